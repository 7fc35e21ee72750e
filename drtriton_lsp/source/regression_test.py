"""A regression test per applied kernel: a pytest file beside the user's code that compares the written
dispatch with the original forward, and `check_regression_test`, which runs it in a subprocess first.

The test runs on CUDA when a GPU is present, else under Triton's interpreter, so the user's CI can run it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drtriton_lsp.errors import DrtritonError

# The first line of every test drtriton writes: a file starting otherwise is the user's, never overwritten.
HEADER = '"""drtriton regression test'
# Points the test at another copy of the module (drtriton's check before writing); unset in the user's runs.
MODULE_OVERRIDE = "DRTRITON_MODULE_UNDER_TEST"
CHECK_TIMEOUT_S = 600

TEMPLATE = '''\
"""drtriton regression test for {target} in {module_name}: the Triton kernels give the original's results.

Written by drtriton when it applied the kernels; run it with pytest (your CI can). With a CUDA GPU the
kernels run compiled, elsewhere under Triton's interpreter (TRITON_INTERPRET=1, set before the module is
imported). Example inputs: {inputs_from}. Other sizes and scalars come from what the kernels were
specialised on: for those the dispatch runs the kernels or the original, and must match either way.
"""

import copy
import importlib.util
import inspect
import os
import sys
from pathlib import Path

import pytest
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"

MODULE_FILE = Path(__file__).resolve().parent / {relative_path!r}
INPUTS = {inputs!r}
INIT = {init!r}
# Free sizes the kernels were verified for: [(argument, dim), ...] sharing one size, and its range.
FREE_SIZES = {free_sizes!r}
# Scalar arguments the kernels were specialised on (any other value runs the original).
SCALAR_ARGUMENTS = {scalar_arguments!r}
TOLERANCE = {{torch.float64: 1e-7, torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1.6e-2}}
# Under the interpreter every kernel program runs in Python: free sizes are halved until inputs are this small.
INTERPRETER_ELEMENTS = 1 << 15


def load_module():
    path = Path(os.environ.get("{override}") or MODULE_FILE)
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"drtriton_checked_{{path.stem}}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


module = load_module()


def launches_during(call):
    """(result, number of Triton kernel launches) of `call()`."""
    from triton.runtime.jit import JITFunction

    classes = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:
        pass
    count = []
    originals = {{cls: cls.run for cls in classes}}
    for cls in classes:
        cls.run = lambda kernel, *args, _run=originals[cls], **kwargs: (count.append(1), _run(kernel, *args, **kwargs))[1]
    try:
        return call(), len(count)
    finally:
        for cls, run in originals.items():
            cls.run = run


{build}


def on_device(values):
    return [value.to(DEVICE) if isinstance(value, torch.Tensor) else value for value in values]


def example():
    torch.manual_seed(0)
    args = on_device(eval(INPUTS, vars(module)))
    return args if DEVICE == "cuda" else smaller(args)


def smaller(args):
    """The example arguments with free sizes halved until every tensor fits INTERPRETER_ELEMENTS."""
    arguments = signature().bind(*args).arguments
    sizes = [arguments[places[0][0]].shape[places[0][1]] for places, _, _ in FREE_SIZES]
    free = {{place: index for index, (places, _, _) in enumerate(FREE_SIZES) for place in places}}

    def elements(name):
        tensor = arguments[name]
        total = 1
        for dim, size in enumerate(tensor.shape):
            total *= sizes[free[(name, dim)]] if (name, dim) in free else size
        return total

    tensors = [name for name, value in arguments.items() if isinstance(value, torch.Tensor)]
    while any(elements(name) > INTERPRETER_ELEMENTS for name in tensors):
        shrinkable = [index for index, (_, low, _) in enumerate(FREE_SIZES) if sizes[index] // 2 >= low]
        if not shrinkable:
            break
        largest = max(shrinkable, key=lambda index: sizes[index])
        sizes[largest] //= 2
    return resized(args, sizes)


def compare(target, args, kwargs=None):
    """Call the written dispatch and the original forward on the same inputs; return the launches."""
    kwargs = kwargs or {{}}
    with torch.no_grad():
        got, launches = launches_during(lambda: target(*clone(args), **clone(kwargs)))
        want = original(target)(*clone(args), **clone(kwargs))
    assert got.dtype == want.dtype and got.shape == want.shape
    tolerance = TOLERANCE.get(want.dtype, 0.0)
    error = float((got.double() - want.double()).abs().max()) if want.numel() else 0.0
    if error > tolerance * (1 + float(want.double().abs().max() if want.numel() else 0.0)):
        exact = float64_result(target, args, kwargs)
        eager_error = float((want.double() - exact).abs().max())
        assert error <= 2 * eager_error + tolerance, (
            f"the kernels are off by {{error:.3g}}; PyTorch's own error against float64 is {{eager_error:.3g}}"
        )
    return launches


def clone(values):
    if isinstance(values, dict):
        return {{key: clone(value) for key, value in values.items()}}
    return [value.clone() if isinstance(value, torch.Tensor) else value for value in values]


def float64_result(target, args, kwargs):
    widened = copy.deepcopy(target).double() if isinstance(target, torch.nn.Module) else target
    wide = [value.double() if isinstance(value, torch.Tensor) and value.is_floating_point() else value for value in args]
    with torch.no_grad():
        return original(widened)(*wide, **kwargs).double()


def resized(args, sizes):
    """The arguments with each free size set to the one in `sizes` (sliced or tiled)."""
    bound = signature().bind(*args)
    for (places, _, _), size in zip(FREE_SIZES, sizes):
        for name, dim in places:
            tensor = bound.arguments[name]
            repeats = [1] * tensor.dim()
            repeats[dim] = -(-size // tensor.shape[dim])
            bound.arguments[name] = tensor.repeat(*repeats).narrow(dim, 0, size).contiguous()
    return list(bound.args)


def test_the_example_inputs_run_the_kernels_and_match():
    assert compare(build(), example()) > 0, "the kernels did not run for the inputs they were verified for"


@pytest.mark.skipif(not FREE_SIZES, reason="the kernels were generated for fixed sizes only")
def test_other_sizes_run_the_kernels_and_match():
    args = example()
    arguments = signature().bind(*args).arguments
    sizes = [arguments[places[0][0]].shape[places[0][1]] for places, _, _ in FREE_SIZES]
    # an odd size next to each one (a missing mask shows there), inside the range the kernels were verified for
    others = [
        next((size for size in (current - 1, current + 1, current + 2) if size % 2 and size >= low
              and (high is None or size <= high)), current)
        for current, (_, low, high) in zip(sizes, FREE_SIZES)
    ]
    assert others != sizes, "no other size is allowed"
    assert compare(build(), resized(args, others)) > 0


@pytest.mark.filterwarnings("ignore:drtriton:UserWarning")  # the dispatch says when it runs the original
def test_other_scalars_match():
    for name, value in SCALAR_ARGUMENTS:
        bound = signature().bind(*example())
        bound.apply_defaults()
        bound.arguments[name] = value * 2 + 0.1
        compare(build(), list(bound.args), dict(bound.kwargs))
    init = list(eval(INIT, vars(module)))
    for index, value in enumerate(init):
        if type(value) is float:
            compare(build(init[:index] + [value * 2 + 0.1] + init[index + 1 :]), example())


@pytest.mark.filterwarnings("ignore:drtriton:UserWarning")
def test_float64_and_non_contiguous_inputs_match():
    compare(widened(build()), [value.double() if isinstance(value, torch.Tensor) and value.is_floating_point()
                               else value for value in example()])
    compare(build(), [strided(value) for value in example()])


def strided(value):
    """The same values in a non-contiguous tensor of the same shape."""
    if not isinstance(value, torch.Tensor) or value.dim() == 0:
        return value
    if value.dim() == 1:
        return torch.empty(value.shape[0] * 2, dtype=value.dtype, device=value.device)[::2].copy_(value)
    return value.transpose(-1, -2).contiguous().transpose(-1, -2)
'''

