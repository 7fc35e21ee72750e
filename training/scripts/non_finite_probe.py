"""Replays an RL step whose gradient was not finite (`RUN/non_finite_step_N.pt`: its loss batch and the weights it ran
on) under each attention implementation, precision and LM head, and says which give a non-finite gradient, and where.

Usage (on the machine that ran the step; the GPU's kernels are what is under test):
    python training/scripts/non_finite_probe.py RUN/non_finite_step_4.pt --model training/models [--temperature T]
Each line: attention (sdpa, eager) x precision (bf16 autocast, fp32) x head (trl's fused log-prob head, plain
logits), the policy term's loss and how many parameters' gradients are not finite; with a non-finite gradient, the
first module (in backward order) whose input gradient is not finite while its output gradient is.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModelForCausalLM

from trl.trainer.utils import add_fused_lm_head


def first_non_finite_module(model) -> tuple[list[str], list]:
    """A list that backward fills with the modules where a non-finite gradient starts, and the hooks doing it."""
    origins: list[str] = []

    def hook(name):
        def check(_module, grad_input, grad_output):
            def finite(grads):
                return all(torch.isfinite(g).all() for g in grads if g is not None)

            if finite(grad_output) and not finite(grad_input):
                origins.append(name)
        return check

    hooks = [module.register_full_backward_hook(hook(name)) for name, module in model.named_modules() if name]
    return origins, hooks


def replay(saved: dict, model_dir: Path, attention: str, precision: str, fused: bool, temperature: float,
           device: str) -> str:
    """One replay of the step's policy term (advantage-weighted log-probabilities of the completions): its loss,
    the parameters with a non-finite gradient, and where the first one starts."""
    config = AutoConfig.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attention, dtype=torch.float32)
    model.load_state_dict({name: tensor.float() for name, tensor in saved["weights"].items()})
    model.to(device).train()
    if fused:
        add_fused_lm_head(model, temperature=temperature)
    batch = {name: tensor.to(device) for name, tensor in saved["batch"].items()}
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    width = batch["completion_ids"].shape[1]
    origins, hooks = first_non_finite_module(model)
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=precision == "bf16"):
        if fused:
            labels = ids.masked_fill(mask == 0, -100)
            labels[:, :-width] = -100
            logps = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True).log_probs[:, -width:]
        else:
            logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=width + 1).logits[:, :-1]
            logps = F.log_softmax(logits.float() / temperature, dim=-1).gather(
                -1, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)
    completion_mask = batch["completion_mask"].float()
    loss = -(logps * batch["advantages"].unsqueeze(-1) * completion_mask).sum() / completion_mask.sum().clamp(min=1)
    loss.backward()
    for handle in hooks:
        handle.remove()
    bad = [name for name, parameter in model.named_parameters()
           if parameter.grad is not None and not torch.isfinite(parameter.grad).all()]
    where = f"; starts in {origins[0]}" if origins else ""
    return (f"{attention:5} {precision:4} {'fused' if fused else 'plain':5} head: loss {loss.item():.4g}, "
            f"non-finite gradients in {len(bad)} parameters{where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step_file", type=Path, help="RUN/non_finite_step_N.pt, written by `drtriton-train rl`")
    parser.add_argument("--model", type=Path, required=True, help="the run's starting model directory (its config)")
    parser.add_argument("--temperature", type=float, default=1.0, help="the run's sampling temperature")
    args = parser.parse_args()
    saved = torch.load(args.step_file)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"{args.step_file}: {saved['batch']['completion_ids'].shape[0]} rollouts on {device}")
    for attention, precision, fused in itertools.product(("sdpa", "eager"), ("bf16", "fp32"), (True, False)):
        print(replay(saved, args.model, attention, precision, fused, args.temperature, device), flush=True)


if __name__ == "__main__":
    main()
