"""The end-of-session table: one row per gated metric.

Rows are plain dicts. Every row carries ``suite``, ``metric``, ``value``, ``op``, ``threshold`` and
``passed`` (the case's overall outcome, as pytest decided it); ``outcome`` is pytest's word for it
(``passed``, ``failed``, ``error`` for a harness error or a crashed worker). A row compared with a
snapshot or a baseline checkpoint also carries ``baseline``, ``delta``, ``delta_ci`` ([low, high] or
None), ``p_value``, ``n_pairs``, ``test``, ``status`` (see
:data:`pytest_novelty.gate.regression.STATUSES`) and ``verdict`` (the status in words). A q@Tail
row carries ``tail``: which frozen tail it was judged on. Without any compared row the table keeps
its threshold-only layout, one block per suite.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

COMPARISON_KEYS = ("baseline", "delta", "delta_ci", "verdict")


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _signed(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{float(value):+.4f}"


def format_ci(ci: Sequence[float] | None) -> str:
    """``[-0.090, -0.050]``, or ``n/a`` when no interval was computed."""
    if not ci:
        return "n/a"
    low, high = ci
    return f"[{low:+.3f}, {high:+.3f}]"


def value_ci(row: Mapping[str, Any]) -> str:
    """The value's interval, ``[0.290, 0.388]``; empty where none was computed."""
    ci = row.get("ci")
    if not ci or any(b is None for b in ci):
        return "" if not ci else "n/a"
    return f"[{float(ci[0]):.3f}, {float(ci[1]):.3f}]"


def value_ci_heading(rows: Iterable[Mapping[str, Any]]) -> str:
    """``95% CI``: the column of the values' intervals, at the rows' confidence."""
    levels = sorted({float(r["confidence"]) for r in rows if r.get("confidence")})
    return f"{100 * levels[0]:g}% CI" if len(levels) == 1 else "CI"


