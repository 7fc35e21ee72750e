"""write_back: only inserted lines (CRLF and BOM kept), idempotent, self-contained blocks, and the file still runs."""

import ast
import difflib
import subprocess
import sys
import textwrap
import warnings

import pytest
from source_stand_ins import relu_program

from drtriton_lsp.errors import SourceError
from drtriton_lsp.source.dispatch import DISPATCH_HELPER, is_dispatch_helper_statement, without_dispatch_decorators
from drtriton_lsp.source.extract import extract_task
from drtriton_lsp.source.pyfile import BLOCK_END, BLOCK_START
from drtriton_lsp.source.targets import find_targets
from drtriton_lsp.source.writeback import verification_candidate, write_back
from drtriton_lsp.task import load_module_from_source

PROVENANCE = (
    "Replaces MLPBlock.forward (5 ops -> 2 kernels)\n"
    "Verified: 5 trials, fp32, max abs err 1e-6\n"
    "\n"
    "Speedup: 1.8x vs eager"
)
# What capture records for MLPBlock(256, 1024) on an [8, 256] input, in brief.
MLP_GUARDS = [
    *(
        {"kind": "parameter", "name": name, "dtype": "float32", "shape": shape}
        for name, shape in [("norm.weight", [256]), ("up.weight", [1024, 256]), ("up.bias", [1024]),
                            ("down.weight", [256, 1024]), ("down.bias", [256])]
    ),
    {"kind": "tensor", "name": "x", "dtype": "float32", "shape": [None, 256]},
    {"kind": "sizes", "symbol": "s0", "dims": [["x", 0]], "low": 2, "high": None},
    {"kind": "attribute", "name": "norm.eps", "value": {"float": "1e-05"}},
    {"kind": "attribute", "name": "act", "value": {"function": [None, "gelu_tanh"]}},
]


def inserted_only(original: str, written: str) -> bool:
    """True when `written` is `original` with whole lines inserted and nothing else changed."""
    matcher = difflib.SequenceMatcher(
        None, original.splitlines(keepends=True), written.splitlines(keepends=True), autojunk=False
    )
    return all(tag in ("equal", "insert") for tag, *_ in matcher.get_opcodes())


def without_block(source: str, name: str, forward_function: str) -> str:
    """The file after deleting the block for `name` (marker to marker) and its decorator line, as a user would."""
    lines = source.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip() == f"{BLOCK_START}{name}")
    end = next(i for i, line in enumerate(lines) if line.rstrip() == f"{BLOCK_END}{name}")
    kept = lines[:start] + lines[end + 1 :]
    return "".join(line for line in kept if f"@drtriton_dispatch({forward_function}," not in line)


def write_mlp(source: str, program=None, provenance: str = PROVENANCE) -> str:
    return write_back(source, "MLPBlock", program or relu_program("mlp_block"), provenance, MLP_GUARDS)


def test_only_lines_are_inserted(realistic_source):
    written = write_mlp(realistic_source)

    assert inserted_only(realistic_source, written)
    assert written != realistic_source


def test_block_sits_above_the_pragma_and_decorator_on_forward(realistic_source):
    written = write_mlp(realistic_source)

    assert (
        "else:\n"
        "    mlp_block_triton_forward = None\n"
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
        "import functools as _drtriton_functools\n"
    ) in written
    assert (
        "        self.act = ACTIVATIONS[activation]\n\n"
        "    @drtriton_dispatch(mlp_block_triton_forward, MLP_BLOCK_SPECIALIZATION)\n"
        "    def forward(self, x):\n"
    ) in written


def test_the_specialization_table_lists_every_guard_as_python(realistic_source):
    written = write_mlp(realistic_source)

    assert (
        "    ('parameter', 'down.bias', torch.float32, (256,)),\n"
        "    ('tensor', 'x', torch.float32, (None, 256)),\n"
        "    ('sizes', (('x', 0),), 2, None),\n"
        "    ('attribute', 'norm.eps', 1e-05),\n"
        "    ('attribute', 'act', DrtritonDefinition('function', None, 'gelu_tanh')),\n"
        ")\n"
    ) in written


