"""The test function behind every suite file (see ``plugin.SuiteFile``).

pytest collects each suite file as a module whose object is this one; ``test_metric`` is
parametrized per threshold by the plugin. It asks the run's one case loop
(:meth:`pytest_novelty.gate.cases.CaseLoop.decide`) and turns its record into pytest's outcome: the
record goes into the item's ``user_properties`` as JSON (as ``("novelty", record)``, the way pytest's
own ``junitxml`` and pytest-xdist carry a test's properties, without the ``record_property`` fixture
that warns under the default ``junit_family`` xunit2), read back on the controller for the table and
the report, and a failure lists every reason the decision gave.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import pytest

from pytest_novelty.gate.comparison import NoveltyDriftWarning

if TYPE_CHECKING:
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.pipeline.series import Checkpoint
    from pytest_novelty.pipeline.session import Baseline
    from pytest_novelty.suites.schema import Suite, Threshold


def test_metric(
    novelty_suite: Suite,
    novelty_threshold: Threshold,
    novelty_result: SuiteResult,
    novelty_baseline: Baseline | None,
    request: pytest.FixtureRequest,
) -> None:
    """The suite's value of the metric meets its threshold and has not regressed."""
    from pytest_novelty.plugin.snapshots import SyrupyStore, snapshot_settings
    from pytest_novelty.plugin.state import STATE

    state = request.config.stash[STATE]
    snapshot = SyrupyStore(request) if snapshot_settings(request.config).enabled else None
    # A damaged snapshot or tail file, an earlier checkpoint that failed: a harness error of the case.
    record = state.guarded(lambda: state.cases.decide(novelty_suite, novelty_threshold, snapshot), request.node)
    for warning in record.warnings:
        warnings.warn(NoveltyDriftWarning(warning), stacklevel=2)
    request.node.user_properties.append(("novelty", record.redacted().to_json()))
    if record.failures:
        pytest.fail("\n".join(record.failures), pytrace=False)


def test_checkpoint(novelty_suite: Suite, novelty_checkpoint: Checkpoint, request: pytest.FixtureRequest) -> None:
    """One earlier checkpoint of ``--model-series`` on one suite, generated and scored here: its own
    unit of work, so that pytest-xdist's workers gate several checkpoints at once. Its part of the
    series goes to the controller, which puts the series together when the run ends."""
    from pytest_novelty.gate.cases import checkpoint_part
    from pytest_novelty.plugin.state import SERIES_PROPERTY, STATE

    state = request.config.stash[STATE]
    if state.shard is not None:  # --novelty-shard: this checkpoint's part of the suite, then skipped
        state.shard_case(novelty_suite, request.node, models=[novelty_checkpoint.path])
    part, work = state.guarded(lambda: checkpoint_part(state.session, novelty_suite, novelty_checkpoint), request.node)
    message = {"suite": novelty_suite.name, "step": novelty_checkpoint.step, "part": part}
    request.node.user_properties.append((SERIES_PROPERTY, message))
    request.node.user_properties.append(("novelty_work", work))
