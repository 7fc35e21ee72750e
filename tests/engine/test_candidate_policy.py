"""The static policy on candidate text: each way of reaching outside the candidate's own computation is refused,
plain kernel code and code copied verbatim from the task pass.
"""

from __future__ import annotations

import textwrap

import pytest

from drtriton_lsp.engine.candidate_policy import policy_violation
from drtriton_lsp.source.dispatch import render_dispatch_helper

FRAME = """
import torch
import torch.nn as nn
import triton
import triton.language as tl
{header}

@triton.jit
def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0

    def forward(self, x):
        out = torch.empty_like(x)
        kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
{body}
        return out
"""


def candidate(header: str = "", body: str = "") -> str:
    return FRAME.format(header=textwrap.dedent(header), body=textwrap.indent(textwrap.dedent(body), " " * 8))


@pytest.mark.parametrize(
    ("header", "body", "what"),
    [
        ("import sys", "", "imports sys"),
        ("import os", "", "imports os"),
        ("from gc import get_objects", "", "imports gc.get_objects"),
        ("import importlib", "", "imports importlib"),
        ("import numpy as np", "", "imports numpy"),
        ("from . import helper", "", "relative to a package"),
        ("import torch._C", "", "imports the private module"),
        ("", "torch.isclose = lambda *a, **k: torch.ones(1, dtype=torch.bool)", "assigns to the attribute torch.isclose"),
        ("", "T = torch\nT.randn = torch.zeros", "assigns to the attribute T.randn"),
        ("", "self.t = torch\nself.t.equal = lambda a, b: True", "only self.name may be set"),
        ("", "del torch.allclose", "assigns to the attribute torch.allclose"),
        ("", "f = getattr(torch, 'isclose')", "uses getattr"),
        ("", "setattr(torch, 'isclose', None)", "uses setattr"),
        ("", "exec('import os')", "uses exec"),
        ("", "eval('1')", "uses eval"),
        ("", "open('/tmp/x').read()", "uses open"),
        ("", "g = vars(torch)", "uses vars"),
        ("", "b = __builtins__", "special name __builtins__"),
        ("", "d = torch.__dict__", "special attribute __dict__"),
        ("", "k = x.__class__.__subclasses__()", "special attribute __subclasses__"),
        ("", "c = torch._C", "private attribute torch._C"),
        ("", "s = torch.sys.modules", "reaches sys"),
        ("", "f = (lambda: 0).__globals__", "special attribute __globals__"),
        ("", "g = (i for i in ()); f = g.gi_frame.f_back", "reaches f_back"),
        ("", "torch.save(out, 'x.pt')", "uses torch.save"),
        ("", "y = torch.load('x.pt')", "uses torch.load"),
        ("import torch as t", "y = t.load('x.pt')", "uses torch.load"),
        ("from torch import load", "", "imports torch.load"),
        ("", "out = torch.compile(lambda v: v)(out)", "uses torch.compile"),
        ("", "s = torch.cuda.Stream()", "uses torch.cuda.Stream"),
        ("", "c = torch.cuda.is_current_stream_capturing()", "uses torch.cuda.is_current_stream_capturing"),
        ("from torch.cuda import graphs", "", "imports torch.cuda.graphs"),
        ("", "c = torch.cuda\nflag = c.is_current_stream_capturing()", "uses torch.cuda.is_current_stream_capturing"),
        # through a parameter no alias can follow: the name itself is forbidden
        ("def capturing(cuda):\n    return cuda.is_current_stream_capturing()\n", "", "reaches is_current_stream_capturing"),
        ("", "c = torch.cuda\ns = c.Stream()", "uses torch.cuda.Stream"),
        ("", "t = torch\nf = t.compile", "uses torch.compile"),
        ("", "torch.backends.cudnn.allow_tf32 = True", "torch.backends"),
        ("", "torch.set_float32_matmul_precision('medium')", "uses torch.set_float32_matmul_precision"),
        ("", "f = triton.knobs.runtime.interpret", "uses triton.knobs"),
        ("import operator", "f = operator.attrgetter('sys')", "uses operator.attrgetter"),
        ("import typing", "h = typing.get_type_hints(ModelNew.forward)", "uses typing.get_type_hints"),
        ("", "out.numpy().tofile('x')", "reaches tofile"),
        ("", "C = type('C', (torch.Tensor,), {})", "creates a class with type"),
        ("class Lazy(torch.Tensor):\n    pass\n", "", "subclasses torch.Tensor"),
        ("def __getattr__(name):\n    return None\n", "", "defines the special method __getattr__"),
        ("class Helper(getattr(torch, 'nn').Module):\n    pass\n", "", "uses getattr"),  # a base is code too
        ("", "x2, torch.isclose = 1, None", "assigns to the attribute torch.isclose"),  # inside a tuple target
    ],
)
def test_each_way_out_is_forbidden(header, body, what):
    violation = policy_violation(candidate(header, body))
    assert violation is not None and violation.reason == "forbidden_construct"
    assert what in violation.detail, violation.detail


