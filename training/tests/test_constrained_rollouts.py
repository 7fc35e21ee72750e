"""Grammar-held rollouts as trl samples them (no stop string: a row ends only at end-of-text): the shipped model's
rollouts end at their end line even when the policy no longer favours end-of-text, and the processor that holds them
allows the same tokens as checking every token of the vocabulary in turn.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessor, LogitsProcessorList

from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.models import formats
from drtriton_lsp.models.constrained_sampling import ALLOWED_PER_STEP, ConstrainedAnswers
from drtriton_lsp.models.script_grammar import ScriptGrammar, script_constraint
from drtriton_training.rl_configs import recipe

SHIPPED_MODEL = Path(__file__).resolve().parents[1] / "models"
FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "csp_dag_training_graphs.json"
# a level-2 training program: max_pool3d, then sigmoid and a loss that reads it
GRAPH = OpGraph.from_json(next(record["graph"] for record in json.loads(FIXTURE.read_text())
                               if record["hash"] == "13af9360397fe04f9142"))
COMPLETION_LIMIT = recipe("small").max_completion_length


class EndOfTextUnlikely(LogitsProcessor):
    """A policy that no longer favours end-of-text: its logit lowered by 20 (a factor of about 5e8)."""

    def __init__(self, end_of_text: int):
        self.end_of_text = end_of_text

    def __call__(self, input_ids, scores):
        scores[:, self.end_of_text] -= 20.0
        return scores


def test_a_held_rollout_ends_at_its_end_line_even_when_the_policy_no_longer_favours_end_of_text():
    """Were another end line allowed after the first, these rollouts would write end lines up to the completion limit,
    every token through the processor (a step of RL on the H200 ran past 300 s while the first took 28 s)."""
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_MODEL)
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_MODEL, dtype=torch.float32).eval()
    prompt = tokenizer(formats.script_prompt(GRAPH), return_tensors="pt", add_special_tokens=False)
    samples = 4
    held = ConstrainedAnswers(tokenizer, [ScriptGrammar(script_constraint(GRAPH))] * samples,
                              prompt["input_ids"].shape[1])
    torch.manual_seed(0)
    with torch.no_grad():
        output = model.generate(
            **prompt, max_new_tokens=COMPLETION_LIMIT, do_sample=True, temperature=1.0, top_p=1.0,
            num_return_sequences=samples, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
            logits_processor=LogitsProcessorList([EndOfTextUnlikely(tokenizer.eos_token_id), held]),
        )
    answers = output[:, prompt["input_ids"].shape[1]:]
    assert answers.shape[1] < COMPLETION_LIMIT // 2
    for row in answers.tolist():
        text = tokenizer.decode(row, skip_special_tokens=True)
        assert text.endswith(formats.END_LINE + "\n") and text.count(formats.END_LINE) == 1, text
        assert tokenizer.eos_token_id in row
        assert formats.parse_script_answer(text).script is not None


@pytest.mark.parametrize("text", [
    "", "k", "keep ", "kernel ", "kernel loss ", "keep max_pool3d\n", "keep max_pool3d\nkernel pointwise sig",
    "keep max_pool3d\nkeep sigmoid\nkeep binary_cross_entropy_with_logits\n",
    "keep max_pool3d\nkeep sigmoid\nkeep binary_cross_entropy_with_logits\n### end",
    "keep max_pool3d\nkeep sigmoid\nkeep binary_cross_entropy_with_logits\n### end\n",
])
def test_the_processor_allows_the_likeliest_tokens_the_grammar_allows_and_no_others(text):
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_MODEL)
    grammar = ScriptGrammar(script_constraint(GRAPH))
    processor = ConstrainedAnswers(tokenizer, [grammar], prompt_length=0)
    answer_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(answer_ids, skip_special_tokens=True) == text
    scores = torch.randn(1, len(tokenizer), generator=torch.Generator().manual_seed(len(text)))
    masked = processor(torch.tensor([answer_ids], dtype=torch.long), scores.clone())
    kept = set(torch.nonzero(masked[0] > float("-inf")).flatten().tolist())

    whole = grammar.finished(text)
    every_allowed = [token for token, piece in enumerate(processor.pieces)
                     if (token == tokenizer.eos_token_id and whole)
                     or (token != tokenizer.eos_token_id and piece and grammar.allows(text, piece))]
    likeliest = sorted(every_allowed, key=lambda token: -scores[0, token].item())[:ALLOWED_PER_STEP]
    assert kept == (set(likeliest) or {tokenizer.eos_token_id})
    if whole and text.endswith("\n"):
        assert kept == {tokenizer.eos_token_id}  # the end line ends the answer
