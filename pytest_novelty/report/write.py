"""Writing the whole report folder: plots, ``report.json`` and ``report.md``."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_novelty.gate.record import CaseRecord
from pytest_novelty.pipeline.suite_data import SuiteData
from pytest_novelty.report.json_report import ReportFiles, write_json_report
from pytest_novelty.report.markdown import write_markdown_report
from pytest_novelty.report.plots import write_plots
from pytest_novelty.report.series import series_tables, write_series_plots
from pytest_novelty.report.spans import spans_markdown
from pytest_novelty.report.terminal import has_comparison, suite_note


def write_report(
    out_dir: str | Path,
    records: Sequence[CaseRecord],
    suites_data: Mapping[str, SuiteData] | None = None,
    versions: Mapping[str, Any] | None = None,
    *,
    step_summary: bool = True,
) -> ReportFiles:
    """Write the whole report folder: plots per suite, ``report.json`` and ``report.md``.

    With ``step_summary`` the markdown is also appended to ``$GITHUB_STEP_SUMMARY`` when that
    variable is set (GitHub Actions shows it on the job page). Every string is redacted first.
    A write the file system refuses (a full disk) raises one
    :class:`~pytest_novelty.infra.errors.HarnessError` line naming the folder and the cause, and
    leaves no earlier run's verdict behind (:func:`_no_verdict_left`).
    """
    from pytest_novelty.infra.redact import redact_data

    records = [r.redacted() for r in records]
    suites_data = {name: data.redacted() for name, data in (suites_data or {}).items()}
    versions = redact_data(versions)
    headers = {r.suite: r.header for r in records if r.header}
    suites = {}
    for name in sorted({*headers, *suites_data}):
        note = suite_note(suites_data[name]) if name in suites_data else ""
        suites[name] = "; ".join(part for part in (headers.get(name, ""), note) if part)
    note = ""
    if has_comparison(records) and not any(d.baseline is not None for d in suites_data.values()):
        note = (
            "The plots show the candidate only: a snapshot keeps per-prompt values of its metric, not "
            "per-generation arrays. `--baseline-model` overlays the baseline checkpoint."
        )
    folder = Path(out_dir)
    try:
        plots = write_plots(folder, suites_data)
        for suite, kinds in write_series_plots(folder, suites_data).items():  # --model-series
            plots.setdefault(suite, {}).update(kinds)
        json_path = write_json_report(folder, records, suites_data, versions, plots=plots)
        md_path = write_markdown_report(
            folder,
            records,
            versions,
            plots=plots,
            step_summary=step_summary,
            suites=suites,
            plot_note=note,
            sections=[*series_tables(suites_data), *spans_markdown({n: d.info for n, d in suites_data.items()})],
        )
    except OSError as exc:
        from pytest_novelty.infra.storage import folder_error

        error = folder_error(out_dir, "report folder", exc)
        _no_verdict_left(folder, f"the report could not be written: {error}")
        raise error from None
    return ReportFiles(json=json_path, markdown=md_path, plots=plots)


def _no_verdict_left(folder: Path, reason: str) -> None:
    """After a failed write: the report says there is no verdict, or (when even that cannot be
    written) holds no ``report.json`` / ``report.md`` at all, so a reader never takes an earlier
    run's files for this run's."""
    from pytest_novelty.infra.errors import NoveltyError
    from pytest_novelty.report.json_report import JSON_NAME, write_placeholder
    from pytest_novelty.report.markdown import MARKDOWN_NAME

    try:
        write_placeholder(folder, reason)
    except NoveltyError:
        for name in (JSON_NAME, MARKDOWN_NAME):
            with contextlib.suppress(OSError):
                (folder / name).unlink(missing_ok=True)
