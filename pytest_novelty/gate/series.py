"""A checkpoint series compared as the gate compares: per checkpoint the gated metrics, and the
paired change of each from the previous checkpoint.

Each suite of a series run (:mod:`pytest_novelty.pipeline.series` finds the checkpoints) gets one
entry per checkpoint, in step order: the gated metrics, the suite means of quality, originality and
novelty, and the change of each gated metric from the previous checkpoint. Every value is measured
as the gate measures the candidate's case: q@Tail on the one frozen tail the case was judged on
(the same prompts for every checkpoint, never each checkpoint's own tail, which would compare two
different prompt sets under one name), and every change is
:func:`pytest_novelty.gate.regression.compare` on two
:func:`~pytest_novelty.gate.regression.result_record` records: the paired sign-flip test of the gated
statistic itself (the top-10 % mean resampled from the per-generation values for
``top10_novelty``), with the suite's tolerance and α, exactly as a snapshot regression. The best
earlier checkpoint of ``[gate] against = "series-best"`` is chosen the same way
(:func:`pytest_novelty.gate.case.best_earlier`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pytest_novelty.gate.regression import MetricRecord, compare, result_record
from pytest_novelty.gate.tail import tail_value
from pytest_novelty.infra.storage import json_float

if TYPE_CHECKING:
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.pipeline.series import Checkpoint

__all__ = ["on_tail", "series_entries", "series_part", "suite_series"]


def on_tail(record: MetricRecord, tail: Sequence[str] | None) -> MetricRecord:
    """``record`` as the case that froze ``tail`` measures it: a q@Tail record's value is
    :func:`~pytest_novelty.gate.tail.tail_value` of its per-prompt quality, and it carries the tail;
    any other record, or no tail, is returned as it is."""
    if tail is None or not record.metric.startswith("q_at_tail@"):
        return record
    value, _ = tail_value(record.per_prompt, tail)
    return replace(record, value=None if math.isnan(value) else value, tail_ids=list(tail))


def series_part(result: SuiteResult) -> dict[str, Any]:
    """One checkpoint's part of its suite's series, JSON-ready (it may cross from the xdist worker that
    generated it to the controller, which puts the series together): each gated metric's record (what
    any comparison of it reads), the suite means, and the generation work."""
    return {
        "records": {t.metric: json.loads(result_record(result, t).to_json()) for t in result.suite.thresholds},
        "means": _means(result),
        "generated_rows": result.generated.work.rows,
        "cached_rows": result.generated.work.cached_rows,
    }


def _comparison(before: MetricRecord, after: MetricRecord) -> dict[str, Any]:
    """``after`` against ``before`` as a regression check of the gate would see it: ``delta``, the
    ``delta_ci`` of the gated statistic's change at the suite's 1 − α, ``p_value``, ``n_pairs``,
    ``status`` and ``test`` (which statistic the bootstrap resampled)."""
    comparison = compare(before, after, against="previous checkpoint")
    ci = comparison.delta_ci
    return {
        "delta": json_float(comparison.delta),
        "delta_ci": None if ci is None else [json_float(ci[0]), json_float(ci[1])],
        "p_value": json_float(comparison.p_value),
        "n_pairs": comparison.n_pairs,
        "status": comparison.status,
        "test": comparison.test or None,
    }


def series_entries(
    parts: Sequence[tuple[Checkpoint, Mapping[str, Any]]], tails: Mapping[str, Sequence[str]] | None = None
) -> list[dict[str, Any]]:
    """One JSON-ready entry per checkpoint, in step order, from each checkpoint's :func:`series_part`:
    step, model, the gated ``metrics``, the ``means`` of quality, originality and novelty, the
    ``change`` of each gated metric from the previous checkpoint (None for the first), and the
    generation work the checkpoint took.

    ``tails`` maps each q@Tail metric to the frozen tail its case was judged on (the prompt ids);
    without one, the newest checkpoint's own tail is the frozen one, as the gate would take it.
    """
    ordered = sorted(parts, key=lambda pair: pair[0].step)
    if not ordered:
        return []
    newest = ordered[-1][1]["records"]
    frozen = {
        metric: list((tails or {}).get(metric) or record.get("tail_ids") or [])
        for metric, record in newest.items()
        if metric.startswith("q_at_tail@")
    }
    entries: list[dict[str, Any]] = []
    previous: dict[str, MetricRecord] | None = None
    for checkpoint, part in ordered:
        records = {m: on_tail(MetricRecord.from_json(json.dumps(r)), frozen.get(m)) for m, r in part["records"].items()}
        entries.append(
            {
                "step": checkpoint.step,
                "model": checkpoint.path,
                "metrics": {m: json_float(r.value) for m, r in records.items()},
                "means": dict(part["means"]),
                "change": None
                if previous is None
                else {m: _comparison(previous[m], r) for m, r in records.items() if m in previous},
                "generated_rows": part["generated_rows"],
                "cached_rows": part["cached_rows"],
            }
        )
        previous = records
    return entries


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
        out[name] = json_float(present.mean()) if present.size else None
    return out


def suite_series(
    results: Sequence[tuple[Checkpoint, SuiteResult]], tails: Mapping[str, Sequence[str]] | None = None
) -> list[dict[str, Any]]:
    """:func:`series_entries` of results at hand (one process): each checkpoint's :func:`series_part`."""
    return series_entries([(checkpoint, series_part(result)) for checkpoint, result in results], tails)
