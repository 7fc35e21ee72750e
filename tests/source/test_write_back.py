"""write_back: only inserted lines, idempotent, imports and decorator placed, and the file still runs."""

import difflib
import textwrap

import pytest
from source_stand_ins import relu_program

from drtriton_lsp.engine.task import load_module_from_source
from drtriton_lsp.errors import SourceError
from drtriton_lsp.source.extract import extract_task
from drtriton_lsp.source.targets import find_targets
from drtriton_lsp.source.writeback import write_back

PROVENANCE = (
    "Replaces MLPBlock.forward (5 ops -> 2 kernels)\n"
    "Verified: 5 trials, fp32, max abs err 1e-6\n"
    "\n"
    "Speedup: 1.8x vs eager"
)


def inserted_only(original: str, written: str) -> bool:
    """True when `written` is `original` with whole lines inserted and nothing else changed."""
    matcher = difflib.SequenceMatcher(
        None, original.splitlines(keepends=True), written.splitlines(keepends=True), autojunk=False
    )
    return all(tag in ("equal", "insert") for tag, *_ in matcher.get_opcodes())


def test_only_lines_are_inserted(realistic_source, mlp_program):
    written = write_back(realistic_source, "MLPBlock", mlp_program, PROVENANCE, mode_dependent=False)

    assert inserted_only(realistic_source, written)
    assert written != realistic_source


def test_block_sits_above_the_pragma_and_decorator_on_forward(realistic_source, mlp_program):
    written = write_back(realistic_source, "MLPBlock", mlp_program, PROVENANCE, mode_dependent=False)

    assert (
        "    return torch.full_like(x, -1.0)\n"
        "\n\n"
        "# <<< drtriton: end of generated code for MLPBlock\n"
        "\n\n"
        "# Feed-forward block used by every layer.\n"
        "# drtriton: inputs = [torch.randn(8, HIDDEN)]\n"
    ) in written
    assert (
        "# >>> drtriton: generated Triton kernels for MLPBlock\n"
        "# Replaces MLPBlock.forward (5 ops -> 2 kernels)\n"
        "# Verified: 5 trials, fp32, max abs err 1e-6\n"
        "#\n"
        "# Speedup: 1.8x vs eager\n"
        "\n"
        "def drtriton_dispatch(triton_forward, mode_dependent, is_method=True):\n"
    ) in written
    assert (
        "        self.act = ACTIVATIONS[activation]\n\n"
        "    @drtriton_dispatch(mlp_block_triton_forward, mode_dependent=False)\n"
        "    def forward(self, x):\n"
    ) in written


def test_missing_imports_follow_the_existing_ones(realistic_source, mlp_program):
    written = write_back(realistic_source, "MLPBlock", mlp_program, PROVENANCE, mode_dependent=False)

    assert (
        "from torch.nn import Module\n"
        "import functools\n"
        "import os\n"
        "import triton\n"
        "import triton.language as tl\n"
        "\n"
        "HIDDEN = 256\n"
    ) in written
    assert written.count("import torch\n") == 1


def test_writing_again_replaces_block_and_decorator(realistic_source, mlp_program):
    once = write_back(realistic_source, "MLPBlock", mlp_program, PROVENANCE, mode_dependent=False)
    twice = write_back(once, "MLPBlock", mlp_program, PROVENANCE, mode_dependent=False)
    changed = write_back(once, "MLPBlock", relu_program("mlp_v2"), "Second run", mode_dependent=True)

    assert twice == once
    assert changed.count("# >>> drtriton: generated Triton kernels for MLPBlock") == 1
    assert changed.count("@drtriton_dispatch(") == 1
    assert "@drtriton_dispatch(mlp_v2_triton_forward, mode_dependent=True)" in changed
    assert "mlp_block_relu_kernel" not in changed and "# Second run\n" in changed
    assert inserted_only(realistic_source, changed)


def test_dispatch_helper_is_defined_once_in_the_first_block(realistic_source, mlp_program):
    mlp = write_back(realistic_source, "MLPBlock", mlp_program, PROVENANCE, mode_dependent=False)
    both = write_back(mlp, "gelu_tanh", relu_program("gelu"), "gelu", mode_dependent=False)
    both_again = write_back(both, "MLPBlock", mlp_program, PROVENANCE, mode_dependent=False)

    assert both.count("def drtriton_dispatch(") == 1
    gelu_block = both.index("# >>> drtriton: generated Triton kernels for gelu_tanh")
    assert (
        gelu_block
        < both.index("def drtriton_dispatch(")
        < both.index("# >>> drtriton: generated Triton kernels for MLPBlock")
    )
    assert (
        "@drtriton_dispatch(gelu_triton_forward, mode_dependent=False, is_method=False)\ndef gelu_tanh(x):"
        in both
    )
    assert both_again == both
    assert inserted_only(realistic_source, both)


