"""The gate layer: thresholds, snapshot regressions and their significance."""

from pytest_novelty.gate.thresholds import Verdict, check_threshold

__all__ = ["Verdict", "check_threshold"]