def test_a_fallback_through_try_except_is_named_as_such():
    violation = policy_violation(candidate(body="try:\n    pass\nexcept Exception:\n    pass"))
    assert violation is not None and violation.reason == "try_except_fallback"


@pytest.mark.parametrize(
    ("header", "body"),
    [
        ("import math\nimport functools", "out = out * math.sqrt(self.scale)"),
        ("import torch.nn.functional as F", "out = F.relu(out.view(-1)).view_as(x)"),
        ("", "self.cache = out.shape"),
        ("", "n = x.stride(0) + x.select(0, 0).numel()"),
        ("", "props = triton.next_power_of_2(x.shape[-1])"),
        ("def doubled__(v):\n    return v * 2.0\n", "out = doubled__(out)"),  # a name ending in __ is not special
        ("", "self._shape = out.shape\nn = self._shape"),  # the module's own private state
        ("", "____ = out.shape\nn = ____"),  # a name of underscores alone is no special name
    ],
)
def test_plain_kernel_code_passes(header, body):
    assert policy_violation(candidate(header, body)) is None


def test_a_candidate_that_postpones_its_annotations_passes():
    # many files start with this line; __future__ is allowed, and its features are no private modules
    assert policy_violation("from __future__ import annotations\n" + candidate()) is None


@pytest.mark.parametrize(("imported", "name"), [("from .helpers import scale_of", "scale_of"),
                                                ("from . import helpers as h", "h")])
def test_what_a_task_imports_relative_to_its_package_stays_off_limits(imported, name):
    task = f"import torch\n{imported}\n"
    assert policy_violation(candidate(header=imported), task) is None  # the task's import, copied verbatim
    violation = policy_violation(candidate(header=imported, body=f"n = {name}"), task)
    assert violation is not None and f"uses {name}," in violation.detail


def test_code_copied_verbatim_from_the_task_is_exempt_and_what_it_imports_stays_off_limits():
    task = "import os\nimport torch\n\nSCALE = float(os.environ.get('SCALE', '2'))\n"
    copied = candidate(header="import os\n\nSCALE = float(os.environ.get('SCALE', '2'))\n")
    assert policy_violation(copied, task) is None
    reusing = candidate(header="import os\n\nSCALE = float(os.environ.get('SCALE', '2'))\n", body="os.getcwd()")
    violation = policy_violation(reusing, task)
    assert violation is not None and "uses os" in violation.detail


def test_a_candidate_without_kernel_or_model_new_is_named():
    assert policy_violation("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n").reason == "no_triton_kernel"
    assert policy_violation("import triton\n@triton.jit\ndef k():\n    pass\n").reason == "no_model_new"
    assigned = "import triton\nSCALE = 2.0\nLOW, HIGH = 0, 1\n@triton.jit\ndef k():\n    pass\n"
    assert policy_violation(assigned).reason == "no_model_new"  # assignments to other names define no ModelNew
    assert policy_violation("def broken(:\n").reason == "import_error"
    # a task that does not parse exempts nothing, and the candidate is judged on its own
    assert policy_violation(candidate(), task_source="def broken(:\n") is None


def test_a_kernel_decorated_with_jit_imported_from_triton_is_a_kernel():
    source = candidate(header="from triton import jit\n\n@jit\ndef twice(v):\n    return v * 2\n")
    assert policy_violation(source.replace("@triton.jit\ndef kernel", "@jit\ndef kernel")) is None


@pytest.mark.parametrize(
    ("line", "called"),
    [
        ("    y = helper(tl.load(x_ptr + offsets))", "helper"),
        ("    y = torch.relu(tl.load(x_ptr + offsets))", "torch.relu"),
        # not a Triton tensor method
        ("    y = tl.load(x_ptr + offsets).tolist()", "tl.load(x_ptr + offsets).tolist"),
    ],
)
def test_a_kernel_calls_only_triton_and_other_kernels(line, called):
    source = candidate(
        header=f"def helper(v):\n    return v\n\n@triton.jit\ndef inner(x_ptr, offsets):\n{line}\n    tl.store(x_ptr + offsets, y)\n"
    )
    violation = policy_violation(source)
    assert violation is not None and f"kernel inner calls {called}" in violation.detail


