"""The dispatch helper every written block carries, and the specialization table its decorator checks.

One canonical text (`DISPATCH_HELPER`), copied verbatim into each block so that a block is self-contained
and a static policy can recognise the helper by AST equality (`is_dispatch_helper_statement`).
"""

from __future__ import annotations

import ast
import copy
import functools
import math
import re
from typing import Any

from drtriton_lsp.errors import SourceError

DISPATCH_DECORATOR = "drtriton_dispatch"

# NOTE: this text is a contract. The verifier's static policy accepts, in candidate code, exactly
# these statements (compared as ASTs), so any change here is a change to what that policy trusts.
# It must run wherever the user's file runs: plain Python, torch, and Triton only if installed.
DISPATCH_HELPER = '''\
import functools as _drtriton_functools
import inspect as _drtriton_inspect
import math as _drtriton_math
import operator as _drtriton_operator
import os as _drtriton_os
import threading as _drtriton_threading
import warnings as _drtriton_warnings

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton here: every decorated call runs the original code
    triton = tl = None


class DrtritonDefinition:
    """A function, class, enum member or object in a specialization, known by its module and name.

    module None is the module that holds the decorated code. kind "object" also compares the
    object's attributes, "partial" a functools.partial's function and arguments, "opaque" only its type.
    """

    drtriton_pattern = True

    def __init__(self, kind, module, qualname, detail=None):
        self.kind = kind
        self.module = module
        self.qualname = qualname
        self.detail = detail

    def __repr__(self):
        return f"{self.module + '.' if self.module else ''}{self.qualname}"

    def matches(self, value, home):
        if value is self.__dict__.get("matched"):
            return True  # the very function or class that matched before
        if self.kind == "partial":
            function, arguments, keywords = self.detail
            return (
                isinstance(value, _drtriton_functools.partial)
                and drtriton_same(value.func, function, home)
                and drtriton_same(value.args, arguments, home)
                and drtriton_same(value.keywords, keywords, home)
            )
        definition = value if self.kind in ("function", "class") else type(value)
        definition = getattr(definition, "__func__", definition)  # a bound method: its function
        if (
            getattr(definition, "__module__", None) != (self.module or home)
            or getattr(definition, "__qualname__", None) != self.qualname
        ):
            return False
        if self.kind == "enum":
            return getattr(value, "name", None) == self.detail
        if self.kind == "object":
            attributes = getattr(value, "__dict__", None)
            return isinstance(attributes, dict) and drtriton_same(attributes, self.detail, home)
        if self.kind in ("function", "class"):
            self.matched = value
        return True


def drtriton_same(value, expected, home):
    """Whether `value` is the value the kernels were specialised on: same kind of value and equal
    (a float must be a float; -0.0 differs from 0.0 and NaN matches NaN; torch.Size counts as a tuple)."""
    if getattr(type(expected), "drtriton_pattern", False):
        return expected.matches(value, home)
    if isinstance(expected, float):
        if type(value) is not float:
            return False
        if value != value or expected != expected:
            return value != value and expected != expected
        return value == expected and _drtriton_math.copysign(1.0, value) == _drtriton_math.copysign(1.0, expected)
    if isinstance(expected, (tuple, list)):
        return (
            isinstance(value, type(expected))
            and len(value) == len(expected)
            and all(drtriton_same(item, want, home) for item, want in zip(value, expected))
        )
    if isinstance(expected, dict):
        return (
            isinstance(value, dict)
            and value.keys() == expected.keys()
            and all(drtriton_same(value[key], want, home) for key, want in expected.items())
        )
    return type(value) is type(expected) and value == expected


class DrtritonGraphReplay:
    """`triton_forward` replayed as one CUDA graph per kind of call, so a call's launches cost the host one replay.

    A kind of call is its arguments' sizes, strides, dtypes and plain values and the module tensors' addresses (a
    replaced parameter is a new kind; one changed in place is read by the graph). Its first call runs plainly, is
    captured, replayed on the same inputs and must give bitwise the plain run's results, else that kind stays plain
    (as do calls that are not a graph's: strided inputs, other structures, a capture in progress, a failed capture).
    That graph reads copies of the inputs: each call copies its inputs into the graph's buffers. When a kind's call
    passes the same input memory as its last call (inputs refilled in place, as a loop over static buffers or the
    caching allocator's reuse gives), a second graph is captured that reads that memory itself, and calls passing it
    replay that graph without the copies. Outputs are always copied out: a returned tensor is never reused.
    DRTRITON_CUDA_GRAPHS=0 in the environment runs every call plainly.
    """

    KINDS = 8  # graphs kept per forward (each holds its intermediate buffers); later calls run plainly or copy inputs

    def __init__(self, triton_forward, warn):
        self.triton_forward = triton_forward
        self.warn = warn
        # kind -> (graph, static inputs, static outputs, finished event, whether the forward left its inputs as they
        # were), or None: runs plainly
        self.graphs = {}
        self.in_place = {}  # (kind, input addresses) -> (graph, static outputs, finished event), or None: not again
        self.last_addresses = {}  # kind -> the input addresses of its last call
        self.lock = _drtriton_threading.Lock()

    def __call__(self, module, module_tensors, passed):
        """The forward's results for `passed`; module_tensors: {path: tensor} the guards read, passed on to it."""
        if _drtriton_os.environ.get("DRTRITON_CUDA_GRAPHS") == "0" or torch.cuda.is_current_stream_capturing():
            return self.triton_forward(module, *passed, drtriton_module_tensors=module_tensors)
        kind = self.kind(list(module_tensors.values()), passed)
        with self.lock:
            if kind is None or self.graphs.get(kind, False) is None:
                return self.triton_forward(module, *passed, drtriton_module_tensors=module_tensors)
            if kind not in self.graphs:
                if len(self.graphs) + len(self.in_place) >= self.KINDS:
                    return self.triton_forward(module, *passed, drtriton_module_tensors=module_tensors)
                self.last_addresses[kind] = self.addresses(passed)
                captured = self.capture(module, module_tensors, passed, copied_inputs=True)
                self.graphs[kind] = captured[1]
                return captured[0]
            graph, inputs, outputs, finished, inputs_kept = self.graphs[kind]
            addresses = self.addresses(passed)
            in_place = self.in_place.get((kind, addresses), False)
            if in_place is False and inputs_kept and self.last_addresses.get(kind) == addresses and (
                len(self.graphs) + len(self.in_place) < self.KINDS
            ):
                captured = self.capture(module, module_tensors, passed, copied_inputs=False)
                self.in_place[(kind, addresses)] = captured[1]
                return captured[0]
            self.last_addresses[kind] = addresses
            if in_place:
                graph, outputs, finished = in_place
            stream = torch.cuda.current_stream()
            stream.wait_event(finished)  # the last replay's outputs are copied out before its buffers are reused
            if not in_place:
                for static, value in zip(inputs, passed):
                    if isinstance(static, torch.Tensor):
                        static.copy_(value)
            graph.replay()
            copied = self.copied(outputs)
            finished.record(stream)
            return copied

    @staticmethod
    def kind(module_tensors, passed):
        """The key of a call, or None where the call cannot be a graph's (a strided or overlapping input)."""
        key = [(tensor.data_ptr(), tensor.shape, tensor.stride(), tensor.dtype) for tensor in module_tensors]
        for value in passed:
            if isinstance(value, torch.Tensor):
                if not (value.is_contiguous() or value.is_contiguous(memory_format=torch.channels_last)):
                    return None
                key.append((value.shape, value.stride(), value.dtype, value.device))
            elif value is None or type(value) in (int, float, bool, str):
                key.append((type(value), value))
            else:
                return None
        return tuple(key)

    @staticmethod
    def addresses(passed):
        """Where the call's tensor inputs lie: a graph that reads them in place replays only for the same."""
        return tuple(value.data_ptr() for value in passed if isinstance(value, torch.Tensor))

    @staticmethod
    def copied(outputs):
        """The outputs as new tensors (a tensor, or a tuple or list of tensors and plain values)."""
        if isinstance(outputs, torch.Tensor):
            return outputs.clone()
        return type(outputs)(value.clone() if isinstance(value, torch.Tensor) else value for value in outputs)

    def capture(self, module, module_tensors, passed, copied_inputs):
        """(the call's plain results, the graph's entry or None): the graph reads copies of the inputs
        (copied_inputs) or the passed tensors' own memory; None where it cannot be captured or differs from the plain
        run, or an output is a view of an input. A graph reads the passed memory only where its copied-inputs graph
        found the forward leaves its inputs as they were (the capture runs it twice more on them)."""
        plain = self.triton_forward(module, *passed, drtriton_module_tensors=module_tensors)
        flat = [plain] if isinstance(plain, torch.Tensor) else plain
        if not isinstance(flat, (tuple, list)) or not any(isinstance(value, torch.Tensor) for value in flat):
            return plain, None
        inputs = [value.clone() if isinstance(value, torch.Tensor) else value for value in passed] if copied_inputs else passed
        graph = torch.cuda.CUDAGraph()
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                # lazy initialisation on a side stream, before the capture
                self.triton_forward(module, *inputs, drtriton_module_tensors=module_tensors)
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                outputs = self.triton_forward(module, *inputs, drtriton_module_tensors=module_tensors)
            graph.replay()
            replayed = [outputs] if isinstance(outputs, torch.Tensor) else outputs
            same = type(replayed) is type(flat) and len(replayed) == len(flat) and all(
                torch.equal(mine, theirs) if isinstance(mine, torch.Tensor) else mine == theirs
                for mine, theirs in zip(replayed, flat)
            )
        except Exception as failure:  # noqa: BLE001 - a forward that cannot be captured runs plainly
            self.warn(f"not replayed as a CUDA graph ({type(failure).__name__}: {str(failure)[:120]})")
            return plain, None
        if not same:
            self.warn("not replayed as a CUDA graph (its replay differed from the plain run)")
            return plain, None
        held = {value.untyped_storage().data_ptr() for value in inputs if isinstance(value, torch.Tensor)}
        if any(isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() in held for value in replayed):
            return plain, None  # an output is a view of an input: a copy would not be one of the caller's
        finished = torch.cuda.Event()
        finished.record(torch.cuda.current_stream())
        if not copied_inputs:
            return plain, (graph, outputs, finished)
        # the copies went through the warm-up and the replay: equal to the inputs, the forward wrote none of them
        kept = all(torch.equal(static, value) for static, value in zip(inputs, passed) if isinstance(value, torch.Tensor))
        return plain, (graph, inputs, outputs, finished, kept)


def drtriton_dispatch(triton_forward, specialization, is_method=True, replay=False):
    """Run `triton_forward` in place of the decorated PyTorch code when the call is one it was verified for.

    The kernels run only when no gradient is needed (they have no backward pass), every tensor is on
    one CUDA device (or on the CPU under Triton's interpreter: TRITON_INTERPRET=1 at import), and every value in
    `specialization` holds: the module's scalar attributes and submodule classes, parameter and input
    dtypes, ranks and fixed sizes, argument values (defaults included), module constants, and the
    training mode. Any other call runs the original, kept as `.reference`; a failed value check says
    so once through `warnings`. A function's Triton forward receives None for `self`; a module's receives the
    parameters and buffers the guards checked as `drtriton_module_tensors` ({path: tensor}). replay: on CUDA, calls
    replay CUDA graphs of `triton_forward` (DrtritonGraphReplay).
    """

    def decorate(reference):
        signature = _drtriton_inspect.signature(reference)
        names = list(signature.parameters)
        plain_signature = all(
            parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
            for parameter in signature.parameters.values()
        )
        home = reference.__module__
        owner = reference.__qualname__.rpartition(".")[0] if is_method else reference.__qualname__
        original = f"{owner}.forward" if is_method else owner
        missing = object()
        warned = set()
        # read once, as triton.jit does: kernels defined without it are compiled ones, which need CUDA tensors
        interpreted = _drtriton_os.environ.get("TRITON_INTERPRET") == "1"

        replayed = None
        if replay and triton_forward is not None and not interpreted:
            replayed = DrtritonGraphReplay(
                triton_forward, lambda sentence: _drtriton_warnings.warn(f"drtriton: {original}: {sentence}", stacklevel=5)
            )

        def bind(args, kwargs):
            if not kwargs and plain_signature and len(args) == len(names):
                return dict(zip(names, args))
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:  # a call the original rejects: let it say so in its own words
                return None
            bound.apply_defaults()
            return bound.arguments

        def same(value, expected):
            """drtriton_same, with the usual cases first: this runs for every guard of every call."""
            if value is expected:
                return True
            kind = type(expected)
            if kind is float and type(value) is float and value == expected and expected != 0.0:
                return True
            if kind in (int, str, bool):
                return type(value) is kind and value == expected
            if kind is tuple and type(value) is tuple and value == expected:
                # equal tuples (a convolution's sizes): the same item types decide it, when those are plain scalars
                types = flat_item_types.get(id(expected))
                if types is not None:
                    return tuple(map(type, value)) == types
            if kind is DrtritonDefinition and value is expected.__dict__.get("matched"):
                return True  # the very function or class that matched before (DrtritonDefinition.matches keeps it)
            return drtriton_same(value, expected, home)

        # per expected tuple of ints, strings or bools: its item types (so equal tuples compare in one step)
        flat_item_types = {
            id(expected[0]): tuple(map(type, expected[0]))
            for kind, _, *expected in specialization
            if kind in ("attribute", "class_attribute", "argument", "global")
            and type(expected[0]) is tuple
            and all(type(item) in (int, str, bool) for item in expected[0])
        }

        # Submodules are found once per call, parents first, each from its parent with one getattr;
        # every other guard on the module reads one attribute of one of them.
        submodules = []  # (path, parent path, attribute, expected class)
        tensors = []  # (label, "module" or "argument", parent path or argument, attribute, dtype, sizes: None where free)
        module_paths = []  # (index in tensors, path) of each module tensor
        values = []  # (label, "module", "class", "argument" or "global", parent path or name, attribute, expected)
        sizes = []  # (label, [(argument, dim)], low, high): dims that share one free size
        modes = []
        for kind, name, *expected in specialization:
            parent, _, attribute = name.rpartition(".") if isinstance(name, str) else ("", "", "")
            if kind == "module":
                submodules.append((name, parent, attribute, expected[0]))
            elif kind in ("parameter", "buffer"):
                module_paths.append((len(tensors), name))
                tensors.append((f"{owner}.{name}", "module", parent, attribute, *expected))
            elif kind == "tensor":
                tensors.append((f"argument {name!r}", "argument", name, None, *expected))
            elif kind == "attribute":
                values.append((f"{owner}.{name}", "module", parent, attribute, expected[0]))
            elif kind == "class_attribute":
                values.append((f"{owner}.{name} (a class attribute)", "class", parent, attribute, expected[0]))
            elif kind == "argument":
                values.append((f"argument {name!r}", "argument", name, None, expected[0]))
            elif kind == "global":
                values.append((f"{name} (module constant)", "global", name, None, expected[0]))
            elif kind == "sizes":
                sizes.append((" and ".join(f"{place}.shape[{dim}]" for place, dim in name), name, *expected))
            elif kind == "training":
                modes.append(name)
        named = {path for path, *_ in submodules}
        for _, where, parent, *_ in tensors + values:
            while where in ("module", "class") and parent and parent not in named:
                named.add(parent)
                submodules.append((parent, *parent.rpartition(".")[::2], None))  # read through, class not guarded
                parent = parent.rpartition(".")[0]
        submodules.sort(key=lambda entry: entry[0].count("."))

        # Most guards check plain values: a submodule's scalar attributes and flat tuples (a convolution's sizes), and
        # the module constants. Those of one object are read in one step (operator.attrgetter: getattr itself; a dict
        # lookup for the constants) and compared as one tuple, with their types (and a tuple's item types). Groups that
        # all hold pass their entries at once; otherwise the entries are checked one by one, which names the first
        # that fails.
        def plain_value(expected):
            """Whether == and the types decide `expected` (not -0.0, 0.0 or NaN, which == alone does not tell)."""
            if type(expected) is float:
                return expected == expected and expected != 0.0
            return type(expected) in (int, str, bool, type(None))

        groups = {}  # (where, parent path) -> [index into values]
        for index, (_, where, key, _, expected) in enumerate(values):
            flat = type(expected) is tuple and all(plain_value(item) for item in expected)
            if where in ("module", "global") and (plain_value(expected) or flat):
                groups.setdefault((where, key if where == "module" else None), []).append(index)
        # (where, parent path, reader, expected values, their types, {position: a tuple's item types})
        value_groups = []
        grouped = set()
        for (where, key), indices in groups.items():
            if len(indices) > 1:
                read_names = [values[index][3] if where == "module" else values[index][2] for index in indices]
                wanted = tuple(values[index][4] for index in indices)
                reader = (_drtriton_operator.attrgetter if where == "module" else _drtriton_operator.itemgetter)(*read_names)
                items = {position: tuple(map(type, value)) for position, value in enumerate(wanted) if type(value) is tuple}
                value_groups.append((where, key, reader, wanted, tuple(map(type, wanted)), items))
                grouped.update(indices)
        ungrouped = [entry for index, entry in enumerate(values) if index not in grouped]

        # per group, the last values read that held: the very same objects again hold too (they are immutable: plain
        # scalars and flat tuples of them), which one identity pass tells
        held = [()] * len(value_groups)

        def groups_hold(tree):
            """Whether every grouped value is the expected one (False too where a group cannot be read in one step)."""
            for number, (where, key, read, wanted, types, items) in enumerate(value_groups):
                try:
                    found = read(tree[key] if where == "module" else reference.__globals__)
                except (AttributeError, KeyError):
                    return False
                if len(found) == len(held[number]) and all(map(_drtriton_operator.is_, found, held[number])):
                    continue
                if found != wanted or tuple(map(type, found)) != types:
                    return False
                for position, item_types in items.items():
                    if tuple(map(type, found[position])) != item_types:
                        return False
                held[number] = found
            return True

        def mismatch(module, arguments, found, tree):
            """(guard, sentence) for the first value the kernels were not verified for; None if none."""
            cls = type(module)
            if is_method and (cls.__module__ != home or cls.__qualname__ != owner):
                return "class", f"{cls.__name__} is not {owner} (a subclass may change what forward computes)"
            for (label, _, _, _, dtype, shape), tensor in zip(tensors, found):
                if tensor.dtype != dtype:
                    return label, f"{label} is {tensor.dtype}, the kernels were verified for {dtype}"
                sizes_now = tensor.shape
                if len(sizes_now) != len(shape):
                    return label, f"{label} has {len(sizes_now)} dims, the kernels were verified for {len(shape)}"
                if sizes_now != shape and any(want is not None and size != want for size, want in zip(sizes_now, shape)):
                    dim, size, want = next(
                        (dim, size, want) for dim, (size, want) in enumerate(zip(sizes_now, shape)) if want not in (None, size)
                    )
                    return label, f"{label} has size {size} in dim {dim}, the kernels were verified for {want}"
            for label, places, low, high in sizes:
                seen = sorted({arguments[name].shape[dim] for name, dim in places})
                if len(seen) > 1 or seen[0] < low or (high is not None and seen[0] > high):
                    span = f"from {low} to {high}" if high is not None else f"of {low} or more"
                    return label, f"{label} is {seen}, the kernels were verified for one size {span}"
            for path, _, _, expected in submodules:
                submodule = tree[path]
                if expected is not None and not same(type(submodule), expected):
                    return f"class of {path}", f"the class of {owner}.{path} is {type(submodule)!r}, the kernels were verified for {expected!r}"
                if submodule._forward_hooks or submodule._forward_pre_hooks:
                    return f"hooks on {path}", f"{owner}.{path} has a forward hook, which the kernels would skip"
            for label, where, key, attribute, expected in ungrouped if groups_hold(tree) else values:
                if where == "module":
                    value = getattr(tree.get(key, missing), attribute, missing)
                elif where == "argument":
                    value = arguments.get(key, missing)
                elif where == "global":
                    value = reference.__globals__.get(key, missing)
                else:
                    value = getattr(type(tree.get(key, missing)), attribute, missing)
                if not same(value, expected):
                    shown = "missing" if value is missing else repr(value)
                    return label, f"{label} is {shown}, the kernels were verified for {expected!r}"
            if modes:
                flags = {submodule.training for submodule in tree.values()}
                if modes[0] == "eval" and True in flags:
                    return "training", f"{owner} is in training mode, the kernels were verified in eval mode (call .eval())"
                if len(flags) > 1:
                    return "training", f"{owner} mixes training and eval submodules, the kernels were verified in one mode"
            return None

        @_drtriton_functools.wraps(reference)
        def dispatch(*args, **kwargs):
            if triton_forward is None:
                reason = ("triton", "Triton is not installed")
            else:
                arguments = None if torch.compiler.is_compiling() else bind(args, kwargs)
                if arguments is None:
                    return reference(*args, **kwargs)
                module = args[0] if is_method else None
                tree = {"": module}
                for path, parent, attribute, _ in submodules:
                    tree[path] = getattr(tree[parent], attribute, missing) if tree.get(parent, missing) is not missing else missing
                if missing in tree.values():
                    return reference(*args, **kwargs)  # a submodule is gone: the original says what it needs
                found = [
                    getattr(tree[key], attribute, missing) if where == "module" else arguments.get(key, missing)
                    for _, where, key, attribute, *_ in tensors
                ]
                if not found or not all(type(tensor) in (torch.Tensor, torch.nn.Parameter) for tensor in found):
                    return reference(*args, **kwargs)  # not plain tensors (a subclass, a proxy, missing)
                if torch.is_grad_enabled() and any(tensor.requires_grad for tensor in found):
                    return reference(*args, **kwargs)  # a gradient is needed, and the kernels have no backward pass
                devices = {tensor.get_device() for tensor in found}  # -1: the CPU
                if len(devices) > 1 or not (interpreted or all(tensor.is_cuda for tensor in found)) or any(
                    tensor.layout != torch.strided for tensor in found
                ):
                    return reference(*args, **kwargs)  # several devices, not CUDA (MPS, CPU), or sparse
                reason = mismatch(module, arguments, found, tree)
                if reason is None:
                    passed = [arguments[name] for name in names[1 if is_method else 0:]]
                    device = min(devices)
                    # the kernels use the very tensors the guards checked: the forward reads none from the module
                    module_tensors = {path: found[index] for index, path in module_paths}
                    if replayed is not None:
                        if device != torch.cuda.current_device():
                            with torch.cuda.device(device):
                                return replayed(module, module_tensors, passed)
                        return replayed(module, module_tensors, passed)
                    if device >= 0 and device != torch.cuda.current_device():
                        with torch.cuda.device(device):
                            return triton_forward(module, *passed, drtriton_module_tensors=module_tensors)
                    return triton_forward(module, *passed, drtriton_module_tensors=module_tensors)
            guard, sentence = reason
            if guard not in warned:
                warned.add(guard)
                _drtriton_warnings.warn(f"drtriton: {sentence}; running the original {original}", stacklevel=2)
            return reference(*args, **kwargs)

        dispatch.reference = reference
        return dispatch

    return decorate
'''


