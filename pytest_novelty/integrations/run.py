"""What a tracker logs: one typed value, :class:`TrackedRun`, built from a run's report.

The trackers, the Trainer callback and the HTML report read a :class:`TrackedRun` and nothing
else; it is built by one adapter, :meth:`TrackedRun.from_report`, from the content of
``report.json`` (:func:`pytest_novelty.report.json_report.build_report`, which the front ends write
from their case records and suite data); its cases are those records, read back as they were
written. No metric is computed here: every number is one the metrics
step or the case decided on.

A run logs one or more :class:`Point` s, each a checkpoint at its training step:

* a single checkpoint: one point, at the step its folder name (``checkpoint-<step>``) or its
  ``trainer_state.json`` (``global_step``) gives, else step 0;
* a series (``--model-series``): one point per checkpoint, in step order, the gated one last.

A point's scalars are, per suite, every gated metric (the value its case decided on: for q@Tail
the value on the frozen tail, after a comparison the compared value) and the standard values the
metrics step computed beside them: ``quality``, ``originality@n`` and ``coverage@n`` for every
n-gram order the suite scores, and ``unscored``. An earlier checkpoint of a series has what its
series entry holds: its gated metrics and the means of quality, originality and novelty.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_novelty.gate.record import CaseRecord, sort_key
from pytest_novelty.pipeline.suite_data import SuiteInfo
from pytest_novelty.report.json_report import read_records
from pytest_novelty.report.spans import CopiedSpan, copied_spans, creativity_passages, span_table, table_cell

#: The prefix of every name the trackers log.
PREFIX = "novelty"

_STANDARD = re.compile(r"^(quality|unscored|originality@\d+|coverage@\d+|uniqueness@\d+|creativity_index)$")
_CHECKPOINT = re.compile(r"checkpoint-(\d+)$")


def checkpoint_step(model: str | None) -> int:
    """The training step of a checkpoint: from a ``checkpoint-<step>`` folder name, else from the
    folder's ``trainer_state.json`` (``global_step``), else 0 (a hub id, a served model, the demo)."""
    if not model:
        return 0
    path = Path(str(model))
    found = _CHECKPOINT.search(path.name)
    if found:
        return int(found.group(1))
    try:
        state = json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    step = state.get("global_step") if isinstance(state, dict) else None
    return int(step) if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else 0


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(float(value)) else None


@dataclass(frozen=True)
class Point:
    """One checkpoint's values at its training step: suite → name → value."""

    step: int
    model: str
    scalars: Mapping[str, Mapping[str, float]]

    def flat(self) -> dict[str, float]:
        """``{"novelty/<suite>/<name>": value}``, the names every tracker logs."""
        return {
            f"{PREFIX}/{suite}/{name}": value
            for suite, values in sorted(self.scalars.items())
            for name, value in sorted(values.items())
        }


