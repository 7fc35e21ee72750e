"""find_targets: which definitions are targets, their exact spans, and syntax errors."""

import textwrap
import time

import pytest

from drtriton_lsp.errors import SourceError
from drtriton_lsp.source.targets import SourceSpan, Target, find_targets


def text_at(source: str, span: SourceSpan) -> str:
    lines = source.splitlines()
    if span.start_line == span.end_line:
        return lines[span.start_line - 1][span.start_column : span.end_column]
    middle = lines[span.start_line : span.end_line - 1]
    return "\n".join(
        [
            lines[span.start_line - 1][span.start_column :],
            *middle,
            lines[span.end_line - 1][: span.end_column],
        ]
    )


def test_realistic_file_targets_in_order(realistic_source):
    targets = find_targets(realistic_source)

    assert [(t.name, t.kind) for t in targets] == [
        ("gelu_tanh", "function"),
        ("RMSNorm", "module"),
        ("MLPBlock", "module"),  # subclasses `Module` imported from torch.nn
        ("GatedMLP", "module"),  # subclass of a subclass
        ("scaled_residual", "function"),
        ("Model", "module"),
    ]


def test_realistic_file_target_details(realistic_source):
    targets = {t.name: t for t in find_targets(realistic_source)}

    assert targets["MLPBlock"] == Target(
        name="MLPBlock",
        kind="module",
        span=SourceSpan(42, 0, 53, 61),
        name_span=SourceSpan(42, 6, 42, 14),
        forward_span=SourceSpan(52, 4, 53, 61),
        forward_params=["x"],
        has_init_params=True,
    )
    assert targets["GatedMLP"].forward_params == ["x", "gate"]
    assert targets["GatedMLP"].has_init_params  # inherits MLPBlock.__init__(dim, hidden)
    assert not targets["Model"].has_init_params
    assert targets["scaled_residual"].forward_params == ["x", "y", "alpha"]
    assert not targets["scaled_residual"].has_init_params


def test_spans_cover_definitions_exactly(realistic_source):
    for target in find_targets(realistic_source):
        assert text_at(realistic_source, target.name_span) == target.name
        whole = text_at(realistic_source, target.span)
        assert whole.startswith(("@", "class ", "def "))
        assert whole == whole.strip()
        forward = text_at(realistic_source, target.forward_span)
        assert forward.startswith(("@", "def "))
        assert forward in whole

    decorated = next(t for t in find_targets(realistic_source) if t.name == "scaled_residual")
    assert text_at(realistic_source, decorated.span).startswith("@torch.no_grad()\ndef scaled_residual")
    assert decorated.forward_span == decorated.span
    model = next(t for t in find_targets(realistic_source) if t.name == "Model")
    assert text_at(realistic_source, model.forward_span).startswith("@torch.no_grad()\n    def forward")


def test_columns_count_characters_not_bytes():
    source = textwrap.dedent(
        """\
        import torch.nn as nn
        class Modèle(nn.Module):
            def forward(self, x):
                return x if "é" else x
        """
    )

    (target,) = find_targets(source)

    assert target.name_span == SourceSpan(2, 6, 2, 12)
    assert target.span.end_column == len('        return x if "é" else x')


def test_what_is_not_a_target():
    source = textwrap.dedent(
        '''\
        import numpy as np
        import torch
        import triton
        import triton.language as tl
        from torch import nn


        class NotAModule:
            def forward(self, x):
                return torch.relu(x)


        class NoForward(nn.Module):
            pass


        class Sub(NoForward):
            def forward(self, x):
                return x


        def numpy_only(x):
            """Mentions torch in a docstring only."""
            return np.tanh(x)


        @triton.jit
        def kernel(x_ptr, BLOCK: tl.constexpr):
            tl.store(x_ptr, tl.load(x_ptr))


        def get_inputs():
            return [torch.randn(2)]


        def get_init_inputs():
            return []


        if True:
            def hidden(x):
                return torch.relu(x)
        '''
    )

    assert [t.name for t in find_targets(source)] == ["Sub"]


def test_module_detection_through_import_forms():
    source = textwrap.dedent(
        """\
        import torch
        import torch.nn
        from torch.nn import Module as Base
        from torch import nn as neural


        class A(torch.nn.Module):
            def forward(self, x):
                return x


        class B(Base):
            def forward(self, x):
                return x


        class C(neural.Linear):
            def forward(self, x):
                return super().forward(x)


        class D(neural.Parameter):
            def forward(self, x):
                return x
        """
    )

    assert [t.name for t in find_targets(source)] == ["A", "B", "C"]
    assert next(
        t for t in find_targets(source) if t.name == "C"
    ).has_init_params  # nn.Linear's arguments are unknown here


def test_generated_blocks_are_skipped():
    source = textwrap.dedent(
        """\
        import torch


        # >>> drtriton: generated Triton kernels for double
        def double_triton_forward(self, x):
            return torch.mul(x, 2)


        # <<< drtriton: end of generated code for double


        def double(x):
            return torch.mul(x, 2)
        """
    )

    assert [t.name for t in find_targets(source)] == ["double"]


def test_syntax_error_names_line_column_and_fix():
    source = "import torch\n\n\ndef broken(x):\n    return torch.relu(x\n\nclass A:\n    pass\n"

    with pytest.raises(SourceError) as raised:
        find_targets(source, "user.py")

    error = raised.value
    assert error.line == 5
    assert error.path == "user.py"
    assert error.message == "user.py has a syntax error at line 5, column 22: '(' was never closed"
    assert error.hint == "Fix the syntax error at `return torch.relu(x` (line 5), then run again."


def test_syntax_error_quotes_the_text_parsed_not_the_file_on_disk(tmp_path):
    """An editor's unsaved buffer differs from the saved file; Python's own message quotes the file."""
    path = tmp_path / "user.py"
    path.write_text("import torch\n\n\ndef fine(x):\n    return torch.relu(x)\n")
    buffer = path.read_text().replace("torch.relu(x)", "torch.relu(x")

    with pytest.raises(SourceError) as raised:
        find_targets(buffer, str(path))

    assert raised.value.hint == "Fix the syntax error at `return torch.relu(x` (line 5), then run again."


def test_three_thousand_lines_parse_quickly():
    block = textwrap.dedent(
        """\
        class Block{i}(nn.Module):
            def __init__(self, dim=64):
                super().__init__()
                self.fc = nn.Linear(dim, dim)

            def forward(self, x):
                return F.gelu(self.fc(x)) * SCALE


        def helper{i}(x, y=2):
            return torch.relu(x) * y


        def plain{i}(a, b):
            return a + b


        """
    )
    source = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nSCALE = 2\n"
    source += "".join(block.format(i=i) for i in range(3000 // block.count("\n")))
    assert source.count("\n") >= 2900

    start = time.perf_counter()
    targets = find_targets(source + "# a fresh edit, so nothing is cached\n")
    elapsed = time.perf_counter() - start

    assert len(targets) == 2 * (3000 // block.count("\n"))
    assert elapsed < 0.5  # ~50 ms on a slow CI core; the bound only catches a quadratic slip
