"""The compiler runs where torch is not (the language server): it imports no torch, and plans and lowers a graph
from the graph and op schemas a capture worker sends.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import drtriton_lsp.compiler
from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.worker.capture import capture_graph
from drtriton_lsp.worker.op_schemas import schemas_of

COMPILER = Path(drtriton_lsp.compiler.__file__).parent

# Imports every compiler module in a fresh interpreter where `import torch` fails, then compiles the graph it is sent
# (with the schemas the capture sent, or none) under the default schedule.
COMPILE_WITHOUT_TORCH = """
import importlib, json, pkgutil, sys
sys.modules["torch"] = None
import drtriton_lsp.compiler
for module in pkgutil.walk_packages(drtriton_lsp.compiler.__path__, "drtriton_lsp.compiler."):
    importlib.import_module(module.name)
from drtriton_lsp.compiler import aten_schemas
from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.graph import OpGraph
graph, schemas = json.loads(sys.stdin.read())
if schemas is not None:
    aten_schemas.remember(schemas)
try:
    program = compile_graph(OpGraph.from_json(graph), prefix="block", forward_params=["x"], has_self=True)
except LookupError as error:
    print(json.dumps({"error": str(error)}))
else:
    print(json.dumps({"schedule": program.schedule, "source": program.kernel_block}))
"""


class ProjectReduceNormalize(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 24)

    def forward(self, x):
        hidden = F.gelu(self.proj(x)) * 2.0
        return hidden.sum(dim=1), torch.softmax(hidden, dim=-1)


def captured():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture_graph(ProjectReduceNormalize().eval(), (torch.randn(4, 16),))


def compiled_without_torch(graph, schemas) -> dict[str, str]:
    finished = subprocess.run(
        [sys.executable, "-c", COMPILE_WITHOUT_TORCH], input=json.dumps([graph.to_json(), schemas]),
        capture_output=True, text=True, timeout=120,
    )
    assert finished.returncode == 0, finished.stderr
    return json.loads(finished.stdout)


def test_no_compiler_module_imports_torch():
    """Function-local imports count: a lazy `import torch` still needs torch where the compiler runs."""
    importers = []
    for path in sorted(COMPILER.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(name == "torch" or name.startswith("torch.") for name in names):
                importers.append(f"{path.relative_to(COMPILER)}:{node.lineno}")
    assert importers == []


def test_the_compiler_plans_and_lowers_a_captured_graph_without_torch():
    graph = captured()
    program = compile_graph(graph, prefix="block", forward_params=["x"], has_self=True)
    assert {"matmul", "reduce", "normalize"} <= {line.split()[1] for line in program.schedule.splitlines()}
    elsewhere = compiled_without_torch(graph, schemas_of(graph))
    assert elsewhere == {"schedule": program.schedule, "source": program.kernel_block}


def test_an_op_no_capture_described_is_named_not_read_from_torch():
    elsewhere = compiled_without_torch(captured(), None)
    assert "no schema for aten.linear.default" in elsewhere.get("error", "")
