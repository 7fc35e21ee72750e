"""DRPO (DRTriton, arXiv 2603.21465): correct rollouts pushed up, weighted by their speed; incorrect ones pushed down
through a log-sum-exp penalty; KL-bounded to the SFT model. A GRPOTrainer whose loss reads the two signals apart.

Per group (the rollouts of one prompt): correct rollouts C get weights softmax(r_s / lambda) over C (uniform on the
CPU, where r_s = 0), and the loss -sum_C w_i log p(y_i) raises their sequence log-probabilities; the incorrect ones I
add logsumexp_I log p(y_i), whose gradient lowers each in proportion to its probability (the likeliest wrong answer
first); beta times the KL estimate to the reference holds the policy near the SFT model. Groups are averaged and the
sum divided by `max_completion_length` (a constant, as Dr. GRPO does), so the step size does not grow with length.
"""

from __future__ import annotations

from typing import Any

import torch
from trl import GRPOTrainer

from drtriton_training.rewards import VERIFIED_REWARD

CORRECTNESS_FUNCTION, SPEED_FUNCTION = "correctness", "speed"


def correct_set_weights(correct: torch.Tensor, speed: torch.Tensor, group: torch.Tensor, lam: float) -> torch.Tensor:
    """Per rollout: softmax of speed / lam over the correct rollouts of its group; 0 for incorrect rollouts."""
    weights = torch.zeros_like(speed, dtype=torch.float32)
    for group_id in group.unique():
        members = (group == group_id) & correct
        if members.any():
            weights[members] = torch.softmax(speed[members].float() / lam, dim=0)
    return weights


def drpo_loss(
    sequence_logps: torch.Tensor,
    correct: torch.Tensor,
    speed: torch.Tensor,
    group: torch.Tensor,
    *,
    lam: float,
    beta: float = 0.0,
    sequence_kl: torch.Tensor | None = None,
    normaliser: float = 1.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The DRPO loss of a batch of whole groups, and its parts (for the log).

    sequence_logps: each rollout's summed completion log-probability under the policy (with gradient); correct: bool
    per rollout (verified); speed: r_s per rollout (read for correct ones only); group: the group id of each rollout;
    sequence_kl: each rollout's summed per-token KL estimate to the reference (needed when beta > 0)."""
    weights = correct_set_weights(correct, speed.detach(), group, lam)
    group_losses, positives, penalties = [], [], []
    for group_id in group.unique():
        members = group == group_id
        wrong = members & ~correct
        positive = -(weights[members] * sequence_logps[members]).sum()
        penalty = torch.logsumexp(sequence_logps[wrong], dim=0) if wrong.any() else sequence_logps.new_zeros(())
        loss = positive + penalty
        if beta:
            loss = loss + beta * sequence_kl[members].mean()
        group_losses.append(loss)
        positives.append(positive.detach())
        penalties.append(penalty.detach())
    parts = {
        "positive": torch.stack(positives).mean().item(),
        "penalty": torch.stack(penalties).mean().item(),
        "correct_share": correct.float().mean().item(),
    }
    return torch.stack(group_losses).mean() / normaliser, parts


class DrpoTrainer(GRPOTrainer):
    """trl's GRPOTrainer with the DRPO loss: the reward functions `correctness` and `speed` stay two signals (GRPO
    sums them into one reward per rollout). Each loss batch must hold whole groups: one generation batch per step
    (`steps_per_generation` and `gradient_accumulation_steps` 1), and on several GPUs a per-device batch that is a
    multiple of `num_generations`."""

    def __init__(self, *args: Any, drpo_lambda: float, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if self.args.steps_per_generation != 1 or self.args.gradient_accumulation_steps != 1:
            raise ValueError("DRPO computes each group's loss in one batch: set steps_per_generation and "
                             "gradient_accumulation_steps to 1")
        if {CORRECTNESS_FUNCTION, SPEED_FUNCTION} - set(self.reward_func_names):
            raise ValueError(f"DRPO reads the reward functions {CORRECTNESS_FUNCTION!r} and {SPEED_FUNCTION!r}; "
                             f"got {self.reward_func_names}")
        self.drpo_lambda = drpo_lambda
        self._gathered_rewards: torch.Tensor | None = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        self._gathered_rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        return self._gathered_rewards

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        rewards = self._gathered_rewards  # every process's rollouts, in order: groups are consecutive
        local = slice(self.accelerator.process_index * len(inputs), (self.accelerator.process_index + 1) * len(inputs))
        correctness = rewards[:, self.reward_func_names.index(CORRECTNESS_FUNCTION)]
        speed = torch.nan_to_num(rewards[:, self.reward_func_names.index(SPEED_FUNCTION)], nan=0.0)
        groups = torch.arange(len(rewards), device=rewards.device) // self.num_generations
        output["drpo_correct"] = (correctness >= VERIFIED_REWARD)[local]
        output["drpo_speed"] = speed[local]
        output["drpo_group"] = groups[local]
        return output

    def _compute_loss(self, model, inputs):
        completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
        input_ids = torch.cat([inputs["prompt_ids"], completion_ids], dim=1)
        attention_mask = torch.cat([inputs["prompt_mask"], completion_mask], dim=1)
        per_token_logps, _entropies, _aux = self._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, completion_ids.size(1)
        )
        group = inputs["drpo_group"]
        sizes = torch.bincount(group - group.min())
        if bool((sizes[sizes > 0] != self.num_generations).any()):
            raise ValueError("a DRPO loss batch holds part of a group: make each device's batch a multiple of "
                             "num_generations")
        sequence_kl = None
        if self.beta:
            reference = inputs["ref_per_token_logps"]
            per_token_kl = torch.exp(reference - per_token_logps) - (reference - per_token_logps) - 1
            sequence_kl = (per_token_kl * completion_mask).sum(-1)
        loss, parts = drpo_loss(
            (per_token_logps * completion_mask).sum(-1), inputs["drpo_correct"], inputs["drpo_speed"], group,
            lam=self.drpo_lambda, beta=self.beta, sequence_kl=sequence_kl, normaliser=self.max_completion_length,
        )
        mode = "train" if self.model.training else "eval"
        for name, value in parts.items():
            self._metrics[mode][f"drpo/{name}"].append(value)
        if sequence_kl is not None:
            tokens = completion_mask.sum().clamp(min=1.0)
            self._metrics[mode]["kl"].append((sequence_kl.sum() / tokens).item())
        return loss
