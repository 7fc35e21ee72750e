"""Loss: masked token-level negative log-likelihood and top-1 accuracy, the way a training loop logs them:
log_softmax, gather of each target's log-probability, argmax, both averaged over non-padding positions;
8192 positions x 8192 classes of float32 logits (268 MB in, two scalars out).

Two row reductions (log-sum-exp and argmax) and a gather over one input; eager writes the 268 MB log-probabilities.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "loss"

POSITIONS = 8192
CLASSES = 8192
PAD_ID = -1


class Model(nn.Module):
    def __init__(self, pad_id):
        super().__init__()
        self.pad_id = pad_id

    def forward(self, logits, targets):
        mask = targets != self.pad_id
        safe_targets = targets.masked_fill(~mask, 0)
        log_probs = F.log_softmax(logits, dim=-1)
        nll = -log_probs.gather(dim=-1, index=safe_targets.unsqueeze(-1)).squeeze(-1)
        n_tokens = mask.sum()
        loss = (nll * mask).sum() / n_tokens
        correct = (logits.argmax(dim=-1) == targets) & mask
        accuracy = correct.float().sum() / n_tokens
        return loss, accuracy


def get_inputs():
    targets = torch.randint(0, CLASSES, (POSITIONS,))
    targets[torch.rand(POSITIONS) < 0.1] = PAD_ID
    logits = torch.randn(POSITIONS, CLASSES)
    # A model that is right about half the time: its logit for the target is raised on every other position.
    logits[::2].scatter_add_(1, targets[::2].clamp(min=0).unsqueeze(1), torch.full((POSITIONS // 2, 1), 6.0))
    return [logits, targets]


def get_init_inputs():
    return [PAD_ID]
