"""The test function behind every suite file (see ``plugin.SuiteFile``).

pytest collects each suite file as a module whose object is this one; ``test_metric`` is
parametrized per threshold by the plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_novelty.gate import check_threshold

if TYPE_CHECKING:
    from pytest_novelty.runner import SuiteResult
    from pytest_novelty.suites.schema import Suite, Threshold


def test_metric(
    novelty_suite: Suite,
    novelty_threshold: Threshold,
    novelty_result: SuiteResult,
    record_property: pytest.RecordProperty,
) -> None:
    """The suite's value of the metric meets its threshold."""
    verdict = check_threshold(novelty_suite.name, novelty_threshold, novelty_result.metrics)
    row = verdict.as_dict()
    row["header"] = f"model {novelty_result.model}, judge {novelty_result.info.get('judge')}"
    record_property("novelty", row)
    if not verdict.passed:
        pytest.fail(verdict.message, pytrace=False)
