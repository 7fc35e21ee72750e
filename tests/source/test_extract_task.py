"""extract_task and targets_with_inputs: what a Task copies, where its inputs come from, and the errors."""

import ast
import textwrap

import pytest

from drtriton_lsp.errors import SourceError
from drtriton_lsp.source.extract import extract_task, targets_with_inputs


def top_level_names(task_source: str) -> list[str]:
    names = []
    for node in ast.parse(task_source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [alias.asname or alias.name for alias in node.names]
    return names


def test_module_target_copies_what_it_needs_transitively(realistic_source):
    task = extract_task(realistic_source, "MLPBlock", "model.py")

    assert top_level_names(task.source) == [
        "annotations",
        "math",
        "torch",
        "nn",
        "F",
        "Module",
        "HIDDEN",
        "EPS",
        "gelu_tanh",
        "ACTIVATIONS",  # EPS via RMSNorm, gelu_tanh and math via ACTIVATIONS
        "RMSNorm",
        "Model",
        "get_inputs",
        "get_init_inputs",
    ]
    assert 'ACTIVATIONS["relu"] = F.relu\n' in task.source  # assignments into a needed dict come along
    assert "super(Model, self).__init__()" in task.source
    assert "MLPBlock" not in task.source
    assert "__main__" not in task.source and "UNUSED_TABLE" not in task.source
    assert (task.name, task.kind, task.origin_path, task.inputs_from) == (
        "MLPBlock",
        "module",
        "model.py",
        "pragma",
    )
    compile(task.source, "task.py", "exec")


def test_pragma_becomes_example_input_functions(realistic_source):
    task = extract_task(realistic_source, "MLPBlock")

    assert task.source.endswith(
        "def get_inputs():\n    return [torch.randn(8, HIDDEN)]\n\n\n"
        "def get_init_inputs():\n    return [HIDDEN, 4 * HIDDEN]\n"
    )


def test_line_map_points_copied_lines_at_the_users_lines(realistic_source):
    task = extract_task(realistic_source, "MLPBlock")
    task_lines = task.source.splitlines()
    user_lines = realistic_source.splitlines()

    class_line = task_lines.index("class Model(Module):") + 1
    assert task.origin_line(class_line) == 42
    return_line = task_lines.index("    return [torch.randn(8, HIDDEN)]") + 1
    assert task.origin_line(return_line) == 40  # the inputs pragma
    copied = [line for line in range(1, len(task_lines) + 1) if task.origin_line(line) is not None]
    assert len(copied) > 30
    for line in copied:
        if line not in (return_line, return_line + 4):
            expected = user_lines[task.origin_line(line) - 1].replace("MLPBlock", "Model")
            assert task_lines[line - 1] == expected
    assert task.origin_line(1) == 3  # from __future__ import annotations


def test_get_inputs_in_file_apply_to_model(realistic_source):
    task = extract_task(realistic_source, "Model")

    assert task.inputs_from == "get_inputs"
    assert "def get_inputs():\n    return [torch.randn(4, HIDDEN)]\n" in task.source
    assert "def get_init_inputs():\n    return []\n" in task.source
    assert "@torch.no_grad()" in task.source
    assert "gelu_tanh" not in task.source


def test_function_target_is_wrapped_in_a_generated_model(realistic_source):
    task = extract_task(realistic_source, "scaled_residual")

    assert task.kind == "function"
    assert task.inputs_from == "pragma"
    assert (
        "class Model(torch.nn.Module):\n"
        '    """The function `scaled_residual` as a module, so it is verified and benchmarked like one."""\n'
        "\n"
        "    def forward(self, x, y, *, alpha=0.5):\n"
        "        return scaled_residual(x, y, alpha=alpha)\n"
    ) in task.source
    assert "def get_init_inputs():\n    return []\n" in task.source


def test_function_task_runs_like_the_function(realistic_source):
    torch = pytest.importorskip("torch")
    namespace = {"__name__": "task"}
    exec(compile(extract_task(realistic_source, "scaled_residual").source, "task.py", "exec"), namespace)

    x, y = namespace["get_inputs"]()
    model = namespace["Model"](*namespace["get_init_inputs"]())

    assert x.shape == (4, 256)
    torch.testing.assert_close(model(x, y), x + 0.5 * torch.nn.functional.silu(y))


def test_get_inputs_apply_to_the_only_module():
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn


        def helper(x):
            return torch.relu(x)


        class Block(nn.Module):
            def forward(self, x):
                return helper(x)


        def get_inputs():
            return [torch.randn(2, 3)]
        """
    )

    availability = {entry.target.name: entry.inputs_from for entry in targets_with_inputs(source)}
    task = extract_task(source, "Block")

    assert availability == {"helper": None, "Block": "get_inputs"}
    assert "def get_init_inputs():\n    return []\n" in task.source  # Block() needs no arguments


def test_get_inputs_do_not_apply_when_ambiguous():
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn


        class First(nn.Module):
            def forward(self, x):
                return x


        class Second(nn.Module):
            def forward(self, x):
                return x


        def get_inputs():
            return [torch.randn(2, 3)]
        """
    )

    entries = targets_with_inputs(source)

    assert [entry.available for entry in entries] == [False, False]
    assert entries[0].problem.hint.endswith(
        "(get_inputs() in this file applies only to a class named Model, or to the only nn.Module.)"
    )


