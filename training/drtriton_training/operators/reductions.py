"""Reductions, softmax / log_softmax and normalization layers (layer, group, instance, batch, RMS).

Norm layers carry parameters and are emitted as `nn.Module`s built in `__init__`; batch norm
is written in its inference form (running statistics), the way frozen models use it.
"""

from __future__ import annotations

import random

from drtriton_training.registry import Emission, Operator, OperatorRegistry, OpShapes, TensorInput, pick_axis
from drtriton_training.shapes import Shape, ShapeModel

REDUCTIONS = {
    "sum": ("torch.sum({x}, dim={dim}, keepdim={keepdim})", 1),
    "mean": ("torch.mean({x}, dim={dim}, keepdim={keepdim})", 1),
    "amax": ("torch.amax({x}, dim={dim}, keepdim={keepdim})", 1),
    "amin": ("torch.amin({x}, dim={dim}, keepdim={keepdim})", 1),
    "var": ("torch.var({x}, dim={dim}, keepdim={keepdim})", 3),
    "std": ("torch.std({x}, dim={dim}, keepdim={keepdim})", 4),
    "logsumexp": ("torch.logsumexp({x}, dim={dim}, keepdim={keepdim})", 4),
    "vector_norm": ("torch.linalg.vector_norm({x}, dim={dim}, keepdim={keepdim})", 2),
}


def reduction_attributes(rng: random.Random, ranks: tuple[int, ...]) -> dict:
    return {"dim": pick_axis(rng, ranks[0]), "keepdim": rng.random() < 0.5}


def reduction_rule(needs_two: bool, flops_per_element: int):
    def rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
        (shape,) = shapes
        axis = attrs["dim"] % len(shape)
        if needs_two:
            # NOTE: var/std over one element is NaN (division by n - 1 = 0).
            model.require(shape[axis] >= 2)
        if attrs["keepdim"]:
            output = shape[:axis] + (1,) + shape[axis + 1:]
        else:
            output = shape[:axis] + shape[axis + 1:]
        return OpShapes(output, (flops_per_element, shape))

    return rule


def softmax_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    return OpShapes(shapes[0], (5, shapes[0]))


def last_dim_norm(module: str, attributes: dict):
    def rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
        (shape,) = shapes
        parameters = {"weight": (shape[-1],)}
        if attrs.get("bias", False):
            parameters["bias"] = (shape[-1],)
        return OpShapes(shape, (8, shape), parameters)

    def constructor(emission: Emission) -> str:
        extra = "".join(f", {key}={value}" for key, value in attributes.items())
        bias = ", bias=False" if "bias" in emission.attrs and not emission.attrs["bias"] else ""
        return f"nn.{module}({emission.inputs[0][-1]}{extra}{bias})"

    return rule, constructor


def group_norm_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    (shape,) = shapes
    per_group = model.dim(1)
    model.require(shape[1] == attrs["groups"] * per_group)
    # PyTorch rejects a group holding a single value (batch * channels per group * spatial).
    group_size = model.product((shape[0], per_group, *shape[2:]), model.limits.max_tensor_elements)
    model.require(group_size >= 2)
    return OpShapes(shape, (8, shape), {"weight": (shape[1],), "bias": (shape[1],)})


def instance_norm_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    (shape,) = shapes
    spatial = model.product(shape[2:], model.limits.max_tensor_elements)
    # PyTorch rejects instance norm over a single spatial element in training mode.
    model.require(spatial >= 2)
    return OpShapes(shape, (8, shape), {"weight": (shape[1],), "bias": (shape[1],)})


def channel_norm_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    (shape,) = shapes
    return OpShapes(shape, (4, shape), {"weight": (shape[1],), "bias": (shape[1],)})


def batch_norm_class(rank: int) -> str:
    return {2: "BatchNorm1d", 3: "BatchNorm1d", 4: "BatchNorm2d", 5: "BatchNorm3d"}[rank]


def register(registry: OperatorRegistry) -> None:
    for name, (text, cost) in REDUCTIONS.items():
        registry.register(
            Operator(
                name, "reduction", (TensorInput(1, 4),), reduction_rule(name in ("var", "std"), cost),
                lambda e, text=text: text.format(x=e.args[0], **e.attrs), reduction_attributes,
            )
        )
    for name in ("softmax", "log_softmax"):
        registry.register(
            Operator(
                name, "softmax", (TensorInput(1, 4),), softmax_rule,
                lambda e, name=name: f"torch.{name}({e.args[0]}, dim={e.attrs['dim']})",
                lambda rng, ranks: {"dim": pick_axis(rng, ranks[0])},
            )
        )
    layer_rule, layer_constructor = last_dim_norm("LayerNorm", {})
    registry.register(
        Operator(
            "layer_norm", "norm", (TensorInput(1, 4),), layer_rule,
            lambda e: f"{e.attribute}({e.args[0]})",
            lambda rng, ranks: {"bias": rng.random() < 0.8}, layer_constructor, "norm",
        )
    )
    rms_rule, rms_constructor = last_dim_norm("RMSNorm", {"eps": 1e-6})
    registry.register(
        Operator(
            "rms_norm", "norm", (TensorInput(1, 4),), rms_rule,
            lambda e: f"{e.attribute}({e.args[0]})", constructor=rms_constructor, attribute_prefix="norm",
        )
    )
    registry.register(
        Operator(
            "group_norm", "norm", (TensorInput(2, 4),), group_norm_rule,
            lambda e: f"{e.attribute}({e.args[0]})",
            lambda rng, ranks: {"groups": rng.choice([1, 2, 4, 8])},
            lambda e: f"nn.GroupNorm({e.attrs['groups']}, {e.inputs[0][1]})", "group_norm",
        )
    )
    registry.register(
        Operator(
            "instance_norm", "norm", (TensorInput(3, 5),), instance_norm_rule,
            lambda e: f"{e.attribute}({e.args[0]})",
            constructor=lambda e: f"nn.InstanceNorm{len(e.inputs[0]) - 2}d({e.inputs[0][1]}, affine=True)",
            attribute_prefix="instance_norm",
            # PyTorch's CPU half-precision instance norm is wrong over few spatial elements
            # (torch 2.13, 2 of 16 seeds: -1.55 for an exact -0.78 in bf16), so float32 only.
            dtypes=("float32",),
        )
    )
    registry.register(
        Operator(
            "batch_norm", "norm", (TensorInput(2, 5),), channel_norm_rule,
            lambda e: (
                f"F.batch_norm({e.args[0]}, {e.attribute}.running_mean, {e.attribute}.running_var, "
                f"{e.attribute}.weight, {e.attribute}.bias, training=False)"
            ),
            constructor=lambda e: f"nn.{batch_norm_class(len(e.inputs[0]))}({e.inputs[0][1]})",
            attribute_prefix="batch_norm",
        )
    )
