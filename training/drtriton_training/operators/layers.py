"""Matrix products (linear, mm, bmm, matmul, addmm), convolutions (1d/2d/3d, transposed), pooling.

Sliding-window output sizes are CP-SAT floor divisions over the input size, with kernel size,
stride, padding and dilation sampled as attributes before solving.
"""

from __future__ import annotations

import random

from drtriton_training.registry import FLOAT_DTYPES, Emission, Operator, OperatorRegistry, OpShapes, TensorInput
from drtriton_training.shapes import Shape, ShapeModel

# PyTorch's CPU bfloat16 transposed convolutions miss the exact result by more than the bf16
# tolerance (measured, torch 2.13: up to 1.8x atol + rtol*|exact|, 1 seed in 48), so a correct
# kernel could fail against them; their float16 results stay well inside.
TRANSPOSED_CONV_DTYPES = ("float32", "float16")
# PyTorch's CPU avg_pool3d has no float16 or bfloat16 kernel (torch 2.13: "not implemented").
AVG_POOL3D_DTYPES = ("float32",)


def linear_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    (shape,) = shapes
    out_features = model.dim(2)
    parameters = {"weight": (out_features, shape[-1])}
    if attrs["bias"]:
        parameters["bias"] = (out_features,)
    return OpShapes(shape[:-1] + (out_features,), (2, (*shape, out_features)), parameters)


def linear_constructor(emission: Emission) -> str:
    out_features, in_features = emission.parameters["weight"]
    bias = "" if emission.attrs["bias"] else ", bias=False"
    return f"nn.Linear({in_features}, {out_features}{bias})"


def matmul_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    left, right = shapes
    model.equal(left[-1], right[-2])
    batch = model.broadcast(left[:-2], right[:-2])
    return OpShapes(batch + (left[-2], right[-1]), (2, (*batch, left[-2], right[-1], left[-1])))


def bmm_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    model.equal(shapes[0][0], shapes[1][0])
    return matmul_rule(model, shapes, attrs)


def addmm_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    bias, left, right = shapes
    product = matmul_rule(model, [left, right], attrs)
    for size, target in zip(model.broadcast(bias, product.output), product.output):
        model.equal(size, target)
    return product


