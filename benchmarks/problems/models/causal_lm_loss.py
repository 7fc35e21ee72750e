"""Loss: a causal language model's training loss: shift logits and labels by one position, upcast the bfloat16
logits to float32, cross-entropy with ignore_index=-100 (padding); 4 x 1024 positions x 32000 vocabulary
(262 MB of bfloat16 logits in, a scalar out).

Eager copies the shifted logits, writes a 524 MB float32 copy, then runs log-softmax and the gather over it.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "loss"

BATCH = 4
SEQUENCE = 1024
VOCAB = 32000
IGNORE_INDEX = -100


class Model(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.vocab_size = vocab_size

    def forward(self, logits, labels):
        shift_logits = logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        shift_logits = shift_logits.view(-1, self.vocab_size).float()
        shift_labels = shift_labels.view(-1)
        return F.cross_entropy(shift_logits, shift_labels, ignore_index=IGNORE_INDEX)


def get_inputs():
    logits = torch.randn(BATCH, SEQUENCE, VOCAB, dtype=torch.bfloat16)
    labels = torch.randint(0, VOCAB, (BATCH, SEQUENCE))
    labels[:, -SEQUENCE // 8 :] = IGNORE_INDEX  # right padding
    return [logits, labels]


def get_init_inputs():
    return [VOCAB]
