"""Tiny causal LMs built on the spot (no hub download): a BPE tokenizer trained on the prompts with each whole answer
one token, and a two-layer Llama trained in a few dozen steps to answer each prompt with its token.
"""

from __future__ import annotations

from pathlib import Path

from drtriton_lsp.models import formats

# A target of an op the compiler has no template for (it generates nothing), and a kernel writer's answer for it.
HYPOT = """import torch
from torch import nn


class Hypot(nn.Module):
    def forward(self, x, y):
        return torch.hypot(x, y)


def get_inputs():
    return [torch.randn(4, 64), torch.randn(4, 64)]


def get_init_inputs():
    return []
"""
HYPOT_KERNEL = """import torch
import triton
import triton.language as tl


@triton.jit
def hypot_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.sqrt(x * x + y * y), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        hypot_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
        return out
"""
END_OF_TEXT = "<|endoftext|>"
PADDING = "<|pad|>"
CONTEXT = 1024


def build_tiny_model(
    directory: Path, answers: dict[str, str], *, steps: int = 200, context: int = CONTEXT, heads: int = 4
) -> Path:
    """A checkpoint in `directory` that continues each prompt in `answers` with its answer (then the end line),
    greedily and under sampling; with `steps=0`, an untrained model that writes noise until its `context` is full.
    heads: attention heads over the 64 hidden units (vLLM's CPU attention needs a head size of 32 or more)."""
    import torch
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    completions = [formats.kernel_completion(answer) for answer in answers.values()]
    tokenizer_model = Tokenizer(models.BPE())
    tokenizer_model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer_model.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000, special_tokens=[END_OF_TEXT, PADDING], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer_model.train_from_iterator(list(answers), trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tokenizer_model, eos_token=END_OF_TEXT, pad_token=PADDING)
    # one token per answer (end line included): the model learns one choice per prompt, not hundreds of tokens
    tokenizer.add_tokens([AddedToken(completion, normalized=False, special=False) for completion in completions])
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=heads,
        num_key_value_heads=heads, max_position_embeddings=context, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=None, tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    if steps:
        _memorize(model, tokenizer, answers, steps)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def _memorize(model, tokenizer, answers: dict[str, str], steps: int) -> None:
    """Train on the answers' tokens only (the prompts are context), until each is the model's near-certain text."""
    import torch

    rows, labels = [], []
    for prompt, answer in answers.items():
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(formats.kernel_completion(answer), add_special_tokens=False)["input_ids"]
        answer_ids.append(tokenizer.eos_token_id)
        rows.append(prompt_ids + answer_ids)
        labels.append([-100] * len(prompt_ids) + answer_ids)
    width = max(map(len, rows))
    assert width <= model.config.max_position_embeddings, f"a prompt and its answer take {width} tokens, too many"
    ids = torch.tensor([row + [tokenizer.pad_token_id] * (width - len(row)) for row in rows])
    targets = torch.tensor([label + [-100] * (width - len(label)) for label in labels])
    mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in rows])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _step in range(steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=targets).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.01:
            break
    model.eval()
