"""The test function behind every suite file (see ``plugin.SuiteFile``).

pytest collects each suite file as a module whose object is this one; ``test_metric`` is
parametrized per threshold by the plugin. It asks the one case decision
(:func:`pytest_novelty.gate.case.decide`) and turns its outcome into pytest's: the row it records
in the item's ``user_properties`` (as ``("novelty", row)``, the way pytest's own ``junitxml`` and
pytest-xdist carry a test's properties, without the ``record_property`` fixture that warns under
the default ``junit_family`` xunit2) is what the table and the report show, and a failure lists
every reason the decision gave.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import pytest

from pytest_novelty.gate.case import decide
from pytest_novelty.gate.regression import NoveltyDriftWarning
from pytest_novelty.infra.errors import NoveltyError
from pytest_novelty.infra.redact import redact_data

if TYPE_CHECKING:
    from pytest_novelty.gate.regression import MetricRecord
    from pytest_novelty.gate.snapshot import SnapshotOutcome
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.pipeline.session import Baseline
    from pytest_novelty.suites.schema import Suite, Threshold


class SyrupyStore:
    """The case's snapshot through syrupy's ``snapshot`` fixture, requested on first use."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.request = request

    def _snapshot(self) -> Any:
        return self.request.getfixturevalue("snapshot")

    def stored(self) -> MetricRecord | None:
        from pytest_novelty.gate.snapshot import stored_record

        return stored_record(self._snapshot())

    def check(self, record: MetricRecord, *, alpha: float | None = None, correction: str = "") -> SnapshotOutcome:
        from pytest_novelty.gate.snapshot import check_snapshot

        return check_snapshot(self._snapshot(), record, alpha=alpha, correction=correction)


def test_metric(
    novelty_suite: Suite,
    novelty_threshold: Threshold,
    novelty_result: SuiteResult,
    novelty_baseline: Baseline | None,
    request: pytest.FixtureRequest,
) -> None:
    """The suite's value of the metric meets its threshold and has not regressed."""
    from pytest_novelty.gate.snapshot import snapshot_settings
    from pytest_novelty.plugin import STATE

    state = request.config.stash[STATE]
    suite, threshold = novelty_suite, novelty_threshold
    snapshot = SyrupyStore(request) if snapshot_settings(request.config).enabled else None
    error: NoveltyError | None = None
    try:
        earlier = state.earlier(suite) if novelty_baseline is None and suite.gate.against == "series-best" else []
        outcome = decide(suite, threshold, novelty_result, baseline=novelty_baseline, earlier=earlier,
                         snapshot=snapshot, mode=request.config.option.novelty_threshold_mode,
                         comparisons=state.comparisons)
    except NoveltyError as exc:  # a damaged snapshot or tail file, an earlier checkpoint that failed
        error = exc
    if error is not None:
        state.harness_failure(error, request.node)
    state.decided(outcome)
    for warning in outcome.warnings:
        warnings.warn(NoveltyDriftWarning(warning), stacklevel=2)
    request.node.user_properties.append(("novelty", redact_data(outcome.row())))
    if outcome.failures:
        pytest.fail("\n".join(outcome.failures), pytrace=False)
