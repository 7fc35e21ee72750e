"""The package's layers, read from every module's imports (function-local ones included): no import runs back up.

Floors, lowest first; a module imports only its own package and the floors below it, never a sibling on its floor:
  ground   errors.py, task.py, the package's __init__ (its version)
  1        compiler/ (graph -> kernels), source/ (user code <-> Tasks, no execution), runners/ (where workers run)
  2        models/ (candidate sources beside the compiler: they call the compiler and start sampling workers)
  3        engine/ (the caller's side: pipeline, search, verify's caller, report) | worker/ (runs in a worker, torch)
  4        bench/ (`drtriton bench`: the pipeline over a suite)
  5        server/ (the language server) | cli.py (`drtriton`)
  6        __main__.py (`python -m drtriton_lsp`: the CLI)
engine/ and worker/ share a floor so neither imports the other: the caller reaches the worker only through a runner.
Inside engine/, worker/ and compiler/ the imports form no loop (one dodged with a function-local import counts); a loop
that cannot be fixed at once goes in KNOWN_LOOP_EDGES, and leaves it when fixed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "drtriton_lsp"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

FLOORS: list[set[str]] = [
    {PACKAGE, "errors", "task"},
    {"compiler", "source", "runners"},
    {"models"},
    {"engine", "worker"},
    {"bench"},
    {"server", "cli"},
    {"__main__"},
]
NO_LOOPS_IN = ("compiler", "engine", "worker")
# Known loops, each an edge a function-local import takes back up (module names under the package): none now.
KNOWN_LOOP_EDGES: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def imported_modules(module: str) -> set[str]:
    """Every drtriton_lsp module `module` imports, anywhere in its body: `from P import name` counts as importing
    the submodule P.name when there is one, else P."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in MODULES else source)
    return {name for name in found if name == PACKAGE or name.startswith(PACKAGE + ".")}


def unit_of(module: str) -> str:
    """The package (or top-level module) a module belongs to: "engine" for drtriton_lsp.engine.pipeline."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def floor_of(unit: str) -> int:
    for number, units in enumerate(FLOORS):
        if unit in units:
            return number
    raise LookupError(unit)


def layer_violations(imports: dict[str, set[str]]) -> list[str]:
    violations = []
    for module, targets in sorted(imports.items()):
        unit = unit_of(module)
        for target in sorted(targets):
            other = unit_of(target)
            if other != unit and floor_of(other) >= floor_of(unit):
                violations.append(f"{module} imports {target} ({other}/ is not below {unit}/)")
    return violations


def loops(imports: dict[str, set[str]], package: str) -> list[list[str]]:
    """The import loops among `package`'s modules (strongly connected components), the known edges left out."""
    prefix = f"{PACKAGE}.{package}"
    inside = {m for m in imports if m == prefix or m.startswith(prefix + ".")}
    known = {(f"{PACKAGE}.{a}", f"{PACKAGE}.{b}") for a, b in KNOWN_LOOP_EDGES}
    edges = {m: sorted(t for t in imports[m] if t in inside and (m, t) not in known) for m in inside}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in edges[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1 or module in edges[module]:
                found.append(sorted(component))

    for module in sorted(inside):
        if module not in index:
            visit(module)
    return found


IMPORTS = {module: imported_modules(module) for module in MODULES}


def test_every_package_has_a_floor():
    unplaced = sorted({unit_of(module) for module in MODULES} - set().union(*FLOORS))
    assert unplaced == [], f"place these on a floor in FLOORS (and docs/development.md): {unplaced}"


def test_no_import_runs_up_or_across_a_floor():
    assert layer_violations(IMPORTS) == []


@pytest.mark.parametrize("package", NO_LOOPS_IN)
def test_no_import_loop(package):
    assert loops(IMPORTS, package) == []


def test_the_known_loop_edges_still_exist():
    """A known loop that was fixed leaves the list, so it cannot come back unnoticed."""
    gone = [edge for edge in sorted(KNOWN_LOOP_EDGES) if f"{PACKAGE}.{edge[1]}" not in IMPORTS[f"{PACKAGE}.{edge[0]}"]]
    assert gone == [], f"remove from KNOWN_LOOP_EDGES: {gone}"


def test_the_checks_see_an_import_back_up_a_sibling_import_and_a_loop():
    """The checks themselves: a function-local import from engine/ into worker/ or server/, and a loop in worker/."""
    imports = {module: set(targets) for module, targets in IMPORTS.items()}
    imports[f"{PACKAGE}.engine.verify"] |= {f"{PACKAGE}.worker.judge", f"{PACKAGE}.server.jobs"}
    imports[f"{PACKAGE}.worker.tolerances"].add(f"{PACKAGE}.worker.op_audit")
    violations = layer_violations(imports)
    assert any("engine.verify imports drtriton_lsp.worker.judge" in line for line in violations)
    assert any("engine.verify imports drtriton_lsp.server.jobs" in line for line in violations)
    assert [f"{PACKAGE}.worker.op_audit", f"{PACKAGE}.worker.tolerances"] in loops(imports, "worker")
