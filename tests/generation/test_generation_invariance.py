"""A row's answer is the same bits whatever shares its batch: the batch size, the order of the
prompts, the shard, the padding, the thread count, on every layout the project builds (GPT-2,
Llama, Qwen2, Mistral with a sliding window shorter than the answers, Gemma).

Each checkpoint is a real transformers model at toy sizes; the reference is one run of all rows in
batches as large as fit, and every other way of splitting the same rows must give the same text
for every (prompt, sample) and the same next-token logits, bit for bit, at every step of every
row (a token changes only when a rounding lands near a sampling boundary; a logit shows every
rounding)."""

from __future__ import annotations

import hashlib
import random
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_novelty.generation import Batch, LoadSettings, generate, sampling
from pytest_novelty.generation.hf import HFGenerator
from pytest_novelty.suites.schema import GenerationSettings
from tests.conftest import build_tiny_checkpoint
from tests.generation.tiny_models import FAMILIES, build_family_checkpoint

pytestmark = pytest.mark.slow

SETTINGS = GenerationSettings(samples=2, temperature=1.0, top_p=0.95, max_new_tokens=28, seed=11)


@pytest.fixture(scope="module", params=("gpt2", *FAMILIES))
def checkpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
               tiny_corpus: list[str]) -> Path:
    folder = tmp_path_factory.mktemp(request.param) / request.param
    if request.param == "gpt2":
        return build_tiny_checkpoint(folder, tiny_corpus)
    return build_family_checkpoint(folder, request.param, tiny_corpus)


@pytest.fixture(scope="module")
def prompts(tiny_corpus: list[str]) -> list[str]:
    """Prompts of 1 to 40 words (so batches pad a lot, and some are narrower than any threshold)."""
    rng = random.Random(5)
    words = " ".join(tiny_corpus[:200]).split()
    return [" ".join(words[(start := rng.randrange(len(words) - 40)) : start + rng.randint(1, 40)]) for _ in range(18)]


def _threads(count: int):  # type: ignore[no-untyped-def]
    import contextlib

    import torch

    @contextlib.contextmanager
    def scope():  # type: ignore[no-untyped-def]
        before = torch.get_num_threads()
        torch.set_num_threads(count)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    return scope()


class Logits:
    """Every row's next-token logits at every step, by the state of the row's random generator
    before its draw (its seed and step: the same key whatever the batch), as a digest of the bytes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: dict[int, str] = {}
        draw = sampling.next_tokens
        filler = random.Random(0)  # the decode loop's generator for rows that only fill a batch
        self.fillers = {hash(filler.getstate()) for _ in range(20_000) if filler.random() >= 0}
        self.fillers.add(hash(random.Random(0).getstate()))

        def spy(logits, rngs, **kwargs):  # type: ignore[no-untyped-def]
            for row, rng in zip(logits.float(), rngs, strict=True):
                key = hash(rng.getstate())
                if key not in self.fillers:
                    self.seen[key] = hashlib.sha256(row.numpy().tobytes()).hexdigest()
            return draw(logits, rngs, **kwargs)

        monkeypatch.setattr(sampling, "next_tokens", spy)

    def take(self) -> dict[int, str]:
        seen, self.seen = self.seen, {}
        return seen


def _answers(generator: HFGenerator, prompts: list[str], logits: Logits, *, batch_size: int = 0,
             order_seed: int | None = None, shards: int = 1) -> tuple[list[list[str]], dict[int, str]]:
    """Every prompt's answers, generated in the given order, shards and batch size, in prompt order,
    and the logits of every step."""
    order = list(range(len(prompts)))
    if order_seed is not None:
        random.Random(order_seed).shuffle(order)
    found: dict[int, list[str]] = {}
    for shard in range(shards):
        part = order[shard::shards]
        out, _ = generate(generator, [prompts[i] for i in part], replace(SETTINGS, batch_size=batch_size))
        found.update(zip(part, out, strict=True))
    return [found[i] for i in range(len(prompts))], logits.take()


def test_every_answer_is_the_same_bits_whatever_the_batching(
    checkpoint: Path, prompts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    logits = Logits(monkeypatch)
    with _threads(2):
        generator = HFGenerator(str(checkpoint), LoadSettings(device="cpu"))
        reference, steps = _answers(generator, prompts, logits)
        ways = {
            "one row at a time": _answers(generator, prompts, logits, batch_size=1),
            "batches of 5": _answers(generator, prompts, logits, batch_size=5),
            "batches of 17, prompts shuffled": _answers(generator, prompts, logits, batch_size=17, order_seed=1),
            "3 shards of shuffled prompts": _answers(generator, prompts, logits, order_seed=2, shards=3),
            "7 shards": _answers(generator, prompts, logits, order_seed=3, shards=7),
        }
    with _threads(1):  # an xdist worker's share of the cores, loaded afresh at that thread count
        ways["one thread"] = _answers(HFGenerator(str(checkpoint), LoadSettings(device="cpu")), prompts, logits,
                                      order_seed=4, shards=2)
    answers = {way: sum(a != b for got, want in zip(out, reference, strict=True)
                        for a, b in zip(got, want, strict=True)) for way, (out, _) in ways.items()}
    rounded = {way: sum(seen.get(key) != digest for key, digest in steps.items()) for way, (_, seen) in ways.items()}
    assert answers == dict.fromkeys(ways, 0)
    assert rounded == dict.fromkeys(ways, 0), f"steps whose logits differ, of {len(steps)}"
    assert all(seen.keys() == steps.keys() for _, seen in ways.values())  # the same rows took the same steps
    assert generator.invariant_attention  # every layout here takes the batch-invariant attention
    assert sum(len(a) > 0 for row in reference for a in row) > len(prompts)  # it generated something to compare


def test_a_row_with_neighbours_of_every_length_is_the_row_alone(checkpoint: Path, prompts: list[str]) -> None:
    """The same seed and prompt, once alone and once among 30 rows of other prompts (long ones pad it,
    short ones finish before it), give the same answer, for a short and a long prompt."""
    generator = HFGenerator(str(checkpoint), LoadSettings(device="cpu"))
    for prompt in (min(prompts, key=len), max(prompts, key=len)):
        alone = generator.sample(Batch([prompt], [123], SETTINGS))
        crowd = [*prompts[:15], prompt, *prompts[15:]]
        seeds = [*range(15), 123, *range(15, len(prompts))]
        assert generator.sample(Batch(crowd, seeds, SETTINGS))[15] == alone[0]


def test_the_checks_made_at_load_are_said(checkpoint: Path) -> None:
    generator = HFGenerator(str(checkpoint), LoadSettings(device="cpu"))
    generator.model  # noqa: B018  # loads, and checks the products' rows
    assert generator.floor in (4, 16, 64, 256) or generator.products.blocks
    assert "rows" in generator.products.description
