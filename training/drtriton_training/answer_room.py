"""Whether a program's prompt leaves the model room to answer it: the model's context must hold the prompt and a whole
answer, and a prompt is never cut to fit (that would describe another program).

`rl` leaves out, when it selects its programs, those whose prompt plus a rollout's `max_completion_length` does not fit
the context, and logs how many per level (and how many kept need a longer answer than a rollout may write); `eval`
reports a program whose prompt leaves no room for the compiler's own answer as "prompt too long", not as a model
failure.
"""

from __future__ import annotations

import json
from pathlib import Path

from drtriton_lsp.models import formats

PROMPT_TOO_LONG = "prompt too long"


def model_context(model_dir: Path | str) -> int | None:
    """The tokens the model in `model_dir` attends over (its config's `max_position_embeddings`; None: unbounded)."""
    return json.loads((Path(model_dir) / "config.json").read_text()).get("max_position_embeddings")


def token_count(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def compiler_answer(capture, kind: str) -> str:
    """The completion that answers a program as the compiler does (its default script, or the module it decodes to):
    the answer SFT teaches, so the room an answer needs."""
    from drtriton_training.teach import kernel_candidate

    if kind == "script":
        return formats.script_completion(capture.program.schedule)
    return formats.kernel_completion(kernel_candidate(capture))


def prompt_problem(prompt_tokens: int, room: int, context: int | None) -> str:
    """Why a prompt of `prompt_tokens` leaves a model of `context` tokens less than `room` to answer in ("" when it
    leaves enough)."""
    if context is None or prompt_tokens + room <= context:
        return ""
    return (f"{PROMPT_TOO_LONG}: its {prompt_tokens} tokens leave {max(context - prompt_tokens, 0)} of the model's "
            f"{context} to answer in, fewer than {room}")
