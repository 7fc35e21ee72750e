"""Transformer: BERT's input embeddings: word, position and token-type lookups (nn.Embedding gathers) summed,
LayerNorm, dropout; 64 x 512 int64 token ids in (262 KB, plus the token types), a 30522 x 768 float32 vocabulary
(94 MB) and 64 x 512 x 768 out (101 MB).

Three gathers and two adds before a row normalisation: eager writes each intermediate; fused, one pass.
"""

import torch
import torch.nn as nn

CATEGORY = "transformer"

BATCH = 64
SEQUENCE = 512
VOCAB = 30522
HIDDEN = 768
MAX_POSITIONS = 512
TYPE_VOCAB = 2


class Model(nn.Module):
    def __init__(self, vocab_size, hidden_size, max_position_embeddings, type_vocab_size):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=0)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer(
            "position_ids", torch.arange(max_position_embeddings).expand((1, -1)), persistent=False
        )
        with torch.no_grad():
            self.LayerNorm.weight.uniform_(0.5, 1.5)
            self.LayerNorm.bias.uniform_(-0.5, 0.5)

    def forward(self, input_ids, token_type_ids):
        seq_length = input_ids.size(1)
        position_ids = self.position_ids[:, :seq_length]

        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        embeddings += self.position_embeddings(position_ids)
        embeddings = self.LayerNorm(embeddings)
        embeddings = self.dropout(embeddings)
        return embeddings


def get_inputs():
    return [
        torch.randint(0, VOCAB, (BATCH, SEQUENCE)),
        torch.randint(0, TYPE_VOCAB, (BATCH, SEQUENCE)),
    ]


def get_init_inputs():
    return [VOCAB, HIDDEN, MAX_POSITIONS, TYPE_VOCAB]
