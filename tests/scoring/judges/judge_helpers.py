"""Helpers shared by the judge tests: the fake key and tiny checkpoints built on the spot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

SECRET = "sk-test-0123456789abcdefSECRET"

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
WORDS = ["Score:4", "assistant:", "user:", "system:", "story", "Lily", "kite", "flew", "the"]


def tiny_tokenizer(chat_template: str | None = CHAT_TEMPLATE) -> Any:
    """A whitespace word-level tokenizer whose vocabulary holds ``Score:4`` as one token."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[PAD]": 1, "[EOS]": 2}
    for word in WORDS:
        vocab[word] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", eos_token="[EOS]")
    if chat_template is not None:
        fast.chat_template = chat_template
    return fast


def _torch() -> Any:
    """torch on one thread (the tests share a few cores); the test that needs it is skipped without it."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


def _config(tokenizer: Any, **extra: Any) -> Any:
    from transformers import GPT2Config

    return GPT2Config(
        vocab_size=len(tokenizer),
        n_embd=16,
        n_layer=1,
        n_head=2,
        n_positions=1024,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        **extra,
    )


def _constant_output(model: Any, head: Any, row: int, value: float) -> None:
    """Make ``head``'s output ``value`` at ``row`` and 0 elsewhere, whatever the input.

    The final layer norm is set to output the unit vector e0 for every position, and the head
    reads only its first column.
    """
    import torch

    with torch.no_grad():
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.zero_()
        model.transformer.ln_f.bias[0] = 1.0
        head.weight.zero_()
        head.weight[row, 0] = value


def _save(model: Any, tokenizer: Any, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_causal_lm(folder: Path, *, emits: str, chat_template: str | None = CHAT_TEMPLATE) -> Path:
    """A one-layer GPT-2 that emits the token ``emits`` at every step, whatever the prompt."""
    torch = _torch()
    from transformers import GPT2LMHeadModel

    torch.manual_seed(0)
    tokenizer = tiny_tokenizer(chat_template)
    model = GPT2LMHeadModel(_config(tokenizer))
    _constant_output(model, model.lm_head, tokenizer.convert_tokens_to_ids(emits), 50.0)
    return _save(model, tokenizer, folder)


def tiny_reward_model(folder: Path, *, reward: float | None, chat_template: str | None = CHAT_TEMPLATE) -> Path:
    """A one-layer GPT-2 sequence classifier whose first logit is ``reward`` for any input.

    With ``reward=None`` the weights stay random (seeded), so the reward depends on the input.
    """
    torch = _torch()
    from transformers import GPT2ForSequenceClassification

    torch.manual_seed(0)
    tokenizer = tiny_tokenizer(chat_template)
    model = GPT2ForSequenceClassification(_config(tokenizer, num_labels=1))
    if reward is not None:
        _constant_output(model, model.score, 0, reward)
    return _save(model, tokenizer, folder)
