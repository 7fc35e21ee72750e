"""docs/COMPILER.md's Coverage section agrees with the code.

The "Template parameters" table lists every template's parameters by name, in the order a schedule
script line gives them, with their first and last allowed values; the Coverage table names every
overload the pointwise table and the templates claim, and nothing that is not an ATen overload.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from drtriton_lsp.compiler.aten_schemas import schema_of
from drtriton_lsp.compiler.fusible import FUSIBLE_OPS
from drtriton_lsp.compiler.gather import GATHER_OPS
from drtriton_lsp.compiler.losses import LOSS_READERS
from drtriton_lsp.compiler.reshape_reads import RESHAPE_OPS
from drtriton_lsp.compiler.templates import TEMPLATES
from drtriton_lsp.compiler.templates.conv import CONV_OVERLOADS
from drtriton_lsp.compiler.templates.fold import REDUCTION_READERS
from drtriton_lsp.compiler.templates.matmul import FORM_READERS
from drtriton_lsp.compiler.templates.normalize import FAMILIES
from drtriton_lsp.compiler.templates.pool import POOL_OVERLOADS
from drtriton_lsp.compiler.templates.reduce import SCAN_COMBINES

DOC = Path(__file__).resolve().parents[2] / "docs" / "COMPILER.md"
OVERLOAD = re.compile(r"\baten\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+\b")
CODE_SPAN = re.compile(r"`([^`]+)`")


def _section(text: str, heading: str) -> str:
    """The lines under `heading` (a whole line) up to the next heading of the same or a higher level."""
    lines = text.splitlines()
    start = lines.index(heading)
    level = len(heading) - len(heading.lstrip("#"))
    body: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("#") and len(line) - len(line.lstrip("#")) <= level:
            break
        body.append(line)
    return "\n".join(body)


def _first_table(section: str) -> list[list[str]]:
    """The rows (cells stripped) of the first Markdown table in `section`, without header and rule."""
    rows: list[list[str]] = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    assert len(rows) >= 2 and set(rows[1][0]) <= set("-: "), "expected a header row and a rule row"
    return rows[2:]


@pytest.fixture(scope="module")
def text() -> str:
    return DOC.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def coverage_table(text: str) -> list[list[str]]:
    return _first_table(_section(text, "## Coverage"))


@pytest.fixture(scope="module")
def parameter_rows(text: str) -> list[list[str]]:
    rows = _first_table(_section(text, "### Template parameters"))
    assert all(len(row) == 4 for row in rows), "columns: template | parameter | values | default rule"
    return rows


def test_parameter_table_lists_every_template_parameter_in_order(parameter_rows):
    listed: dict[str, list[str]] = {}
    for template, parameter, _, _ in parameter_rows:
        names = CODE_SPAN.findall(parameter)
        assert len(names) == 1, f"one parameter per row, in backticks: {parameter!r}"
        listed.setdefault(template, []).append(names[0])
    assert sorted(listed) == sorted(TEMPLATES)
    for name, template in TEMPLATES.items():
        assert listed[name] == [spec.name for spec in template.parameters], name


def test_parameter_table_gives_the_allowed_values(parameter_rows):
    """Every option of a small choice, else the first and the last allowed value, as code."""
    cells = {(template, CODE_SPAN.findall(parameter)[0]): values for template, parameter, values, _ in parameter_rows}
    for name, template in TEMPLATES.items():
        for spec in template.parameters:
            shown = set(CODE_SPAN.findall(cells[name, spec.name]))
            rendered = [spec.render(value) for value in spec.values]
            small_choice = all(isinstance(value, str) for value in spec.values) and len(rendered) <= 4
            expected = rendered if small_choice else [rendered[0], rendered[-1]]
            missing = [value for value in expected if value not in shown]
            assert not missing, f"{name}.{spec.name}: values cell lacks {missing}"


def test_coverage_table_names_every_pointwise_overload(coverage_table):
    named = {overload for row in coverage_table for overload in OVERLOAD.findall(row[1])}
    missing = [op for op in FUSIBLE_OPS if op not in named]
    assert not missing, f"overloads missing from the Coverage table: {missing}"


def test_coverage_table_names_every_template_overload(coverage_table):
    named = {overload for row in coverage_table for overload in OVERLOAD.findall(row[1])}
    claimed = [
        *REDUCTION_READERS, *SCAN_COMBINES, *FAMILIES, *FORM_READERS, *CONV_OVERLOADS, *POOL_OVERLOADS, *LOSS_READERS,
        "aten.cat.default", "aten.stack.default", "aten.repeat.default", *GATHER_OPS, *RESHAPE_OPS,
    ]  # fmt: skip
    missing = [op for op in claimed if op not in named]
    assert not missing, f"overloads missing from the Coverage table: {missing}"


def test_coverage_names_only_real_overloads(text: str):
    section = _section(text, "## Coverage")
    unknown = sorted({overload for overload in OVERLOAD.findall(section) if schema_of(overload) is None})
    assert not unknown, f"not ATen overloads in this torch: {unknown}"
