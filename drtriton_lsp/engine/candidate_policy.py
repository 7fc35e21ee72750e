"""The static policy for candidate code: what a candidate may not write, judged from its text alone (no torch).

A candidate runs in its own process, but the checks made there (launch counts, the ATen audit, guard regions) live in
that process too; this policy keeps candidate code from reaching them, from leaving the process's normal paths (files,
threads, other processes, native code), and from inspecting or patching anything outside itself. Code copied verbatim
from the task (the user's own statements, which the reference runs anyway) and the write-back dispatch helper are exempt.
"""

from __future__ import annotations

import ast
import threading
from dataclasses import dataclass

from drtriton_lsp.source.dispatch import is_dispatch_helper_statement, without_dispatch_decorators

# Modules a candidate may import (a top-level name; submodules are checked against FORBIDDEN_PATHS).
ALLOWED_MODULES = frozenset(
    {
        "__future__", "abc", "collections", "dataclasses", "enum", "functools", "itertools", "math", "numbers",
        "operator", "torch", "triton", "typing", "typing_extensions", "warnings",
    }
)

# Dotted paths (and everything under them) that a candidate may not name, however it imported their root.
FORBIDDEN_PATHS = (
    "torch.load", "torch.save", "torch.from_file", "torch.hub", "torch.package", "torch.serialization",
    "torch.utils.cpp_extension", "torch.multiprocessing", "torch.distributed", "torch.library", "torch.overrides",
    "torch.compile", "torch.jit", "torch.export", "torch.fx", "torch.Stream", "torch.cuda.Stream", "torch.cuda.stream",
    "torch.cuda.set_stream", "torch.cuda.ExternalStream", "torch.cuda.graph", "torch.cuda.CUDAGraph",
    # a forward that could tell a CUDA-graph capture from a plain call could replay other work than it was audited doing
    "torch.cuda.graphs", "torch.cuda.is_current_stream_capturing", "torch.cuda.make_graphed_callables",
    "torch.Tensor.register_hook", "torch.ops.load_library", "torch.classes", "torch.backends",
    "torch.set_float32_matmul_precision", "torch.cuda.caching_allocator_alloc", "torch.cuda.memory",
    "triton.knobs", "triton.runtime.interpreter", "triton.runtime.jit", "triton.compiler",
    "operator.attrgetter", "operator.methodcaller",
    # these evaluate annotation strings, which would run code this policy never read
    "typing.get_type_hints", "typing.ForwardRef", "typing_extensions.get_type_hints", "typing_extensions.ForwardRef",
    "functools.singledispatch", "functools.singledispatchmethod",
)

# Built-in names that read or change code, modules and objects by name, or reach files and the interpreter. (Names a
# model's own code often uses, such as `input` and `dir`, are not here: they can only hurt the candidate itself.)
FORBIDDEN_BUILTINS = frozenset(
    {"__import__", "breakpoint", "compile", "delattr", "eval", "exec", "getattr", "globals", "locals", "open", "setattr", "vars"}
)

# Attribute names that reach modules the policy forbids (many modules keep `sys`, `os`... as attributes), stack
# frames, or code objects, whatever object they are read from.
FORBIDDEN_ATTRIBUTES = frozenset(
    {
        "asyncio", "atexit", "builtins", "concurrent", "ctypes", "faulthandler", "gc", "importlib", "inspect",
        "marshal", "mmap", "multiprocessing", "os", "pathlib", "pickle", "runpy", "shutil", "signal", "socket",
        "subprocess", "sys", "tempfile", "threading", "traceback", "weakref",
        "ag_frame", "co_code", "co_consts", "cr_frame", "f_back", "f_builtins", "f_code", "f_globals", "f_locals",
        "gi_frame", "tb_frame", "tb_next",
        "from_file", "fromfile", "tofile",
        # CUDA graphs and the capture state, by name: reachable through any alias of torch.cuda
        "CUDAGraph", "is_current_stream_capturing", "make_graphed_callables",
    }
)


