"""The docs: the MkDocs site builds without a warning, its generated tables match the definitions, and every setting,
command and option that README.md or a page names exists (docs/scripts/generate_reference.py writes the tables).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

from drtriton_lsp.engine.report import SCHEMA
from drtriton_lsp.models.settings import ModelSettings
from drtriton_lsp.server import (
    apply_kernel,
    debug_information,
    generate,
    remove_kernel,
    show_report,
    verify_and_benchmark,
)
from drtriton_lsp.server.settings import SECTION, Settings

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = sorted((REPO / "docs").glob("*.md"))
PACKAGE_JSON = REPO / "editor_clients" / "vscode" / "package.json"
NEOVIM_PLUGIN = REPO / "editor_clients" / "nvim" / "plugin" / "drtriton.lua"
# the repository's own scripts, whose options the docs may name (`python benchmarks/compiler_suite.py ... --check`)
SCRIPTS = sorted([*(REPO / "benchmarks").glob("*.py"), *(REPO / "docs" / "scripts").glob("*.py")])
SERVER_COMMANDS = {
    generate.GENERATE, generate.CANCEL, verify_and_benchmark.VERIFY, verify_and_benchmark.BENCHMARK,
    apply_kernel.APPLY, show_report.SHOW_REPORT, remove_kernel.REMOVE_KERNEL, debug_information.PRINT_DEBUG_INFORMATION,
}


def load_generator():
    path = REPO / "docs" / "scripts" / "generate_reference.py"
    spec = importlib.util.spec_from_file_location("generate_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = load_generator()


def texts() -> dict[str, str]:
    return {str(path.relative_to(REPO)): path.read_text() for path in [README, *PAGES]}


def code_spans(text: str) -> list[str]:
    """Every inline code span, and every line of every fenced block."""
    spans = []
    for number, block in enumerate(re.split(r"^```.*$", text, flags=re.MULTILINE)):
        if number % 2:
            spans += [line.strip() for line in block.splitlines() if line.strip()]
        else:
            spans += re.findall(r"`([^`\n]+)`", block)
    return spans


def test_the_site_builds_without_a_warning(tmp_path):
    """`--strict` turns every warning into an error: a link to a missing page or heading, a page left out of the nav."""
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        capture_output=True, text=True, timeout=120,
    )
    assert build.returncode == 0, f"mkdocs build --strict failed (pip install -e '.[docs]'):\n{build.stderr}"
    assert "WARNING" not in build.stderr
    assert (tmp_path / "site" / "settings" / "index.html").exists()


def test_readme_links_and_pictures_point_at_files_in_the_repository():
    targets = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    local = [target.split("#")[0] for target in targets if not re.match(r"[a-z]+://", target)]
    assert local, "the README links its pages and results"
    assert [target for target in local if target and not (REPO / target).exists()] == []


def test_the_generated_tables_match_the_settings_and_options_they_are_made_from():
    assert GENERATOR.stale_pages() == [], "run: python docs/scripts/generate_reference.py"
    assert GENERATOR.blocks_in_pages() == set(GENERATOR.generated_blocks()), "every generated table sits on a page"


def test_every_setting_and_option_has_its_documentation():
    """A setting or an option added without a help text fails here; one added with it, in the tables above."""
    settings = [(f"{SECTION}.{field.name}", field) for field in dataclasses.fields(Settings) if field.name != "model"]
    settings += [(f"{SECTION}.model.{field.name}", field) for field in dataclasses.fields(ModelSettings)]
    assert [name for name, field in settings if not field.metadata.get("doc", "").strip()] == []
    properties = json.loads(PACKAGE_JSON.read_text())["contributes"]["configuration"]["properties"]
    assert [name for name, entry in properties.items()
            if not (entry.get("markdownDescription") or entry.get("description"))] == []
    assert [f"{command} {option.option_strings[0]}" for command, parser in GENERATOR.cli_parsers().items()
            for option in GENERATOR.documented_options(parser) if not (option.help or "").strip()] == []


def test_every_drtriton_name_in_the_docs_is_a_setting_or_a_command():
    properties = json.loads(PACKAGE_JSON.read_text())["contributes"]
    settings = set(properties["configuration"]["properties"])
    known = settings | SERVER_COMMANDS | {command["command"] for command in properties["commands"]}
    known |= {name.rsplit(".", 1)[0] for name in settings if name.count(".") > 1}  # `drtriton.model.*`
    known.add(SCHEMA.split("/")[0])
    unknown = {
        (page, name)
        for page, text in texts().items()
        for name in re.findall(r"(?<![\w/.-])drtriton\.[A-Za-z]\w*(?:\.[A-Za-z]\w*)*", text)
        if name not in known
    }
    assert unknown == set()


def training_parsers() -> dict:
    """`drtriton-train`'s commands by name (`drtriton-train rl`), as docs/training.md writes them."""
    from drtriton_training.cli import build_parser

    commands = next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    return {f"drtriton-train {name}": parser for name, parser in commands.choices.items()}


def test_every_option_in_the_docs_belongs_to_the_command_it_is_written_with():
    parsers = {**GENERATOR.cli_parsers(), **training_parsers()}
    options = {command: {name for action in parser._actions for name in action.option_strings}
               for command, parser in parsers.items()}
    script_options = {path.relative_to(REPO).as_posix(): set(re.findall(r"[\"'](--[\w-]+)[\"']", path.read_text()))
                      for path in SCRIPTS}
    anywhere = set().union(*options.values(), *script_options.values())
    wrong = []
    for page, text in texts().items():
        for span in code_spans(text):
            named = re.findall(r"(?<![\w-])--[a-z][\w-]*", span)
            command = re.search(r"(?:^|[\s/])(drtriton(?: optimize| verify| bench|-lsp)|drtriton-train \w+)\b", span)
            script = re.match(r"(?:\S*python3? )?(\S+\.py)\b", span)
            if command and command[1] in options:
                allowed = options[command[1]]
            elif script and script[1] in script_options:
                allowed = script_options[script[1]]
            elif span.startswith("--"):
                allowed = anywhere
            else:
                continue  # another tool's command line (pip, vllm, nvim, make)
            wrong += [(page, span, option) for option in named if option not in allowed]
    assert wrong == []


def test_every_neovim_command_is_documented_and_every_documented_one_exists():
    defined = set(re.findall(r"'(Drtriton\w+)'", NEOVIM_PLUGIN.read_text()))
    assert len(defined) >= 9
    editors = (REPO / "docs" / "editors.md").read_text()
    assert [name for name in sorted(defined) if f"`:{name}`" not in editors] == []
    named = {(page, name) for page, text in texts().items() for name in re.findall(r":(Drtriton\w+)", text)}
    assert {(page, name) for page, name in named if name not in defined} == set()