def test_nothing_is_added_outside_the_block(realistic_source):
    written = write_mlp(realistic_source)
    start = written.index(BLOCK_START)
    end = written.index("\n", written.index(BLOCK_END))

    outside = written[:start] + written[end + 1 :]
    decorator = "    @drtriton_dispatch(mlp_block_triton_forward, MLP_BLOCK_SPECIALIZATION)\n"
    assert outside.replace(decorator, "").replace("\n\n\n\n# Feed", "\n\n# Feed") == realistic_source


def test_writing_again_replaces_block_and_decorator(realistic_source):
    once = write_mlp(realistic_source)
    twice = write_mlp(once)
    changed = write_mlp(once, relu_program("mlp_v2"), "Second run")

    assert twice == once
    assert changed.count(f"{BLOCK_START}MLPBlock") == 1
    assert changed.count("@drtriton_dispatch(") == 1
    assert "@drtriton_dispatch(mlp_v2_triton_forward, MLP_V2_SPECIALIZATION)" in changed
    assert "mlp_block_relu_kernel" not in changed and "# Second run\n" in changed
    assert inserted_only(realistic_source, changed)


def test_every_block_carries_its_own_dispatch_helper_verbatim(realistic_source):
    mlp = write_mlp(realistic_source)
    both = write_back(mlp, "gelu_tanh", relu_program("gelu"), "gelu", [])
    both_again = write_mlp(both)

    assert both.count(DISPATCH_HELPER) == 2
    assert "@drtriton_dispatch(gelu_triton_forward, GELU_SPECIALIZATION, is_method=False)\ndef gelu_tanh(x):" in both
    assert both_again == both
    assert inserted_only(realistic_source, both)


def test_targets_and_tasks_are_unchanged_by_write_back(realistic_source):
    written = write_mlp(realistic_source)

    assert [t.name for t in find_targets(written)] == [t.name for t in find_targets(realistic_source)]
    assert extract_task(written, "MLPBlock").source == extract_task(realistic_source, "MLPBlock").source


def test_windows_line_endings_are_kept_byte_for_byte(realistic_source):
    original = realistic_source.replace("\n", "\r\n")

    written = write_mlp(original)

    assert "\n" not in written.replace("\r\n", "")  # docstrings inside the block too
    assert inserted_only(original, written)
    assert write_mlp(written) == written


def test_a_byte_order_mark_stays_first(realistic_source):
    original = "\ufeff" + realistic_source

    written = write_mlp(original)

    assert written.startswith("\ufeff") and written.count("\ufeff") == 1
    assert inserted_only(original, written)


def test_comments_at_the_top_of_the_file_stay_above_a_first_target():
    source = "# Copyright: the user.\n\n# drtriton: inputs = [torch.randn(4)]\ndef first(x):\n    return torch.relu(x)\n"
    source = "import torch\n" + source

    written = write_back(source, "first", relu_program("first"), "p", [])

    assert written.startswith("import torch\n# Copyright: the user.\n\n# >>> drtriton")
    assert "# <<< drtriton: end of generated code for first\n\n\n# drtriton: inputs" in written
    assert inserted_only(source, written)


def test_unknown_target_lists_the_targets(realistic_source):
    with pytest.raises(SourceError) as raised:
        write_back(realistic_source, "Attention", relu_program("x"), PROVENANCE, [])

    assert (
        "targets found: gelu_tanh, RMSNorm, MLPBlock, GatedMLP, scaled_residual, Model"
        in raised.value.message
    )


def test_block_without_end_marker_is_an_error(realistic_source):
    written = write_mlp(realistic_source)
    broken = written.replace(f"{BLOCK_END}MLPBlock\n", "")

    with pytest.raises(SourceError) as raised:
        write_mlp(broken)

    assert raised.value.message.startswith(
        "The generated block for MLPBlock has a start marker without its end marker"
    )


def load(source: str, name: str, directory) -> dict:
    """Import `source` from a real file (triton.jit reads its kernels' source text)."""
    return vars(load_module_from_source(source, name, directory))


