"""``report.md``: a short table a reviewer reads in a pull request or on the CI job page."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_novelty.infra.storage import atomic_write_text
from pytest_novelty.report.json_report import summarize
from pytest_novelty.report.terminal import (
    SHARES_LEGEND,
    format_ci,
    format_p,
    has_comparison,
    is_error,
    pairs_cell,
    threshold_met,
    verdict_text,
)

MARKDOWN_NAME = "report.md"
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def _num(value: Any, signed: bool = False) -> str:
    if value is None or value != value:  # None or NaN
        return "n/a"
    return f"{float(value):+.4f}" if signed else f"{float(value):.4f}"


def _plain(value: Any) -> str:
    """A version entry as text: lists joined with commas, mappings as ``key: value`` pairs, no reprs."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_plain(v)}" for k, v in sorted(value.items()))
    if isinstance(value, (list, tuple, set)):
        return ", ".join(_plain(v) for v in value)
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _threshold(row: Mapping[str, Any]) -> str:
    if row.get("op") is None or row.get("threshold") is None:
        return ""
    return f"{row['op']} {row['threshold']:g}"


def _note(row: Mapping[str, Any]) -> str:
    """A bullet explaining why a row failed or warned: its threshold message, its comparison, or both."""
    parts = []
    if is_error(row):
        return f"- {_cell(str(row['suite']))} `{row['metric']}`: {_cell(str(row.get('message') or 'harness error'))}"
    if not threshold_met(row) and row.get("message"):
        parts.append(str(row["message"]))
    if row.get("status") in ("regressed", "not_significant", "within_tolerance"):
        parts.append(str(row.get("comparison") or row.get("message") or ""))
    if not parts and not row.get("passed", True) and row.get("message"):
        parts.append(str(row["message"]))
    return "\n".join(f"- {_cell(p)}" for p in parts if p)


def _table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    compared = has_comparison(rows)
    if compared:
        head = ["suite", "metric", "value", "threshold", "baseline", "delta", "CI", "p", "pairs", "verdict"]
    else:
        head = ["suite", "metric", "value", "threshold", "result"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    for row in sorted(rows, key=lambda r: (str(r["suite"]), str(r["metric"]), str(r.get("op")))):
        verdict = verdict_text(row)
        if verdict.startswith("FAIL"):
            verdict = f"**{verdict}**"
        metric = f"`{row['metric']}`" + (f" ({row['tail']})" if row.get("tail") else "")
        cells = [str(row["suite"]), metric, _num(row.get("value")), _threshold(row)]
        if compared:
            cells += [
                _num(row.get("baseline")),
                _num(row.get("delta"), signed=True),
                format_ci(row.get("delta_ci")),
                format_p(row.get("p_value")),
                pairs_cell(row),
            ]
        cells.append(verdict)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def render_markdown(
    rows: Sequence[Mapping[str, Any]],
    versions: Mapping[str, Any] | None = None,
    *,
    plots: Mapping[str, Mapping[str, Path]] | None = None,
    title: str = "Novelty gate",
    sections: Sequence[str] = (),
    suites: Mapping[str, str] | None = None,
    plot_note: str = "",
) -> str:
    """The report as Markdown: headline, versions, table, failure messages and (optionally) plots.

    Plot images are linked by file name, relative to the report folder; leave ``plots`` out where
    the text is shown away from the folder (a CI job summary). ``suites`` maps a suite to a line
    about it (what it was measured with, its coverage and unscored shares); ``plot_note`` a line
    under the plots' heading (e.g. why no baseline is overlaid).
    """
    counts = summarize(rows)
    if counts["failed"] or counts["errors"]:
        parts = []
        if counts["failed"]:
            parts.append(f"{counts['failed']} of {counts['cases']} cases failed")
        if counts["errors"]:
            parts.append(f"{counts['errors']} of {counts['cases']} cases reached no verdict (harness error)")
        headline = "**" + "; ".join(parts) + "**"
    elif not counts["cases"]:
        headline = "**no case ran**"
    else:
        cases = counts["cases"]
        headline = "**the 1 case passed**" if cases == 1 else f"**all {cases} cases passed**"
    extras = []
    if counts["regressions"]:
        extras.append(f"{counts['regressions']} regression{'s' if counts['regressions'] != 1 else ''}")
    if counts["warnings"]:
        extras.append(f"{counts['warnings']} drift warning{'s' if counts['warnings'] != 1 else ''}")
    if counts["improvements"]:
        extras.append(f"{counts['improvements']} improvement{'s' if counts['improvements'] != 1 else ''}")
    lines = [f"## {title}", "", headline + (f" ({', '.join(extras)})" if extras else "")]
    if versions:
        lines.append("")
        lines.extend(
            f"- {key}: {_plain(value)}" for key, value in sorted(versions.items()) if value not in (None, "", [], {})
        )
    if suites:
        lines += ["", "### Suites", ""]
        for name, text in sorted(suites.items()):
            lines.append(f"- {name}: {_cell(text)}")
        lines += ["", SHARES_LEGEND]
    lines += ["", *_table(rows)]
    agreements = {str(r["suite"]): str(r["judge_agreement"]) for r in rows if r.get("judge_agreement")}
    if agreements:
        lines += ["", *(f"- {suite}: {text}" for suite, text in sorted(agreements.items()))]
    lines += list(sections)  # e.g. the series tables
    tests = sorted({str(r["test"]) for r in rows if r.get("test")})
    if tests:
        lines += ["", *(f"CI and p: {t}; a drop is a regression when its CI lies entirely below 0." for t in tests)]
    notes = [_note(r) for r in sorted(rows, key=lambda r: (str(r["suite"]), str(r["metric"])))]
    notes = [n for n in notes if n]
    if notes:
        lines += ["", "<details><summary>Details</summary>", "", *notes, "", "</details>"]
    if plots:
        lines += ["", "### Plots", ""] + ([plot_note, ""] if plot_note else [])
        for suite, kinds in sorted(plots.items()):
            for kind, path in sorted(kinds.items()):
                lines += [f"![{suite} {kind.replace('_', ' ')}]({Path(path).name})", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def write_markdown_report(
    out_dir: str | Path,
    rows: Sequence[Mapping[str, Any]],
    versions: Mapping[str, Any] | None = None,
    *,
    plots: Mapping[str, Mapping[str, Path]] | None = None,
    step_summary: bool = True,
    sections: Sequence[str] = (),
    suites: Mapping[str, str] | None = None,
    plot_note: str = "",
) -> Path:
    """Write ``report.md`` into ``out_dir``; append the table to ``$GITHUB_STEP_SUMMARY`` when set.

    The job summary gets the text without the plot links, which only resolve inside the folder.
    """
    path = Path(out_dir) / MARKDOWN_NAME
    atomic_write_text(
        path, render_markdown(rows, versions, plots=plots, sections=sections, suites=suites, plot_note=plot_note)
    )
    summary = os.environ.get(STEP_SUMMARY_ENV)
    if step_summary and summary:
        # GitHub documents appending as the way to write a step summary; one write call.
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(render_markdown(rows, versions, sections=sections, suites=suites) + "\n")
    return path
