"""The generation layer: k sampled answers per prompt from a checkpoint, batched and cached.

Public interface: :class:`Generator` (what a backend implements), :func:`open_generator` (a
backend from a model spec) and :func:`generate` (seeding, batching by length, the on-disk cache
and progress). Heavy libraries are imported only when a model is opened.

Every answer is one *row*: a (prompt, sample index) pair with its own seed, derived from the
checkpoint fingerprint, the prompt text, the sampling settings and the sample index. A backend
draws a row's randomness from that seed alone, so a row's answer does not depend on which other
rows share its batch: the batch size can follow the hardware, a suite can grow by a prompt or a
sample without changing the answers already cached, and a resumed run matches an uninterrupted
one.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from pytest_novelty.storage import atomic_write_json, read_json, stable_hash
from pytest_novelty.suites.schema import GenerationSettings

ModelInput = str | Sequence[dict[str, str]]
StepCallback = Callable[[int, int], None]

GENERATORS = ("hf", "vllm")


class Generator(Protocol):
    """A loaded model that samples continuations."""

    name: str
    fingerprint: str
    tokens_generated: int

    @property
    def device(self) -> str:
        """Where the model runs (resolved when first asked)."""
        ...

    def render(self, model_input: ModelInput) -> str:
        """The exact text the model sees for one input (chat templates applied)."""
        ...

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """The number of prompt tokens of each rendered input."""
        ...

    def max_rows(self, prompt_tokens: int, settings: GenerationSettings) -> int:
        """How many rows of up to ``prompt_tokens`` prompt tokens one batch may hold."""
        ...

    def sample(
        self,
        texts: Sequence[str],
        seeds: Sequence[int],
        settings: GenerationSettings,
        on_step: StepCallback | None = None,
    ) -> list[str]:
        """One continuation (new text only) per row; row ``i`` draws its randomness from ``seeds[i]`` only.

        ``on_step(rows_finished, tokens)`` may be called while the batch runs, for progress.
        """
        ...


def open_generator(
    model: str, *, device: str = "auto", trust_remote_code: bool = False, backend: str = "hf", memo: Any = None
) -> Generator:
    """Load ``model`` (a local Hugging Face folder or a hub id) for sampling with ``backend``.

    ``memo`` remembers the checkpoint's file digests between runs (see :mod:`pytest_novelty.identity`).
    """
    if backend == "vllm":
        from pytest_novelty.generation.vllm import VLLMGenerator

        return VLLMGenerator(model, device=device, trust_remote_code=trust_remote_code, memo=memo)
    if backend != "hf":
        from pytest_novelty.errors import ConfigError, did_you_mean

        raise ConfigError(
            f"unknown generator {backend!r}; use one of {', '.join(GENERATORS)}{did_you_mean(backend, GENERATORS)}",
            field="--generator",
        )
    from pytest_novelty.generation.hf import HFGenerator

    return HFGenerator(model, device=device, trust_remote_code=trust_remote_code, memo=memo)


@dataclass
class Progress:
    """Where a :func:`generate` call stands, passed to its ``on_batch`` callback during and after each batch."""

    rows_done: int
    rows_total: int
    batches_done: int
    batches_total: int
    tokens: int
    seconds: float

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


@dataclass
class GenerationStats:
    """What a :func:`generate` call did: the work a warm rerun should show as zeros."""

    batches: int = 0
    rows: int = 0
    cached_rows: int = 0
    tokens: int = 0
    seconds: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def _identity(settings: GenerationSettings) -> dict[str, object]:
    """The settings that change an answer (not the batch size, not how many samples are asked)."""
    data = asdict(settings)
    del data["batch_size"], data["samples"]
    return data


def prompt_key(fingerprint: str, text: str, settings: GenerationSettings) -> str:
    """The cache key of one prompt's answers: checkpoint content, exact input text, sampling settings."""
    return stable_hash(fingerprint, text, _identity(settings))


def row_seed(key: str, sample: int) -> int:
    """The seed of sample ``sample`` of the prompt whose cache key is ``key`` (63 bits)."""
    return int(stable_hash(key, sample)[:15], 16)