def test_written_file_runs_the_reference_unless_every_condition_holds(realistic_source, monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    original = load(realistic_source, "user_original", tmp_path)
    written = load(write_mlp(realistic_source), "user_written_mlp", tmp_path)
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

    monkeypatch.setenv("TRITON_INTERPRET", "1")  # kernels for the interpreter: CPU tensors are a Triton device
    written = load(write_mlp(realistic_source), "user_written_mlp_interpreted", tmp_path)
    torch.manual_seed(0)
    module = written["MLPBlock"](256, 1024)
    torch.testing.assert_close(module(x), expected)  # parameters require grad: still the reference
    with torch.no_grad():
        assert bool((module(x) == -1).all())  # every condition met: the Triton forward
        assert written["TRITON_CALLS"] == ["mlp_block"]
        module.norm.eps = 0.5
        with pytest.warns(UserWarning, match=r"MLPBlock\.norm\.eps is 0\.5, the kernels were verified for 1e-05"):
            torch.testing.assert_close(module(x), original["MLPBlock"].forward(module, x))
    assert written["TRITON_CALLS"] == ["mlp_block"]


def test_written_function_target_dispatches_without_self(realistic_source, monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    guards = [{"kind": "tensor", "name": "x", "dtype": "float32", "shape": [None, None]}]
    namespace = load(write_back(realistic_source, "gelu_tanh", relu_program("gelu"), "gelu", guards), "w_gelu", tmp_path)
    x = torch.randn(3, 4)

    reference = namespace["gelu_tanh"](x)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    interpreted = load(write_back(realistic_source, "gelu_tanh", relu_program("gelu"), "gelu", guards), "w_gelu_i", tmp_path)
    routed = interpreted["gelu_tanh"](x)

    torch.testing.assert_close(reference, namespace["gelu_tanh"].reference(x))
    assert bool((routed == -1).all())
    assert namespace["TRITON_CALLS"] == [] and interpreted["TRITON_CALLS"] == ["gelu"]


@pytest.mark.parametrize("deleted, forward_function", [("MLPBlock", "mlp_block_triton_forward"), ("scaled_residual", "scaled_triton_forward")])
def test_deleting_one_block_and_its_decorator_leaves_a_working_file(
    realistic_source, deleted, forward_function, monkeypatch, tmp_path
):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    guards = [{"kind": "tensor", "name": name, "dtype": "float32", "shape": [None, None]} for name in ("x", "y")]
    both = write_back(write_mlp(realistic_source), "scaled_residual", relu_program("scaled"), "scaled", guards)
    edited = without_block(both, deleted, forward_function)
    assert edited.count("@drtriton_dispatch(") == 1

    namespace = load(edited, f"user_without_{deleted}", tmp_path)
    with torch.no_grad():
        scaled = namespace["scaled_residual"](torch.ones(8, 256), torch.ones(8, 256))
        mlp = namespace["MLPBlock"](256, 1024)(torch.ones(8, 256))

    kept = "scaled" if deleted == "MLPBlock" else "mlp_block"
    assert namespace["TRITON_CALLS"] == [kept]
    assert bool((scaled == -1).all()) == (kept == "scaled")
    assert bool((mlp == -1).all()) == (kept == "mlp_block")


def test_a_file_without_triton_imports_and_runs_the_original(realistic_source, monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    for name in [name for name in sys.modules if name == "triton" or name.startswith("triton.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError

    namespace = load(write_mlp(realistic_source), "user_without_triton", tmp_path)
    module = namespace["MLPBlock"](256, 1024)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, second = module(torch.ones(8, 256)), module(torch.ones(8, 256))

    torch.testing.assert_close(first, second)
    assert not bool((first == -1).all())
    assert [str(warning.message) for warning in caught] == [
        "drtriton: Triton is not installed; running the original MLPBlock.forward"
    ]


def test_verification_candidate_is_the_written_task_with_model_new(realistic_source):
    task = extract_task(realistic_source, "MLPBlock")

    candidate = verification_candidate(task.source, "Model", relu_program("mlp_block"), "header", MLP_GUARDS)

    assert candidate.startswith(write_back(task.source, "Model", relu_program("mlp_block"), "header", MLP_GUARDS).rstrip())
    assert candidate.endswith("\nModelNew = Model\n")
    assert "    @drtriton_dispatch(mlp_block_triton_forward, MLP_BLOCK_SPECIALIZATION)\n    def forward" in candidate


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

    written = write_back(source, "Block", relu_program("block"), "p", [])

    assert written.startswith('"""Docstring."""\nfrom torch import nn\n\n\n# >>> drtriton')
    assert inserted_only(source, written)
    compile(written, "written.py", "exec")


def test_written_function_target_extracts_as_before(realistic_source):
    written = write_back(realistic_source, "scaled_residual", relu_program("scaled"), "p", [])

    task = extract_task(written, "scaled_residual")

    assert task.source == extract_task(realistic_source, "scaled_residual").source
    assert task.inputs_from == "pragma"  # the pragma still sits directly above the decorators
    written_lines = written.splitlines()
    decorator_line = written_lines.index("@torch.no_grad()") + 1
    assert written_lines[decorator_line - 2].startswith("@drtriton_dispatch(scaled_triton_forward")
    assert task.origin_line(task.source.splitlines().index("@torch.no_grad()") + 1) == decorator_line
    def_line = task.source.splitlines().index("def scaled_residual(x, y, *, alpha=0.5):") + 1
    assert task.origin_line(def_line) == decorator_line + 1


def test_a_static_policy_can_tell_the_written_parts_from_the_tasks_own(realistic_source):
    task = extract_task(realistic_source, "MLPBlock")
    candidate = verification_candidate(task.source, "Model", relu_program("mlp_block"), "header", MLP_GUARDS)
    task_statements = {ast.dump(statement) for statement in ast.parse(task.source).body}

    others = [
        statement
        for statement in ast.parse(candidate).body
        if ast.dump(without_dispatch_decorators(statement)) not in task_statements
        and not is_dispatch_helper_statement(statement)
    ]

    assert [type(statement).__name__ for statement in others] == ["Assign", "If", "Assign"]  # table, kernels, ModelNew
    assert [ast.unparse(statement.targets[0]) for statement in (others[0], others[2])] == [
        "MLP_BLOCK_SPECIALIZATION", "ModelNew"
    ]


def test_a_target_that_uses_another_written_target_extracts_its_pytorch_code(realistic_source):
    with_norm = write_back(realistic_source, "RMSNorm", relu_program("rms"), "p", [])

    task = extract_task(with_norm, "MLPBlock")

    assert task.source == extract_task(realistic_source, "MLPBlock").source
    assert "drtriton" not in task.source


@pytest.mark.slow  # imports torch in a subprocess
def test_libcst_is_loaded_by_write_back_only():
    """The language server's start-up and the workers never import libcst (the GPU machine may not have it)."""
    modules = ["drtriton_lsp.server.main", "drtriton_lsp.server.apply_kernel", "drtriton_lsp.worker.main",
               "drtriton_lsp.worker.judge", "drtriton_lsp.worker.candidate_host", "drtriton_lsp.worker.capture_job",
               "drtriton_lsp.engine.verify"]
    check = f"import sys\nfor name in {modules!r}:\n    __import__(name)\nprint('libcst' in sys.modules)"

    loaded = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120)

    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "False"


@pytest.mark.parametrize("blank_lines_left", [0, 1])
@pytest.mark.parametrize("target", ["MLPBlock", "gelu_tanh"])
def test_writing_again_after_the_blank_lines_below_a_block_were_deleted_keeps_the_users_lines(
    realistic_source, target, blank_lines_left
):
    # the two blank lines after the end marker are the block's; what follows (MLPBlock's comments, or gelu_tanh's
    # def with nothing above it) is the user's
    def write(source):
        return write_back(source, target, relu_program(target.lower()), PROVENANCE, [])

    once = write(realistic_source)
    end = f"{BLOCK_END}{target}\n"
    below = "# Feed-forward block used by every layer.\n" if target == "MLPBlock" else "@drtriton_dispatch("
    assert end + "\n\n" + below in once
    edited = once.replace(end + "\n\n", end + "\n" * blank_lines_left)

    assert write(edited) == once


def test_a_block_at_the_top_of_the_file_is_replaced_in_place():
    # no statement above the target: the block is in libcst's module header, not in a statement's leading lines
    source = "# drtriton: inputs = [torch.randn(4)]\ndef first(x):\n    return torch.relu(x)\n\n\nimport torch\n"
    once = write_back(source, "first", relu_program("first"), "p", [])
    assert once.startswith(BLOCK_START + "first")

    assert write_back(once, "first", relu_program("first"), "p", []) == once
    assert inserted_only(source, write_back(once, "first", relu_program("again"), "q", []))
