"""The metrics step: a suite's scores become every gated value, with the arrays the gate and the
report read (:class:`~pytest_novelty.pipeline.results.SuiteMetrics`). Nothing downstream
recomputes a metric."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pytest_novelty.metrics.table import FAMILIES, family, values_of
from pytest_novelty.pipeline.results import SuiteMetrics, SuiteResult, SuiteScores
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.schema import Suite

NOVELTYBENCH = tuple(name for name, f in FAMILIES.items() if f.per_prompt_only)
"""The families that need several samples per prompt and an equivalence check (NoveltyBench's)."""


def gated_order(suite: Suite) -> int:
    """The n-gram order the suite gates on (its first novelty/originality/coverage threshold's),
    else 5 when scored, else its lowest: the order the report's arrays and plots show."""
    for threshold in suite.thresholds:
        if threshold.base in ("novelty", "top10_novelty", "originality", "coverage") and threshold.arg:
            return int(threshold.arg)
    ngrams = suite.scoring.ngrams
    return 5 if 5 in ngrams else ngrams[0]


def needs_equivalence(suite: Suite, answers: list[list[str]]) -> bool:
    """Whether the suite gates on NoveltyBench's metrics with more than one sample per prompt."""
    return any(t.base in NOVELTYBENCH for t in suite.thresholds) and bool(answers) and len(answers[0]) > 1


def metric_values(result: SuiteResult, metric: str, subset: Sequence[str] | None = None) -> np.ndarray:
    """The values ``metric``'s statistic averages in one result: prompts × samples, or one per prompt
    for NoveltyBench's metrics; for q@Tail and Novelty at Peak only the rows of the prompts ``subset``
    (the frozen tail, the peak) that the result has (None: every prompt's)."""
    fam = family(metric)
    if fam.per_prompt_only:
        return np.asarray(result.measured.per_prompt[metric], dtype=float)
    values = np.asarray(values_of(metric, result.quality, result.originality, result.scores.uniqueness), dtype=float)
    if fam.subset is None or subset is None:
        return values
    index = {p.id: i for i, p in enumerate(result.prompts)}
    return values[[index[i] for i in subset if i in index]]


def frozen_peaks(suite: Suite, gated: list[str]) -> dict[str, list[str]]:
    """The peaks the suite's tail file freezes (``[gate] tail``), for each Novelty at Peak the metrics
    step computes: a gated ``novelty_at_peak@α`` must have its entry there (else one line naming the
    file, exit 4), one reported beside ``q_at_tail@α`` uses it when there is one."""
    if suite.gate.tail is None:
        return {}
    from pytest_novelty.suites.tail_file import has_entry, read_tail_ids

    wanted = {f"novelty_at_peak@{float(m.partition('@')[2]):g}" for m in gated
              if m.startswith(("q_at_tail@", "novelty_at_peak@"))}  # fmt: skip
    return {m: read_tail_ids(suite.gate.tail, m) for m in sorted(wanted)
            if m in gated or has_entry(suite.gate.tail, m)}  # fmt: skip


def measure(
    suite: Suite,
    prompts: list[Prompt],
    answers: list[list[str]],
    scores: SuiteScores,
    *,
    equivalent: Any = None,
    pool_novelty: np.ndarray | None = None,
) -> SuiteMetrics:
    """Every metric of the suite from its scores (:func:`pytest_novelty.metrics.suite.suite_metrics`).

    ``equivalent`` (the suite's equivalence check) enables distinct_k and utility_k; without it
    they are left out. ``pool_novelty`` (prompts × samples originality at n = 4 of a frozen
    reference pool, e.g. the baseline checkpoint) ranks the prompts for q@Tail; without it the
    candidate's own outputs do.
    """
    from pytest_novelty.metrics import gated_novelty
    from pytest_novelty.metrics.consistency import judge_consistency
    from pytest_novelty.metrics.suite import suite_metrics
    from pytest_novelty.metrics.uncertainty import suite_intervals

    gated = [t.metric for t in suite.thresholds if equivalent is not None or t.base not in NOVELTYBENCH]
    values, per_prompt, tails = suite_metrics(
        quality=scores.quality,
        originality=scores.originality,
        prompt_ids=[p.id for p in prompts],
        metrics=gated,
        prompt_novelty=scores.prompt_novelty,
        answers=answers,
        equivalent=equivalent,
        pool_novelty=pool_novelty,
        frozen_peaks=frozen_peaks(suite, gated),
        uniqueness=scores.uniqueness,
    )
    novelty = {n: gated_novelty(scores.quality, orig) for n, orig in scores.originality.items()}
    intervals = suite_intervals(
        quality=scores.quality, originality=scores.originality, metrics=[m for m in gated if m in values],
        per_prompt=per_prompt, prompt_ids=[p.id for p in prompts], tails=tails, confidence=1.0 - suite.gate.alpha,
        uniqueness=scores.uniqueness,
    )  # fmt: skip
    consistency = judge_consistency(scores.judge_samples) if scores.judge_samples else None
    if consistency is not None and not consistency.answers:
        consistency = None  # one sample per answer: nothing to say
    return SuiteMetrics(values, per_prompt, tails, order=gated_order(suite), novelty=novelty, intervals=intervals,
                        judge_consistency=consistency)
