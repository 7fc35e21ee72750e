"""Network: a word-level GRU language model: nn.Embedding(10000, 512), a two-layer batch-first nn.GRU(512 -> 1024)
with dropout between layers, and a linear decoder back to the vocabulary; 64 sequences x 128 int64 tokens in
(66 KB), 64 x 128 x 10000 float32 logits out (328 MB).

The recurrence is 2 x 128 dependent steps (cuDNN's persistent kernels in eager); the decoder is a 168 GFLOP GEMM.
"""

import torch
import torch.nn as nn

CATEGORY = "network"

BATCH = 64
SEQUENCE = 128
VOCAB = 10000
EMBED = 512
HIDDEN = 1024
LAYERS = 2


class Model(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.GRU(ninp, nhid, nlayers, dropout=dropout, batch_first=True)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, tokens):
        emb = self.drop(self.encoder(tokens))
        output, _hidden = self.rnn(emb)
        output = self.drop(output)
        return self.decoder(output)


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQUENCE))]


def get_init_inputs():
    return [VOCAB, EMBED, HIDDEN, LAYERS, 0.2]
