"""The test function behind every suite file (see ``plugin.SuiteFile``).

pytest collects each suite file as a module whose object is this one; ``test_metric`` is
parametrized per threshold by the plugin. A case fails when its metric breaks the threshold,
regresses significantly against its accepted snapshot, or against the baseline checkpoint.

The row each case records (``record_property("novelty", row)``) is what the table and the report
show, so its numbers are the ones the case decided on: for q@Tail the value on the one frozen tail
(:func:`pytest_novelty.gate.regression.choose_tail`), and after a comparison the compared value,
so that value − baseline = delta on every row.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from pytest_novelty.gate import check_threshold
from pytest_novelty.gate.agreement import agreement_failure, agreement_text
from pytest_novelty.gate.regression import (
    Comparison,
    FrozenTail,
    NoveltyDriftWarning,
    choose_tail,
    compare,
    gated_metrics,
    result_record,
)
from pytest_novelty.gate.snapshot import check_snapshot, snapshot_settings
from pytest_novelty.infra.redact import redact_data

if TYPE_CHECKING:
    from pytest_novelty.gate.regression import MetricRecord
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.suites.schema import Suite, Threshold


def _per_generation(threshold: Threshold, result: SuiteResult) -> Any:
    """Per-generation gated novelty (prompts × samples) for ``top10_novelty@n``, else None."""
    if threshold.base != "top10_novelty" or threshold.arg is None:
        return None
    values = result.measured.novelty.get(int(threshold.arg))
    return None if values is None else values.tolist()


def _record(
    suite: Suite,
    threshold: Threshold,
    result: SuiteResult,
    tail_ids: Any = None,
    metrics: Mapping[str, float] | None = None,
) -> MetricRecord:
    return result_record(
        result, threshold, suite=suite, tail_ids=tail_ids, metrics=metrics,
        per_generation=_per_generation(threshold, result),
    )


def _note(row: dict[str, Any], comparison: Comparison, failures: list[str]) -> None:
    row.update(comparison.as_dict())
    if comparison.candidate_value is not None:
        # The value shown is the value compared (for q@Tail: on the tail both share).
        row["value"] = comparison.candidate_value
    if not comparison.passed:
        failures.extend(comparison.lines())
    elif comparison.warning:
        warnings.warn(NoveltyDriftWarning(comparison.message), stacklevel=2)


def _frozen_tail(
    suite: Suite,
    threshold: Threshold,
    result: SuiteResult,
    baseline: SuiteResult | None,
    request: pytest.FixtureRequest,
) -> FrozenTail:
    """The tail the q@Tail case is judged on: baseline's, snapshot's, the suite's file, or its own."""
    snapshot_ids = None
    if baseline is None and snapshot_settings(request.config).enabled:
        from pytest_novelty.gate.snapshot import stored_record

        stored = stored_record(request.getfixturevalue("snapshot"))
        snapshot_ids = None if stored is None or stored.metric != threshold.metric else stored.tail_ids
    return choose_tail(
        threshold.metric,
        baseline=None if baseline is None else baseline.measured.tail_ids.get(threshold.metric),
        snapshot=snapshot_ids,
        tail_file=suite.gate.tail,
        candidate=result.measured.tail_ids.get(threshold.metric) or [],
    )


def header(result: SuiteResult) -> str:
    """What the suite's numbers were measured with: model, judge, originality units, NoveltyBench scales."""
    scores = result.scores
    parts = [f"model {result.model}", f"judge {scores.judge}"]
    if scores.units:
        parts.append(f"originality in {scores.units}")
    if any(t.base in ("distinct_k", "utility_k") for t in result.suite.thresholds):
        reward = scores.judge.startswith("reward model")
        scale = "reward model 1-10" if reward else "10 × rubric quality"
        parts.append(f"equivalence {result.suite.scoring.equivalence}, utility scale {scale}")
    return ", ".join(parts)


def test_metric(
    novelty_suite: Suite,
    novelty_threshold: Threshold,
    novelty_result: SuiteResult,
    novelty_baseline: SuiteResult | None,
    record_property: Callable[[str, object], None],
    request: pytest.FixtureRequest,
) -> None:
    """The suite's value of the metric meets its threshold and has not regressed."""
    suite, threshold, result = novelty_suite, novelty_threshold, novelty_result
    metrics: Mapping[str, float] = result.metrics
    tail: FrozenTail | None = None
    if threshold.base == "q_at_tail":
        tail = _frozen_tail(suite, threshold, result, novelty_baseline, request)
        ids = [p.id for p in result.prompts]
        metrics, used = gated_metrics(threshold.metric, metrics, ids, result.per_prompt["quality"], tail)
    verdict = check_threshold(suite.name, threshold, metrics)
    row = verdict.as_dict()
    row["header"] = header(result)
    failures = [] if verdict.passed else [verdict.message]
    agreement = agreement_text(result.judge_agreement)
    if agreement:
        row["header"] = f"{row['header']}, {agreement}"
        row["judge_agreement"] = agreement
    distrusted = agreement_failure(suite, threshold, result.judge_agreement)
    if distrusted:
        row["message"], failures = distrusted, [distrusted]
    if tail is not None:
        row["tail"] = tail.describe(len(used))
        row["tail_source"] = tail.source
        if not used:
            row["message"] = (
                f"{suite.name}: {threshold.metric}: none of the {len(tail.ids)} prompts of the {tail.describe(0)} "
                "is among the suite's prompts; point [gate] tail at a tail of these prompts"
            )
            failures = [str(row["message"])]
    tail_ids = None if tail is None else tail.ids
    if novelty_baseline is not None:
        base = _record(suite, threshold, novelty_baseline, tail_ids)
        _note(row, compare(base, _record(suite, threshold, result, tail_ids, metrics)), failures)
    elif suite.gate.against == "series-best" and request.config.option.novelty_model_series:
        from pytest_novelty.gate.series import compare_with_best

        state = request.getfixturevalue("novelty_state")
        found = compare_with_best(state.earlier_results(suite), result, threshold)
        if found is not None:
            best, comparison = found
            row["against"] = best.model
            if not comparison.passed:
                failures.append(f"against the best earlier checkpoint of the series, {best.model}:")
            _note(row, comparison, failures)
    elif snapshot_settings(request.config).enabled:
        record = _record(suite, threshold, result, tail_ids, metrics)
        outcome = check_snapshot(request.getfixturevalue("snapshot"), record)
        if outcome.harness_error is not None:  # a damaged snapshot: no verdict, never "no snapshot"
            request.getfixturevalue("novelty_state").harness_failure(outcome.harness_error, request.node)
        if outcome.written:
            row["verdict"] = "snapshot written"
        elif outcome.comparison is not None:
            _note(row, outcome.comparison, [])
        failures.extend(outcome.lines)
    value = row.get("value")
    if isinstance(value, float) and math.isnan(value):
        row["value"] = None
    row["passed"] = not failures
    record_property("novelty", redact_data(row))
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)