def test_missing_inputs_hint_shows_the_pragma_to_add():
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn


        class MLPBlock(nn.Module):
            def __init__(self, dim, hidden, bias=True):
                super().__init__()
                self.up = nn.Linear(dim, hidden, bias=bias)

            def forward(self, x, scale, shift=0.0):
                return self.up(x) * scale + shift
        """
    )

    with pytest.raises(SourceError) as raised:
        extract_task(source, "MLPBlock", "blocks.py")

    assert raised.value.message == "MLPBlock has no example inputs."
    assert raised.value.line == 5
    assert raised.value.hint == (
        "Add this directly above `class MLPBlock` (line 5), with the shapes and values you use:\n"
        "    # drtriton: inputs = [torch.randn(8, 64), torch.randn(8, 64)]\n"
        "    # drtriton: init = [<dim>, <hidden>]\n"
        "or define get_inputs() and get_init_inputs() in the file, returning those lists."
    )


def test_get_inputs_without_get_init_inputs_needs_a_constructor_without_arguments():
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn


        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.fc = nn.Linear(dim, dim)

            def forward(self, x):
                return self.fc(x)


        def get_inputs():
            return [torch.randn(2, 3)]
        """
    )

    with pytest.raises(SourceError) as raised:
        extract_task(source, "Model")

    assert (
        raised.value.message
        == "Model's constructor needs dim, and there are no example constructor arguments."
    )
    assert "get_init_inputs()" in raised.value.hint and "`# drtriton: init = [dim]`" in raised.value.hint


@pytest.mark.parametrize(
    ("pragma", "message"),
    [
        (
            "# drtriton: inputs = [torch.randn(2, 3)",
            "The drtriton inputs pragma on line 4 is not a Python expression",
        ),
        ("# drtriton: input = [torch.randn(2, 3)]", "Unknown drtriton pragma `input` on line 4."),
        ("# drtriton: init = [3]", "Block has a drtriton init pragma but no inputs pragma."),
    ],
)
def test_bad_pragmas_name_their_line(pragma, message):
    source = (
        f"import torch\nfrom torch import nn\n\n{pragma}\n"
        "class Block(nn.Module):\n    def forward(self, x):\n        return x\n"
    )

    with pytest.raises(SourceError) as raised:
        extract_task(source, "Block")

    assert raised.value.message.startswith(message)
    assert raised.value.line == 4


def test_pragma_beats_get_inputs_and_sits_above_decorators():
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn

        SHAPE = (4, 5)


        # Scales its input.
        # drtriton: inputs = [torch.randn(*SHAPE)]
        @torch.jit.ignore
        def scale(x):
            return torch.mul(x, 2)


        def get_inputs():
            return [torch.randn(2, 3)]
        """
    )

    task = extract_task(source, "scale")

    assert task.inputs_from == "pragma"
    assert "SHAPE = (4, 5)\n" in task.source
    assert "def get_inputs():\n    return [torch.randn(*SHAPE)]\n" in task.source
    assert "torch.randn(2, 3)" not in task.source


def test_relative_import_the_target_needs_is_an_error():
    source = textwrap.dedent(
        """\
        import torch
        from .layers import Norm
        from .unused import Other


        # drtriton: inputs = [torch.randn(2, 3)]
        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = Norm()

            def forward(self, x):
                return self.norm(x)


        # drtriton: inputs = [torch.randn(2, 3)]
        def standalone(x):
            return torch.relu(x)
        """
    )

    with pytest.raises(SourceError) as raised:
        extract_task(source, "Block")

    assert raised.value.line == 2
    assert "`from .layers import Norm` (line 2), a relative import" in raised.value.message
    assert "standalone module" in raised.value.message
    assert "absolute import" in raised.value.hint
    assert "Other" not in extract_task(source, "standalone").source


def test_unknown_target_lists_the_targets(realistic_source):
    with pytest.raises(SourceError) as raised:
        extract_task(realistic_source, "Attention")

    assert raised.value.message == (
        "No target named Attention in the file "
        "(targets found: gelu_tanh, RMSNorm, MLPBlock, GatedMLP, scaled_residual, Model)."
    )


def test_copied_code_may_not_define_model_for_a_renamed_target():
    source = textwrap.dedent(
        """\
        import torch


        class Model(torch.nn.Module):
            pass


        # drtriton: inputs = [torch.randn(2)]
        def run(x):
            return Model()(x) + torch.ones(1)
        """
    )

    with pytest.raises(SourceError) as raised:
        extract_task(source, "run")

    assert raised.value.line == 4
    assert "defines `Model`" in raised.value.message


def test_generated_import_torch_when_the_file_has_none():
    source = textwrap.dedent(
        """\
        from torch import nn


        # drtriton: inputs = [torch.randn(2)]
        class Block(nn.Module):
            def forward(self, x):
                return x
        """
    )

    task = extract_task(source, "Block")

    assert task.source.startswith("import torch\nfrom torch import nn\n")
    assert task.origin_line(1) is None
    assert task.origin_line(2) == 1


def test_names_from_a_star_import_bring_the_star_import():
    source = textwrap.dedent(
        '''\
        import torch
        from torch.nn.functional import *
        from math import *


        # drtriton: inputs = [torch.randn(2)]
        def activate(x):
            return relu(x) + torch.ones(1)
        '''
    )

    task = extract_task(source, "activate")

    assert "from torch.nn.functional import *\nfrom math import *\n" in task.source


def test_code_defined_after_the_target_is_copied_in_file_order():
    source = textwrap.dedent(
        '''\
        import torch


        # drtriton: inputs = [torch.randn(2)]
        def outer(x):
            return inner(x) * FACTOR + torch.zeros(1)


        def inner(x):
            return torch.relu(x)


        FACTOR = 3
        '''
    )

    task = extract_task(source, "outer")

    assert task.source.index("def outer") < task.source.index("def inner") < task.source.index("FACTOR = 3")