def conv_attributes(spatial: int, transposed: bool):
    def sample(rng: random.Random, ranks: tuple[int, ...]) -> dict:
        kernel = rng.choice([1, 3] if spatial == 3 else [1, 3, 5])
        stride = rng.choice([1, 1, 2])
        dilation = 1 if spatial == 3 or kernel == 1 else rng.choice([1, 1, 2])
        attrs = {
            "kernel_size": kernel,
            "stride": stride,
            "padding": rng.choice([0, (kernel // 2) * dilation]),
            "dilation": dilation,
            "groups": rng.choice([1, 1, 2, 4]),
            "bias": rng.random() < 0.7,
        }
        if transposed:
            attrs["output_padding"] = rng.randrange(max(stride, dilation))
        return attrs

    return sample


def conv_rule(spatial: int, transposed: bool):
    def rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
        (shape,) = shapes
        kernel, stride, padding, dilation, groups = (
            attrs[key] for key in ("kernel_size", "stride", "padding", "dilation", "groups")
        )
        in_per_group, out_per_group = model.dim(2), model.dim(2)
        model.require(shape[1] == groups * in_per_group)
        out_channels = model.output(groups * out_per_group)
        reach = dilation * (kernel - 1)
        if transposed:
            sizes = tuple(
                model.output((size - 1) * stride - 2 * padding + reach + attrs["output_padding"] + 1)
                for size in shape[2:]
            )
            weight = (shape[1], out_per_group) + (kernel,) * spatial
            work = (shape[0], *shape[1:], out_per_group)
        else:
            sizes = tuple(
                model.output(model.floor_div(size + 2 * padding - reach - 1, stride) + 1) for size in shape[2:]
            )
            weight = (out_channels, in_per_group) + (kernel,) * spatial
            work = (shape[0], out_channels, *sizes, in_per_group)
        parameters = {"weight": weight}
        if attrs["bias"]:
            parameters["bias"] = (out_channels,)
        return OpShapes((shape[0], out_channels) + sizes, (2 * kernel**spatial, work), parameters)

    return rule


def conv_constructor(spatial: int, transposed: bool):
    def constructor(emission: Emission) -> str:
        attrs = emission.attrs
        in_channels, out_channels = emission.inputs[0][1], emission.output[1]
        name = f"ConvTranspose{spatial}d" if transposed else f"Conv{spatial}d"
        text = f"nn.{name}({in_channels}, {out_channels}, kernel_size={attrs['kernel_size']}"
        for key, default in (("stride", 1), ("padding", 0), ("output_padding", 0), ("dilation", 1), ("groups", 1)):
            if attrs.get(key, default) != default:
                text += f", {key}={attrs[key]}"
        if not attrs["bias"]:
            text += ", bias=False"
        return text + ")"

    return constructor


def pool_attributes(rng: random.Random, ranks: tuple[int, ...]) -> dict:
    kernel = rng.choice([2, 3])
    return {"kernel_size": kernel, "stride": rng.choice([1, 2, kernel]), "padding": rng.choice([0, kernel // 2])}


def pool_rule(kind: str, spatial: int):
    def rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
        (shape,) = shapes
        if kind == "avg" and spatial == 3:
            # NOTE: PyTorch's avg_pool3d rejects inputs smaller than the kernel, padding or not.
            for size in shape[2:]:
                model.require(size >= attrs["kernel_size"])
        return pool_shapes(model, shape, attrs)

    return rule


def pool_shapes(model: ShapeModel, shape: Shape, attrs: dict) -> OpShapes:
    kernel, stride, padding = attrs["kernel_size"], attrs["stride"], attrs["padding"]
    sizes = tuple(model.output(model.floor_div(size + 2 * padding - kernel, stride) + 1) for size in shape[2:])
    output = shape[:2] + sizes
    return OpShapes(output, (kernel ** (len(shape) - 2), output))


def adaptive_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    (shape,) = shapes
    size = attrs["output_size"]
    for dim in shape[2:]:
        model.require(dim >= size)
    return OpShapes(shape[:2] + (size,) * (len(shape) - 2), (1, shape))


def register(registry: OperatorRegistry) -> None:
    registry.register(
        Operator(
            "linear", "matmul", (TensorInput(1, 4),), linear_rule,
            lambda e: f"{e.attribute}({e.args[0]})", lambda rng, ranks: {"bias": rng.random() < 0.8},
            linear_constructor, "linear",
        )
    )
    registry.register(
        Operator("mm", "matmul", (TensorInput(2, 2), TensorInput(2, 2)), matmul_rule,
                 lambda e: f"torch.mm({e.args[0]}, {e.args[1]})")
    )
    registry.register(
        Operator("bmm", "matmul", (TensorInput(3, 3), TensorInput(3, 3)), bmm_rule,
                 lambda e: f"torch.bmm({e.args[0]}, {e.args[1]})")
    )
    registry.register(
        Operator("matmul", "matmul", (TensorInput(2, 4), TensorInput(2, 4)), matmul_rule,
                 lambda e: f"{e.args[0]} @ {e.args[1]}")
    )
    registry.register(
        Operator("addmm", "matmul", (TensorInput(1, 2), TensorInput(2, 2), TensorInput(2, 2)), addmm_rule,
                 lambda e: f"torch.addmm({e.args[0]}, {e.args[1]}, {e.args[2]})")
    )
    for spatial in (1, 2, 3):
        for transposed in (False, True):
            name = f"conv_transpose{spatial}d" if transposed else f"conv{spatial}d"
            registry.register(
                Operator(
                    name, "conv", (TensorInput(spatial + 2, spatial + 2),), conv_rule(spatial, transposed),
                    lambda e: f"{e.attribute}({e.args[0]})", conv_attributes(spatial, transposed),
                    conv_constructor(spatial, transposed), "conv_transpose" if transposed else "conv",
                    dtypes=TRANSPOSED_CONV_DTYPES if transposed else FLOAT_DTYPES,
                )
            )
    for spatial in (1, 2, 3):
        for kind in ("max", "avg"):
            registry.register(
                Operator(
                    f"{kind}_pool{spatial}d", "pool", (TensorInput(spatial + 2, spatial + 2),), pool_rule(kind, spatial),
                    lambda e, kind=kind, spatial=spatial: (
                        f"F.{kind}_pool{spatial}d({e.args[0]}, kernel_size={e.attrs['kernel_size']}, "
                        f"stride={e.attrs['stride']}, padding={e.attrs['padding']})"
                    ),
                    pool_attributes,
                    dtypes=AVG_POOL3D_DTYPES if (kind, spatial) == ("avg", 3) else FLOAT_DTYPES,
                )
            )
    for spatial in (1, 2):
        for kind in ("max", "avg"):
            registry.register(
                Operator(
                    f"adaptive_{kind}_pool{spatial}d", "pool", (TensorInput(spatial + 2, spatial + 2),),
                    adaptive_rule,
                    lambda e, kind=kind, spatial=spatial: (
                        f"F.adaptive_{kind}_pool{spatial}d({e.args[0]}, {e.attrs['output_size']})"
                    ),
                    lambda rng, ranks: {"output_size": rng.choice([1, 2, 4])},
                )
            )
