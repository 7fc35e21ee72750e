"""Shape operators: transpose, permute, flatten, reshape, cat, stack, slicing, (un)squeeze, repeat.

Reshapes are product constraints (a merged dimension equals the product of the parts), so
the solver keeps them exact; the emitted source writes the solved sizes.
"""

from __future__ import annotations

import random

from drtriton_training.registry import Emission, Operator, OperatorRegistry, OpShapes, TensorInput
from drtriton_training.shapes import Shape, ShapeModel


def sizes(shape: tuple[int, ...]) -> str:
    return ", ".join(str(size) for size in shape)


def transpose_attributes(rng: random.Random, ranks: tuple[int, ...]) -> dict:
    first, second = sorted(rng.sample(range(ranks[0]), 2))
    return {"dim0": first, "dim1": second}


def transpose_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    output = list(shapes[0])
    output[attrs["dim0"]], output[attrs["dim1"]] = output[attrs["dim1"]], output[attrs["dim0"]]
    return OpShapes(tuple(output), (1, shapes[0]))


def permute_attributes(rng: random.Random, ranks: tuple[int, ...]) -> dict:
    order = list(range(ranks[0]))
    while order == sorted(order):
        rng.shuffle(order)
    return {"dims": order}


def permute_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    return OpShapes(tuple(shapes[0][axis] for axis in attrs["dims"]), (1, shapes[0]))


def flatten_attributes(rng: random.Random, ranks: tuple[int, ...]) -> dict:
    start = rng.randrange(ranks[0] - 1)
    return {"start_dim": start, "end_dim": rng.randrange(start + 1, ranks[0])}


def flatten_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    (shape,) = shapes
    start, end = attrs["start_dim"], attrs["end_dim"]
    merged = model.product(shape[start:end + 1], model.limits.max_tensor_elements)
    return OpShapes(shape[:start] + (merged,) + shape[end + 1:], (1, shape))


def flatten_source(emission: Emission) -> str:
    start, end = emission.attrs["start_dim"], emission.attrs["end_dim"]
    if end == len(emission.inputs[0]) - 1:
        return f"torch.flatten({emission.args[0]}, {start})"
    return f"torch.flatten({emission.args[0]}, {start}, {end})"


def split_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    (shape,) = shapes
    axis = attrs["axis"]
    outer, inner = model.dim(len(shape) + 1), model.dim(len(shape) + 1)
    model.equal(shape[axis], model.product((outer, inner), model.limits.max_tensor_elements))
    return OpShapes(shape[:axis] + (outer, inner) + shape[axis + 1:], (1, shape))


def cat_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    first, second = shapes
    axis = attrs["dim"] % len(first)
    for index, (left, right) in enumerate(zip(first, second)):
        if index != axis:
            model.equal(left, right)
    joined = model.output(first[axis] + second[axis])
    return OpShapes(first[:axis] + (joined,) + first[axis + 1:], (1, (joined,) + first[:axis] + first[axis + 1:]))


def stack_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    first, second = shapes
    for left, right in zip(first, second):
        model.equal(left, right)
    axis = attrs["dim"]
    return OpShapes(first[:axis] + (2,) + first[axis:], (2, first))


def slice_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    (shape,) = shapes
    axis = attrs["dim"]
    length = model.dim(len(shape))
    start = model.model.NewIntVar(0, model.limits.max_tensor_elements, "")
    model.require(start + length <= shape[axis])
    return OpShapes(shape[:axis] + (length,) + shape[axis + 1:], (1, shape), values={"start": start})


def slice_source(emission: Emission) -> str:
    axis = emission.attrs["dim"]
    start = emission.values["start"]
    stop = start + emission.output[axis]
    bound = f"{start}:{stop}" if start else f":{stop}"
    return f"{emission.args[0]}[{', '.join([':'] * axis + [bound])}]"


def squeeze_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    (shape,) = shapes
    axis = attrs["dim"]
    model.equal(shape[axis], 1)
    return OpShapes(shape[:axis] + shape[axis + 1:], (1, shape))


def unsqueeze_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    (shape,) = shapes
    axis = attrs["dim"]
    return OpShapes(shape[:axis] + (1,) + shape[axis:], (1, shape))


def repeat_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    (shape,) = shapes
    output = tuple(model.output(times * size) for times, size in zip(attrs["repeats"], shape))
    return OpShapes(output, (1, output))


def register(registry: OperatorRegistry) -> None:
    def one(name, ranks, rule, source, attributes):
        registry.register(Operator(name, "shape", (TensorInput(*ranks),), rule, source, attributes))

    one("transpose", (2, 4), transpose_rule,
        lambda e: f"{e.args[0]}.transpose({e.attrs['dim0']}, {e.attrs['dim1']})", transpose_attributes)
    one("permute", (2, 4), permute_rule,
        lambda e: f"{e.args[0]}.permute({sizes(e.attrs['dims'])})", permute_attributes)
    one("flatten", (2, 4), flatten_rule, flatten_source, flatten_attributes)
    one("reshape", (1, 3), split_rule, lambda e: f"{e.args[0]}.reshape({sizes(e.output)})",
        lambda rng, ranks: {"axis": rng.randrange(ranks[0])})
    one("slice", (1, 4), slice_rule, slice_source, lambda rng, ranks: {"dim": rng.randrange(ranks[0])})
    one("squeeze", (1, 4), squeeze_rule, lambda e: f"{e.args[0]}.squeeze({e.attrs['dim']})",
        lambda rng, ranks: {"dim": rng.randrange(ranks[0])})
    one("unsqueeze", (0, 3), unsqueeze_rule, lambda e: f"{e.args[0]}.unsqueeze({e.attrs['dim']})",
        lambda rng, ranks: {"dim": rng.randrange(ranks[0] + 1)})
    one("repeat", (1, 3), repeat_rule, lambda e: f"{e.args[0]}.repeat({sizes(e.attrs['repeats'])})",
        lambda rng, ranks: {"repeats": [rng.choice([1, 2]) for _ in range(ranks[0])]})
    pair = (TensorInput(1, 4), TensorInput(1, 4, same_rank_as=0))
    registry.register(
        Operator(
            "cat", "shape", pair, cat_rule, lambda e: f"torch.cat([{e.args[0]}, {e.args[1]}], dim={e.attrs['dim']})",
            lambda rng, ranks: {"dim": rng.randrange(ranks[0])},
        )
    )
    registry.register(
        Operator(
            "stack", "shape", (TensorInput(0, 3), TensorInput(0, 3, same_rank_as=0)), stack_rule,
            lambda e: f"torch.stack([{e.args[0]}, {e.args[1]}], dim={e.attrs['dim']})",
            lambda rng, ranks: {"dim": rng.randrange(ranks[0] + 1)},
        )
    )
