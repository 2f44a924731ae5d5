"""What a suite file holds, as frozen dataclasses, and the values its keys may take.

A suite file names one task, where its prompts come from, how they are put to the model, how
the answers are generated and scored, and the thresholds that gate the checkpoint;
:mod:`pytest_novelty.suites.suite_file` reads and validates one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

SWEEPABLE = ("generation.temperature", "generation.top_p", "generation.top_k", "generation.max_new_tokens",
             "prompting.examples")
PROMPTING_METHODS = ("few-shot", "chat", "ask-novelty", "denial", "novel-examples")
BOUNDED_METRICS = (
    "novelty", "top10_novelty", "originality", "coverage", "quality", "unscored", "q_at_tail", "novelty_overall",
    "novelty_at_peak", "uniqueness",
)  # fmt: skip
COUNT_METRICS = ("distinct_k", "utility_k")
#: The Creativity Index's metrics (``uniqueness@L`` lies in [0, 1] and is also bounded; the index in
#: [0, the number of lengths of ``[scoring] creativity_lengths``]).
CREATIVITY_METRICS = ("creativity_index", "uniqueness")
GATE_AGAINST = ("series-best",)
#: How a threshold case decides given its interval (see :mod:`pytest_novelty.gate.thresholds`).
THRESHOLD_MODES = ("point", "lenient", "strict")


@dataclass(frozen=True)
class PromptSource:
    """Where the prompts come from: ``builtin:story``, ``tinystories:PATH``, ``jsonl:PATH``..."""

    source: str
    limit: int | None = None
    seed: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Prompting:
    """How a prompt becomes model input (see ``pytest_novelty.suites.prompting``)."""

    method: str = "few-shot"
    examples: int = 0
    rounds: int = 3


@dataclass(frozen=True)
class GenerationSettings:
    """Sampling settings; ``samples`` answers per prompt, reproducible from ``seed``."""

    samples: int = 1
    """Answers per prompt (NoveltyBench's k)."""
    temperature: float = 1.0
    """Softmax temperature; 0 decodes greedily."""
    top_p: float = 1.0
    """Nucleus sampling: the smallest set of tokens whose probability reaches ``top_p`` (1: all)."""
    top_k: int = 0
    """Only the ``top_k`` most likely tokens (0: no limit)."""
    max_new_tokens: int = 64
    """The longest answer, in tokens of the model's tokenizer."""
    seed: int = 1234
    """Part of each prompt's cache key, from which every row's own seed derives (see ``generation.row_seed``)."""
    batch_size: int = 0
    """Rows per batch; 0 (``"auto"`` in a suite file): as many as the memory allows."""
    stop: tuple[str, ...] = ()
    """Strings that end an answer; the run sets the task's own (a suite file does not)."""


@dataclass(frozen=True)
class Scoring:
    """How answers are scored: n-gram orders, originality backend, judge and partitioner."""

    ngrams: tuple[int, ...] = (4, 5, 6)
    originality: str = "auto"
    judge: str = "rules"
    judge_samples: int = 5
    judge_temperature: float = 0.7
    equivalence: str = "unigram"
    max_unscored: float = 0.05
    """The largest share of answers the judge may leave unscored before the suite is a harness error."""
    calibration: str | None = None  # human-graded JSON Lines to measure the judge's agreement on
    max_judge_spread: float = 0.25
    """The largest share of answers whose judge samples span 2 points or more before the table warns
    that the judge is inconsistent with itself."""
    creativity_lengths: tuple[int, int] = (5, 12)
    """The shortest and longest span length L (in originality units) the Creativity Index sums
    ``uniqueness@L`` over, both included: the paper's 5 to 12 by default."""

    @property
    def creativity_range(self) -> tuple[int, ...]:
        """Every L of :attr:`creativity_lengths`, ascending."""
        return tuple(range(self.creativity_lengths[0], self.creativity_lengths[1] + 1))


@dataclass(frozen=True)
class GateSettings:
    """Regression settings against a snapshot or a baseline checkpoint."""

    alpha: float = 0.05
    tolerance_abs: float = 0.02
    tolerance_rel: float = 0.0
    reference: bool = False
    min_judge_agreement: float | None = None  # Spearman rho on scoring.calibration that quality gates need
    against: str | None = None  # "series-best": compare with the best earlier checkpoint of --model-series
    tail: Path | None = None  # a frozen q@Tail tail (JSON list of prompt ids) when no snapshot or baseline has one
    threshold_mode: str = "point"  # one of THRESHOLD_MODES: the value, or its interval, against the bound


@dataclass(frozen=True)
class Threshold:
    """One gate: ``metric`` must stay at or above ``min`` or at or below ``max``."""

    metric: str
    op: str  # ">=" or "<="
    value: float
    tolerance_abs: float | None = None
    tolerance_rel: float | None = None

    @property
    def base(self) -> str:
        """The metric family, e.g. ``novelty`` for ``novelty@5``."""
        return self.metric.split("@", 1)[0]

    @property
    def arg(self) -> float | None:
        """The number after ``@`` (an n-gram order or a tail fraction), if any."""
        _, _, arg = self.metric.partition("@")
        return float(arg) if arg else None

    def holds(self, value: float) -> bool:
        """Whether ``value`` satisfies this threshold (NaN never does)."""
        if math.isnan(value):
            return False
        return value >= self.value if self.op == ">=" else value <= self.value

    @property
    def label(self) -> str:
        """``novelty@5>=0.3``: used in test ids and tables."""
        return f"{self.metric}{self.op}{self.value:g}"


@dataclass(frozen=True)
class Suite:
    """A validated suite file."""

    name: str
    task: str
    path: Path
    prompts: PromptSource
    prompting: Prompting
    generation: GenerationSettings
    scoring: Scoring
    gate: GateSettings
    thresholds: tuple[Threshold, ...]
    description: str = ""
    sweep: tuple[str, tuple[float, ...]] | None = None
    sweep_value: float | None = None
    """The swept parameter's value in this run of a ``[sweep]`` suite (None: not a sweep value)."""
    denial_round: int | None = None
    """The 1-based round of a denial-prompting suite (None: not a round)."""
    variants: tuple[Suite, ...] = ()
    family_name: str = ""
    """The suite file's own name when this is one of its runs (a sweep value, a denial round)."""
    repeat: int = 0
    """Which of ``--novelty-repeat`` N independent sets of samples this run draws (0: the run itself)."""
    repeat_of: Suite | None = None
    """The run this one repeats (None for repeat 0)."""

    @property
    def first(self) -> Suite:
        """Repeat 0 of this run: the run itself."""
        return self.repeat_of or self

    @property
    def run_key(self) -> str:
        """What tells this run's results apart from every other's: its name, and its repeat."""
        return self.name if not self.repeat else f"{self.name}#repeat={self.repeat}"

    def repeated(self, index: int) -> Suite:
        """Repeat ``index`` of this run: the same prompts and settings, independent samples (the
        generation seed derived from the repeat, :func:`repeat_seed`); repeat 0 is the run itself."""
        first = self.first
        if index == 0:
            return first
        seed = repeat_seed(first.generation.seed, index)
        return replace(first, repeat=index, repeat_of=first, generation=replace(first.generation, seed=seed))

    @property
    def family(self) -> str:
        """The suite file's name, shared by all its runs: ``story`` for ``story[temperature=0.7]``."""
        return self.family_name or self.name

    @property
    def base_dir(self) -> Path:
        """Relative paths in the suite file are relative to its folder."""
        return self.path.parent

    @property
    def scored_lengths(self) -> tuple[int, ...]:
        """The span lengths L its originality scoring finds match lengths for: the Creativity
        Index's range when a threshold gates on one of its metrics, else none (nothing extra is
        searched)."""
        gated = any(t.base in CREATIVITY_METRICS for t in self.thresholds)
        return self.scoring.creativity_range if gated else ()

    def runs(self) -> tuple[Suite, ...]:
        """What actually runs: one suite per sweep value, or the suite itself."""
        return self.variants or (self,)


def repeat_seed(seed: int, repeat: int) -> int:
    """The generation seed of repeat ``repeat`` of a run seeded ``seed``: ``seed`` itself for repeat
    0 (so its cached answers are reused), else 31 bits of a hash of both (every row's seed, and so
    every answer, then differs)."""
    if repeat == 0:
        return seed
    import hashlib

    return int(hashlib.sha256(f"{seed}/repeat/{repeat}".encode()).hexdigest()[:8], 16) & 0x7FFFFFFF