# What a @triton.jit body may call besides Triton's own functions and other kernels: Triton tensor methods (and a
# tensor descriptor's load and store) and a few builtins the compiler understands. Anything else (a Python helper,
# torch) runs only under the CPU interpreter.
KERNEL_BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool", "isinstance", "print", "tuple", "abs"})
TRITON_TENSOR_METHODS = frozenset(
    {
        "T", "abs", "advance", "argmax", "argmin", "associative_scan", "atomic_add", "atomic_and", "atomic_cas",
        "atomic_max", "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor", "broadcast_to", "cast", "cdiv", "ceil",
        "cos", "cumprod", "cumsum", "erf", "exp", "exp2", "expand_dims", "flip", "floor", "gather", "histogram",
        "item", "load", "log", "log2", "logical_and", "logical_or", "max", "min", "permute", "ravel", "reduce",
        "reduce_or", "reshape", "rsqrt", "sigmoid", "sin", "softmax", "sort", "split", "sqrt", "sqrt_rn", "store", "sum",
        "to", "trans", "view", "xor_sum",
    }
)


@dataclass(frozen=True)
class PolicyViolation:
    """Why the candidate is rejected before it runs: a reason code (see verify.REJECTION_REASONS) and the detail."""

    reason: str
    detail: str


# CPython 3.11 before 3.11.8 can fail `ast.parse` run in two threads at once ("AST constructor recursion depth
# mismatch", gh-106905), and the search verifies candidates in a thread pool: one check at a time per process.
_PARSING = threading.Lock()


def policy_violation(candidate_source: str, task_source: str | None = None) -> PolicyViolation | None:
    """The first thing in `candidate_source` that the policy forbids, or None.

    task_source: the task the candidate replaces. A top-level statement identical to one of the task's (once the
    write-back's dispatch decorators are set aside, whose arguments are still checked), a class member identical to
    a member of one of the task's classes, and the write-back's dispatch helper are exempt. Nothing deeper is: a
    statement of the user's reused in another context could do what the user's code never did.
    """
    with _PARSING:
        return _first_violation(candidate_source, task_source)


def _first_violation(candidate_source: str, task_source: str | None) -> PolicyViolation | None:
    try:
        tree = ast.parse(candidate_source)
    except SyntaxError as error:
        return PolicyViolation("import_error", f"syntax error at line {error.lineno}: {error.msg}")
    task_statements: set[str] = set()
    task_members: set[str] = set()
    if task_source:
        try:
            task_tree = ast.parse(task_source)
        except SyntaxError:
            task_tree = ast.Module(body=[], type_ignores=[])
        task_statements = {ast.dump(node) for node in task_tree.body}
        task_members = {
            ast.dump(member) for node in task_tree.body if isinstance(node, ast.ClassDef) for member in node.body
        }
    kernels = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(_is_triton_jit(d) for d in node.decorator_list)
    }
    checker = _Checker(task_statements, task_members, kernels)
    try:
        checker.visit(tree)
    except _Forbidden as forbidden:
        return forbidden.violation
    if not any(_defines_model_new(node) for node in ast.walk(tree)):
        return PolicyViolation("no_model_new", "")
    if not kernels:
        return PolicyViolation("no_triton_kernel", "")
    return None


