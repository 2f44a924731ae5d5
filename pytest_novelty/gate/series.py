"""A checkpoint series compared as the gate compares: per checkpoint the gated metrics, and the
paired change of each from the previous checkpoint.

Each suite of a series run (:mod:`pytest_novelty.pipeline.series` finds the checkpoints) gets one
entry per checkpoint, in step order: the gated metrics, the suite means of quality, originality and
novelty, and the change of each gated metric from the previous checkpoint. Every value is measured
as the gate measures the candidate's case: q@Tail on the one frozen tail the case was judged on
(the same prompts for every checkpoint, never each checkpoint's own tail, which would compare two
different prompt sets under one name), and every change is
:func:`pytest_novelty.gate.regression.compare` on two
:func:`~pytest_novelty.gate.regression.result_record` records: the paired bootstrap of the gated
statistic itself (the top-10 % mean resampled from the per-generation values for
``top10_novelty``), with the suite's tolerance and α, exactly as a snapshot regression. The best
earlier checkpoint of ``[gate] against = "series-best"`` is chosen the same way
(:func:`pytest_novelty.gate.case.best_earlier`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_novelty.gate.regression import FrozenTail, compare, result_record

if TYPE_CHECKING:
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.pipeline.series import Checkpoint
    from pytest_novelty.suites.schema import Threshold

__all__ = ["paired_change", "suite_series"]


def _finite(value: Any) -> float | None:
    return None if value is None or not math.isfinite(float(value)) else round(float(value), 6)


def paired_change(
    before: SuiteResult, after: SuiteResult, threshold: Threshold, tail: FrozenTail | None = None
) -> dict[str, Any]:
    """``after`` against ``before`` on one gated metric, as a regression check of the gate would see
    it (see the module doc): ``delta`` (after − before), the ``ci`` of the change of the gated
    statistic at the suite's 1 − α, ``p_value``, ``n_pairs``, ``status`` and ``test`` (which
    statistic the bootstrap resampled)."""
    comparison = compare(result_record(before, threshold, tail=tail), result_record(after, threshold, tail=tail))
    return {
        "delta": _finite(comparison.delta),
        "ci": None if comparison.ci is None else [_finite(comparison.ci[0]), _finite(comparison.ci[1])],
        "p_value": _finite(comparison.p_value),
        "n_pairs": comparison.n_pairs,
        "status": comparison.status,
        "test": comparison.test or None,
    }


def _means(result: SuiteResult) -> dict[str, float | None]:
    import numpy as np

    ngrams = result.suite.scoring.ngrams
    n = 5 if 5 in ngrams else ngrams[0]
    out: dict[str, float | None] = {}
    for name, values in (
        ("quality", np.asarray(result.quality, dtype=float)),
        (f"originality@{n}", np.asarray(result.originality[n], dtype=float)),
        (f"novelty@{n}", np.asarray(result.measured.novelty[n], dtype=float)),
    ):
        present = values[~np.isnan(values)]
        out[name] = _finite(present.mean()) if present.size else None
    return out


def suite_series(
    results: Sequence[tuple[Checkpoint, SuiteResult]], tails: Mapping[str, Sequence[str]] | None = None
) -> list[dict[str, Any]]:
    """One JSON-ready entry per checkpoint, in step order: step, model, the gated ``metrics``, the
    ``means`` of quality, originality and novelty, the ``change`` of each gated metric from the
    previous checkpoint (None for the first), and the generation work the checkpoint took.

    ``tails`` maps each q@Tail metric to the frozen tail its case was judged on (the prompt ids);
    without one, the candidate's (the newest checkpoint's) own tail is the frozen one, as the gate
    would take it.
    """
    ordered = sorted(results, key=lambda pair: pair[0].step)
    frozen: dict[str, FrozenTail] = {}
    if ordered:
        newest = ordered[-1][1]
        for threshold in newest.suite.thresholds:
            if threshold.base == "q_at_tail":
                ids = (tails or {}).get(threshold.metric) or newest.measured.tail_ids.get(threshold.metric) or []
                frozen[threshold.metric] = FrozenTail(list(ids), "candidate")
    entries = []
    previous: SuiteResult | None = None
    for checkpoint, result in ordered:
        thresholds = result.suite.thresholds
        values = {}
        for t in thresholds:
            values[t.metric] = _finite(result_record(result, t, tail=frozen.get(t.metric)).value)
        entries.append(
            {
                "step": checkpoint.step,
                "model": checkpoint.path,
                "metrics": values,
                "means": _means(result),
                "change": None
                if previous is None
                else {t.metric: paired_change(previous, result, t, frozen.get(t.metric)) for t in thresholds},
                "generated_rows": result.generated.work.rows,
                "cached_rows": result.generated.work.cached_rows,
            }
        )
        previous = result
    return entries
