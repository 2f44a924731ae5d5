"""Our decode loop against ``model.generate`` on the Llama, Qwen2, Mistral and Gemma layouts.

Each family is a tiny random checkpoint built from its config (grouped-query attention, a chat
template, several end-of-turn ids). Greedy decoding must equal ``model.generate`` token for
token; seeded sampling must follow the same distribution as ``model.generate`` sampling (a
chi-square test at a fixed seed, not equality: the two draw their randomness differently);
end-of-turn ids and stop strings end rows; chat inputs go through the template.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_novelty.generation import Batch, generate
from pytest_novelty.generation.backends import open_generator
from pytest_novelty.suites.schema import GenerationSettings
from tests.generation.tiny_models import EOT, FAMILIES, IM_END, IM_START, build_family_checkpoint, set_end_of_turn_ids

pytestmark = pytest.mark.slow

TEXTS = ["Lily went to the park.", "Tom had a red ball and", "Mia saw a big dog near the tree. She", "Ben ran."]
GREEDY = GenerationSettings(samples=1, temperature=0.0, max_new_tokens=12, batch_size=4, seed=3)


@pytest.fixture(scope="module", params=FAMILIES)
def family_checkpoint(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tiny_corpus: list[str]
) -> Path:
    import torch

    torch.set_num_threads(1)
    return build_family_checkpoint(tmp_path_factory.mktemp(request.param) / request.param, request.param, tiny_corpus)


@pytest.fixture(scope="module")
def generator(family_checkpoint: Path):  # type: ignore[no-untyped-def]
    return open_generator(str(family_checkpoint), device="cpu")


def _reference(generator, texts: list[str], **kwargs) -> list[str]:  # type: ignore[no-untyped-def]
    """``model.generate`` on the same left-padded batch: the new tokens up to the first end-of-turn
    id (which ``generate`` keeps and then pads after), decoded without special tokens."""
    import torch

    tok = generator.tokenizer
    ends = generator.model.generation_config.eos_token_id
    ends = set(ends if isinstance(ends, list) else [ends])
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.inference_mode():
        out = generator.model.generate(**enc, pad_token_id=tok.pad_token_id, **kwargs)
    rows = []
    for row in out[:, enc["input_ids"].shape[1] :].tolist():
        cut = next((i for i, t in enumerate(row) if t in ends), len(row))
        rows.append(str(tok.decode(row[:cut], skip_special_tokens=True)))
    return rows


def test_greedy_equals_generate_token_for_token(generator) -> None:  # type: ignore[no-untyped-def]
    ours = generator.sample(Batch(TEXTS, [0] * len(TEXTS), GREEDY))
    theirs = _reference(generator, TEXTS, do_sample=False, max_new_tokens=GREEDY.max_new_tokens)
    assert ours == theirs
    assert sum(map(bool, ours)) >= len(TEXTS) - 1  # something was generated, so the comparison means something


def test_chat_inputs_render_through_the_template_and_match_generate(generator) -> None:  # type: ignore[no-untyped-def]
    messages = [{"role": "system", "content": "Tell stories."}, {"role": "user", "content": "A story about a cat."}]
    text = generator.render(messages)
    assert text == generator.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.startswith(f"{IM_START}system\nTell stories.{IM_END}") and text.endswith(f"{IM_START}assistant\n")
    # The special tokens of the rendered text are single tokens, as the template means them.
    ids = generator.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids.count(generator.tokenizer.convert_tokens_to_ids(IM_START)) == 3
    ours = generator.sample(Batch([text], [0], GREEDY))
    assert ours == _reference(generator, [text], do_sample=False, max_new_tokens=GREEDY.max_new_tokens)


def test_each_end_of_turn_id_ends_a_row(family_checkpoint: Path, tmp_path: Path) -> None:
    """Make the token that greedy decoding writes third an end-of-turn id (the last of three): rows end there."""
    import shutil

    folder = tmp_path / "ckpt"
    shutil.copytree(family_checkpoint, folder)
    free = open_generator(str(folder), device="cpu")
    tok = free.tokenizer
    enc = tok(TEXTS[:1], return_tensors="pt", add_special_tokens=False)
    import torch

    with torch.inference_mode():
        out = free.model.generate(**enc, do_sample=False, max_new_tokens=8, pad_token_id=tok.pad_token_id)
    new = out[0, enc["input_ids"].shape[1] :].tolist()
    firsts = [i for i in range(len(new)) if new[i] not in new[:i]]  # where a token is written the first time
    stop_at = firsts[-1]
    ends = [tok.eos_token_id, tok.convert_tokens_to_ids(EOT), new[stop_at]]
    set_end_of_turn_ids(folder, ends)
    ended = open_generator(str(folder), device="cpu")
    before = ended.tokens_generated
    answer = ended.sample(Batch(TEXTS[:1], [0], GREEDY))[0]
    assert ended.tokens_generated - before == stop_at  # the end-of-turn token itself is not kept
    assert answer == tok.decode(new[:stop_at], skip_special_tokens=True)
    assert answer == _reference(ended, TEXTS[:1], do_sample=False, max_new_tokens=GREEDY.max_new_tokens)[0]


def test_stop_strings_end_rows(generator) -> None:  # type: ignore[no-untyped-def]
    settings = replace(GREEDY, max_new_tokens=16)
    free = generator.sample(Batch(TEXTS, [0] * len(TEXTS), settings))
    # An ASCII character some answer writes after its first few (token pieces are exact for ASCII).
    row, stop = next((r, c) for r, a in enumerate(free) for c in a[3:] if c.isascii() and c.isprintable() and c != " ")
    before = generator.tokens_generated
    stopped = generator.sample(Batch(TEXTS, [0] * len(TEXTS), replace(settings, stop=(stop,))))
    assert generator.tokens_generated - before < sum(len(generator.tokenizer(a)["input_ids"]) for a in free)
    for a, b in zip(free, stopped, strict=True):
        assert a.startswith(b)
    assert stop in stopped[row] and len(stopped[row]) < len(free[row])


def test_seeded_sampling_follows_the_distribution_of_generate(generator) -> None:  # type: ignore[no-untyped-def]
    """First and second tokens of 1,500 seeded rows against 1,500 ``model.generate`` samples.

    A chi-square test of homogeneity over the tokens both drew (rare ones pooled): with the same
    temperature and top-p, the two samplers must not be told apart at the 0.1 % level. The test
    has power: the same comparison against sampling at another temperature fails.
    """
    import numpy as np
    import torch
    from scipy.stats import chi2_contingency

    rows = 1500
    settings = GenerationSettings(samples=rows, temperature=0.8, top_p=0.9, max_new_tokens=2, seed=11)
    prompt = TEXTS[1]
    ours, _ = generate(generator, [prompt], settings)
    tok = generator.tokenizer
    ours_ids = [tuple(tok(a, add_special_tokens=False)["input_ids"][:1]) for a in ours[0]]

    def theirs(temperature: float) -> list[tuple[int, ...]]:
        torch.manual_seed(0)
        enc = tok([prompt], return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            out = generator.model.generate(
                **enc, do_sample=True, temperature=temperature, top_p=0.9, top_k=0, max_new_tokens=2,
                num_return_sequences=rows, pad_token_id=tok.pad_token_id,
            )  # fmt: skip
        texts = tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        return [tuple(tok(t, add_special_tokens=False)["input_ids"][:1]) for t in texts]

    def p_value(a: list[tuple[int, ...]], b: list[tuple[int, ...]]) -> float:
        keys = sorted(set(a) | set(b))
        table = np.array([[a.count(k) for k in keys], [b.count(k) for k in keys]], dtype=float)
        common = table.sum(0) >= 10
        pooled = np.concatenate([table[:, common], table[:, ~common].sum(1, keepdims=True)], axis=1)
        pooled = pooled[:, pooled.sum(0) > 0]
        assert pooled.shape[1] >= 3, "too few distinct tokens for the test to mean anything"
        return float(chi2_contingency(pooled)[1])

    assert p_value(ours_ids, theirs(0.8)) > 1e-3
    assert p_value(ours_ids, theirs(2.0)) < 1e-3  # power: a different distribution is noticed


def test_cuda_row_budget_counts_kv_heads_and_head_dim(generator) -> None:  # type: ignore[no-untyped-def]
    """The bytes per row behind ``max_rows`` follow the config's kv heads and head_dim, not hidden/heads."""
    from pytest_novelty.generation.hf import kv_bytes_per_token

    text = generator.model.config
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    expected = 2 * text.num_hidden_layers * text.num_key_value_heads * head_dim * 2  # bf16
    import torch

    assert kv_bytes_per_token(text, torch.bfloat16) == expected
