"""The generation layer: k sampled answers per prompt from a checkpoint, batched and cached.

Here: :class:`Generator` (what a backend implements) with the batches and settings it is handed,
and :func:`generate` (seeding, batching by length, the cache, progress); backends are opened by
:func:`~.backends.open_generator`, heavy libraries only then.

Every answer is one *row*, a (prompt, sample index) pair whose seed (:func:`row_seed`) is all the
randomness it draws on, so an answer does not depend on its batch: the batch size can follow the
hardware, a suite can grow without changing cached answers, and a resumed run matches a whole one.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pytest_novelty.infra.cache import Namespace, as_namespace
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.storage import stable_hash
from pytest_novelty.suites.schema import GenerationSettings

if TYPE_CHECKING:
    from pytest_novelty.infra.hashing import Memo
    from pytest_novelty.infra.identity import Identity

ModelInput = str | Sequence[dict[str, str]]
StepCallback = Callable[[int, int], None]
RowCallback = Callable[[int, str], None]
NAMESPACE = "generations"
# 1 was one list per prompt; 2 one entry per (prompt, sample); 3 the same, sampled by batch-invariant
# decoding (an answer of 2 may hold what its batch did to it: never reused, see .invariant).
NAMESPACE_VERSION = 3


@dataclass(frozen=True)
class Batch:
    """One :meth:`Generator.sample` call: row ``i`` is ``texts[i]`` sampled with ``seeds[i]``.

    Backends call the callbacks through :meth:`step` and :meth:`finished`, so the caller keeps each
    answer the moment it exists (a kill loses only the rows in flight).
    """

    texts: Sequence[str]
    """The rendered inputs (:meth:`Generator.render`), one per row; the k samples of a prompt repeat its text."""
    seeds: Sequence[int]
    """One seed per row (:func:`row_seed`)."""
    settings: GenerationSettings
    """How to sample (``samples`` and ``batch_size`` are the caller's: every row is one answer)."""
    on_step: StepCallback | None = None
    """``on_step(rows_finished, tokens)``, for progress: any number of times, never going backwards."""
    on_row: RowCallback | None = None
    """``on_row(i, text)``: once per row, as soon as row ``i`` is finished (in any order), with the
    text the returned list will hold at ``i``; a backend that learns of rows only at the end calls
    it then."""
    samples: Sequence[int] = ()
    """Which sample of its prompt each row is, for :class:`RecordedAnswers`; empty when not said."""

    def __post_init__(self) -> None:
        if len(self.texts) != len(self.seeds):
            raise ValueError(f"a batch needs one seed per row: {len(self.texts)} texts, {len(self.seeds)} seeds")
        if self.samples and len(self.samples) != len(self.texts):
            raise ValueError(f"a batch names every row's sample or none: {len(self.texts)} texts, "
                             f"{len(self.samples)} samples")

    def __len__(self) -> int:
        return len(self.texts)

    def step(self, rows_finished: int, tokens: int) -> None:
        if self.on_step is not None:
            self.on_step(rows_finished, tokens)

    def finished(self, row: int, text: str) -> None:
        if self.on_row is not None:
            self.on_row(row, text)

    def part(self, start: int, stop: int, *, tokens_before: int = 0) -> Batch:
        """Rows ``start:stop`` as a batch whose callbacks speak in this batch's terms (row ``i`` is
        ``start + i``; progress counts ``start`` rows and ``tokens_before`` tokens done before it):
        for a backend that splits a batch, e.g. in halves after running out of memory."""
        on_step, on_row = self.on_step, self.on_row
        return Batch(
            self.texts[start:stop],
            self.seeds[start:stop],
            self.settings,
            None if on_step is None else lambda rows, new: on_step(start + rows, tokens_before + new),
            None if on_row is None else lambda i, text: on_row(start + i, text),
            self.samples[start:stop],
        )


DTYPES = {"auto": "", "bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
"""The ``dtype`` choices and the torch / vLLM names they stand for (``auto``: the backend's choice)."""


@dataclass(frozen=True)
class LoadSettings:
    """How a local checkpoint is loaded (``--generator hf`` or ``vllm``)."""

    device: str = "auto"
    """``auto`` (CUDA when there is one, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``."""
    trust_remote_code: bool = False
    """Whether a checkpoint may run the Python code it ships (``auto_map``)."""
    gpus: int = 1
    """GPUs one model is spread over: accelerate's device map for ``hf``, tensor parallelism for ``vllm``."""
    base_model: str | None = None
    """The base checkpoint under a PEFT adapter folder (None: the one its adapter config names)."""
    dtype: str = "auto"
    """Weights' type: ``auto`` (bfloat16 on CUDA, float32 on the CPU), ``bf16``, ``fp16`` or ``fp32``."""
    placement: Mapping[str, Any] | None = None
    """``hf`` only: the caller's ``from_pretrained`` placement (a ``device_map``,
    :func:`~pytest_novelty.generation.devices.shard_placement`), used instead of ``gpus``."""
    memo: Memo | None = None
    """Remembers the checkpoint's file digests between runs (:mod:`pytest_novelty.infra.identity`)."""
    batch_invariant: bool = True
    """``hf`` only: forward passes whose rows do not depend on their batch (:mod:`.invariant`);
    off only to measure what it costs."""

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ConfigError(f"unknown dtype {self.dtype!r}; use one of {', '.join(DTYPES)}", field="--dtype")


class Generator(Protocol):
    """A loaded model that samples continuations, registered in :data:`~.backends.GENERATOR_BACKENDS`
    (a local checkpoint, ``factory(model, load)``) or :data:`~.backends.MODEL_SOURCES` (a served model)."""

    name: str
    identity_id: str
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

    def sample(self, batch: Batch) -> list[str]:
        """One continuation (new text only) per row of ``batch``, in its order, each from its own seed."""
        ...


@dataclass(frozen=True)
class Reproducibility:
    """How far a source's answers depend on the weights, the prompt, the settings and the seed only."""

    batch_invariant: bool
    """Whether a row's answer is the same whatever shares its batch (its size, its padding, the shard)."""
    how: str
    """What the run log says of it (and, where not invariant, the report under the suite)."""


@runtime_checkable
class Reproducible(Protocol):
    """A source that says how its answers reproduce (every local and served model does; files of
    answers are what they are)."""

    @property
    def reproducibility(self) -> Reproducibility: ...


@runtime_checkable
class Identified(Protocol):
    """A generator that knows what it generates from by content: a checkpoint's files, a hub
    revision, the files of answers (a served model does not: its server cannot prove its weights)."""

    identity: Identity
    """The content identity; its description is what the report and the messages name."""


def identity_description(generator: Generator) -> str | None:
    """What messages name ``generator`` by (``ckpt @ 1a2b3c4d``); None when it is not :class:`Identified`."""
    return generator.identity.description if isinstance(generator, Identified) else None


@dataclass(frozen=True)
class PromptRequest:
    """What one suite run asks of a :class:`RecordedAnswers` source: its prompts, the exact text the
    suite sends for each, and how the suite samples them."""

    run: str
    """The suite run (``Suite.run_key``: ``story``, ``story[temperature=0.7]``, ``story#repeat=1``)."""
    repeat: int
    """Which ``--novelty-repeat`` run this is (0: the run itself)."""
    ids: Sequence[str]
    """The prompt ids, in the suite's order."""
    texts: Sequence[str]
    """Each prompt's model input as the source renders it (:meth:`Generator.render`)."""
    settings: GenerationSettings
    """The run's sampling settings as a model would be sampled: its seed, the task's stop strings."""


@runtime_checkable
class RecordedAnswers(Protocol):
    """A source whose answers exist already (read from files), not a model: the pipeline hands it a
    run's prompts first (:meth:`check_prompts`), and :func:`generate` reads every row through
    :meth:`Generator.sample` and caches nothing (the files are the store and the identity_id)."""

    source: str
    """The files, as the run log names them (``answers.jsonl``, ``lm-eval/ (3 files)``)."""
    answered: Mapping[str, frozenset[str]]
    """Each checked suite run's prompt ids that have answers: all of its prompts, or, where the source
    may gate a subset (``?only_answered=true``), the ones the files cover."""

    def check_prompts(self, request: PromptRequest) -> str:
        """Raise :class:`~pytest_novelty.infra.errors.ConfigError` naming the prompt and the file unless
        every prompt has its answers as the suite would generate them; return a note for the report, or ''."""
        ...


def is_recorded(generator: object) -> bool:
    """Whether ``generator`` reads answers that exist already (:class:`RecordedAnswers`)."""
    return isinstance(generator, RecordedAnswers)


@dataclass
class Throughput:
    """Tokens generated and the seconds they took."""

    tokens: int = 0
    seconds: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


@dataclass(kw_only=True)
class Progress(Throughput):
    """Where a :func:`generate` call stands, for its ``on_batch`` callback."""

    rows_done: int
    rows_total: int
    batches_done: int
    batches_total: int


@dataclass
class GenerationStats(Throughput):
    """What a :func:`generate` call did: the work a warm rerun should show as zeros."""

    batches: int = 0
    """Batches handed to the backend."""
    rows: int = 0
    """Rows (prompt, sample) generated."""
    cached_rows: int = 0
    """Rows read from the cache instead."""
    read_rows: int = 0
    """Rows read from a :class:`RecordedAnswers` source (nothing generated, nothing cached)."""


def _identity(settings: GenerationSettings) -> dict[str, object]:
    """The settings that change an answer (not the batch size, not how many samples are asked)."""
    data = asdict(settings)
    del data["batch_size"], data["samples"]
    return data


def prompt_key(identity_id: str, text: str, settings: GenerationSettings) -> str:
    """The cache key of one prompt's answers: checkpoint content, exact input text, sampling settings."""
    return stable_hash(identity_id, text, _identity(settings))


def row_seed(key: str, sample: int) -> int:
    """The seed of sample ``sample`` of the prompt whose cache key is ``key`` (63 bits)."""
    return int(stable_hash(key, sample)[:15], 16)


def plan_batches(
    lengths: Sequence[int], rows_allowed: Callable[[int], int], batch_size: int | None = None
) -> list[list[int]]:
    """Group rows (given by their prompt lengths) into batches of similar length, in order of length
    (little padding): at most ``batch_size`` rows each, or, with None, ``rows_allowed(longest prompt)``."""
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


def _row_key(key: str, sample: int) -> str:
    """The cache key of one row: its prompt's key and its sample index."""
    return f"{key}/{sample}"


def _cache(cache_dir: Namespace | Path | None) -> Namespace | None:
    return as_namespace(cache_dir, version=NAMESPACE_VERSION, validate=lambda value: isinstance(value, str))


def _cached(cache: Namespace | None, keys: Sequence[str], samples: int) -> list[list[str | None]]:
    """Each prompt's cached answers (None where a row is not cached)."""
    return [[None if cache is None else cache.get(_row_key(key, j)) for j in range(samples)] for key in keys]


def rows_missing(
    generator: Generator, texts: Sequence[str], settings: GenerationSettings, cache_dir: Namespace | Path | None
) -> int:
    """How many rows :func:`generate` would hand ``generator`` (0 for :class:`RecordedAnswers`); reads
    the cache only, so a run can tell before it loads a model whether it needs one."""
    if is_recorded(generator):
        return 0
    keys = [prompt_key(generator.identity_id, text, settings) for text in texts]
    return sum(answer is None for row in _cached(_cache(cache_dir), keys, settings.samples) for answer in row)


def uncached_prompts(keys: Sequence[str], samples: int, cache_dir: Namespace | Path) -> list[int]:
    """The indices of the prompts (by :func:`prompt_key`) that lack any of their rows in the cache."""
    found = _cached(_cache(cache_dir), keys, samples)
    return [i for i, rows in enumerate(found) if any(answer is None for answer in rows)]


def generate(
    generator: Generator,
    texts: Sequence[str],
    settings: GenerationSettings,
    *,
    cache_dir: Namespace | Path | None = None,
    on_batch: Callable[[Progress], None] | None = None,
    on_work: Callable[[int], None] | None = None,
    on_missing: Callable[[Sequence[str], Sequence[int]], None] | None = None,
) -> tuple[list[list[str]], GenerationStats]:
    """Sample ``settings.samples`` answers for every rendered input; returns them in input order, and
    what was done. A :class:`RecordedAnswers` source is read instead (:func:`read_recorded`).

    Each row is cached on its own the moment the backend finishes it, so a rerun or a resumed run
    generates only the rows it lacks; a row another process stored first is used (first writer wins).
    ``batch_size`` 0 means as many rows as fit. Before the backend is asked anything, and only when a
    row is missing: ``on_missing(keys, prompts)`` with every :func:`prompt_key` and the inputs that lack
    a row (it may raise: a merge run whose shards did not bring every answer), then ``on_work(rows)``
    with the rows to generate (the caller can say that the model loads).
    """
    if is_recorded(generator):
        return read_recorded(generator, texts, settings)
    start = time.perf_counter()
    cache = _cache(cache_dir)
    keys = [prompt_key(generator.identity_id, text, settings) for text in texts]
    found = _cached(cache, keys, settings.samples)
    todo = [(i, j) for i in range(len(texts)) for j in range(settings.samples) if found[i][j] is None]
    stats = GenerationStats(cached_rows=len(texts) * settings.samples - len(todo))
    if todo:
        if on_missing is not None:
            on_missing(keys, sorted({i for i, _ in todo}))
        if on_work is not None:
            on_work(len(todo))

        def keep(i: int, j: int, text: str) -> None:
            if found[i][j] is None:
                found[i][j] = text if cache is None else str(cache.put(_row_key(keys[i], j), text))

        _generate_rows(generator, texts, keys, todo, settings, keep, stats, on_batch, start)
    return [[str(a) for a in row] for row in found], stats


def _generate_rows(
    generator: Generator,
    texts: Sequence[str],
    keys: Sequence[str],
    todo: Sequence[tuple[int, int]],
    settings: GenerationSettings,
    keep: Callable[[int, int, str], None],
    stats: GenerationStats,
    on_batch: Callable[[Progress], None] | None,
    start: float,
) -> None:
    """:func:`generate`'s work on the rows ``todo``: ``keep(i, j, text)`` receives each answer as soon
    as the backend has it, and ``stats`` counts the work (seconds since ``start``)."""
    missing = sorted({i for i, _ in todo})
    counts = dict(zip(missing, generator.token_counts([texts[i] for i in missing]), strict=True))
    plan = plan_batches(
        [counts[i] for i, _ in todo], lambda n: generator.max_rows(n, settings), settings.batch_size or None
    )
    tokens_before = generator.tokens_generated

    def report(rows_done: int, batches_done: int, tokens: int) -> None:
        if on_batch is not None:
            on_batch(Progress(rows_done=rows_done, rows_total=len(todo), batches_done=batches_done,
                              batches_total=len(plan), tokens=tokens, seconds=time.perf_counter() - start))

    for done, batch in enumerate(plan, start=1):
        rows = [todo[r] for r in batch]

        def finished(slot: int, text: str, rows: list[tuple[int, int]] = rows) -> None:
            keep(*rows[slot], text)

        on_step = functools.partial(_step, report, stats.rows, done - 1, generator.tokens_generated - tokens_before)
        seeds = [row_seed(keys[i], j) for i, j in rows]
        answers = generator.sample(
            Batch([texts[i] for i, _ in rows], seeds, settings, on_step, finished, [j for _, j in rows])
        )
        for slot, answer in enumerate(answers):
            finished(slot, answer)  # rows a backend did not report one by one
        stats.batches += 1
        stats.rows += len(rows)
        report(stats.rows, done, generator.tokens_generated - tokens_before)
    stats.tokens = generator.tokens_generated - tokens_before
    stats.seconds = time.perf_counter() - start


def read_recorded(
    source: Generator, texts: Sequence[str], settings: GenerationSettings
) -> tuple[list[list[str]], GenerationStats]:
    """Every row of ``texts`` read from a :class:`RecordedAnswers` source in one batch that names each
    row's sample index (nothing is cached: a rerun reads the files again)."""
    start = time.perf_counter()
    rows = [(i, j) for i in range(len(texts)) for j in range(settings.samples)]
    keys = [prompt_key(source.identity_id, text, settings) for text in texts]
    seeds = [row_seed(keys[i], j) for i, j in rows]
    answers = source.sample(Batch([texts[i] for i, _ in rows], seeds, settings, samples=[j for _, j in rows]))
    if len(answers) != len(rows):
        raise ValueError(f"{source.name} answered {len(answers)} of {len(rows)} rows")
    found: list[list[str]] = [["" for _ in range(settings.samples)] for _ in texts]
    for (i, j), answer in zip(rows, answers, strict=True):
        found[i][j] = str(answer)
    return found, GenerationStats(read_rows=len(rows), seconds=time.perf_counter() - start)


def _step(
    report: Callable[[int, int, int], None], rows: int, batches: int, tokens: int, finished: int, new: int
) -> None:
    """Progress within a batch: rows and tokens of the earlier batches plus this one's so far."""
    report(rows + finished, batches, tokens + new)
