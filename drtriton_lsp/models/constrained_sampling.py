"""Constrained sampling for transformers' `generate`: a logits processor that keeps, at each step, only the tokens
after which the answer can still be a script (a `ScriptGrammar`, or any object with `allows` and `finished`).

Imports torch and transformers: only the worker's sampling job and the training package's sampler load it.
"""

from __future__ import annotations

from typing import Protocol

import torch
from transformers import LogitsProcessor, LogitsProcessorList

# Tokens are tried from the most likely down; sampling chooses among at most this many allowed ones.
ALLOWED_PER_STEP = 64


class AnswerConstraint(Protocol):
    def allows(self, text: str, piece: str) -> bool: ...

    def finished(self, text: str) -> bool: ...


class ConstrainedAnswers(LogitsProcessor):
    """Masks every token whose text would take a row's answer out of its constraint (rows without one are free).

    rows: one constraint (or None) per generated row, in `generate`'s order (each prompt's samples together);
    prompt_length: where the answers start in `input_ids` (prompts are left-padded to one length). The end-of-text
    token is allowed only once the answer is whole, and then alone where the constraint allows nothing more (a
    sampler without a stop string ends there); a row with no allowed token ends (the parser then says why).

    It runs on the host for every row at every token, so it tries only the tokens whose first character may come
    next (one check per character, tokens grouped by first character once), and masks all rows at once."""

    def __init__(self, tokenizer, rows: list[AnswerConstraint | None], prompt_length: int):
        self.tokenizer, self.rows, self.prompt_length = tokenizer, rows, prompt_length
        self.end_of_text = tokenizer.eos_token_id
        self.pieces = token_pieces(tokenizer)
        by_first: dict[str, list[int]] = {}
        for token, piece in enumerate(self.pieces):
            if piece and token != self.end_of_text:
                by_first.setdefault(piece[0], []).append(token)
        self.tokens_by_first = {character: torch.tensor(tokens) for character, tokens in by_first.items()}

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        # one copy to the host per step and one back: reading or masking a GPU tensor row by row would wait for the
        # device each time
        answers = input_ids[:, self.prompt_length:].tolist()
        host_scores = scores.detach().float().cpu()
        keep = torch.ones(host_scores.shape, dtype=torch.bool)
        for row, constraint in enumerate(self.rows):
            if constraint is None:
                continue
            text = self.tokenizer.decode(answers[row], skip_special_tokens=True)
            keep[row] = False
            keep[row, self._allowed(constraint, text, host_scores[row])] = True
        return scores.masked_fill(~keep.to(scores.device), float("-inf"))

    def _allowed(self, constraint: AnswerConstraint, text: str, row_scores: torch.Tensor) -> list[int]:
        whole = constraint.finished(text)
        allowed = [self.end_of_text] if whole and self.end_of_text is not None else []
        # answers are prefix-closed: a token whose first character cannot come next is out without matching it whole
        firsts = [character for character in self.tokens_by_first if constraint.allows(text, character)]
        if firsts:
            candidates = torch.cat([self.tokens_by_first[character] for character in firsts])
            candidate_scores = row_scores[candidates]
            ordered_scores, order = torch.sort(candidate_scores, descending=True)
            for token, score in zip(candidates[order].tolist(), ordered_scores.tolist()):
                if len(allowed) == ALLOWED_PER_STEP or score == float("-inf"):
                    break
                piece = self.pieces[token]
                if len(piece) == 1 or constraint.allows(text, piece):
                    allowed.append(token)
        if not allowed and self.end_of_text is not None:
            allowed.append(self.end_of_text)
        return allowed


def constraint_processors(
    tokenizer, constraints: list[AnswerConstraint | None] | None, samples: int, prompt_length: int
) -> LogitsProcessorList:
    """`generate`'s logits processors for per-prompt constraints (none when no prompt has one); `generate` puts each
    prompt's `samples` rows together."""
    if not constraints or all(constraint is None for constraint in constraints):
        return LogitsProcessorList()
    rows = [constraint for constraint in constraints for _ in range(samples)]
    return LogitsProcessorList([ConstrainedAnswers(tokenizer, rows, prompt_length)])


def token_pieces(tokenizer) -> list[str]:
    """The text each token adds after other text (a tokenizer may drop a token's leading space at the start of a
    text, so each is decoded after an anchor token and the anchor's own text is cut off); special tokens add ""."""
    anchor = tokenizer("kernel", add_special_tokens=False)["input_ids"][:1]
    anchor_text = tokenizer.decode(anchor, skip_special_tokens=True)
    pieces = []
    for token in range(len(tokenizer)):
        text = tokenizer.decode(anchor + [token], skip_special_tokens=True)
        pieces.append(text[len(anchor_text):] if text.startswith(anchor_text) else "")
    return pieces