@dataclass(frozen=True)
class TrackedRun:
    """Everything a tracker shows about one gate run; the last point is the gated checkpoint."""

    identity: Mapping[str, str]
    """What produced the numbers: model, its content identity, suites, judge, index, units, versions."""
    points: tuple[Point, ...]
    cases: tuple[CaseRecord, ...]
    plots: Mapping[str, Mapping[str, Path]] = field(default_factory=dict)
    """Per suite, plot kind → PNG file."""
    spans: Mapping[str, tuple[CopiedSpan, ...]] = field(default_factory=dict)
    """Per suite, its longest copied spans (longest first), then the copied passages behind its
    Creativity Index (when it gates on it: the answers with the lowest index first)."""

    @property
    def gated(self) -> Point:
        """The point of the gated checkpoint (the newest of a series)."""
        return self.points[-1]

    @property
    def step(self) -> int:
        return self.gated.step

    @property
    def suites(self) -> list[str]:
        """Every suite with a case, a value, a plot or a span, sorted."""
        names = {c.suite for c in self.cases} | set(self.gated.scalars) | set(self.plots) | set(self.spans)
        return sorted(names)

    @property
    def passed(self) -> bool:
        """Whether every case passed (an error or a failure makes it False)."""
        return bool(self.cases) and all(c.passed for c in self.cases)

    def summary_scalars(self) -> dict[str, float]:
        """Run-level values logged at the gated step: ``novelty/passed`` (1 when every case passed)
        and the numbers of failed and errored cases."""
        return {
            f"{PREFIX}/passed": 1.0 if self.passed else 0.0,
            f"{PREFIX}/cases_failed": float(sum(c.failed for c in self.cases)),
            f"{PREFIX}/cases_errored": float(sum(c.is_error for c in self.cases)),
        }

    def cases_of(self, suite: str) -> list[CaseRecord]:
        return sorted((c for c in self.cases if c.suite == suite), key=sort_key)

    def cases_markdown(self, suite: str) -> str:
        """The suite's cases as a Markdown table (metric, value, bound, outcome, comparison)."""
        lines = ["| metric | value | bound | outcome | comparison |", "|---|---|---|---|---|"]
        for case in self.cases_of(suite):
            comparison = case.comparison_text() or (case.message if case.is_error else "")
            cells = (case.metric, case.value_text(), case.bound, case.outcome, table_cell(comparison))
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def spans_markdown(self, suite: str) -> str:
        """The suite's copied spans as a Markdown table, or ``""`` when nothing was copied."""
        spans = self.spans.get(suite) or ()
        return "\n".join(span_table(spans)) if spans else ""

    # -- the adapter ----------------------------------------------------------------------------

    @classmethod
    def from_report(cls, report: Mapping[str, Any], folder: str | Path | None = None) -> TrackedRun:
        """The run that ``report`` (the content of ``report.json``) describes; plot files are
        resolved against ``folder``, the report's folder (left out when it is not given)."""
        versions = dict(report.get("versions") or {})
        suites = {str(k): dict(v) for k, v in dict(report.get("suites") or {}).items()}
        cases = tuple(read_records(report))
        gated = _gated_values(cases, suites)
        series = list(report.get("series") or [])
        model = str(versions.get("model") or "")
        if series:
            entries = sorted(series, key=lambda e: int(e["step"]))
            points = [_series_point(e) for e in entries[:-1]]
            points.append(Point(int(entries[-1]["step"]), str(entries[-1].get("model") or model), gated))
        else:
            points = [Point(checkpoint_step(model), model, gated)]
        plots: dict[str, dict[str, Path]] = {}
        if folder is not None:
            for suite, kinds in dict(report.get("plots") or {}).items():
                files = {str(k): Path(folder) / str(name) for k, name in dict(kinds or {}).items()}
                present = {k: p for k, p in files.items() if p.is_file()}
                if present:
                    plots[str(suite)] = present
        infos = {name: SuiteInfo.from_json(dict(data.get("info") or {})) for name, data in suites.items()}
        longest, passages = copied_spans(infos), creativity_passages(infos)
        spans = {name: (*longest.get(name, ()), *passages.get(name, ())) for name in sorted({*longest, *passages})}
        return cls(_identity(versions, suites), tuple(points), cases, plots, spans)

    @classmethod
    def from_report_file(cls, path: str | Path) -> TrackedRun:
        """The run a ``report.json`` file describes (its plots beside it)."""
        file = Path(path)
        return cls.from_report(json.loads(file.read_text(encoding="utf-8")), file.parent)


def _gated_values(
    cases: Iterable[CaseRecord], suites: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, float]]:
    """Per suite: the standard values the metrics step computed, then every gated metric's value
    as its case decided it (which wins where both name the same metric)."""
    out: dict[str, dict[str, float]] = {}
    for name, data in suites.items():
        metrics = dict(data.get("metrics") or {})
        if not metrics:  # a report written before the suite data kept its metrics: the shares it showed
            metrics = dict(data.get("shares") or {})
        values = {k: _number(v) for k, v in metrics.items() if _STANDARD.match(str(k))}
        out[name] = {k: v for k, v in values.items() if v is not None}
    for case in cases:
        if case.value is not None:
            out.setdefault(case.suite, {})[case.metric] = case.value
    return out


def _series_point(entry: Mapping[str, Any]) -> Point:
    """An earlier checkpoint of a series: per suite, its means and its gated metrics."""
    scalars: dict[str, dict[str, float]] = {}
    for suite, values in dict(entry.get("suites") or {}).items():
        merged = {**dict(values.get("means") or {}), **dict(values.get("metrics") or {})}
        scalars[str(suite)] = {str(k): v for k, v in ((k, _number(v)) for k, v in merged.items()) if v is not None}
    return Point(int(entry["step"]), str(entry.get("model") or ""), scalars)


def _identity(versions: Mapping[str, Any], suites: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The run's identity as flat strings (tracker configs and params take strings)."""
    infos = [dict(d.get("info") or {}) for d in suites.values()]
    identities = sorted({str(i["identity"]) for i in infos if i.get("identity")})
    out = {
        "model": versions.get("model"),
        "identity": ", ".join(identities),
        "identity_id": versions.get("identity_id"),
        "baseline_model": versions.get("baseline_model"),
        "model_series": versions.get("model_series"),
        "suites": ", ".join(sorted(suites)) or ", ".join(sorted(dict(versions.get("suites") or {}))),
        "judge": versions.get("judge"),
        "index": versions.get("index"),
        "originality_units": versions.get("originality units"),
        "pytest_novelty": versions.get("pytest-novelty") or versions.get("pytest_novelty"),
    }
    return {k: str(v) for k, v in out.items() if v not in (None, "")}
