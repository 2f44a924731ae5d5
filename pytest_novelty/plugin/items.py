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

from pytest_novelty.gate.case import decide, with_repeats
from pytest_novelty.gate.regression import NoveltyDriftWarning
from pytest_novelty.infra.errors import NoveltyError
from pytest_novelty.infra.redact import redact_data

if TYPE_CHECKING:
    from pytest_novelty.gate.regression import MetricRecord
    from pytest_novelty.gate.snapshot import SnapshotOutcome
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.pipeline.series import Checkpoint
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

        outcome = check_snapshot(self._snapshot(), record, alpha=alpha, correction=correction)
        if outcome.harness_error is not None:  # a damaged snapshot: no verdict, never "no snapshot"
            raise outcome.harness_error
        return outcome


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
        mode = request.config.option.novelty_threshold_mode
        outcome = decide(suite, threshold, novelty_result, baseline=novelty_baseline, earlier=earlier,
                         snapshot=snapshot, mode=mode, comparisons=state.comparisons)
        repeats = int(request.config.option.novelty_repeat or 1)
        outcome = with_repeats(state.session, suite, threshold, outcome, repeats, snapshot=snapshot, mode=mode,
                               comparisons=state.comparisons)
        state.note_repeats(suite, repeats)
    except NoveltyError as exc:  # a damaged snapshot or tail file, an earlier checkpoint that failed
        error = exc
    if error is not None:
        state.harness_failure(error, request.node)
    for warning in outcome.warnings:
        warnings.warn(NoveltyDriftWarning(warning), stacklevel=2)
    request.node.user_properties.append(("novelty", redact_data(outcome.row())))
    if outcome.failures:
        pytest.fail("\n".join(outcome.failures), pytrace=False)


def test_checkpoint(novelty_suite: Suite, novelty_checkpoint: Checkpoint, request: pytest.FixtureRequest) -> None:
    """One earlier checkpoint of ``--model-series`` on one suite, generated and scored here: its own
    unit of work, so that pytest-xdist's workers gate several checkpoints at once. Its part of the
    series goes to the controller, which puts the series together when the run ends."""
    from pytest_novelty.gate.series import series_part
    from pytest_novelty.pipeline.export import work_line
    from pytest_novelty.plugin import STATE
    from pytest_novelty.plugin.state import SERIES_PROPERTY

    state = request.config.stash[STATE]
    suite, checkpoint = novelty_suite, novelty_checkpoint
    if state.shard is not None:  # --novelty-shard: this checkpoint's part of the suite, then skipped
        state.shard.case(state, suite, request.node, models=[checkpoint.path])
    error: NoveltyError | None = None
    try:
        result = state.session.model_result(checkpoint.path, suite.first)
    except NoveltyError as exc:
        error = exc
    if error is not None:
        state.harness_failure(error, request.node)
    part = {"suite": suite.name, "step": checkpoint.step, "model": checkpoint.path, "part": series_part(result)}
    request.node.user_properties.append((SERIES_PROPERTY, part))
    request.node.user_properties.append(("novelty_work", work_line(f"{suite.name} @ {checkpoint.name}", result)))
    state.session.release(checkpoint.path)

