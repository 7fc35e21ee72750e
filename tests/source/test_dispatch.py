"""The written dispatch: the kernels run only for calls they were verified for; anything else runs the original.

A stand-in Triton forward (plain Python) records its calls, so each guard is checked without compiling kernels.
"""

import enum
import functools
import warnings

import pytest

from drtriton_lsp.source.dispatch import DISPATCH_HELPER, render_specialization
from drtriton_lsp.task import load_module_from_source

torch = pytest.importorskip("torch")

# Guards as capture records them for Scaled below, built with Scaled(8, scale=0.5) and called on a [4, 8] input.
SCALED_GUARDS = [
    {"kind": "parameter", "name": "weight", "dtype": "float32", "shape": [8]},
    {"kind": "attribute", "name": "scale", "value": {"float": "0.5"}},
    {"kind": "attribute", "name": "window", "value": {"tuple": [3, 3]}},
    {"kind": "module", "name": "inner", "value": {"class": [None, "Inner"]}},
    {"kind": "attribute", "name": "inner.eps", "value": {"float": "1e-05"}},
    {"kind": "training", "name": "uniform"},
    {"kind": "tensor", "name": "x", "dtype": "float32", "shape": [None, 8]},
    {"kind": "tensor", "name": "gate", "dtype": "float32", "shape": [None, 8]},
    {"kind": "sizes", "symbol": "s0", "dims": [["x", 0], ["gate", 0]], "low": 2, "high": 64},
    {"kind": "argument", "name": "alpha", "value": {"float": "1.0"}},
    {"kind": "argument", "name": "mode", "value": "fast"},
    {"kind": "global", "name": "OFFSET", "value": {"float": "0.25"}},
]
GELU_GUARDS = [
    {"kind": "tensor", "name": "x", "dtype": "float32", "shape": [None]},
    {"kind": "argument", "name": "scale", "value": {"float": "1.702"}},
]

USER_FILE = '''
OFFSET = 0.25
KERNEL_CALLS = []
MODULE_TENSORS = []


{helper}

{scaled_guards}
{gelu_guards}

def scaled_triton_forward(self, x, gate, alpha, mode, *, drtriton_module_tensors):
    MODULE_TENSORS.append(drtriton_module_tensors)
    KERNEL_CALLS.append(("scaled", alpha, mode))
    return torch.full_like(x, -1.0)


def gelu_triton_forward(self, x, scale, *, drtriton_module_tensors):
    MODULE_TENSORS.append(drtriton_module_tensors)
    KERNEL_CALLS.append(("gelu", scale))
    return torch.full_like(x, -1.0)


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.eps = 1e-05

    def forward(self, x):
        return x + self.eps


class Scaled(torch.nn.Module):
    def __init__(self, width, scale=0.5):
        super().__init__()
        self.scale = scale
        self.window = (3, 3)
        self.weight = torch.nn.Parameter(torch.ones(width))
        self.inner = Inner()

    @drtriton_dispatch(scaled_triton_forward, SCALED_SPECIALIZATION)
    def forward(self, x, gate, alpha=1.0, *, mode="fast"):
        return self.inner(x * self.weight * self.scale * alpha + OFFSET) * torch.sigmoid(gate)


@drtriton_dispatch(gelu_triton_forward, GELU_SPECIALIZATION, is_method=False)
def scaled_gelu(x, scale: float = 1.702):
    return x * torch.sigmoid(scale * x)
'''


def user_module(directory, name: str):
    source = USER_FILE.format(
        helper=DISPATCH_HELPER,
        scaled_guards=render_specialization("SCALED_SPECIALIZATION", SCALED_GUARDS),
        gelu_guards=render_specialization("GELU_SPECIALIZATION", GELU_GUARDS),
    )
    return load_module_from_source(source, name, directory)


