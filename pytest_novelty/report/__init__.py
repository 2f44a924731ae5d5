"""The report layer: what a reviewer reads at the end of a run."""

from pytest_novelty.pipeline.suite_data import SuiteData
from pytest_novelty.report.json_report import ReportFiles, build_report, write_json_report
from pytest_novelty.report.markdown import render_markdown, write_markdown_report
from pytest_novelty.report.plots import plot_novelty_histogram, plot_quality_originality, write_plots
from pytest_novelty.report.terminal import render_table
from pytest_novelty.report.write import write_report

__all__ = [
    "ReportFiles",
    "SuiteData",
    "build_report",
    "plot_novelty_histogram",
    "plot_quality_originality",
    "render_markdown",
    "render_table",
    "write_json_report",
    "write_markdown_report",
    "write_plots",
    "write_report",
]
