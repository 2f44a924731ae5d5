"""The report folder: ``report.json`` (everything, machine-readable), ``report.md`` and the plots.

:func:`write_report` is the entry point; it writes the plots first so that ``report.json`` can list
them. Inputs are plain data so the controller can build them from what xdist workers sent:

* ``records``: one :class:`~pytest_novelty.gate.record.CaseRecord` per case, written as its
  :meth:`~pytest_novelty.gate.record.CaseRecord.to_json` under ``rows`` and read back with
  :func:`read_records`;
* ``suites_data``: per suite, a :class:`SuiteData` with the per-generation arrays;
* ``versions``: what produced the numbers, e.g. ``{"model": ..., "suites": ..., "judge": ...,
  "index": ...}``; values are strings or small JSON values.

NaN becomes null and floats are rounded to 6 decimals; every file is written atomically.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from pytest_novelty.gate.record import CaseRecord, sort_key
from pytest_novelty.infra.storage import atomic_write_json
from pytest_novelty.pipeline.suite_data import GenerationArrays, SuiteData
from pytest_novelty.report.data import as_vector

#: The layout of ``report.json``. 2: every row is a case record as
#: :meth:`~pytest_novelty.gate.record.CaseRecord.to_json` writes it (the comparison nested under
#: ``comparison``, the tail under ``tail``, ``outcome`` always present); 1 had flat rows.
REPORT_FORMAT = 2
JSON_NAME = "report.json"


@dataclass(frozen=True)
class ReportFiles:
    """What :func:`write_report` wrote."""

    json: Path
    markdown: Path
    plots: dict[str, dict[str, Path]] = field(default_factory=dict)


def clean(value: Any) -> Any:
    """A JSON-safe copy: NaN and inf become None, floats keep 6 decimals, arrays become lists."""
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return clean(value.tolist())
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return round(number, 6) if math.isfinite(number) else None
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, str):
        return value
    return str(value)


def _summary(arrays: GenerationArrays) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, grid in (("quality", arrays.quality), ("originality", arrays.originality), ("novelty", arrays.novelty)):
        values = as_vector(grid)
        present = values[~np.isnan(values)]
        out[name] = {
            "mean": float(present.mean()) if present.size else None,
            "count": int(present.size),
            "unscored": int(values.size - present.size),
        }
    return out


def _arrays_entry(arrays: GenerationArrays) -> dict[str, Any]:
    """A checkpoint's arrays as ``report.json`` keeps them, with their summary."""
    entry: dict[str, Any] = {"quality": arrays.quality, "originality": arrays.originality, "novelty": arrays.novelty}
    if arrays.model:
        entry["model"] = arrays.model
    return {**entry, "summary": _summary(arrays)}


def _suite_entry(data: SuiteData) -> dict[str, Any]:
    entry: dict[str, Any] = {"n": data.n, "info": data.info.to_json(), "candidate": _arrays_entry(data.candidate)}
    if data.shares:
        entry["shares"] = dict(data.shares)
    if data.metrics:
        entry["metrics"] = dict(data.metrics)
    if data.detectable:  # metric -> the smallest drop a comparison detects (80 % power)
        entry["detectable"] = dict(data.detectable)
    if data.baseline is not None:
        entry["baseline"] = {**_arrays_entry(data.baseline), "shares": dict(data.baseline.shares)}
    return entry


def _own_version() -> str:
    try:
        return metadata.version("pytest-novelty")
    except metadata.PackageNotFoundError:
        return "unknown"


def summarize(records: Sequence[CaseRecord]) -> dict[str, int]:
    """Counts of cases as pytest decided them: total, passed, failed (gate failures), errors (harness
    errors and crashed workers, which decide nothing), threshold failures, regressions, drift
    warnings (drops within tolerance or not significant) and improvements."""
    return {
        "cases": len(records),
        "passed": sum(r.passed for r in records),
        "failed": sum(r.failed for r in records),
        "errors": sum(r.is_error for r in records),
        "threshold_failures": sum(not r.is_error and not r.met for r in records),
        "regressions": sum(r.regressed for r in records),
        "warnings": sum(r.drifted for r in records),
        "improvements": sum(r.status == "improved" for r in records),
    }


