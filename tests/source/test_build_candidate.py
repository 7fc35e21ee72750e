"""build_candidate: a KernelBench-form candidate that compiles, defines ModelNew and never touches Model."""

import ast
import textwrap

import pytest
from source_stand_ins import StandInProgram, relu_program

from drtriton_lsp.errors import SourceError
from drtriton_lsp.source.candidate import build_candidate
from drtriton_lsp.source.extract import extract_task

TASK = textwrap.dedent(
    '''\
    """A KernelBench task."""
    import torch
    import torch.nn as nn

    SCALE = 2.0


    def helper(x):
        return x * SCALE


    class Model(nn.Module):
        """The reference."""

        expansion = 4

        def __init__(self, dim, hidden=8):
            super(Model, self).__init__()
            self.fc = nn.Linear(dim, hidden * Model.expansion)
            self._init_weights()

        def _init_weights(self):
            nn.init.zeros_(self.fc.bias)

        def forward(self, x, scale: float = 1.0, *extra, mask=None):
            return helper(self.fc(x)) * scale


    def get_inputs():
        return [torch.randn(2, 3)]


    def get_init_inputs():
        return [3]
    '''
)


def test_candidate_layout():
    candidate = build_candidate(TASK, relu_program("task"), "Triton candidate for Model.\nVerified: not yet.")

    tree = ast.parse(candidate)
    assert ast.get_docstring(tree) == "Triton candidate for Model.\nVerified: not yet."
    top_level = [getattr(node, "name", None) for node in tree.body]
    assert top_level == [
        None,
        None,
        None,
        None,
        None,
        None,
        "helper",
        "task_relu_kernel",
        None,
        "task_triton_forward",
        "ModelNew",
    ]
    assert candidate.count("import torch\n") == 1
    assert "import triton\nimport triton.language as tl\n" in candidate
    assert "get_inputs" not in candidate and "get_init_inputs" not in candidate
    compile(candidate, "candidate.py", "exec")


def test_model_new_keeps_constructor_and_forward_signature():
    candidate = build_candidate(TASK, relu_program("task"), "header")

    assert (
        textwrap.dedent(
            '''\
        class ModelNew(torch.nn.Module):
            """Model with its forward computed by `task_triton_forward` (generated Triton kernels)."""

            expansion = 4

            def __init__(self, dim, hidden=8):
                super().__init__()
                self.fc = nn.Linear(dim, hidden * ModelNew.expansion)
                self._init_weights()

            def _init_weights(self):
                nn.init.zeros_(self.fc.bias)

            def forward(self, x, scale: float=1.0, *extra, mask=None):
                return task_triton_forward(self, x, scale, *extra, mask=mask)
        '''
        )
        in candidate
    )


def test_candidate_never_references_model():
    candidate = build_candidate(TASK, relu_program("task"), "header")

    names = {node.id for node in ast.walk(ast.parse(candidate)) if isinstance(node, ast.Name)}
    assert "Model" not in names
    assert "class Model(" not in candidate


def test_candidate_from_an_extracted_function_task(realistic_source):
    task = extract_task(realistic_source, "scaled_residual")

    candidate = build_candidate(task.source, relu_program("scaled"), "header")

    assert "def scaled_residual(x, y, *, alpha=0.5):" in candidate  # the helper the task wraps stays
    assert "class ModelNew(torch.nn.Module):" in candidate
    assert "return scaled_triton_forward(self, x, y, alpha=alpha)" in candidate
    assert "__init__" not in candidate.split("class ModelNew")[1]
    compile(candidate, "candidate.py", "exec")


def test_header_quotes_are_escaped():
    candidate = build_candidate(TASK, relu_program("task"), 'Says """hi""" and ends with a quote"')

    assert ast.get_docstring(ast.parse(candidate)) == 'Says """hi""" and ends with a quote"'


def test_imports_the_program_needs_are_added_once():
    program = StandInProgram(
        relu_program("task").kernel_block,
        "task_triton_forward",
        ("import math", "import torch", "import triton", "import triton.language as tl"),
    )

    candidate = build_candidate(TASK, program, "header")

    assert candidate.count("import math\n") == 1
    assert candidate.index("import math") < candidate.index("SCALE = 2.0")


def test_task_without_model_is_an_error():
    with pytest.raises(SourceError, match="no `class Model`"):
        build_candidate("import torch\n", relu_program("task"), "header")
