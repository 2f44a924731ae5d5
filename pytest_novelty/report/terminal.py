"""The end-of-session table: one row per case, read from its :class:`~pytest_novelty.gate.record.CaseRecord`.

A record knows its own words (its verdict, its metric cell, its comparison); this module lays them
out. Without any compared case the table keeps its threshold-only layout, one block per suite; as
soon as one case was compared (with a snapshot, a baseline checkpoint, the references or an earlier
checkpoint) it has one row per case with what it was compared with, the change, its interval, p and
the pairs the test used.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_novelty.gate.record import CaseRecord, by_suite, sort_key
from pytest_novelty.pipeline.suite_data import RoundWork, SuiteData


def format_ci(ci: Sequence[float] | None) -> str:
    """``[-0.090, -0.050]``, or ``n/a`` when no interval was computed."""
    if not ci:
        return "n/a"
    low, high = ci
    return f"[{low:+.3f}, {high:+.3f}]"


def format_p(value: float | None) -> str:
    """``0.0123``, ``< 0.0001``, or ``n/a``."""
    if value is None or math.isnan(value):
        return "n/a"
    return "< 0.0001" if value < 0.0001 else f"{value:.4f}"


def _signed(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:+.4f}"


def value_ci_heading(records: Iterable[CaseRecord]) -> str:
    """``95% CI``: the column of the values' intervals, at the cases' confidence."""
    levels = sorted({r.confidence for r in records if r.confidence})
    return f"{100 * levels[0]:g}% CI" if len(levels) == 1 else "CI"


def mode_notes(records: Iterable[CaseRecord]) -> list[str]:
    """One line per threshold mode other than ``point`` in use, saying how it decides."""
    modes = sorted({r.mode for r in records if r.mode != "point"})
    words = {
        "lenient": "lenient thresholds fail only when the whole interval lies on the wrong side of the bound",
        "strict": "strict thresholds pass only when the whole interval lies on the right side of the bound",
    }
    return [words[m] for m in modes if m in words]


NOISE_LEGEND = "within noise: the value's interval contains the bound (another run could land on the other side)"


def has_comparison(records: Iterable[CaseRecord]) -> bool:
    """Whether any case was compared (or wrote a snapshot), and so needs those columns."""
    return any(r.comparison is not None or r.snapshot_written for r in records)


def compared_cell(record: CaseRecord) -> str:
    """What the case was compared with and its value: ``snapshot 0.4412``, ``baseline 0.3120``."""
    compared = record.compared
    if compared is None:
        return "n/a"
    value = "n/a" if compared.accepted_value is None else f"{compared.accepted_value:.4f}"
    return f"{compared.against} {value}"


def pairs_cell(record: CaseRecord) -> str:
    """How many paired prompts the significance test used; empty where no test ran."""
    compared = record.compared
    return "" if compared is None or not (compared.delta_ci or compared.test) else str(compared.n_pairs)


def tests_used(records: Iterable[CaseRecord]) -> list[str]:
    """The significance tests the comparisons used, each named once."""
    return sorted({r.compared.test for r in records if r.compared is not None and r.compared.test})


def aligned(cells: Sequence[Sequence[str]], indent: str) -> list[str]:
    """Rows of cells as a plain-text table: columns padded to their widest cell, a rule under the first row."""
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    lines = []
    for i, cell in enumerate(cells):
        lines.append(indent + "  ".join(text.ljust(w) for text, w in zip(cell, widths, strict=True)).rstrip())
        if i == 0:
            lines.append(indent + "  ".join("-" * w for w in widths))
    return lines


def _comparison_table(
    records: list[CaseRecord], headers: Mapping[str, str] | None, notes: Mapping[str, str] | None = None
) -> list[str]:
    suites = sorted({r.suite for r in records})
    lines = [f"suite {suite}: {headers[suite]}" for suite in suites if headers and suite in headers]
    lines += [f"  {suite}: {notes[suite]}" for suite in suites if notes and notes.get(suite)]
    cells: list[tuple[str, ...]] = [
        ("suite", "metric", "value", value_ci_heading(records), "threshold", "compared with", "delta", "delta CI",
         "p", "pairs", "verdict")
    ]  # fmt: skip
    for record in sorted(records, key=sort_key):
        compared = record.compared
        cells.append(
            (
                record.suite,
                record.metric_cell(),
                record.value_text(),
                record.ci_text(),
                record.bound,
                compared_cell(record),
                _signed(None if compared is None else compared.delta),
                format_ci(None if compared is None else compared.delta_ci),
                format_p(None if compared is None else compared.p_value),
                pairs_cell(record),
                record.verdict_text(),
            )
        )
    footer = [f"  CI and p: {t} (a drop is a regression when its CI lies below 0)" for t in tests_used(records)]
    return [*lines, *aligned(cells, "  "), *footer, ""]


def render_table(
    records: Iterable[CaseRecord],
    headers: Mapping[str, str] | None = None,
    notes: Mapping[str, str] | None = None,
) -> list[str]:
    """Lines of a plain-text table of the cases.

    ``headers`` maps a suite name to a line shown with it (model, judge, originality units);
    ``notes`` to a second line (the coverage and unscored shares every suite shows). Without a
    compared case: one block per suite with columns metric, value, CI, threshold, result; with one:
    one row per case with what it was compared with, the delta, its CI, p, the pairs and the verdict.
    """
    records = list(records)
    if has_comparison(records):
        return _comparison_table(records, headers, notes)
    lines: list[str] = []
    for suite, cases in by_suite(records).items():
        cells: list[tuple[str, ...]] = [("metric", "value", value_ci_heading(records), "threshold", "result")]
        for record in sorted(cases, key=lambda r: r.metric):
            cells.append((record.metric_cell(), record.value_text(), record.ci_text(), record.bound,
                          record.result_text()))  # fmt: skip
        lines.append(f"suite {suite}" + (f"  ({headers[suite]})" if headers and suite in headers else ""))
        if notes and notes.get(suite):
            lines.append(f"  {notes[suite]}")
        lines.extend(aligned(cells, "  "))
        # A harness error's cause is already in pytest's own error report, once: the table names
        # the kind only (a crashed worker's message is shown, nothing else prints it).
        lines.extend(
            f"  {r.metric}: "
            + ("harness error (cause printed above)" if r.message.startswith("harness error") else r.message)
            for r in cases
            if r.is_error and r.message
        )
        lines.append("")
    return lines


#: What the shares in :func:`shares_note` mean, printed once under the table.
SHARES_LEGEND = (
    "coverage@n: share of answers with at least one n-gram of order n (shorter ones count as novelty 0); "
    "unscored: share the judge gave no score (left out of quality and novelty)"
)


def shares_note(data: SuiteData) -> str:
    """``coverage@4 0.9850, ...; unscored 0.0000 (0 of 200 answers)``: the shares every suite shows."""
    shares, total = data.shares, data.candidate.answers
    parts = []
    for name in sorted((k for k in shares if k.startswith("coverage@")), key=lambda k: int(k.split("@")[1])):
        value = shares[name]
        parts.append(f"{name} {'n/a' if value is None else f'{value:.4f}'}")
    unscored = shares.get("unscored")
    if unscored is not None:
        parts.append(f"unscored {unscored:.4f} ({round(unscored * total)} of {total} answers)")
    return ", ".join(parts)


def suite_note(data: SuiteData) -> str:
    """The line under a suite's header: its shares (:func:`shares_note`) and, for answers read from
    files, what their source said (prompt texts it accepted that differ from the suite's)."""
    return "; ".join(part for part in (shares_note(data), data.info.answers_note) if part)


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


def _rounds_text(what: str, rounds: Sequence[RoundWork]) -> str:
    made, kept = sum(r.generated_rows for r in rounds), sum(r.cached_rows for r in rounds)
    return f"; {what}: {made} samples generated ({kept} from cache)" if rounds else ""


def work_summary(suite_data: Mapping[str, SuiteData], repairs: int = 0) -> str:
    """One line with the work a run did: what a warm rerun should show as zeros."""
    from pytest_novelty.pipeline.export import batches_text

    infos = [d.info for d in suite_data.values()]
    if not infos:
        return ""
    line = (
        f"novelty work done: {sum(i.generated_rows for i in infos)} samples generated in "
        f"{batches_text(sum(i.generated_batches for i in infos))} ({sum(i.cached_rows for i in infos)} from cache), "
        f"{sum(i.originality_lookups for i in infos)} originality lookups, "
        f"{sum(i.judge_requests for i in infos)} judge requests"
    )
    read = sum(i.read_rows for i in infos)
    if read:  # --model answers:FILE
        line += f", {read} answers read from files"
    if repairs:
        line += f"; warning: {repairs} damaged cache entries dropped and recomputed"
    line += _rounds_text("repeats", [r for d in suite_data.values() for r in d.repeats])  # --novelty-repeat
    line += _rounds_text("adaptive rounds", [r for d in suite_data.values() for r in d.adaptive])
    earlier = [e for d in suite_data.values() for e in d.series[:-1]]
    if earlier:  # --model-series: the checkpoints before the candidate
        made, kept = sum(int(e["generated_rows"]) for e in earlier), sum(int(e["cached_rows"]) for e in earlier)
        line += f"; earlier checkpoints: {made} samples generated ({kept} from cache)"
    return line


def gate_summary(records: Sequence[CaseRecord], suite_data: Mapping[str, SuiteData], repairs: int = 0) -> list[str]:
    """The lines every front end prints at the end of a run: the table of cases (with each suite's
    header and shares), the shares' legend, the series tables and the work line."""
    from pytest_novelty.report.series import series_tables

    lines: list[str] = []
    if records:
        headers = {r.suite: r.header for r in records if r.header}
        notes = {name: suite_note(data) for name, data in suite_data.items()}
        lines += render_table(records, headers, notes)
        if any(notes.values()):
            lines.append(SHARES_LEGEND)
        if any(r.within_noise for r in records):
            lines.append(NOISE_LEGEND)
        lines += mode_notes(records)
        for name in sorted(suite_data):
            lines += detectable_lines(name, suite_data[name].detectable)
            lines += consistency_lines(name, suite_data[name].info.judge_consistency)
        lines += series_tables(suite_data)
    work = work_summary(suite_data, repairs)
    if work:
        lines.append(work)
    return lines