MODULE_BUILD = '''\
def build(init=None):
    torch.manual_seed(0)
    init = eval(INIT, vars(module)) if init is None else init
    return module.{target}(*init).eval().to(DEVICE)


def original(model):
    return lambda *args, **kwargs: type(model).forward.reference(model, *args, **kwargs)


def signature():
    return inspect.signature(module.{target}.forward.reference).replace(
        parameters=list(inspect.signature(module.{target}.forward.reference).parameters.values())[1:]
    )


def widened(model):
    return model.double()'''

FUNCTION_BUILD = '''\
def build(init=None):
    return module.{target}


def original(function):
    return function.reference


def signature():
    return inspect.signature(module.{target}.reference)


def widened(function):
    return function'''


@dataclass(frozen=True)
class RegressionTest:
    """A test file to write at `path`, and its text."""

    path: Path
    text: str


def regression_test(
    user_path: Path,
    target: str,
    kind: str,
    inputs: tuple[str, str],
    guards: list[dict[str, Any]],
) -> RegressionTest:
    """The regression test for `target` (kind "module" or "function") in the user's file `user_path`.

    inputs: (forward arguments, constructor arguments) as expressions in the user's module (see
    extract.example_input_expressions). The test goes to the file's folder, or its tests/ folder if there is one.
    """
    folder = user_path.parent / "tests" if (user_path.parent / "tests").is_dir() else user_path.parent
    path = folder / f"test_drtriton_{_snake_case(target)}.py"
    free_sizes = [
        ([(name, int(dim)) for name, dim in guard["dims"]], int(guard["low"]), guard["high"])
        for guard in guards
        if guard["kind"] == "sizes"
    ]
    scalar_arguments = [
        (guard["name"], float(guard["value"]["float"]))
        for guard in guards
        if guard["kind"] == "argument" and isinstance(guard["value"], dict) and "float" in guard["value"]
    ]
    build = (MODULE_BUILD if kind == "module" else FUNCTION_BUILD).format(target=target)
    text = TEMPLATE.format(
        target=target,
        module_name=user_path.name,
        inputs_from="get_inputs()" if inputs[0] == "get_inputs()" else "the drtriton pragma above the target",
        relative_path=os.path.relpath(user_path, folder),
        inputs=inputs[0],
        init=inputs[1],
        free_sizes=free_sizes,
        scalar_arguments=scalar_arguments,
        override=MODULE_OVERRIDE,
        build=build,
    )
    return RegressionTest(path, text)