@functools.lru_cache(maxsize=1)
def _helper_statement_dumps() -> frozenset[str]:
    return frozenset(ast.dump(statement) for statement in ast.parse(DISPATCH_HELPER).body)


def is_dispatch_helper_statement(statement: ast.stmt) -> bool:
    """Whether a top-level statement is one of the dispatch helper's, exactly (compared as an AST)."""
    return ast.dump(statement) in _helper_statement_dumps()


def without_dispatch_decorators(statement: ast.stmt) -> ast.stmt:
    """A copy of a top-level statement without the `@drtriton_dispatch(...)` decorators write-back adds (on a
    function, or on a class's methods): a written target compares equal (as an AST) to the task's own statement."""
    copied = copy.deepcopy(statement)
    functions = [copied] if isinstance(copied, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
    if isinstance(copied, ast.ClassDef):
        functions = [node for node in copied.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for function in functions:
        function.decorator_list = [
            decorator
            for decorator in function.decorator_list
            if not (
                isinstance(decorator, ast.Call)
                and isinstance(decorator.func, ast.Name)
                and decorator.func.id == DISPATCH_DECORATOR
            )
        ]
    return copied


def render_dispatch_helper(newline: str = "\n") -> str:
    """The helper's text with the file's line ending."""
    return DISPATCH_HELPER.replace("\n", newline)


def declares_replay(source: str) -> bool:
    """Whether a module's source decorates something with `@drtriton_dispatch(..., replay=True)`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == DISPATCH_DECORATOR
        and any(
            keyword.arg == "replay" and isinstance(keyword.value, ast.Constant) and keyword.value.value is True
            for keyword in node.keywords
        )
        for node in ast.walk(tree)
    )


def specialization_name(forward_function: str) -> str:
    """`RMS_NORM_SPECIALIZATION` for the forward function `rms_norm_triton_forward`."""
    return f"{forward_function.removesuffix('_triton_forward').upper()}_SPECIALIZATION"


def render_specialization(name: str, guards: list[dict[str, Any]]) -> str:
    """`NAME = (...)`: the guards as Python source, one per line, in the form drtriton_dispatch reads.

    guards: what capture recorded (see worker/specialization.py). Raises SourceError for a guard
    that is not in that form (drtriton only ever writes values it can spell as plain Python).
    """
    lines = [f"{name} = ("]
    for guard in guards:
        kind = guard["kind"]
        if kind in ("parameter", "buffer", "tensor"):
            entry = [repr(guard["name"]), f"torch.{_identifier(guard['dtype'])}", _python(guard["shape"], tuple_of=True)]
        elif kind == "sizes":
            places = tuple((str(name), int(axis)) for name, axis in guard["dims"])
            high = None if guard["high"] is None else int(guard["high"])
            entry = [repr(places), repr(int(guard["low"])), repr(high)]
        elif kind == "training":
            entry = [repr(guard["name"])]
        elif kind in ("attribute", "class_attribute", "module", "argument", "global"):
            entry = [repr(guard["name"]), _python(guard["value"])]
        else:
            raise SourceError(f"drtriton cannot write a guard of kind {kind!r}.", "This is a drtriton bug; please report it.")
        lines.append(f"    ({repr(kind)}, {', '.join(entry)}),")
    lines.append(")")
    text = "\n".join(lines) + "\n"
    ast.parse(text)  # a malformed value fails here, not in the user's file
    return text


def describe_guard(guard: dict[str, Any], owner: str) -> str:
    """One guard in words, for the report and the provenance comment."""
    kind = guard["kind"]
    if kind == "sizes":
        dims = " = ".join(f"{place}.shape[{axis}]" for place, axis in guard["dims"])
        span = f"{guard['low']}..{guard['high']}" if guard["high"] is not None else f">= {guard['low']}"
        return f"free size {dims} ({span})"
    name = guard["name"]
    if kind in ("parameter", "buffer"):
        return f"{owner}.{name}: {guard['dtype']} {_shape_text(guard['shape'])}"
    if kind == "tensor":
        return f"{name}: {guard['dtype']} {_shape_text(guard['shape'])}"
    if kind == "training":
        return f"{owner} in eval mode" if name == "eval" else f"{owner} and its submodules all in one mode"
    value = _readable(guard["value"])
    if kind == "attribute":
        return f"{owner}.{name} == {value}"
    if kind == "class_attribute":
        return f"{owner}.{name} == {value} (class attribute)"
    if kind == "module":
        return f"{owner}.{name} is a {value}"
    if kind == "argument":
        return f"argument {name} == {value}"
    return f"module constant {name} == {value}"


def _readable(value: Any) -> str:
    """A value in a guard's description: as Python, with definitions by their dotted name."""
    if isinstance(value, dict) and len(value) <= 2:
        tag, content = next(iter(value.items()))
        if tag in ("function", "class", "object"):
            module, qualname = content
            return f"{module + '.' if module else ''}{qualname}" + (" (its attributes too)" if tag == "object" else "")
        if tag == "opaque":
            module, qualname = content
            return f"an instance of {module + '.' if module else ''}{qualname} (its type only)"
        if tag == "enum":
            module, qualname, member = content
            return f"{qualname}.{member}"
    return _python(value)


def _shape_text(shape: list[int | None]) -> str:
    return "[" + ", ".join("*" if size is None else str(size) for size in shape) + "]"


def _identifier(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z_]\w*", text):
        raise SourceError(f"drtriton cannot write {text!r} as a torch name.", "This is a drtriton bug; please report it.")
    return text


def _python(value: Any, tuple_of: bool = False) -> str:
    """Python source for a value encoded by worker/specialization.py (`tuple_of`: a list written as a tuple)."""
    if isinstance(value, list) and tuple_of:
        return _sequence("(", [_python(item) for item in value], ")", tuple_=True)
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if not isinstance(value, dict) or len(value) != 1 and "object" not in value:
        raise SourceError(f"drtriton cannot write the value {value!r} as Python.", "This is a drtriton bug; please report it.")
    tag, content = next(iter(value.items()))
    if tag == "float":
        number = float(content)
        return repr(number) if math.isfinite(number) else f'float("{number}")'
    if tag == "tuple":
        return _sequence("(", [_python(item) for item in content], ")", tuple_=True)
    if tag == "list":
        return _sequence("[", [_python(item) for item in content], "]")
    if tag == "dict":
        return _sequence("{", [f"{_python(key)}: {_python(item)}" for key, item in content], "}")
    if tag == "torch":
        return f"torch.{_identifier(content)}"
    if tag == "device":
        return f"torch.device({str(content)!r})"
    if tag in ("function", "class", "opaque"):
        module, qualname = content
        return f"DrtritonDefinition({tag!r}, {module!r}, {qualname!r})"
    if tag == "enum":
        module, qualname, member = content
        return f"DrtritonDefinition('enum', {module!r}, {qualname!r}, {member!r})"
    if tag == "partial":
        function, arguments, keywords = content
        detail = f"({_python(function)}, {_python(arguments)}, {_python(keywords)})"
        return f"DrtritonDefinition('partial', 'functools', 'partial', {detail})"
    if tag == "object":
        module, qualname = content
        return f"DrtritonDefinition('object', {module!r}, {qualname!r}, {_python(value['attributes'])})"
    raise SourceError(f"drtriton cannot write a value tagged {tag!r} as Python.", "This is a drtriton bug; please report it.")


def _sequence(opening: str, items: list[str], closing: str, tuple_: bool = False) -> str:
    if tuple_ and len(items) == 1:
        return f"{opening}{items[0]},{closing}"
    return f"{opening}{', '.join(items)}{closing}"