def read_records(report: Mapping[str, Any]) -> list[CaseRecord]:
    """The case records of ``report`` (the content of a ``report.json``); ``ValueError`` naming the
    format when the file was written in another one."""
    if report.get("format") != REPORT_FORMAT:
        raise ValueError(f"report format {report.get('format')!r}, this version reads format {REPORT_FORMAT}")
    return [CaseRecord.from_json(row) for row in report.get("rows") or []]


def build_report(
    records: Sequence[CaseRecord],
    suites_data: Mapping[str, SuiteData] | None = None,
    versions: Mapping[str, Any] | None = None,
    *,
    plots: Mapping[str, Mapping[str, Path]] | None = None,
    created: datetime | None = None,
) -> dict[str, Any]:
    """The content of ``report.json`` as a JSON-safe dict.

    ``plots`` maps suite → plot kind → file; files are stored relative to the report folder by
    their name. ``created`` defaults to now (UTC).
    """
    stamp = (created or datetime.now(UTC)).isoformat(timespec="seconds")
    report = {
        "format": REPORT_FORMAT,
        "created": stamp,
        "versions": {"pytest_novelty": _own_version(), **dict(versions or {})},
        "summary": {**summarize(records), "complete": True},
        "rows": [r.to_json() for r in sorted(records, key=sort_key)],
        "suites": {name: _suite_entry(data) for name, data in sorted((suites_data or {}).items())},
        "plots": {s: {k: Path(p).name for k, p in kinds.items()} for s, kinds in sorted((plots or {}).items())},
    }
    from pytest_novelty.report.series import series_report

    series = series_report(suites_data)
    if series:  # --model-series: one entry per checkpoint, in step order
        report["series"] = series
    cleaned: dict[str, Any] = clean(report)
    return cleaned


def write_placeholder(out_dir: str | Path, reason: str, status: int | None = None) -> None:
    """Replace a previous report with one that says no verdict was reached (yet).

    Written when a run starts, so a run that stops before its summary (a configuration or harness
    error, an interrupted session) never leaves the previous run's "all passed" on disk, and again
    with ``status``, the exit status the run ends with, once that is known (a run stopped by its
    preflight, by bad input). The plots the previous ``report.json`` listed are removed with it. A
    write the file system refuses raises one :class:`~pytest_novelty.infra.errors.HarnessError`
    line naming the folder.
    """
    from pytest_novelty.infra.storage import atomic_write_text, folder_error, read_json

    folder = Path(out_dir)
    try:
        old = read_json(folder / JSON_NAME)
        if isinstance(old, dict):
            for kinds in dict(old.get("plots") or {}).values():
                for name in dict(kinds or {}).values():
                    (folder / Path(str(name)).name).unlink(missing_ok=True)
        report = build_report([], None, {"status": reason, **({} if status is None else {"exit status": int(status)})})
        report["summary"]["complete"] = False
        atomic_write_json(folder / JSON_NAME, report)
        said = "" if status is None else f"\n- exit status: `{int(status)}`\n"
        atomic_write_text(folder / "report.md", f"## Novelty gate\n\n**no verdict**: {reason}\n{said}")
    except OSError as exc:
        raise folder_error(out_dir, "report folder", exc) from None


def record_no_verdict(out_dir: str | Path, reason: str, status: int) -> None:
    """The report folder of a run that reaches no verdict says so, why, and the exit status the run
    ends with (:func:`write_placeholder`); a folder that cannot be written is left as it is, since
    the run's own error already says why it stops."""
    from contextlib import suppress

    from pytest_novelty.infra.errors import NoveltyError

    with suppress(OSError, NoveltyError):
        write_placeholder(out_dir, reason, int(status))


def write_json_report(
    out_dir: str | Path,
    records: Sequence[CaseRecord],
    suites_data: Mapping[str, SuiteData] | None = None,
    versions: Mapping[str, Any] | None = None,
    *,
    plots: Mapping[str, Mapping[str, Path]] | None = None,
) -> Path:
    """Write ``report.json`` into ``out_dir`` (created if needed) and return its path."""
    path = Path(out_dir) / JSON_NAME
    atomic_write_json(path, build_report(records, suites_data, versions, plots=plots))
    return path
