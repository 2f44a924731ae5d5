"""Threshold checks: does a suite's metric value meet the bound its suite file sets?"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pytest_novelty.suites.schema import Threshold


@dataclass(frozen=True)
class Verdict:
    """The outcome of one (suite, metric, threshold) case."""

    suite: str
    metric: str
    op: str
    threshold: float
    value: float
    passed: bool
    message: str

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly form (NaN becomes None)."""
        value = None if math.isnan(self.value) else self.value
        return {
            "suite": self.suite,
            "metric": self.metric,
            "op": self.op,
            "threshold": self.threshold,
            "value": value,
            "passed": self.passed,
            "message": self.message,
        }


def check_threshold(suite: str, threshold: Threshold, metrics: Mapping[str, float]) -> Verdict:
    """Compare the suite's value of ``threshold.metric`` with its bound."""
    value = float(metrics.get(threshold.metric, math.nan))
    passed = threshold.holds(value)
    if math.isnan(value):
        message = (
            f"{suite}: {threshold.metric} could not be computed (no scored generations); "
            f"threshold {threshold.op} {threshold.value:g}"
        )
    elif passed:
        message = f"{suite}: {threshold.metric} = {value:.4f} meets {threshold.op} {threshold.value:g}"
    else:
        side = "below the minimum" if threshold.op == ">=" else "above the maximum"
        message = f"{suite}: {threshold.metric} = {value:.4f} is {side} {threshold.value:g}"
    return Verdict(suite, threshold.metric, threshold.op, threshold.value, value, passed, message)
