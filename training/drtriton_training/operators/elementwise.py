"""Elementwise operators: unary math, broadcasting binary math, activations, per-channel params.

Functions with a restricted domain (log, sqrt, ...) read an `abs()` first, as careful model
code does, so synthetic programs stay finite on random inputs.
"""

from __future__ import annotations

import random
import string

from drtriton_training.registry import Emission, Operator, OperatorRegistry, OpShapes, TensorInput
from drtriton_training.shapes import Shape, ShapeModel

ANY_RANK = TensorInput(0, 4)
SOME_RANK = TensorInput(1, 4)

UNARY_MATH = {
    "abs": ("torch.abs({x})", 1),
    "neg": ("torch.neg({x})", 1),
    "exp": ("torch.exp(torch.clamp({x}, max=10.0))", 2),
    "log": ("torch.log(torch.abs({x}) + 1e-6)", 3),
    "log1p": ("torch.log1p(torch.abs({x}))", 2),
    "sqrt": ("torch.sqrt(torch.abs({x}))", 2),
    "rsqrt": ("torch.rsqrt(torch.abs({x}) + 1e-6)", 3),
    "sin": ("torch.sin({x})", 1),
    "cos": ("torch.cos({x})", 1),
    "erf": ("torch.erf({x})", 1),
    "reciprocal": ("1.0 / (torch.abs({x}) + 1.0)", 3),
    "square": ("torch.square({x})", 1),
}

ACTIVATIONS = {
    "relu": "torch.relu({x})",
    "relu6": "F.relu6({x})",
    "gelu": "F.gelu({x}, approximate=\"{approximate}\")",
    "silu": "F.silu({x})",
    "mish": "F.mish({x})",
    "softplus": "F.softplus({x}, beta={beta})",
    "elu": "F.elu({x}, alpha={alpha})",
    "selu": "F.selu({x})",
    "celu": "F.celu({x}, alpha={alpha})",
    "hardswish": "F.hardswish({x})",
    "hardsigmoid": "F.hardsigmoid({x})",
    "hardtanh": "F.hardtanh({x}, min_val={low}, max_val={high})",
    "softsign": "F.softsign({x})",
    "tanh": "torch.tanh({x})",
    "sigmoid": "torch.sigmoid({x})",
    "logsigmoid": "F.logsigmoid({x})",
    "leaky_relu": "F.leaky_relu({x}, negative_slope={slope})",
}

BINARY = {
    "add": "{x} + {y}",
    "sub": "{x} - {y}",
    "mul": "{x} * {y}",
    "div": "{x} / (torch.abs({y}) + 1.0)",
    "maximum": "torch.maximum({x}, {y})",
    "minimum": "torch.minimum({x}, {y})",
    "where": "torch.where({x} > 0, {x}, {y})",
}


def same_shape(model: ShapeModel, shapes: list[Shape], attrs: dict, cost: int = 1) -> OpShapes:
    return OpShapes(shapes[0], (cost, shapes[0]))


ACTIVATION_CHOICES = {
    "approximate": ["none", "tanh"],
    "beta": [1.0, 2.0],
    "alpha": [1.0, 0.5],
    "low": [-1.0, -2.0],
    "high": [1.0, 2.0],
    "slope": [0.01, 0.1, 0.2],
}


def activation_attributes(text: str):
    """Sample only the attributes the activation's source uses (so equal programs hash equal)."""
    fields = [field for _, field, _, _ in string.Formatter().parse(text) if field and field not in "xy"]

    def sample(rng: random.Random, ranks: tuple[int, ...]) -> dict:
        return {field: rng.choice(ACTIVATION_CHOICES[field]) for field in fields}

    return sample


def template(text: str):
    def forward(emission: Emission) -> str:
        names = dict(zip("xy", emission.args))
        return text.format(**names, **emission.attrs)

    return forward


def broadcast_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    output = model.broadcast(shapes[0], shapes[1])
    return OpShapes(output, (1, output))


def channel_parameter_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    (shape,) = shapes
    if attrs["per_channel"]:
        parameter = (shape[1],) + (1,) * (len(shape) - 2)
    else:
        parameter = (shape[-1],)
    return OpShapes(shape, (1, shape), {"": parameter})


def channel_parameter_attributes(rng: random.Random, ranks: tuple[int, ...]) -> dict:
    return {"per_channel": ranks[0] >= 3 and rng.random() < 0.6}


def parameter_constructor(initial: str):
    def constructor(emission: Emission) -> str:
        shape = ", ".join(str(size) for size in emission.parameters[""])
        return f"nn.Parameter(torch.{initial}({shape}))"

    return constructor


def register(registry: OperatorRegistry) -> None:
    for name, (text, cost) in UNARY_MATH.items():
        registry.register(
            Operator(
                name, "elementwise", (ANY_RANK,),
                lambda m, s, a, cost=cost: same_shape(m, s, a, cost), template(text),
            )
        )
    registry.register(
        Operator(
            "clamp", "elementwise", (ANY_RANK,), same_shape,
            template("torch.clamp({x}, min={low}, max={high})"),
            attributes=lambda rng, ranks: {"low": rng.choice([-1.0, -0.5, 0.0]), "high": rng.choice([0.5, 1.0, 2.0])},
        )
    )
    registry.register(
        Operator(
            "scale", "elementwise", (ANY_RANK,), same_shape, template("{x} * {factor}"),
            attributes=lambda rng, ranks: {"factor": rng.choice([0.5, 2.0, 0.125, 1.5])},
        )
    )
    registry.register(
        Operator(
            "shift", "elementwise", (ANY_RANK,), same_shape, template("{x} + {offset}"),
            attributes=lambda rng, ranks: {"offset": rng.choice([1.0, -0.5, 3.0])},
        )
    )
    for name, text in BINARY.items():
        registry.register(Operator(name, "elementwise", (ANY_RANK, ANY_RANK), broadcast_rule, template(text)))
    registry.register(
        Operator(
            "bias_add", "elementwise", (SOME_RANK,), channel_parameter_rule,
            lambda e: f"{e.args[0]} + {e.attribute}", channel_parameter_attributes,
            parameter_constructor("zeros"), "bias",
        )
    )
    registry.register(
        Operator(
            "scale_parameter", "elementwise", (SOME_RANK,), channel_parameter_rule,
            lambda e: f"{e.args[0]} * {e.attribute}", channel_parameter_attributes,
            parameter_constructor("ones"), "scale",
        )
    )
    for name, text in ACTIVATIONS.items():
        registry.register(
            Operator(name, "activation", (ANY_RANK,), same_shape, template(text), activation_attributes(text))
        )