def plan_batches(
    lengths: Sequence[int], rows_allowed: Callable[[int], int], batch_size: int | None = None
) -> list[list[int]]:
    """Group rows (given by their prompt lengths) into batches of similar length.

    Rows are taken in order of length; a batch grows while it holds at most ``batch_size`` rows,
    or, with ``batch_size=None``, at most ``rows_allowed(longest prompt in the batch)``, which a
    backend derives from its memory. Sorting keeps padding small and puts short prompts together.
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    plan: list[list[int]] = []
    current: list[int] = []
    for i in order:
        limit = batch_size if batch_size is not None else max(1, rows_allowed(lengths[i]))
        if current and len(current) >= limit:
            plan.append(current)
            current = []
        current.append(i)
    if current:
        plan.append(current)
    return plan


def generate(
    generator: Generator,
    texts: Sequence[str],
    settings: GenerationSettings,
    *,
    cache_dir: Path | None = None,
    on_batch: Callable[[Progress], None] | None = None,
) -> tuple[list[list[str]], GenerationStats]:
    """Sample ``settings.samples`` answers for every rendered input.

    Each prompt's answers are cached in ``cache_dir`` under :func:`prompt_key` and written
    atomically after every batch, so a rerun (or a run resumed after a crash) generates only the
    rows it lacks. Missing rows are sorted by prompt length and batched (``settings.batch_size``
    rows, or as many as fit when it is 0, meaning auto). Returns the answers in input order and
    what was done.
    """
    start = time.perf_counter()
    stats = GenerationStats()
    keys = [prompt_key(generator.fingerprint, text, settings) for text in texts]
    paths = [None if cache_dir is None else cache_dir / key[:2] / f"{key}.json" for key in keys]
    results: list[list[str]] = []
    stored: list[int] = []  # answers already on disk per prompt (a file is never shortened)
    for path in paths:
        cached = None if path is None else read_json(path)
        have = [str(a) for a in cached] if isinstance(cached, list) else []
        stored.append(len(have))
        results.append(have[: settings.samples])
    todo = [(i, j) for i in range(len(texts)) for j in range(len(results[i]), settings.samples)]
    stats.cached_rows = len(texts) * settings.samples - len(todo)
    if not todo:
        return results, stats
    missing = sorted({i for i, _ in todo})
    counts = dict(zip(missing, generator.token_counts([texts[i] for i in missing]), strict=True))
    plan = plan_batches(
        [counts[i] for i, _ in todo],
        lambda n: generator.max_rows(n, settings),
        settings.batch_size or None,
    )
    tokens_before = generator.tokens_generated

    def report(rows_done: int, batches_done: int, tokens: int) -> None:
        if on_batch is not None:
            on_batch(Progress(rows_done, len(todo), batches_done, len(plan), tokens, time.perf_counter() - start))

    for done, batch in enumerate(plan, start=1):
        rows = [todo[r] for r in batch]
        on_step = functools.partial(_step, report, stats.rows, done - 1, generator.tokens_generated - tokens_before)
        seeds = [row_seed(keys[i], j) for i, j in rows]
        answers = generator.sample([texts[i] for i, _ in rows], seeds, settings, on_step=on_step)
        changed = set()
        for (i, j), answer in sorted(zip(rows, answers, strict=True), key=lambda x: x[0]):
            if j != len(results[i]):  # rows of one prompt arrive in sample order (see plan_batches)
                raise RuntimeError(f"sample {j} of prompt {i} arrived out of order")
            results[i].append(answer)
            changed.add(i)
        for i in sorted(changed):
            path = paths[i]
            if path is not None and len(results[i]) > stored[i]:
                atomic_write_json(path, results[i])
                stored[i] = len(results[i])
        stats.batches += 1
        stats.rows += len(rows)
        report(stats.rows, done, generator.tokens_generated - tokens_before)
    stats.tokens = generator.tokens_generated - tokens_before
    stats.seconds = time.perf_counter() - start
    return results, stats


def _step(
    report: Callable[[int, int, int], None], rows: int, batches: int, tokens: int, finished: int, new: int
) -> None:
    """Progress within a batch: rows and tokens of the earlier batches plus this one's so far."""
    report(rows + finished, batches, tokens + new)