def check_regression_test(test: RegressionTest, user_path: Path, written: bytes) -> None:
    """Run `test` against `written` (the user's file as it will be) before anything is written; raise if it fails.

    The written module is put beside the user's file under a hidden name (its own imports of sibling modules
    work there) and the test in a temporary folder; pytest runs in a subprocess; both are removed after.
    """
    handle, module_copy = tempfile.mkstemp(dir=user_path.parent, prefix=".drtriton_check_", suffix=".py")
    with os.fdopen(handle, "wb") as stream:
        stream.write(written)
    try:
        with tempfile.TemporaryDirectory(prefix="drtriton-test-") as folder:
            test_file = Path(folder) / test.path.name
            test_file.write_text(test.text, encoding="utf-8")
            finished = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
                cwd=user_path.parent,
                env={**os.environ, MODULE_OVERRIDE: module_copy},
                stdin=subprocess.DEVNULL,  # in the language server, stdin is the editor's channel
                capture_output=True,
                text=True,
                timeout=CHECK_TIMEOUT_S,
            )
    except subprocess.TimeoutExpired:
        raise DrtritonError(
            f"the regression test for {test.path.name} did not finish in {CHECK_TIMEOUT_S} s; nothing was written",
            "run without writing tests, or report this (a kernel that hangs should have failed verification)",
        ) from None
    finally:
        os.unlink(module_copy)
    if finished.returncode != 0:
        output = (finished.stdout + finished.stderr).strip()
        if "No module named pytest" in output:
            raise DrtritonError("pytest is not installed, so the regression test cannot run; nothing was written",
                                "install pytest, or apply without writing a test")
        raise DrtritonError(
            f"the regression test {test.path.name} failed against the written file; nothing was written",
            "the test's output ends:\n" + "\n".join(output.splitlines()[-25:]),
        )


def write_regression_test(test: RegressionTest) -> None:
    """Write the test file; one that exists and was not written by drtriton is left alone (an error)."""
    if test.path.exists() and not test.path.read_text(encoding="utf-8", errors="replace").startswith(HEADER):
        raise DrtritonError(
            f"{test.path} exists and was not written by drtriton, so it was left as it is",
            "rename or move it, then apply again to write the regression test",
        )
    test.path.write_text(test.text, encoding="utf-8")


def _snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