def mode_notes(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per threshold mode other than ``point`` in use, saying how it decides."""
    modes = sorted({str(r.get("threshold_mode")) for r in rows if r.get("threshold_mode") not in (None, "point")})
    words = {
        "lenient": "lenient thresholds fail only when the whole interval lies on the wrong side of the bound",
        "strict": "strict thresholds pass only when the whole interval lies on the right side of the bound",
    }
    return [words[m] for m in modes if m in words]


NOISE_LEGEND = "within noise: the value's interval contains the bound (another run could land on the other side)"


def has_comparison(rows: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any row was compared with a snapshot or a baseline (and so needs those columns)."""
    return any(any(row.get(key) is not None for key in COMPARISON_KEYS) for row in rows)


def threshold_met(row: Mapping[str, Any]) -> bool:
    """Whether the row's threshold passed, as the case decided it (its mode may read the value's
    interval); for a row without that decision, whether the value meets the bound (a row without a
    threshold meets it; NaN never does)."""
    if row.get("threshold_passed") is not None:
        return bool(row["threshold_passed"])
    if row.get("op") is None or row.get("threshold") is None:
        return True
    value = row.get("value")
    if value is None or math.isnan(float(value)):
        return False
    return float(value) >= row["threshold"] if row["op"] == ">=" else float(value) <= row["threshold"]


def is_error(row: Mapping[str, Any]) -> bool:
    """Whether pytest reported the case as an error (harness error, crashed worker), not a verdict."""
    return row.get("outcome") == "error"


def metric_cell(row: Mapping[str, Any]) -> str:
    """The metric's name, with the tail it was judged on for q@Tail rows."""
    return f"{row['metric']} ({row['tail']})" if row.get("tail") else str(row["metric"])


def verdict_text(row: Mapping[str, Any]) -> str:
    """What the verdict cell says: the threshold outcome and the comparison's verdict, FAIL first."""
    if is_error(row):
        return "ERROR (harness, no verdict)"
    notes = []
    noise = " (within noise)" if row.get("within_noise") else ""
    if not threshold_met(row):
        notes.append(f"FAIL {row['op']} {row['threshold']:g}{noise}")
    elif noise:
        notes.append(f"pass{noise}")
    if row.get("status") == "regressed":
        notes.append("FAIL regression")
    elif row.get("verdict"):
        notes.append(str(row["verdict"]))
    if not row.get("passed", True) and not any(note.startswith("FAIL") for note in notes):
        notes.insert(0, "FAIL")
    return ("; ".join(notes) or "pass") + repeats_note(row)


def repeats_note(row: Mapping[str, Any]) -> str:
    """``; 2 of 3 repeats pass (0.3301 .. 0.3452)``: how the case fares over ``--novelty-repeat``."""
    repeats = row.get("repeats")
    if not repeats:
        return ""
    passed, total = sum(bool(p) for p in repeats["passed"]), len(repeats["passed"])
    spread = repeats.get("spread")
    span = f" ({spread[0]:.4f} .. {spread[2]:.4f})" if spread else ""
    return f"; {passed} of {total} repeats pass{span}"


def _lines(cells: list[tuple[str, ...]], indent: str) -> list[str]:
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    lines = []
    for i, cell in enumerate(cells):
        lines.append(indent + "  ".join(text.ljust(w) for text, w in zip(cell, widths, strict=True)).rstrip())
        if i == 0:
            lines.append(indent + "  ".join("-" * w for w in widths))
    return lines


def _threshold_cell(row: Mapping[str, Any]) -> str:
    if row.get("op") is None or row.get("threshold") is None:
        return ""
    return f"{row['op']} {row['threshold']:g}"


def pairs_cell(row: Mapping[str, Any]) -> str:
    """How many paired prompts the significance test used; empty where no test ran."""
    return "" if row.get("n_pairs") is None or not (row.get("delta_ci") or row.get("test")) else str(row["n_pairs"])


def format_p(value: Any) -> str:
    """``0.0123``, ``< 0.0001``, or ``n/a``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return "< 0.0001" if float(value) < 0.0001 else f"{float(value):.4f}"


def _comparison_table(
    rows: list[Mapping[str, Any]], headers: Mapping[str, str] | None, notes: Mapping[str, str] | None = None
) -> list[str]:
    lines = [
        f"suite {suite}: {headers[suite]}"
        for suite in sorted({str(r["suite"]) for r in rows})
        if headers and suite in headers
    ]
    for suite in sorted({str(r["suite"]) for r in rows}):
        if notes and notes.get(suite):
            lines.append(f"  {suite}: {notes[suite]}")
    cells: list[tuple[str, ...]] = [
        ("suite", "metric", "value", value_ci_heading(rows), "threshold", "baseline", "delta", "delta CI", "p",
         "pairs", "verdict")
    ]  # fmt: skip
    for row in sorted(rows, key=lambda r: (str(r["suite"]), str(r["metric"]), str(r.get("op")))):
        cells.append(
            (
                str(row["suite"]),
                metric_cell(row),
                _fmt(row.get("value")),
                value_ci(row),
                _threshold_cell(row),
                _fmt(row.get("baseline")),
                _signed(row.get("delta")),
                format_ci(row.get("delta_ci")),
                format_p(row.get("p_value")),
                pairs_cell(row),
                verdict_text(row),
            )
        )
    tests = sorted({str(r["test"]) for r in rows if r.get("test")})
    footer = [f"  CI and p: {t} (a drop is a regression when its CI lies below 0)" for t in tests]
    return [*lines, *_lines(cells, "  "), *footer, ""]


def render_table(
    rows: Iterable[Mapping[str, Any]],
    headers: Mapping[str, str] | None = None,
    notes: Mapping[str, str] | None = None,
) -> list[str]:
    """Lines of a plain-text table of the gated metrics.

    ``headers`` maps a suite name to a line shown with it (model, judge, originality units);
    ``notes`` to a second line (the coverage and unscored shares every suite shows). Rows without
    comparison fields give one block per suite with columns metric, value, threshold, result; as
    soon as one row carries ``baseline``/``delta``/``delta_ci``/``verdict`` the table has one row per
    case with columns suite, metric, value, threshold, baseline, delta, CI and verdict.
    """
    rows = list(rows)
    if has_comparison(rows):
        return _comparison_table(rows, headers, notes)
    by_suite: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_suite.setdefault(str(row["suite"]), []).append(row)
    lines: list[str] = []
    for suite in sorted(by_suite):
        cells: list[tuple[str, ...]] = [("metric", "value", value_ci_heading(rows), "threshold", "result")]
        for row in sorted(by_suite[suite], key=lambda r: str(r["metric"])):
            verdict = "ERROR" if is_error(row) else "pass" if row.get("passed", True) else "FAIL"
            if row.get("within_noise") and not is_error(row):
                verdict += " (within noise)"
            verdict += repeats_note(row)
            cells.append(
                (metric_cell(row), _fmt(row.get("value")), value_ci(row), _threshold_cell(row), verdict)
            )
        lines.append(f"suite {suite}" + (f"  ({headers[suite]})" if headers and suite in headers else ""))
        if notes and notes.get(suite):
            lines.append(f"  {notes[suite]}")
        lines.extend(_lines(cells, "  "))
        errors = [r for r in by_suite[suite] if is_error(r) and r.get("message")]
        # A harness error's cause is already in pytest's own error report, once: the table names
        # the kind only (a crashed worker's message is shown, nothing else prints it).
        lines.extend(
            f"  {r['metric']}: "
            + ("harness error (cause printed above)" if str(r["message"]).startswith("harness error") else r["message"])
            for r in errors
        )
        lines.append("")
    return lines


#: What the shares in :func:`shares_note` mean, printed once under the table.
SHARES_LEGEND = (
    "coverage@n: share of answers with at least one n-gram of order n (shorter ones count as novelty 0); "
    "unscored: share the judge gave no score (left out of quality and novelty)"
)


def shares_note(data: Mapping[str, Any]) -> str:
    """``coverage@4 0.9850, ...; unscored 0.0000 (0 of 200 answers)``: the shares every suite shows.

    ``data`` is a suite's report data (:class:`pytest_novelty.report.json_report.SuiteData`):
    ``shares`` maps ``coverage@n`` and ``unscored`` to their values, ``quality`` the answers.
    """
    shares = data.get("shares") or {}
    total = sum(len(row) for row in data.get("quality") or [])
    parts = []
    for name in sorted((k for k in shares if k.startswith("coverage@")), key=lambda k: int(k.split("@")[1])):
        value = shares[name]
        parts.append(f"{name} {'n/a' if value is None else f'{value:.4f}'}")
    unscored = shares.get("unscored")
    if unscored is not None:
        parts.append(f"unscored {unscored:.4f} ({round(unscored * total)} of {total} answers)")
    return ", ".join(parts)


def suite_note(data: Mapping[str, Any]) -> str:
    """The line under a suite's header: its shares (:func:`shares_note`) and, for answers read from
    files, what their source said (prompt texts it accepted that differ from the suite's)."""
    answers = str((data.get("info") or {}).get("answers_note") or "")
    return "; ".join(part for part in (shares_note(data), answers) if part)


def detectable_lines(suite: str, detectable: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``story: detects a drop of 0.075 in novelty@5, ...``, and the metrics whose tolerance lies
    below what the suite can detect, with the prompts that would detect it."""
    from pytest_novelty.metrics.power import CONSTANT

    # A metric that did not vary in this run (no answer unscored, say) gives no noise to plan with.
    found = {m: d for m, d in sorted(detectable.items()) if d.get("effect") is not None and d.get("basis") != CONSTANT}
    if not found:
        return []
    first = next(iter(found.values()))
    effects = ", ".join(f"{d['effect']:.3f} in {m}" for m, d in found.items())
    lines = [f"{suite}: detects a drop of {effects} (paired, {100 * float(first['power']):g} % power at alpha "
             f"{float(first['alpha']):.2g})"]
    short = [f"{m} ({d['tolerance']:g}: {d['prompts_for_tolerance']} prompts)"
             for m, d in found.items() if d.get("prompts_for_tolerance")]
    if short:
        lines.append(f"  {suite}: tolerance below what it can detect, prompts needed for it: {', '.join(short)}")
    return lines


def consistency_lines(suite: str, consistency: Mapping[str, Any] | None) -> list[str]:
    """How consistent the suite's judge was with itself, and a warning when too many answers' samples
    disagree by two points or more (``[scoring] max_judge_spread``)."""
    if not consistency or consistency.get("wide_share") is None:
        return []
    share, bound = float(consistency["wide_share"]), float(consistency.get("max_spread", 1.0))
    line = (f"{suite}: judge consistency: mean sd {float(consistency['mean_sd']):.2f} points over the samples of "
            f"one answer, {share:.0%} of {consistency['answers']} answers span {consistency['span']:g}+ points")
    if share > bound:
        return [f"warning: {line}, above scoring.max_judge_spread = {bound:g}: the judge is inconsistent with itself"]
    return [line]


def work_summary(suite_data: Mapping[str, Mapping[str, Any]], repairs: int = 0) -> str:
    """One line with the work a run did: what a warm rerun should show as zeros."""
    from pytest_novelty.pipeline.export import batches_text

    infos = [d.get("info", {}) for d in suite_data.values()]
    if not infos:
        return ""
    batches = sum(int(i.get("generated_batches", 0)) for i in infos)
    line = (
        f"novelty work done: {sum(int(i.get('generated_rows', 0)) for i in infos)} samples generated in "
        f"{batches_text(batches)} ({sum(int(i.get('cached_rows', 0)) for i in infos)} from cache), "
        f"{sum(int(i.get('originality_lookups', 0)) for i in infos)} originality lookups, "
        f"{sum(int(i.get('judge_requests', 0)) for i in infos)} judge requests"
    )
    read = sum(int(i.get("read_rows", 0)) for i in infos)
    if read:  # --model answers:FILE
        line += f", {read} answers read from files"
    if repairs:
        line += f"; warning: {repairs} damaged cache entries dropped and recomputed"
    repeats = [e for d in suite_data.values() for e in (d.get("repeats") or [])]
    if repeats:  # --novelty-repeat: the runs after the first
        made, kept = sum(int(e["generated_rows"]) for e in repeats), sum(int(e["cached_rows"]) for e in repeats)
        line += f"; repeats: {made} samples generated ({kept} from cache)"
    earlier = [e for d in suite_data.values() for e in (d.get("series") or [])[:-1]]
    if earlier:  # --model-series: the checkpoints before the candidate
        made, kept = sum(int(e["generated_rows"]) for e in earlier), sum(int(e["cached_rows"]) for e in earlier)
        line += f"; earlier checkpoints: {made} samples generated ({kept} from cache)"
    return line


def gate_summary(
    rows: Sequence[Mapping[str, Any]], suite_data: Mapping[str, Mapping[str, Any]], repairs: int = 0
) -> list[str]:
    """The lines every front end prints at the end of a run: the table of cases (with each suite's
    header and shares), the shares' legend, the series tables and the work line."""
    from pytest_novelty.report.series import series_tables

    lines: list[str] = []
    if rows:
        headers = {str(r["suite"]): str(r["header"]) for r in rows if r.get("header")}
        notes = {name: suite_note(data) for name, data in suite_data.items()}
        lines += render_table(rows, headers, notes)
        if any(notes.values()):
            lines.append(SHARES_LEGEND)
        if any(r.get("within_noise") for r in rows):
            lines.append(NOISE_LEGEND)
        lines += mode_notes(rows)
        for name in sorted(suite_data):
            lines += detectable_lines(name, suite_data[name].get("detectable") or {})
            lines += consistency_lines(name, (suite_data[name].get("info") or {}).get("judge_consistency"))
        lines += series_tables(suite_data)
    work = work_summary(suite_data, repairs)
    if work:
        lines.append(work)
    return lines
