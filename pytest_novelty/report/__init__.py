"""The report layer: what a reviewer reads at the end of a run."""

from pytest_novelty.report.terminal import render_table

__all__ = ["render_table"]
