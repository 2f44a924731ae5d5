"""pytest-html's report (``--html``) holds each case's value, bound and comparison, and each
suite's tables, series, copied spans and plots; read back from the written file."""

from __future__ import annotations

import base64
import html
import json
import math
import re
from typing import Any

import pytest

from tests.integrations.conftest import LoggedRun

pytestmark = pytest.mark.slow

pytest.importorskip("pytest_html", reason="needs the html extra")


def _tests(page: str) -> dict[str, Any]:
    """The per-test data pytest-html keeps in the page (its table is drawn from it)."""
    blob = re.search(r'data-jsonblob="([^"]*)"', page)
    assert blob is not None
    return json.loads(html.unescape(blob.group(1)))["tests"]


def _cells(tests: dict[str, Any], case: str) -> dict[str, str]:
    (nodeid,) = [n for n in tests if n.endswith(f"[{case}]")]
    (row,) = [t for t in tests[nodeid] if "::" not in t["testId"].split("]", 1)[-1]]
    cells = {}
    for cell in row["resultsTableRow"]:
        found = re.match(r'<td class="novelty-(\w+)">(.*)</td>$', cell, re.S)
        if found:
            cells[found.group(1)] = html.unescape(found.group(2))
    return cells


def _section(page: str, suite: str) -> str:
    found = re.search(rf'<section class="novelty-suite" id="novelty-{re.escape(suite)}">(.*?)</section>', page, re.S)
    assert found is not None, f"no section for suite {suite}"
    return found.group(1)


def _images(section: str) -> list[tuple[str, bytes]]:
    return [(alt, base64.b64decode(data))
            for alt, data in re.findall(r'alt="([^"]+)" src="data:image/png;base64,([^"]+)"', section)]


def test_each_case_row_has_value_bound_and_each_suite_its_tables_spans_and_plots(demo_logged: LoggedRun) -> None:
    page = demo_logged.html.read_text()
    for name in ("value", "bound", "comparison"):
        assert f'<th class="novelty-{name}">{name}</th>' in page
    report = json.loads((demo_logged.report / "report.json").read_text())
    tests = _tests(page)
    for row in report["rows"]:
        cells = _cells(tests, f"story-{row['metric']}{row['op']}{row['threshold']:g}")
        assert cells["value"] == f"{row['value']:.4f}"
        assert cells["bound"] == f"{row['op']} {row['threshold']:g}"
        assert cells["comparison"] == ""  # no snapshot, baseline or series here
    section = _section(page, "story")
    assert "<td>novelty@5</td>" in section and "<td>&gt;= 0.3</td>" in section
    longest = report["suites"]["story"]["info"]["longest_copied"][0]
    assert f"<td>{longest['longest_span']} words</td>" in section
    assert html.escape(longest["longest_span_text"]) in section
    assert f"<td>{longest['longest_span_doc']}</td>" in section
    images = _images(section)
    assert [alt for alt, _ in images] == ["story novelty histogram", "story quality originality"]
    for _, png in images:
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000


def test_a_series_shows_its_table_with_intervals_and_each_comparison(series_logged: LoggedRun) -> None:
    page = series_logged.html.read_text()
    report = json.loads((series_logged.report / "report.json").read_text())
    tests = _tests(page)
    for row in report["rows"]:  # compared with the best earlier checkpoint of the series
        cells = _cells(tests, f"story-{row['metric']}{row['op']}{row['threshold']:g}")
        compared = row["comparison"]
        verdict, (low, high) = compared["verdict"], compared["delta_ci"]  # every comparison carries its interval
        # JSON's null for a bound too few prompts cannot set (six prompts at the run's corrected α)
        low, high = -math.inf if low is None else low, math.inf if high is None else high
        ci = f"CI [{low:+.4f}, {high:+.4f}]"
        p = "p < 0.0001" if compared["p_value"] < 0.0001 else f"p {compared['p_value']:.4f}"
        against = f"{compared['against']} {compared['accepted_value']:.4f}"
        assert cells["comparison"] == f"{against}, delta {compared['delta']:+.4f}, {ci}, {p}, {verdict}"
        assert compared["against"].startswith("checkpoint-")
    section = _section(page, "story")
    series = re.search(r'<table class="novelty-series">(.*?)</table>', section, re.S)
    assert series is not None
    steps = re.findall(r"<tr><td>(\d+)</td>", series.group(1))
    assert steps == ["60", "200", "400"]
    change = report["series"][2]["suites"]["story"]["change"]["quality"]
    low, high = (math.inf if b is None else b for b in change["delta_ci"])
    low = -low if change["delta_ci"][0] is None else low
    assert f"({change['delta']:+.4f} [{low:+.4f}, {high:+.4f}])" in series.group(1)
    assert "story series" in [alt for alt, _ in _images(section)]