@pytest.fixture
def user(tmp_path, monkeypatch):
    """The user's module imported with TRITON_INTERPRET=1, so CPU tensors count as a Triton device."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    return user_module(tmp_path, f"user_{tmp_path.name}")


def run(call, *args, **kwargs):
    """(result, or the exception the call raised; warning texts) of a call without autograd."""
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = call(*args, **kwargs)
        except RuntimeError as error:  # the original rejects sizes it cannot broadcast, in its own words
            result = error
    return result, [str(warning.message) for warning in caught]


def kernels_ran(result) -> bool:
    return isinstance(result, torch.Tensor) and bool((result == -1).all())


def inputs(rows=4):
    return torch.randn(rows, 8), torch.randn(rows, 8)


def test_the_verified_call_runs_the_kernels_with_every_argument_bound(user):
    model = user.Scaled(8)

    result, warned = run(model, *inputs())
    keyword, _ = run(model, x=torch.randn(5, 8), gate=torch.randn(5, 8), alpha=1.0, mode="fast")

    assert kernels_ran(result) and kernels_ran(keyword) and warned == []
    assert user.KERNEL_CALLS == [("scaled", 1.0, "fast"), ("scaled", 1.0, "fast")]
    # the kernels get the very parameter the guards checked, by its path
    assert all(tensors.keys() == {"weight"} and tensors["weight"] is model.weight for tensors in user.MODULE_TENSORS)


def test_a_function_called_with_its_default_omitted_or_passed_by_keyword_runs_the_kernels(user):
    omitted, _ = run(user.scaled_gelu, torch.randn(6))
    keyword, _ = run(user.scaled_gelu, x=torch.randn(6), scale=1.702)

    assert kernels_ran(omitted) and kernels_ran(keyword)
    assert user.KERNEL_CALLS == [("gelu", 1.702), ("gelu", 1.702)]
    assert user.MODULE_TENSORS == [{}, {}]  # a function has no module tensors


def test_another_scalar_argument_runs_the_original_and_says_so_once(user):
    x = torch.randn(6)

    results = [run(user.scaled_gelu, x, 3.0) for _ in range(3)]

    torch.testing.assert_close(results[0][0], user.scaled_gelu.reference(x, 3.0))
    assert [warned for _, warned in results] == [
        ["drtriton: argument 'scale' is 3.0, the kernels were verified for 1.702; running the original scaled_gelu"],
        [],
        [],
    ]
    assert user.KERNEL_CALLS == []


# (change to a module, the warning it gets)
MODULE_CHANGES = [
    (lambda m: setattr(m, "scale", 0.75), "Scaled.scale is 0.75, the kernels were verified for 0.5"),
    (lambda m: setattr(m, "scale", 1), "Scaled.scale is 1, the kernels were verified for 0.5"),
    # a property the class gains shadows the value still in the instance's __dict__, for the guards as for forward
    (lambda m: setattr(type(m), "scale", property(lambda self: 0.75)), "Scaled.scale is 0.75"),
    # equal tuples whose items are of another type: not the values the kernels were verified for
    (lambda m: setattr(m, "window", (3.0, 3)), "Scaled.window is (3.0, 3), the kernels were verified for (3, 3)"),
    (lambda m: setattr(m, "window", (True, 3)), "Scaled.window is (True, 3)"),
    (lambda m: setattr(m, "window", [3, 3]), "Scaled.window is [3, 3]"),
    (lambda m: setattr(m.inner, "eps", 0.1), "Scaled.inner.eps is 0.1, the kernels were verified for 1e-05"),
    (lambda m: setattr(m, "inner", torch.nn.Identity()), "the class of Scaled.inner is <class 'torch.nn.modules.linear.Identity'>"),
    (lambda m: m.inner.register_forward_hook(lambda *a: None), "Scaled.inner has a forward hook"),
    (lambda m: m.inner.train(False), "Scaled mixes training and eval submodules"),
    (lambda m: setattr(m, "weight", torch.nn.Parameter(torch.ones(8, dtype=torch.float64))), "Scaled.weight is torch.float64"),
    (lambda m: setattr(m, "weight", torch.nn.Parameter(torch.ones(1))), "Scaled.weight has size 1 in dim 0"),
]


@pytest.mark.parametrize(("change", "warning"), MODULE_CHANGES)
def test_a_module_built_or_changed_otherwise_runs_the_original(user, change, warning):
    model = user.Scaled(8)
    change(model)
    x, gate = inputs()

    result, warned = run(model, x, gate)

    torch.testing.assert_close(result, user.Scaled.forward.reference(model, x, gate))
    assert len(warned) == 1 and warned[0].startswith(f"drtriton: {warning}")
    assert warned[0].endswith("; running the original Scaled.forward")
    assert user.KERNEL_CALLS == []


@pytest.mark.parametrize(("change", "warning"), MODULE_CHANGES)
def test_a_module_changed_after_a_call_that_ran_the_kernels_runs_the_original(user, change, warning):
    # the guards remember what held (a submodule's class, a group's values) and check it again by identity first
    model = user.Scaled(8)
    x, gate = inputs()
    run(model, x, gate)
    assert user.KERNEL_CALLS
    user.KERNEL_CALLS.clear()
    change(model)

    result, warned = run(model, x, gate)

    torch.testing.assert_close(result, user.Scaled.forward.reference(model, x, gate))
    assert len(warned) == 1 and warned[0].startswith(f"drtriton: {warning}")
    assert user.KERNEL_CALLS == []


@pytest.mark.parametrize(
    "call, warning",
    [
        (lambda m, x, g: m(x, g, 2.0), "argument 'alpha' is 2.0"),
        (lambda m, x, g: m(x, g, mode="exact"), "argument 'mode' is 'exact'"),
        (lambda m, x, g: m(x.double(), g.double()), "argument 'x' is torch.float64"),
        (lambda m, x, g: m(x[None], g[None]), "argument 'x' has 3 dims"),
        (lambda m, x, g: m(torch.randn(4, 9), torch.randn(4, 9)), "argument 'x' has size 9 in dim 1"),
        (lambda m, x, g: m(x, torch.randn(5, 8)), "x.shape[0] and gate.shape[0] is [4, 5]"),
        (lambda m, x, g: m(x[:1], g[:1]), "x.shape[0] and gate.shape[0] is [1], the kernels were verified for one size from 2 to 64"),
        (lambda m, x, g: m(torch.randn(65, 8), torch.randn(65, 8)), "x.shape[0] and gate.shape[0] is [65]"),
    ],
)
def test_a_call_the_kernels_were_not_verified_for_runs_the_original(user, call, warning):
    model = user.Scaled(8)
    x, gate = inputs()

    result, warned = run(call, model, x, gate)

    assert not kernels_ran(result)
    assert len(warned) == 1 and warned[0].startswith(f"drtriton: {warning}")


def test_a_changed_module_constant_runs_the_original(user):
    user.OFFSET = 0.5
    model = user.Scaled(8)

    result, warned = run(model, *inputs())

    assert not kernels_ran(result)
    assert warned == [f"drtriton: OFFSET (module constant) is 0.5, the kernels were verified for 0.25; running the original Scaled.forward"]


def test_a_subclass_runs_the_original(user):
    class Louder(user.Scaled):
        pass

    result, warned = run(Louder(8), *inputs())

    assert not kernels_ran(result)
    assert warned[0].startswith("drtriton: Louder is not Scaled")


def test_training_mode_alone_is_fine_when_the_graph_did_not_change_but_eval_only_guards_hold(user):
    model = user.Scaled(8).train()
    guards = (("tensor", "x", torch.float32, (None, 8)), ("training", "eval"))
    eval_only = user.drtriton_dispatch(user.scaled_triton_forward, guards)(user.Scaled.forward.reference)

    trained, _ = run(model, *inputs())
    guarded, warned = run(eval_only, model, *inputs())

    assert kernels_ran(trained)
    assert not kernels_ran(guarded)
    assert warned == ["drtriton: Scaled is in training mode, the kernels were verified in eval mode (call .eval()); "
                      "running the original Scaled.forward"]


def test_autograd_cpu_tensors_and_compilation_run_the_original_quietly(user, monkeypatch, tmp_path):
    model = user.Scaled(8)
    x, gate = inputs()
    monkeypatch.delenv("TRITON_INTERPRET")
    compiled_kernels = user_module(tmp_path, "user_without_the_interpreter")  # its kernels need CUDA tensors

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with_grad = model(x, gate)  # the parameters need a gradient
        with monkeypatch.context() as compiling_now:
            compiling_now.setattr(torch.compiler, "is_compiling", lambda: True)
            compiling = run(model, x, gate)[0]
        on_cpu = run(compiled_kernels.Scaled(8), x, gate)[0]

    assert with_grad.requires_grad and not any(kernels_ran(r) for r in (with_grad, compiling, on_cpu))
    assert caught == [] and user.KERNEL_CALLS == [] and compiled_kernels.KERNEL_CALLS == []


def test_a_call_the_original_rejects_raises_its_own_error(user):
    with pytest.raises(TypeError, match="scaled_gelu\\(\\) got an unexpected keyword argument 'bias'"):
        user.scaled_gelu(torch.randn(3), bias=1.0)


class Colour(enum.Enum):
    RED = 1
    BLUE = 2


class Settings:
    """A plain object a module may hold (a config): matched by its class and every attribute."""

    def __init__(self, eps, approximate):
        self.eps = eps
        self.approximate = approximate


@pytest.mark.parametrize(
    "value, same, other",
    [
        (1e-06, 1e-06, 1e-05),
        (0.0, 0.0, -0.0),
        (float("nan"), float("nan"), 0.0),
        (1.0, 1.0, 1),
        (1, 1, True),
        ((64,), torch.Size([64]), [64]),
        ({"a": (1, 2.5)}, {"a": (1, 2.5)}, {"a": (1, 2.0)}),
        (torch.float16, torch.float16, torch.bfloat16),
        (Colour.RED, Colour.RED, Colour.BLUE),
        (torch.tanh, torch.tanh, torch.sigmoid),
        (functools.partial(torch.nn.functional.gelu, approximate="tanh"),
         functools.partial(torch.nn.functional.gelu, approximate="tanh"),
         functools.partial(torch.nn.functional.gelu, approximate="none")),
        (Settings(1e-5, "tanh"), Settings(1e-5, "tanh"), Settings(1e-3, "tanh")),
    ],
)
def test_values_match_only_the_same_kind_of_value(user, value, same, other):
    from drtriton_lsp.source.dispatch import _python
    from drtriton_lsp.worker.specialization import encode_value

    expected = eval(_python(encode_value(value, "tests")), vars(user))

    assert user.drtriton_same(same, expected, user.__name__)
    assert not user.drtriton_same(other, expected, user.__name__)


def test_each_guard_is_described_in_words_for_the_report_and_the_provenance_comment():
    from drtriton_lsp.source.dispatch import describe_guard

    described = [describe_guard(guard, "Scaled") for guard in [
        *SCALED_GUARDS,
        {"kind": "attribute", "name": "config",
         "value": {"object": ["configs", "Settings"], "attributes": {"dict": []}}},
        {"kind": "attribute", "name": "act", "value": {"function": [None, "gelu_tanh"]}},
        {"kind": "attribute", "name": "norm", "value": {"opaque": ["torch._C", "Generator"]}},
        {"kind": "attribute", "name": "local", "value": {"opaque": [None, "Handle"]}},
        {"kind": "class_attribute", "name": "colour", "value": {"enum": [None, "Colour", "RED"]}},
    ]]
    assert described == [
        "Scaled.weight: float32 [8]",
        "Scaled.scale == 0.5",
        "Scaled.window == (3, 3)",
        "Scaled.inner is a Inner",
        "Scaled.inner.eps == 1e-05",
        "Scaled and its submodules all in one mode",
        "x: float32 [*, 8]",
        "gate: float32 [*, 8]",
        "free size x.shape[0] = gate.shape[0] (2..64)",
        "argument alpha == 1.0",
        "argument mode == 'fast'",
        "module constant OFFSET == 0.25",
        "Scaled.config == configs.Settings (its attributes too)",
        "Scaled.act == gelu_tanh",
        "Scaled.norm == an instance of torch._C.Generator (its type only)",
        "Scaled.local == an instance of Handle (its type only)",
        "Scaled.colour == Colour.RED (class attribute)",
    ]


def test_one_item_lists_dicts_and_tuples_are_described_as_python_writes_them():
    from drtriton_lsp.worker.specialization import encode_value
    from drtriton_lsp.source.dispatch import describe_guard

    described = [describe_guard({"kind": "argument", "name": "value", "value": encode_value(value, "tests")}, "Scaled")
                 for value in ([1], {"a": 1}, (64,))]
    assert described == ["argument value == [1]", "argument value == {'a': 1}", "argument value == (64,)"]
