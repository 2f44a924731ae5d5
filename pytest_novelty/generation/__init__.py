"""The generation layer: k sampled answers per prompt from a checkpoint, batched and cached.

Public interface: :class:`Generator` (what a backend implements), :func:`open_generator` (a
backend from a model spec) and :func:`generate` (batching by length, seeding, the on-disk cache
and progress). Heavy libraries are imported only when a model is opened.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Protocol

from pytest_novelty.storage import atomic_write_json, read_json, stable_hash
from pytest_novelty.suites.schema import GenerationSettings

ModelInput = str | Sequence[dict[str, str]]
Progress = Callable[[int, int], None]


class Generator(Protocol):
    """A loaded model that samples continuations."""

    name: str
    fingerprint: str

    def render(self, model_input: ModelInput) -> str:
        """The exact text the model sees for one input (chat templates applied)."""
        ...

    def generate(
        self, texts: Sequence[str], settings: GenerationSettings, *, seed: int, progress: bool = False
    ) -> list[list[str]]:
        """``settings.samples`` continuations for each rendered input of one batch."""
        ...


def open_generator(model: str, *, device: str = "auto", trust_remote_code: bool = False) -> Generator:
    """Load ``model`` (a local Hugging Face folder or a hub id) for sampling."""
    from pytest_novelty.generation.hf import HFGenerator

    return HFGenerator(model, device=device, trust_remote_code=trust_remote_code)


def batches(texts: Sequence[str], batch_size: int) -> list[list[int]]:
    """Indices of ``texts`` grouped into batches of similar length (less padding)."""
    order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), texts[i]))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def generate(
    generator: Generator,
    texts: Sequence[str],
    settings: GenerationSettings,
    *,
    cache_dir: Path | None = None,
    on_batch: Progress | None = None,
) -> tuple[list[list[str]], int]:
    """Sample ``settings.samples`` answers for every rendered input.

    Inputs are sorted by length and cut into batches; each batch's seed and cache key derive from
    the checkpoint fingerprint, the batch's texts and the settings, so a rerun (or a run resumed
    after a crash) reproduces the same answers and reads finished batches from ``cache_dir``.
    Returns the answers in input order and the number of batches actually generated.
    """
    results: list[list[str]] = [[] for _ in texts]
    plan = batches(texts, settings.batch_size)
    generated = 0
    for done, index in enumerate(plan, start=1):
        batch = [texts[i] for i in index]
        key = stable_hash(generator.fingerprint, batch, asdict(settings))
        path = None if cache_dir is None else cache_dir / key[:2] / f"{key}.json"
        cached = None if path is None else read_json(path)
        if isinstance(cached, list) and len(cached) == len(batch):
            answers = cached
        else:
            seed = settings.seed + int(key[:8], 16)
            answers = generator.generate(batch, settings, seed=seed)
            generated += 1
            if path is not None:
                atomic_write_json(path, answers)
        for i, sample in zip(index, answers, strict=True):
            results[i] = list(sample)
        if on_batch is not None:
            on_batch(done, len(plan))
    return results, generated
