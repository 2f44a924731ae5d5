"""The gate in pytest-html's report (``pytest --model ... --html=report.html``), through the hooks
pytest-html documents: three columns in the results table (value, bound, comparison) and, after
the summary, a section per suite (``docs/trackers.md``), built from the same records and suite
data as ``report.json``. The plots are drawn into a temporary folder and embedded as PNG data,
since pytest-html writes its file before the novelty report is written.
"""

from __future__ import annotations

import base64
import html
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.gate.record import CaseRecord
from pytest_novelty.integrations.run import TrackedRun
from pytest_novelty.pipeline.suite_data import SuiteData
from pytest_novelty.report.series import series_of, series_rows, write_series_plots
from pytest_novelty.report.spans import SPAN_HEAD, span_cells

#: The columns added to the results table, after the test's id.
COLUMNS = ("value", "bound", "comparison")
_AFTER = 2  # pytest-html's columns: result, test, duration, links


def _record(report: pytest.TestReport) -> CaseRecord | None:
    """The case record a test report carries (the plugin's ``novelty`` user property), if any."""
    for name, value in report.user_properties:
        if name == "novelty" and isinstance(value, Mapping):
            return CaseRecord.from_json(value)
    return None


class NoveltyHtml:
    """pytest-html hooks; ``records`` and ``suites`` give the session's case records and suite data."""

    def __init__(self, records: Callable[[], Sequence[CaseRecord]],
                 suites: Callable[[], Mapping[str, SuiteData]]) -> None:  # fmt: skip
        self.records, self.suites = records, suites

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        for offset, name in enumerate(COLUMNS):
            cells.insert(_AFTER + offset, f'<th class="novelty-{name}">{name}</th>')

    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        case = _record(report)
        texts = ("", "", "") if case is None else (case.value_text(), case.bound, case.comparison_text())
        for offset, (name, text) in enumerate(zip(COLUMNS, texts, strict=True)):
            cells.insert(_AFTER + offset, f'<td class="novelty-{name}">{html.escape(text)}</td>')

    def pytest_html_results_summary(self, prefix: list[str], summary: list[str], postfix: list[str],
                                    session: pytest.Session) -> None:  # fmt: skip
        records = list(self.records())
        if records:
            postfix.append(render_sections(records, self.suites()))


def register_html(config: pytest.Config, records: Callable[[], Sequence[CaseRecord]],
                  suites: Callable[[], Mapping[str, SuiteData]]) -> None:  # fmt: skip
    """Register the hooks for this session (unregistered at the config's cleanup)."""
    hooks = NoveltyHtml(records, suites)
    config.pluginmanager.register(hooks, "novelty-html")
    config.add_cleanup(lambda: config.pluginmanager.unregister(hooks))


def render_sections(records: Sequence[CaseRecord], suites_data: Mapping[str, SuiteData]) -> str:
    """The HTML of every suite's section (tables, series, copied spans, plots)."""
    from pytest_novelty.report.json_report import build_report
    from pytest_novelty.report.plots import write_plots

    records = [r.redacted() for r in records]
    suites_data = {name: data.redacted() for name, data in suites_data.items()}
    with tempfile.TemporaryDirectory(prefix="novelty-html-") as folder:
        plots = write_plots(folder, suites_data)
        for suite, kinds in write_series_plots(folder, suites_data).items():
            plots.setdefault(suite, {}).update(kinds)
        report = build_report(records, suites_data, None, plots=plots)
        run = TrackedRun.from_report(report, folder)
        series = series_of(suites_data)
        parts = ['<div class="novelty">', STYLE, "<h2>Novelty gate</h2>"]
        for suite in run.suites:
            parts.append(_suite_section(run, suite, series.get(suite, [])))
        parts.append("</div>")
        return "\n".join(parts)


#: The section's own look (pytest-html's style sheet does not cover these tables).
STYLE = """<style>
.novelty table { border-collapse: collapse; margin: 0.5em 0 1em; }
.novelty th, .novelty td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; vertical-align: top; }
.novelty th { background: #f4f4f4; }
.novelty-plots figure { display: inline-block; margin: 0 1em 1em 0; }
.novelty-plots img { width: 480px; }
.novelty-plots figcaption { color: #666; font-size: 90%; }
</style>"""


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _table(head: Sequence[str], body: Sequence[Sequence[str]], css: str) -> str:
    """An HTML table; cells are escaped here."""
    header = "".join(f"<th>{_esc(h)}</th>" for h in head)
    lines = [f'<table class="{css}"><thead><tr>{header}</tr></thead><tbody>']
    lines += ["<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in cells) + "</tr>" for cells in body]
    return "\n".join([*lines, "</tbody></table>"])


def _suite_section(run: TrackedRun, suite: str, series: list[dict[str, Any]]) -> str:
    parts = [f'<section class="novelty-suite" id="novelty-{_esc(suite)}"><h3>Suite {_esc(suite)}</h3>']
    body = [(c.metric, c.value_text(), c.bound, c.outcome, c.comparison_text() or _unless_passed(c))
            for c in run.cases_of(suite)]  # fmt: skip
    if body:
        parts.append(_table(("metric", "value", "bound", "outcome", "comparison"), body, "novelty-cases"))
    values = run.gated.scalars.get(suite, {})
    shown = {k: v for k, v in values.items() if k not in {c.metric for c in run.cases_of(suite)}}
    if shown:
        parts.append("<p>Also measured: " + _esc(", ".join(f"{k} {v:.4f}" for k, v in sorted(shown.items()))) + "</p>")
    if series:
        parts.append("<h4>Series (change from the previous checkpoint, paired, with its CI)</h4>")
        parts.append(_table(*series_rows(series), "novelty-series"))
    spans = run.spans.get(suite) or ()
    if spans:
        parts.append("<h4>Longest copied spans</h4>")
        parts.append(_table(SPAN_HEAD, [span_cells(s) for s in spans], "novelty-spans"))
    figures = []
    for kind, path in sorted(run.plots.get(suite, {}).items()):
        data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
        label = f"{suite} {kind.replace('_', ' ')}"
        figures.append(f'<figure><img class="novelty-plot" alt="{_esc(label)}" src="data:image/png;base64,{data}"/>'
                       f"<figcaption>{_esc(label)}</figcaption></figure>")
    if figures:
        parts.append('<div class="novelty-plots">' + "".join(figures) + "</div>")
    parts.append("</section>")
    return "\n".join(parts)


def _unless_passed(case: CaseRecord) -> str:
    """A case's message, shown where it did not simply pass (a failure, an error, a skip's reason)."""
    return "" if case.outcome == "passed" else case.message
