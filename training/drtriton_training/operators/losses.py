"""Loss functions and similarity measures: regression losses, KL divergence, cross entropy, ...

Pairs of inputs have equal shapes (PyTorch warns on broadcasting losses); targets that must be
probabilities, signs or class indices are derived from the second input or created as indices.
"""

from __future__ import annotations

from drtriton_training.registry import FLOAT_DTYPES, Operator, OperatorRegistry, OpShapes, TensorInput, pick_axis
from drtriton_training.shapes import Shape, ShapeModel

PAIR = (TensorInput(1, 4), TensorInput(1, 4, same_rank_as=0))

PAIR_LOSSES = {
    "mse_loss": "F.mse_loss({x}, {y})",
    "l1_loss": "F.l1_loss({x}, {y})",
    "smooth_l1_loss": "F.smooth_l1_loss({x}, {y}, beta={beta})",
    "huber_loss": "F.huber_loss({x}, {y}, delta={beta})",
    "soft_margin_loss": "F.soft_margin_loss({x}, torch.sign({y}).detach())",
    "bce_with_logits": "F.binary_cross_entropy_with_logits({x}, torch.sigmoid({y}))",
    "kl_div": "F.kl_div(F.log_softmax({x}, dim=-1), F.softmax({y}, dim=-1), reduction=\"batchmean\")",
}
# kl_div sums p * (log p - log q), terms that cancel: in half precision PyTorch's own result
# misses the exact one by more than the tolerance (bf16: -0.04 for an exact 0), so float32 only.
FLOAT32_ONLY_LOSSES = {"kl_div": ("float32",)}


def equal_shapes(model: ShapeModel, shapes: list[Shape]) -> None:
    for other in shapes[1:]:
        if len(other) != len(shapes[0]):
            model.infeasible()
            return
        for left, right in zip(shapes[0], other):
            model.equal(left, right)


def pair_loss_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    equal_shapes(model, shapes)
    return OpShapes((), (4, shapes[0]))


def cosine_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    equal_shapes(model, shapes)
    axis = attrs["dim"] % len(shapes[0])
    return OpShapes(shapes[0][:axis] + shapes[0][axis + 1:], (6, shapes[0]))


def class_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    logits, target = shapes
    model.equal(logits[0], target[0])
    return OpShapes((), (6, logits))


def triplet_rule(model: ShapeModel, shapes: list[Shape], attrs: dict) -> OpShapes:
    equal_shapes(model, shapes)
    return OpShapes((), (10, shapes[0]))


def register(registry: OperatorRegistry) -> None:
    for name, text in PAIR_LOSSES.items():
        registry.register(
            Operator(
                name, "loss", PAIR, pair_loss_rule,
                lambda e, text=text: text.format(x=e.args[0], y=e.args[1], **e.attrs),
                (lambda rng, ranks: {"beta": rng.choice([0.5, 1.0, 2.0])}) if "{beta}" in text else
                (lambda rng, ranks: {}),
                dtypes=FLOAT32_ONLY_LOSSES.get(name, FLOAT_DTYPES),
            )
        )
    registry.register(
        Operator(
            "cosine_similarity", "loss", PAIR, cosine_rule,
            lambda e: f"F.cosine_similarity({e.args[0]}, {e.args[1]}, dim={e.attrs['dim']})",
            lambda rng, ranks: {"dim": pick_axis(rng, ranks[0])},
        )
    )
    targets = TensorInput(1, 1, dtype="int64", class_count_of=(0, 1))
    registry.register(
        Operator(
            "cross_entropy", "loss", (TensorInput(2, 2), targets), class_rule,
            lambda e: f"F.cross_entropy({e.args[0]}, {e.args[1]})",
        )
    )
    registry.register(
        Operator(
            "nll_loss", "loss", (TensorInput(2, 2), targets), class_rule,
            lambda e: f"F.nll_loss(F.log_softmax({e.args[0]}, dim=1), {e.args[1]})",
        )
    )
    registry.register(
        Operator(
            "triplet_margin_loss", "loss",
            (TensorInput(2, 2), TensorInput(2, 2, same_rank_as=0), TensorInput(2, 2, same_rank_as=0)),
            triplet_rule,
            lambda e: f"F.triplet_margin_loss({e.args[0]}, {e.args[1]}, {e.args[2]}, margin={e.attrs['margin']})",
            lambda rng, ranks: {"margin": rng.choice([0.5, 1.0])},
        )
    )
