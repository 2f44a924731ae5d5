"""The test function behind every suite file (see ``plugin.SuiteFile``).

pytest collects each suite file as a module whose object is this one; ``test_metric`` is
parametrized per threshold by the plugin. A case fails when its metric breaks the threshold,
regresses significantly against its accepted snapshot, or against the baseline checkpoint.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_novelty.gate import check_threshold
from pytest_novelty.gate.agreement import agreement_failure, agreement_text
from pytest_novelty.gate.regression import Comparison, NoveltyDriftWarning, compare, make_record
from pytest_novelty.gate.snapshot import check_snapshot, snapshot_settings
from pytest_novelty.redact import redact_data

if TYPE_CHECKING:
    from pytest_novelty.gate.regression import MetricRecord
    from pytest_novelty.runner import SuiteResult
    from pytest_novelty.suites.schema import Suite, Threshold


def _record(suite: Suite, threshold: Threshold, result: SuiteResult, tail_ids: Any = None) -> MetricRecord:
    return make_record(
        suite,
        threshold,
        metrics=result.metrics,
        per_prompt=result.per_prompt,
        prompt_ids=[p.id for p in result.prompts],
        tail_ids=tail_ids if tail_ids is not None else result.info.get("tail_ids", {}).get(threshold.metric),
        model=result.model,
        fingerprint=str(result.info.get("fingerprint", "")),
        judge=str(result.info.get("judge", "")),
    )


def _note(row: dict[str, Any], comparison: Comparison, failures: list[str]) -> None:
    row.update(comparison.as_dict())
    if not comparison.passed:
        failures.extend(comparison.lines())
    elif comparison.warning:
        warnings.warn(NoveltyDriftWarning(comparison.message), stacklevel=2)


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
    verdict = check_threshold(suite.name, threshold, result.metrics)
    row = verdict.as_dict()
    row["header"] = f"model {result.model}, judge {result.info.get('judge')}"
    failures = [] if verdict.passed else [verdict.message]
    agreement = agreement_text(result.info)
    if agreement:
        row["header"] = f"{row['header']}, {agreement}"
        row["judge_agreement"] = agreement
    distrusted = agreement_failure(suite, threshold, result.info)
    if distrusted:
        row["message"], failures = distrusted, [distrusted]
    if novelty_baseline is not None:
        base = _record(suite, threshold, novelty_baseline)
        # The baseline's tail ranks the prompts, so both checkpoints are judged on the same ones.
        _note(row, compare(base, _record(suite, threshold, result, base.tail_ids)), failures)
    elif suite.gate.against == "series-best" and request.config.option.novelty_model_series:
        from pytest_novelty.series import compare_with_best

        state = request.getfixturevalue("novelty_state")
        found = compare_with_best(state.earlier_results(suite), result, threshold)
        if found is not None:
            best, comparison = found
            row["against"] = best.model
            if not comparison.passed:
                failures.append(f"against the best earlier checkpoint of the series, {best.model}:")
            _note(row, comparison, failures)
    elif snapshot_settings(request.config).enabled:
        outcome = check_snapshot(request.getfixturevalue("snapshot"), _record(suite, threshold, result))
        if outcome.written:
            row["verdict"] = "snapshot written"
        elif outcome.comparison is not None:
            _note(row, outcome.comparison, [])
        failures.extend(outcome.lines)
    row["passed"] = not failures
    record_property("novelty", redact_data(row))
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)