def test_kernel_bodies_may_call_triton_tensor_methods_and_other_kernels():
    source = candidate(
        header=(
            "@triton.jit\ndef twice(v):\n    return v * 2\n\n"
            "@triton.jit\ndef inner(x_ptr, n, BLOCK: tl.constexpr):\n"
            "    offsets = tl.arange(0, BLOCK).to(tl.int64)\n"
            "    y = twice(tl.load(x_ptr + offsets, mask=offsets < n).to(tl.float32))\n"
            "    tl.store(x_ptr + offsets, tl.maximum(y.sum(axis=0), 0.0), mask=offsets < min(n, BLOCK))\n"
        )
    )
    assert policy_violation(source) is None


def test_kept_aten_ops_with_special_names_and_a_parameter_named_input_pass():
    source = candidate(body="mask = torch.ops.aten.__and__.Tensor(out > 0, out < 1)\ninput = out\nout = input")
    assert policy_violation(source) is None


TASK = """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0

    def forward(self, x):
        return torch.relu(x) * self.scale
"""


def test_a_written_target_is_exempt_but_what_its_dispatch_decorator_carries_is_checked():
    kernel = candidate().split("class ModelNew")[0]
    written = TASK.replace("    def forward", "    @drtriton_dispatch(forward_kernels)\n    def forward")
    alias = "\n\nModelNew = Model\n"
    as_written = kernel + render_dispatch_helper() + written + alias  # the helper as write-back writes it
    assert policy_violation(as_written, TASK) is None
    after = policy_violation(kernel + written + "\nimport os\n" + alias, TASK)
    assert after is not None and "imports os" in after.detail  # what follows the written target is checked
    smuggled = TASK.replace("    def forward", "    @drtriton_dispatch(__import__('os')._exit(0))\n    def forward")
    violation = policy_violation(kernel + smuggled + alias, TASK)
    assert violation is not None and "__import__" in violation.detail


FUNCTION_TASK = """
import torch


def scaled_relu(x, scale=2.0):
    return torch.relu(x) * scale
"""


def test_a_written_function_target_is_exempt_but_what_its_dispatch_decorator_carries_is_checked():
    honest = "@drtriton_dispatch(scaled_relu_kernels, is_method=False)\n"
    function = FUNCTION_TASK.split("\n\n\n")[1]
    assert policy_violation(candidate(header=honest + function), FUNCTION_TASK) is None
    smuggled = "@drtriton_dispatch(__import__('os')._exit(0), is_method=False)\n"
    violation = policy_violation(candidate(header=smuggled + function), FUNCTION_TASK)
    assert violation is not None and "__import__" in violation.detail


def test_a_task_statement_reused_inside_the_candidates_own_code_is_checked():
    task = TASK + "\n\ndef helper(obj, name, value):\n    setattr(obj, name, value)\n"
    reused = candidate(body="setattr(obj, name, value)")
    violation = policy_violation(reused, task)
    assert violation is not None and "uses setattr" in violation.detail


UNALIASED_IMPORTS = """
import torch.nn
import triton.language
from triton import language


@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: triton.language.constexpr):
    offsets = triton.language.program_id(0) * BLOCK + language.arange(0, BLOCK)
    mask = offsets < n
    triton.language.store(out_ptr + offsets, triton.language.load(x_ptr + offsets, mask=mask) * 2.0, mask=mask)


class ModelNew(torch.nn.Module):
    def scale(self, x):
        return torch.empty_like(x)  # a method named like the kernel is plain Python, not a kernel

    def forward(self, x):
        out = self.scale(x)
        scale[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
{body}
        return out
"""


def test_import_a_dot_b_binds_a_and_a_method_named_like_a_kernel_is_plain_python():
    # `import triton.language` binds `triton` (and `from triton import language`, `language`), so both are Triton's
    assert policy_violation(UNALIASED_IMPORTS.format(body="")) is None
    # and `import torch.nn` binds `torch`: what torch offers stays checked
    violation = policy_violation(UNALIASED_IMPORTS.format(body="        out = torch.compile(lambda v: v)(out)"))
    assert violation is not None and "uses torch.compile" in violation.detail
