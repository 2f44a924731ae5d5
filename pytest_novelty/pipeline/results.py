"""The typed results of one suite run: answers, then scores, then metrics.

Frozen dataclasses pass between the pipeline's steps (:mod:`~pytest_novelty.pipeline.answers`,
:mod:`~pytest_novelty.pipeline.scores`, :mod:`~pytest_novelty.pipeline.measure`) and on to the gate,
the series and the report; :mod:`~pytest_novelty.pipeline.export` is the one place that turns a
result into JSON (what crosses from an xdist worker and what ``report.json`` holds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_novelty.metrics.bootstrap import Interval
from pytest_novelty.metrics.consistency import JudgeConsistency
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.schema import Suite

HUMAN_REFERENCES = "references"
"""The name a suite's human references are compared under (``[gate] reference = true``), as the
table, the report and a comparison's words say it."""


@dataclass(frozen=True)
class Sweep:
    """The swept setting of one suite run (``[sweep]``): its file, parameter and value."""

    suite: str
    parameter: str
    value: Any


@dataclass(frozen=True)
class GenerationWork:
    """What the generation step did: where, how much was generated and how much came from cache."""

    worker: str = "main"
    device: str = "cache"  # "cache" when every sample came from the cache
    samples: int = 0  # per prompt
    batches: int = 0
    rows: int = 0  # samples generated
    cached_rows: int = 0
    tokens: int = 0
    tokens_per_second: float = 0.0
    seconds: float = 0.0
    read_rows: int = 0  # samples read from answers generated elsewhere (--model answers:FILE)
    read_from: str = ""  # the files they were read from, as the work line names them
    note: str = ""  # what the answers' source has to say in the report (a prompt text it accepted)
    reproducibility: str = ""  # how the generated answers reproduce (the run log)
    varies_with_batch: bool = False  # an answer can change with its batch: the report says so under the suite


@dataclass(frozen=True)
class SuiteAnswers:
    """Prompts and generation: the answers (prompts × samples) one checkpoint gave a suite."""

    suite: Suite
    model: str
    prompts: list[Prompt]
    answers: list[list[str]]
    model_path: str = ""
    identity_id: str = ""
    identity: str = ""  # the checkpoint's human description ("demo @ 01d791a0")
    work: GenerationWork = field(default_factory=GenerationWork)
    sweep: Sweep | None = None


@dataclass(frozen=True)
class SuiteScores:
    """Originality and judge scores of the answers (arrays are prompts × samples, NaN: no value)."""

    originality: dict[int, np.ndarray]  # by n-gram order; NaN: too short for an n-gram
    quality: np.ndarray  # NaN: the judge gave no score
    prompt_novelty: np.ndarray | None = None  # each prompt's own originality at n = 4 (q@Tail)
    judge: str = ""  # the judge's description
    index: str = ""  # the originality backend spec
    units: str = ""  # what the n-grams were counted in
    longest_copied: list[dict[str, Any]] = field(default_factory=list)  # the 3 longest corpus spans
    unscored_reasons: list[list[Any]] = field(default_factory=list)  # [reason, answers], most first
    judge_samples: list[list[float]] = field(default_factory=list)  # per answer (flat), the judge's sample scores
    lookups: int = 0  # texts sent to the originality backend (not from cache)
    judge_requests: int = 0
    seconds_originality: float = 0.0
    seconds_judge: float = 0.0
    uniqueness: dict[int, np.ndarray] = field(default_factory=dict)
    """``uniqueness@L`` by span length L of the Creativity Index's range (NaN: shorter than L);
    empty when the suite gates on none of its metrics."""
    creativity_copied: list[dict[str, Any]] = field(default_factory=list)
    """The answers with the lowest Creativity Index that copied anything, with their copied passages."""


@dataclass(frozen=True)
class SuiteMetrics:
    """Every gated value of a suite, with the arrays the gate and the report read."""

    values: dict[str, float]  # by threshold metric name
    per_prompt: dict[str, list[float]]  # the per-prompt series behind the paired tests
    tail_ids: dict[str, list[str]]  # each q_at_tail@α metric's tail prompts
    order: int  # the n-gram order the suite gates on and the report shows
    novelty: dict[int, np.ndarray]  # per-generation gated novelty by n (too short: 0, unscored: NaN)
    judge_consistency: JudgeConsistency | None = None
    """How consistent the judge is with itself over its samples of one answer (None: one sample each)."""
    intervals: dict[str, Interval] = field(default_factory=dict)
    """Each gated metric's interval at the suite's 1 − α, clustered by prompt
    (:func:`pytest_novelty.metrics.uncertainty.suite_intervals`; q@Tail on the suite's own tail)."""

    @property
    def shares(self) -> dict[str, float]:
        """The coverage and unscored shares the gate reports beside the values."""
        return {k: v for k, v in self.values.items() if k.startswith("coverage@") or k == "unscored"}


@dataclass(frozen=True)
class DenialRound:
    """One round of denial prompting: its number (1-based) and the concepts forbidden per prompt id."""

    number: int
    forbidden: dict[str, list[str]]

    @property
    def counts(self) -> dict[str, int]:
        """The number of forbidden concepts per prompt id."""
        return {i: len(c) for i, c in self.forbidden.items()}


@dataclass(frozen=True)
class SuiteResult:
    """Everything one suite produced for one checkpoint: answers, scores, metrics."""

    generated: SuiteAnswers
    scores: SuiteScores
    measured: SuiteMetrics
    judge_agreement: dict[str, Any] | None = None  # the judge against [scoring] calibration
    denial: DenialRound | None = None
    cache_repaired: int = 0  # damaged cache entries dropped and recomputed during the run

    @property
    def suite(self) -> Suite:
        return self.generated.suite

    @property
    def model(self) -> str:
        return self.generated.model

    @property
    def prompts(self) -> list[Prompt]:
        return self.generated.prompts

    @property
    def answers(self) -> list[list[str]]:
        return self.generated.answers

    @property
    def originality(self) -> dict[int, np.ndarray]:
        return self.scores.originality

    @property
    def quality(self) -> np.ndarray:
        return self.scores.quality

    @property
    def metrics(self) -> dict[str, float]:
        return self.measured.values

    @property
    def per_prompt(self) -> dict[str, list[float]]:
        return self.measured.per_prompt
