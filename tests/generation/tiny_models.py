"""Tiny random checkpoints of the modern decoder layouts (Llama, Qwen2, Mistral, Gemma), built in the test.

Each one is a real transformers model made from its own config class at toy sizes (grouped-query
attention: fewer key/value heads than query heads; an explicit head_dim where the family has one),
with a byte-level BPE tokenizer trained here, a ChatML-style chat template, and a generation
config that lists several end-of-turn ids, as instruct checkpoints do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EOS = "</s>"
BOS = "<s>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
EOT = "<|eot|>"
CHAT_TEMPLATE = (
    "{% for m in messages %}" + IM_START + "{{ m['role'] }}\n{{ m['content'] }}" + IM_END + "\n{% endfor %}"
    "{% if add_generation_prompt %}" + IM_START + "assistant\n{% endif %}"
)
FAMILIES = ("llama", "qwen2", "mistral", "gemma")


def layer_sizes(hidden: int, layers: int, heads: int, positions: int) -> dict[str, int]:
    """The size fields that transformers' decoder and encoder configs name alike, for a model of
    ``layers`` blocks of width ``hidden`` with ``heads`` attention heads, a feed-forward layer twice as
    wide, and room for ``positions`` tokens."""
    return {
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "max_position_embeddings": positions,
    }


def _config(family: str, vocab: int, ids: dict[str, int], sizes: dict[str, int] | None = None) -> Any:
    import transformers

    common: dict[str, Any] = dict(
        vocab_size=vocab,
        **layer_sizes(hidden=32, layers=2, heads=4, positions=256),
        num_key_value_heads=2,
        bos_token_id=ids[BOS],
        eos_token_id=ids[EOS],
        pad_token_id=ids[EOS],
        initializer_range=0.2,  # peaked next-token distributions, so sampling tests have power
        tie_word_embeddings=False,
    )
    common.update(sizes or {})
    if family == "llama":
        return transformers.LlamaConfig(**common)
    if family == "qwen2":
        return transformers.Qwen2Config(**common)
    if family == "mistral":
        return transformers.MistralConfig(**common, sliding_window=16)
    if family == "gemma":
        return transformers.GemmaConfig(**{"head_dim": 16, **common, "tie_word_embeddings": True})
    raise ValueError(family)


def train_tokenizer(corpus: list[str]) -> Any:
    """A byte-level BPE with the special tokens of a chat model, and a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=[EOS, BOS, IM_START, IM_END, EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS,
        bos_token=BOS,
        unk_token=EOS,
        pad_token=EOS,
        additional_special_tokens=[IM_START, IM_END, EOT],
        padding_side="left",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_family_checkpoint(
    folder: Path, family: str, corpus: list[str], *, seed: int = 0, sizes: dict[str, int] | None = None
) -> Path:
    """Save a tiny random ``family`` model with its tokenizer; the generation config ends a turn on
    any of ``</s>``, ``<|im_end|>`` and ``<|eot|>``. ``sizes`` overrides config fields (larger models)."""
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = train_tokenizer(corpus)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in (EOS, BOS, IM_START, IM_END, EOT)}
    config = _config(family, len(tokenizer), ids, sizes)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config.eos_token_id = [ids[EOS], ids[IM_END], ids[EOT]]
    model.generation_config.pad_token_id = ids[EOS]
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def set_end_of_turn_ids(folder: Path, ids: list[int]) -> None:
    """Rewrite the checkpoint's generation config to end turns on ``ids``."""
    path = folder / "generation_config.json"
    data = json.loads(path.read_text())
    data["eos_token_id"] = ids
    path.write_text(json.dumps(data))
