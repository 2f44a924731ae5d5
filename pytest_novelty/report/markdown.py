"""``report.md``: a short table a reviewer reads in a pull request or on the CI job page."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_novelty.gate.record import CaseRecord, sort_key
from pytest_novelty.infra.storage import atomic_write_text
from pytest_novelty.report.json_report import summarize
from pytest_novelty.report.terminal import (
    SHARES_LEGEND,
    compared_cell,
    format_ci,
    format_p,
    has_comparison,
    pairs_cell,
    tests_used,
)

MARKDOWN_NAME = "report.md"
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def _plain(value: Any) -> str:
    """A version entry as text: lists joined with commas, mappings as ``key: value`` pairs, no reprs."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_plain(v)}" for k, v in sorted(value.items()))
    if isinstance(value, (list, tuple, set)):
        return ", ".join(_plain(v) for v in value)
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _note(record: CaseRecord) -> str:
    """Bullets explaining why a case failed or warned: its harness error, threshold message, comparison."""
    if record.is_error:
        return f"- {_cell(record.suite)} `{record.metric}`: {_cell(record.reasons()[0])}"
    return "\n".join(f"- {_cell(reason)}" for reason in record.reasons())


def _table(records: Sequence[CaseRecord]) -> list[str]:
    compared = has_comparison(records)
    if compared:
        head = ["suite", "metric", "value", "threshold", "compared with", "delta", "CI", "p", "pairs", "verdict"]
    else:
        head = ["suite", "metric", "value", "threshold", "result"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    for record in sorted(records, key=sort_key):
        verdict = record.verdict_text()
        if verdict.startswith("FAIL"):
            verdict = f"**{verdict}**"
        metric = f"`{record.metric}`" + (f" ({record.tail.description})" if record.tail else "")
        cells = [record.suite, metric, record.value_text(), record.bound]
        if compared:
            comparison = record.compared
            cells += [
                compared_cell(record),
                "n/a" if comparison is None or comparison.delta != comparison.delta else f"{comparison.delta:+.4f}",
                format_ci(None if comparison is None else comparison.delta_ci),
                format_p(None if comparison is None else comparison.p_value),
                pairs_cell(record),
            ]
        cells.append(verdict)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def _headline(records: Sequence[CaseRecord]) -> str:
    """How many cases failed or reached no verdict, else that all passed; then the regressions,
    drift warnings and improvements among them."""
    counts = summarize(records)
    cases = counts["cases"]
    parts = [f"{counts['failed']} of {cases} cases failed"] if counts["failed"] else []
    if counts["errors"]:
        parts.append(f"{counts['errors']} of {cases} cases reached no verdict (harness error)")
    if parts:
        headline = "**" + "; ".join(parts) + "**"
    elif not cases:
        headline = "**no case ran**"
    else:
        headline = "**the 1 case passed**" if cases == 1 else f"**all {cases} cases passed**"
    kinds = (("regressions", "regression"), ("warnings", "drift warning"), ("improvements", "improvement"))
    extras = [f"{counts[key]} {word}{'s' if counts[key] != 1 else ''}" for key, word in kinds if counts[key]]
    return headline + (f" ({', '.join(extras)})" if extras else "")


def render_markdown(
    records: Sequence[CaseRecord],
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
    lines = [f"## {title}", "", _headline(records)]
    if versions:
        shown = sorted((key, value) for key, value in versions.items() if value not in (None, "", [], {}))
        lines += ["", *(f"- {key}: {_plain(value)}" for key, value in shown)]
    if suites:
        lines += ["", "### Suites", ""]
        for name, text in sorted(suites.items()):
            lines.append(f"- {name}: {_cell(text)}")
        lines += ["", SHARES_LEGEND]
    lines += ["", *_table(records)]
    agreements = {r.suite: r.judge_agreement for r in records if r.judge_agreement}
    if agreements:
        lines += ["", *(f"- {suite}: {text}" for suite, text in sorted(agreements.items()))]
    lines += list(sections)  # e.g. the series tables
    tests = tests_used(records)
    if tests:
        lines += ["", *(f"CI and p: {t}; a drop is a regression when its CI lies entirely below 0." for t in tests)]
    notes = [note for note in map(_note, sorted(records, key=sort_key)) if note]
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
    records: Sequence[CaseRecord],
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
        path, render_markdown(records, versions, plots=plots, sections=sections, suites=suites, plot_note=plot_note)
    )
    summary = os.environ.get(STEP_SUMMARY_ENV)
    if step_summary and summary:
        # GitHub documents appending as the way to write a step summary; one write call.
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(render_markdown(records, versions, sections=sections, suites=suites) + "\n")
    return path