def test_targets_and_tasks_are_unchanged_by_write_back(realistic_source, mlp_program):
    written = write_back(realistic_source, "MLPBlock", mlp_program, PROVENANCE, mode_dependent=False)

    assert [t.name for t in find_targets(written)] == [t.name for t in find_targets(realistic_source)]
    assert extract_task(written, "MLPBlock").source == extract_task(realistic_source, "MLPBlock").source


def test_windows_line_endings_are_kept(realistic_source, mlp_program):
    original = realistic_source.replace("\n", "\r\n")

    written = write_back(original, "MLPBlock", mlp_program, PROVENANCE, mode_dependent=False)

    assert "\n" not in written.replace("\r\n", "")
    assert inserted_only(original, written)


def test_unknown_target_lists_the_targets(realistic_source, mlp_program):
    with pytest.raises(SourceError) as raised:
        write_back(realistic_source, "Attention", mlp_program, PROVENANCE, mode_dependent=False)

    assert (
        "targets found: gelu_tanh, RMSNorm, MLPBlock, GatedMLP, scaled_residual, Model"
        in raised.value.message
    )


def test_block_without_end_marker_is_an_error(realistic_source, mlp_program):
    written = write_back(realistic_source, "MLPBlock", mlp_program, PROVENANCE, mode_dependent=False)
    broken = written.replace("# <<< drtriton: end of generated code for MLPBlock\n", "")

    with pytest.raises(SourceError) as raised:
        write_back(broken, "MLPBlock", mlp_program, PROVENANCE, mode_dependent=False)

    assert raised.value.message.startswith(
        "The generated block for MLPBlock has a start marker without its end marker"
    )


def load(source: str, name: str, directory) -> dict:
    """Import `source` from a real file (triton.jit reads its kernels' source text)."""
    return vars(load_module_from_source(source, name, directory))


def test_written_file_runs_the_reference_on_cpu(realistic_source, mlp_program, monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    original = load(realistic_source, "user_original", tmp_path)
    written = load(
        write_back(realistic_source, "MLPBlock", mlp_program, PROVENANCE, mode_dependent=True),
        "user_written_mlp",
        tmp_path,
    )
    x = torch.randn(8, 256)

    torch.manual_seed(0)
    expected = original["MLPBlock"](256, 1024)(x)
    torch.manual_seed(0)
    module = written["MLPBlock"](256, 1024)

    torch.testing.assert_close(module(x), expected)  # CPU tensors: the reference path
    with torch.no_grad():
        torch.testing.assert_close(module(x), expected)
    assert written["TRITON_CALLS"] == []
    assert written["MLPBlock"].forward.__name__ == "forward"
    torch.testing.assert_close(written["MLPBlock"].forward.reference(module, x), expected)

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    torch.testing.assert_close(module(x), expected)  # parameters require grad: still the reference
    with torch.no_grad():
        torch.testing.assert_close(module(x), expected)  # training mode and mode_dependent: the reference
        module.eval()
        assert bool((module(x) == -1).all())  # every condition met: the Triton forward
    assert written["TRITON_CALLS"] == ["mlp_block"]


def test_written_function_target_dispatches_without_self(realistic_source, monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    namespace = load(
        write_back(realistic_source, "gelu_tanh", relu_program("gelu"), "gelu", mode_dependent=False),
        "user_written_gelu",
        tmp_path,
    )
    x = torch.randn(3, 4)

    reference = namespace["gelu_tanh"](x)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    routed = namespace["gelu_tanh"](x)

    torch.testing.assert_close(reference, namespace["gelu_tanh"].reference(x))
    assert bool((routed == -1).all())
    assert namespace["TRITON_CALLS"] == ["gelu"]


def test_file_without_imports_after_docstring():
    source = textwrap.dedent(
        '''\
        """Docstring."""
        from torch import nn


        class Block(nn.Module):
            def forward(self, x):
                return x
        '''
    )

    written = write_back(source, "Block", relu_program("block"), "p", mode_dependent=False)

    assert written.startswith(
        '"""Docstring."""\nfrom torch import nn\nimport functools\nimport os\nimport torch\nimport triton\n'
    )
    assert inserted_only(source, written)
    compile(written, "written.py", "exec")


def test_written_function_target_extracts_as_before(realistic_source):
    written = write_back(
        realistic_source, "scaled_residual", relu_program("scaled"), "p", mode_dependent=False
    )

    task = extract_task(written, "scaled_residual")

    assert task.source == extract_task(realistic_source, "scaled_residual").source
    assert task.inputs_from == "pragma"  # the pragma still sits directly above the decorators
    written_lines = written.splitlines()
    decorator_line = written_lines.index("@torch.no_grad()") + 1
    assert written_lines[decorator_line - 2].startswith("@drtriton_dispatch(scaled_triton_forward")
    assert task.origin_line(task.source.splitlines().index("@torch.no_grad()") + 1) == decorator_line
    def_line = task.source.splitlines().index("def scaled_residual(x, y, *, alpha=0.5):") + 1
    assert task.origin_line(def_line) == decorator_line + 1