class _Forbidden(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.violation = PolicyViolation(reason, detail)


class _Checker(ast.NodeVisitor):
    """Walks the candidate, skipping exempt statements; raises _Forbidden at the first violation."""

    def __init__(self, task_statements: set[str], task_members: set[str], kernels: set[str]):
        self.task_statements = task_statements
        self.task_members = task_members
        self.kernels = kernels
        self.in_kernel: str | None = None
        # local name -> the dotted path it was imported as ("F" -> "torch.nn.functional")
        self.imported: dict[str, str] = {}
        # names that exempt code bound to modules the candidate's own code may not use
        self.untouchable: set[str] = set()

    def _forbid(self, node: ast.AST, what: str) -> None:
        raise _Forbidden("forbidden_construct", f"line {getattr(node, 'lineno', '?')}: {what}")

    def visit_Module(self, node: ast.Module) -> None:
        for statement in node.body:
            if is_dispatch_helper_statement(statement) or ast.dump(statement) in self.task_statements:
                self._note_exempt_imports(statement)
                continue
            undecorated = without_dispatch_decorators(statement)
            if ast.dump(undecorated) in self.task_statements:
                self._note_exempt_imports(statement)
                for decorator in _dispatch_decorators(statement):
                    self.visit(decorator)  # the only part write-back added: its arguments are checked
                continue
            self.visit(statement)

    def _note_exempt_imports(self, node: ast.stmt) -> None:
        for statement in ast.walk(node):
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                for local, path, imported in _bindings(statement):
                    if _import_problem(imported) is None:
                        self.imported[local] = path
                    else:
                        self.untouchable.add(local)

    # statements

    def visit_Import(self, node: ast.Import) -> None:
        self._check_imports(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and "drtriton_task" in node.module:
            raise _Forbidden("calls_reference", f"the task module is imported at line {node.lineno}")
        self._check_imports(node)

    def _check_imports(self, node: ast.Import | ast.ImportFrom) -> None:
        for local, path, imported in _bindings(node):
            if "drtriton_task" in imported:
                raise _Forbidden("calls_reference", f"the task module is imported at line {node.lineno}")
            problem = _import_problem(imported)
            if problem:
                self._forbid(node, problem)
            self.imported[local] = path
            self.untouchable.discard(local)

    def visit_Try(self, node: ast.AST) -> None:
        raise _Forbidden("try_except_fallback", f"try statement at line {node.lineno}")

    visit_TryStar = visit_Try

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if _is_dunder(node.name) and node.name != "__init__":
            self._forbid(node, f"defines the special method {node.name} (it could change how results behave)")
        if node.name in self.kernels and any(_is_triton_jit(d) for d in node.decorator_list):
            outer, self.in_kernel = self.in_kernel, node.name
            try:
                self.generic_visit(node)
            finally:
                self.in_kernel = outer
            return
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            if self._path_of(base) in ("torch.Tensor", "torch._tensor.Tensor"):
                self._forbid(node, f"class {node.name} subclasses torch.Tensor (a result could compute itself later)")
        for expression in [*node.bases, *node.keywords, *node.decorator_list]:
            self.visit(expression)
        for member in node.body:
            if ast.dump(member) not in self.task_members:  # a member copied from the task's classes is exempt
                self.visit(member)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target)
        self.generic_visit(node)
        # a name bound to a module or one of its members (`c = torch.cuda`) names what it is bound to from here on,
        # so the forbidden paths hold through it (`c.Stream()` is torch.cuda.Stream)
        for target in node.targets:
            if isinstance(target, ast.Name):
                path = self._path_of(node.value)
                if path is None:
                    self.imported.pop(target.id, None)
                else:
                    self.imported[target.id] = path

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_target(target)
        self.generic_visit(node)

    def _check_target(self, target: ast.expr) -> None:
        """Attributes may be set only directly on `self` (`self.name = ...`, the module's own state): anything else
        could patch a shared object, including one stored on self (`self.t = torch; self.t.isclose = ...`)."""
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._check_target(element)
        elif isinstance(target, ast.Starred):
            self._check_target(target.value)
        elif isinstance(target, ast.Attribute):
            if not (isinstance(target.value, ast.Name) and target.value.id == "self"):
                self._forbid(target, f"assigns to the attribute {ast.unparse(target)} (only self.name may be set)")

    # expressions

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_BUILTINS:
            self._forbid(node, f"uses {node.id}")
        if _is_dunder(node.id):
            self._forbid(node, f"uses the special name {node.id}")
        if node.id in self.untouchable:
            self._forbid(node, f"uses {node.id}, a module the candidate's own code may not use")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = node.attr
        path = self._path_of(node)
        aten_op = path is not None and path.startswith("torch.ops.aten.")  # e.g. torch.ops.aten.__and__.Tensor
        if _is_dunder(name) and name != "__init__" and not aten_op:
            self._forbid(node, f"reads the special attribute {name}")
        if path is not None and any(path == p or path.startswith(p + ".") for p in FORBIDDEN_PATHS):
            self._forbid(node, f"uses {path}")
        if name in FORBIDDEN_ATTRIBUTES:
            self._forbid(node, f"reaches {name} through {ast.unparse(node)}")
        if name.startswith("_") and not _is_dunder(name) and _root_name(node) != "self" and not aten_op:
            self._forbid(node, f"reads the private attribute {ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id == "type" and len(node.args) == 3:
            self._forbid(node, "creates a class with type(name, bases, namespace)")
        if self.in_kernel is not None:
            self._check_kernel_call(node)
        self.generic_visit(node)

    def _check_kernel_call(self, node: ast.Call) -> None:
        """A kernel body calls only Triton (tl.*, triton.*), other kernels, Triton tensor methods and a few
        builtins: anything else is Python that only the CPU interpreter runs, never a GPU kernel."""
        func = node.func
        if isinstance(func, ast.Name):
            if func.id in self.kernels or func.id in KERNEL_BUILTINS or self._is_triton(func):
                return
        elif isinstance(func, ast.Attribute):
            root = func
            while isinstance(root, ast.Attribute):
                root = root.value
            if self._is_triton(root):
                return
            # a tensor method on a value (a name, a call's result, an expression), not on another module
            if func.attr in TRITON_TENSOR_METHODS and not (isinstance(root, ast.Name) and root.id in self.imported):
                return
        self._forbid(
            node,
            f"kernel {self.in_kernel} calls {ast.unparse(func)}, which only Triton's CPU interpreter can run "
            "(a GPU kernel calls only Triton functions and other @triton.jit kernels)",
        )

    def _is_triton(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and self.imported.get(node.id, "").split(".")[0] == "triton"

    def _path_of(self, node: ast.expr) -> str | None:
        """The dotted path an expression names through the candidate's imports ("F.relu" -> "torch.nn.functional.relu")."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.imported:
            return None
        return ".".join([self.imported[node.id], *reversed(parts)])


def _defines_model_new(node: ast.AST) -> bool:
    if isinstance(node, ast.ClassDef):
        return node.name == "ModelNew"
    return isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in node.targets)


def _dispatch_decorators(statement: ast.stmt) -> list[ast.expr]:
    """The decorators write-back added to a statement (on a function, or on a class's methods)."""
    kept = without_dispatch_decorators(statement)
    functions = [statement] if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
    stripped = [kept] if isinstance(kept, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
    if isinstance(statement, ast.ClassDef):
        functions = [n for n in statement.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        stripped = [n for n in kept.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    removed = []
    for original, remaining in zip(functions, stripped):
        left = {ast.dump(d) for d in remaining.decorator_list}
        removed += [d for d in original.decorator_list if ast.dump(d) not in left]
    return removed


def _bindings(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str, str]]:
    """(local name, dotted path it names, module path imported) for each name an import statement binds:
    `import a.b` binds `a` to "a" but imports "a.b"."""
    if isinstance(node, ast.Import):
        return [
            (alias.asname or alias.name.split(".")[0], alias.name if alias.asname else alias.name.split(".")[0], alias.name)
            for alias in node.names
        ]
    if node.level:
        return [(alias.asname or alias.name, "." + alias.name, "." + alias.name) for alias in node.names]
    return [(alias.asname or alias.name, f"{node.module}.{alias.name}", f"{node.module}.{alias.name}") for alias in node.names]


def _import_problem(path: str) -> str | None:
    """Why importing `path` is forbidden, or None."""
    if path.startswith("."):
        return f"imports {path} relative to a package (a candidate is a single module)"
    if path.split(".")[0] not in ALLOWED_MODULES:
        return f"imports {path} (allowed: {', '.join(sorted(ALLOWED_MODULES - {'__future__'}))})"
    if any(part.startswith("_") for part in path.split(".")[1:]):
        return f"imports the private module {path}"
    if any(path == p or path.startswith(p + ".") for p in FORBIDDEN_PATHS):
        return f"imports {path}"
    return None


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _is_triton_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    text = ast.unparse(target)
    return text in ("triton.jit", "jit") or text.endswith(".jit")
