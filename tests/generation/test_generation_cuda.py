"""The CUDA branch of the decode loop: bf16, batch sizing from the memory, out-of-memory halving.

The ``gpu`` tests run where CUDA is (skipped elsewhere). Where it is not, an out-of-memory
error is raised on purpose by wrapping the real decode loop, to check the halving itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_novelty.generation import Batch
from pytest_novelty.generation.backends import open_generator
from pytest_novelty.suites.schema import GenerationSettings
from tests.generation.tiny_models import FAMILIES, build_family_checkpoint, layer_sizes

TEXTS = ["Lily went to the park.", "Tom had a red ball and", "Mia saw a big dog near the tree. She", "Ben ran."]
# A small but not toy layout: 8 layers, grouped-query attention (8 query heads over 2 key/value heads of 64).
MEDIUM = {**layer_sizes(hidden=512, layers=8, heads=8, positions=1024), "num_key_value_heads": 2, "head_dim": 64}


@pytest.mark.slow
def test_out_of_memory_halves_the_batch_with_the_same_answers_and_progress(
    tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    gen = open_generator(str(tiny_checkpoint), device="cpu")
    settings = GenerationSettings(samples=1, temperature=1.0, max_new_tokens=10)
    texts, seeds = TEXTS * 2, list(range(8))
    whole = gen.sample(Batch(texts, seeds, settings))
    decode = gen._decode
    sizes: list[int] = []

    def tight(batch: Batch) -> list[str]:
        sizes.append(len(batch))
        if len(batch) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (raised by the test)")
        return decode(batch)

    monkeypatch.setattr(gen, "_decode", tight)
    steps: list[tuple[int, int]] = []
    rows: dict[int, str] = {}
    before = gen.tokens_generated
    progress = lambda done, tokens: steps.append((done, tokens))  # noqa: E731
    assert gen.sample(Batch(texts, seeds, settings, on_step=progress, on_row=rows.__setitem__)) == whole
    # Every row reaches the cache callback under its index in the whole batch, across the halves.
    assert [rows[i] for i in range(len(texts))] == whole
    assert sizes == [8, 4, 2, 2, 4, 2, 2]
    # Progress runs on across the halves (never backwards) and ends at every token of the batch.
    assert steps == sorted(steps) and steps[-1][1] == gen.tokens_generated - before
    assert 4 <= steps[-1][0] <= 8  # the second half's rows count after the first half's


@pytest.fixture(scope="module")
def cuda() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")


@pytest.mark.gpu
@pytest.mark.parametrize("family", FAMILIES)
def test_bf16_greedy_on_cuda_equals_generate(cuda: None, family: str, tmp_path: Path, tiny_corpus: list[str]) -> None:
    import torch

    folder = build_family_checkpoint(tmp_path / family, family, tiny_corpus)
    gen = open_generator(str(folder), device="cuda")
    settings = GenerationSettings(samples=1, temperature=0.0, max_new_tokens=16)
    ours = gen.sample(Batch(TEXTS, [0] * len(TEXTS), settings))
    assert gen.model.dtype == torch.bfloat16 and gen.device == "cuda"
    tok = gen.tokenizer
    ends = gen.eos_ids
    for text in TEXTS:  # one row at a time: no batch shapes to differ in bf16
        enc = tok([text], return_tensors="pt", add_special_tokens=False).to("cuda")
        with torch.inference_mode():
            out = gen.model.generate(**enc, do_sample=False, max_new_tokens=16, pad_token_id=tok.pad_token_id)
        ids = out[0, enc["input_ids"].shape[1] :].tolist()
        ids = ids[: next((i for i, t in enumerate(ids) if t in ends), len(ids))]
        assert gen.sample(Batch([text], [0], settings))[0] == tok.decode(ids, skip_special_tokens=True)
    # The batched rows ran too (a random model may end a row at once: not every row need say something).
    assert len(ours) == len(TEXTS) and any(ours)


@pytest.mark.gpu
def test_max_rows_fits_and_the_batch_runs(cuda: None, tmp_path: Path, tiny_corpus: list[str]) -> None:
    """A batch of ``max_rows`` rows at full length fits (capped at 1024 rows by the backend)."""
    import torch

    from pytest_novelty.generation.hf import kv_bytes_per_token

    folder = build_family_checkpoint(tmp_path / "llama", "llama", tiny_corpus, sizes=MEDIUM)
    gen = open_generator(str(folder), device="cuda")
    settings = GenerationSettings(samples=1, temperature=1.0, max_new_tokens=128)
    assert kv_bytes_per_token(gen.model.config, gen.model.dtype) == 2 * 8 * 2 * 64 * 2
    rows = gen.max_rows(16, settings)
    assert 1 <= rows <= 1024
    torch.cuda.reset_peak_memory_stats()
    answers = gen.sample(Batch(["Lily went to the park."] * rows, list(range(rows)), settings))
    assert len(answers) == rows and len(set(answers)) > rows // 2


@pytest.mark.gpu
def test_real_out_of_memory_is_survived_by_halving(cuda: None, tmp_path: Path, tiny_corpus: list[str]) -> None:
    """Cap the process's CUDA memory below what a large batch took: the halves must fit, with the same answers.

    The cap comes from the batch's own measured peak (not from a formula), so it holds whatever the
    allocator's block sizes and the model's retired rows make of the estimate.
    """
    import torch

    folder = build_family_checkpoint(tmp_path / "llama", "llama", tiny_corpus, sizes=MEDIUM)
    gen = open_generator(str(folder), device="cuda")
    settings = GenerationSettings(samples=1, temperature=1.0, max_new_tokens=256)
    texts, seeds = ["Lily went to the park."] * 256, list(range(256))
    gen.sample(Batch(texts[:2], seeds[:2], settings))  # weights and kernels loaded before measuring
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    whole = gen.sample(Batch(texts, seeds, settings))  # uncapped: the batch's peak
    peak = torch.cuda.max_memory_allocated() - base
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    # 40 % of the batch's own working memory: the whole batch (and its halves) cannot fit, a quarter can.
    torch.cuda.set_per_process_memory_fraction((base + 0.4 * peak) / total)
    calls: list[int] = []
    decode = gen._decode

    def counted(*args):  # type: ignore[no-untyped-def]
        calls.append(len(args[0]))
        return decode(*args)

    gen._decode = counted  # a spy: every call runs the real loop
    try:
        answers = gen.sample(Batch(texts, seeds, settings))
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert calls[0] == 256 and len(calls) > 1  # it did run out of memory, and split
    same = sum(a == b for a, b in zip(answers, whole, strict=True))
    # Rows keep their own seeds across the split (a row given another row's seed would almost never
    # match). They are not bit-identical: in bf16 another batch shape rounds differently, and one
    # flipped token changes the rest of a 256-token sample. Measured on an H200: 179 of 256 equal.
    assert same >= 128
