"""The case decision: one (suite, metric, threshold) of one run, decided once, in one place.

:func:`decide` takes typed inputs (the suite run, the threshold, the candidate's
:class:`~pytest_novelty.pipeline.results.SuiteResult`, and what it is compared with: a baseline
checkpoint or the human references, the best earlier checkpoint of a series, or the accepted
snapshot) and returns a :class:`~pytest_novelty.gate.record.CaseRecord`. The one loop of the cases
calls it and nothing else decides; the terminal table, the report, the trackers and the series read
its records. :class:`pytest_novelty.gate.cases.CaseLoop` gathers those inputs from a
:class:`~pytest_novelty.pipeline.session.ResultsSession`, so both front ends pass the same ones.

A case fails when any of these holds, and its message lists every reason:

1. the value breaks its threshold (:func:`pytest_novelty.gate.check_threshold`); for q@Tail the
   value is taken on the one frozen tail (:func:`frozen_tail`);
2. the metric depends on the judge's quality and ``[gate] min_judge_agreement`` is not met
   (:func:`pytest_novelty.gate.agreement.agreement_failure`): then that is the only reason given;
3. it regressed significantly against what it is compared with, first found of: the baseline
   checkpoint or the human references, the best earlier checkpoint of the series
   (``[gate] against = "series-best"``), the accepted snapshot (when snapshots are on).
   Every comparison is :func:`pytest_novelty.gate.regression.compare` on two records made by
   :func:`pytest_novelty.gate.regression.result_record` on the same tail, so a snapshot, a baseline
   and a series checkpoint are compared on one statistic with one test.

After a comparison the value decided on is the compared value (for q@Tail: on the tail both share),
so value − accepted value = delta on every record.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_novelty.gate.adaptive import Adaptive
from pytest_novelty.gate.agreement import agreement_failure, agreement_text
from pytest_novelty.gate.comparison import Comparison
from pytest_novelty.gate.record import CaseRecord, TailUsed
from pytest_novelty.gate.regression import MetricRecord, compare, result_record
from pytest_novelty.gate.tail import FrozenTail, choose_tail, gated_metrics
from pytest_novelty.gate.thresholds import check_threshold
from pytest_novelty.pipeline.session import HUMAN_REFERENCES

if TYPE_CHECKING:
    from pytest_novelty.gate.snapshot import SnapshotOutcome
    from pytest_novelty.gate.thresholds import Verdict
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.pipeline.session import Baseline
    from pytest_novelty.suites.schema import Suite, Threshold

__all__ = ["ReadOnlySnapshot", "SnapshotStore", "decide", "frozen_tail", "header"]


AdaptiveHook = Callable[["Verdict", "FrozenTail | None"], "tuple[Verdict, Adaptive]"]
"""What a case's decision asks of ``--novelty-adaptive``: the threshold's verdict as the sequential rule
ends it, given the first pass's and the frozen tail (:func:`pytest_novelty.gate.adaptive.adaptive_verdict`)."""

PairedHook = Callable[[Comparison, MetricRecord, MetricRecord, bool], "tuple[Comparison, Adaptive] | None"]
"""What a regression case asks of ``--novelty-adaptive``: the comparison as the paired sequential rule
ends it (None: the rule cannot judge it), given the first pass's, the accepted record, the
candidate's, and whether the accepted side is a live baseline checkpoint (else a frozen snapshot):
:func:`pytest_novelty.gate.adaptive.regression_verdict`."""


class SnapshotStore(Protocol):
    """Where one case's accepted snapshot lives (syrupy under pytest, the same files elsewhere)."""

    def stored(self) -> MetricRecord | None:
        """The accepted record, or None when there is none yet."""
        ...

    def check(self, record: MetricRecord, *, alpha: float | None = None, correction: str = "") -> SnapshotOutcome:
        """Compare ``record`` with the accepted one at ``alpha`` (after the run's ``correction``),
        writing it where the run accepts new snapshots."""
        ...


def header(result: SuiteResult) -> str:
    """What the suite's numbers were measured with: model, judge, originality units, NoveltyBench scales."""
    scores = result.scores
    parts = [f"model {result.model}", f"judge {scores.judge}"]
    if scores.units:
        parts.append(f"originality in {scores.units}")
    if any(t.base in ("distinct_k", "utility_k") for t in result.suite.thresholds):
        reward = scores.judge.startswith("reward model")
        scale = "reward model 1-10" if reward else "10 × rubric quality"
        parts.append(f"equivalence {result.suite.scoring.equivalence}, utility scale {scale}")
    return ", ".join(parts)


def frozen_tail(
    suite: Suite,
    threshold: Threshold,
    result: SuiteResult,
    *,
    baseline: SuiteResult | None = None,
    snapshot: SnapshotStore | None = None,
) -> FrozenTail:
    """The one tail a q@Tail case is judged and compared on: the baseline's, the snapshot's, the
    suite file's (``[gate] tail``), or the candidate's own (see
    :func:`pytest_novelty.gate.tail.choose_tail`)."""
    snapshot_ids = None
    if baseline is None and snapshot is not None:
        stored = snapshot.stored()
        snapshot_ids = None if stored is None or stored.metric != threshold.metric else stored.tail_ids
    return choose_tail(
        threshold.metric,
        baseline=None if baseline is None else baseline.measured.tail_ids.get(threshold.metric),
        snapshot=snapshot_ids,
        tail_file=suite.gate.tail,
        candidate=result.measured.tail_ids.get(threshold.metric) or [],
    )


def best_earlier(
    earlier: Sequence[SuiteResult], suite: Suite, threshold: Threshold, tail: FrozenTail | None
) -> tuple[SuiteResult, MetricRecord] | None:
    """The earlier checkpoint with the best value of ``threshold``'s metric, measured as the case is
    (q@Tail on the case's frozen tail), and its record; None when none has a value."""
    best: tuple[SuiteResult, MetricRecord] | None = None
    for result in earlier:
        record = result_record(result, threshold, suite=suite, tail=tail)
        value = record.value
        if value is None or math.isnan(value):
            continue
        if best is None or (value > best[1].value if threshold.op == ">=" else value < best[1].value):  # type: ignore[operator]
            best = (result, record)
    return best


def decide(
    suite: Suite,
    threshold: Threshold,
    result: SuiteResult,
    *,
    baseline: Baseline | None = None,
    earlier: Sequence[SuiteResult] = (),
    snapshot: SnapshotStore | None = None,
    mode: str | None = None,
    comparisons: int = 1,
    adaptive: AdaptiveHook | None = None,
    paired: PairedHook | None = None,
) -> CaseRecord:
    """Decide one case (see the module doc for the rules, in order).

    ``baseline`` is the paired comparison the session found (a checkpoint or the human
    references); ``earlier`` the series' earlier checkpoints in step order (used with
    ``[gate] against = "series-best"``); ``snapshot`` the case's snapshot store when snapshots are on.
    ``mode`` is the threshold mode (the command line's, else the suite's ``[gate] threshold_mode``).
    ``comparisons`` is the number of regression tests the whole run makes, each held to α /
    comparisons (:func:`corrected_alpha`). ``adaptive(verdict, tail)`` (``--novelty-adaptive``) may
    replace the threshold's verdict by the sequential rule's (:mod:`pytest_novelty.gate.adaptive`),
    for a value that could be computed; ``paired`` the comparison with a baseline checkpoint or the
    snapshot by the paired rule's.
    """
    tail: FrozenTail | None = None
    metrics = result.metrics
    used: list[str] = []
    if threshold.base == "q_at_tail":
        tail = frozen_tail(suite, threshold, result, baseline=None if baseline is None else baseline.result,
                           snapshot=snapshot)  # fmt: skip
        metrics, used = gated_metrics(result, threshold.metric, tail)
    interval = case_interval(suite, threshold, result, tail)
    mode = (mode or suite.gate.threshold_mode) if interval is not None else "point"
    verdict = check_threshold(suite.name, threshold, metrics, interval=interval, mode=mode)
    adapted = None
    if adaptive is not None and not math.isnan(verdict.value):
        verdict, adapted = adaptive(verdict, tail)
    message, failures, distrusted = _threshold_failures(suite, threshold, result, verdict, tail, used)
    candidate = result_record(result, threshold, suite=suite, tail=tail, metrics=metrics)
    compared = compare_case(suite, threshold, candidate, tail, baseline=baseline, earlier=earlier,
                            snapshot=snapshot, comparisons=comparisons, paired=paired)  # fmt: skip
    comparison, written = compared.comparison, compared.written
    failures.extend(compared.lines)
    warnings = (comparison.message,) if comparison is not None and comparison.passed and comparison.warning else ()
    agreement = agreement_text(result.judge_agreement)
    value = metrics.get(threshold.metric, math.nan)
    if comparison is not None and not written and comparison.candidate_value is not None:
        value = comparison.candidate_value  # the compared value: value − accepted value = delta
    return CaseRecord(
        suite=suite.name, metric=threshold.metric, op=threshold.op, threshold=threshold.value,
        value=None if value is None or math.isnan(value) else float(value),
        outcome="failed" if failures else "passed", message=message, failures=tuple(failures),
        header=header(result) + (f", {agreement}" if agreement else ""),
        tail=None if tail is None else TailUsed(tail.describe(len(used)), tail.source, tuple(tail.ids)),
        comparison=comparison, snapshot_written=written, judge_agreement=agreement, warnings=warnings,
        ci=verdict.ci, confidence=verdict.confidence, within_noise=verdict.within_noise, mode=verdict.mode,
        threshold_passed=verdict.passed and not distrusted, adaptive=adapted, regression_adaptive=compared.adaptive,
    )  # fmt: skip


def _threshold_failures(
    suite: Suite, threshold: Threshold, result: SuiteResult, verdict: Verdict, tail: FrozenTail | None, used: list[str]
) -> tuple[str, list[str], str | None]:
    """Rules 1 and 2 of the module doc: the case's message and failures from its threshold's verdict,
    unless the judge does not agree with people enough (then that is the only reason, returned third)
    or the frozen tail has none of the suite's prompts (then the message says so)."""
    message, failures = verdict.message, [] if verdict.passed else [verdict.message]
    distrusted = agreement_failure(suite, threshold, result.judge_agreement)
    if distrusted:
        message, failures = distrusted, [distrusted]
    if tail is not None and not used:
        message = (
            f"{suite.name}: {threshold.metric}: none of the {len(tail.ids)} prompts of the {tail.describe(0)} "
            "is among the suite's prompts; point [gate] tail at a tail of these prompts"
        )
        failures = [message]
    return message, failures, distrusted


@dataclass(frozen=True)
class Compared:
    """What a case's regression check found: the comparison (None when nothing was compared), whether
    the run accepted the candidate as the new snapshot instead, the lines of its failure, and how
    the paired sequential rule ended it (``--novelty-adaptive``)."""

    comparison: Comparison | None = None
    written: bool = False
    lines: tuple[str, ...] = ()
    adaptive: Adaptive | None = None

    def ruled(self, paired: PairedHook | None, accepted: MetricRecord | None, candidate: MetricRecord,
              live: bool) -> Compared:  # fmt: skip
        """The check with its comparison as ``paired`` ends it (unchanged without one, or where the
        rule cannot judge it)."""
        found = None
        if paired is not None and accepted is not None and self.comparison is not None and not self.written:
            found = paired(self.comparison, accepted, candidate, live)
        if found is None:
            return self
        comparison, adaptive = found
        lines = self.lines if comparison is self.comparison else () if comparison.passed else tuple(comparison.lines())
        return Compared(comparison, self.written, lines, adaptive)


def compare_case(
    suite: Suite,
    threshold: Threshold,
    candidate: MetricRecord,
    tail: FrozenTail | None,
    *,
    baseline: Baseline | None = None,
    earlier: Sequence[SuiteResult] = (),
    snapshot: SnapshotStore | None = None,
    comparisons: int = 1,
    paired: PairedHook | None = None,
) -> Compared:
    """Rule 3 of the module doc: ``candidate`` (the case's record) against the first found of the
    baseline checkpoint or the references, the best earlier checkpoint of the series
    (``[gate] against = "series-best"``) and the accepted snapshot, at the run's corrected α; with
    ``paired`` (``--novelty-adaptive``), a baseline checkpoint's or the snapshot's comparison as the
    paired sequential rule ends it."""
    alpha, correction = corrected_alpha(suite.gate.alpha, comparisons)

    def compare_with(accepted: MetricRecord, against: str) -> Comparison:
        return compare(accepted, candidate, alpha=alpha, correction=correction, against=against)

    if baseline is not None:
        against = HUMAN_REFERENCES if baseline.kind == "references" else "baseline"
        accepted = result_record(baseline.result, threshold, suite=suite, tail=tail)
        comparison = compare_with(accepted, against)
        compared = Compared(comparison, lines=() if comparison.passed else tuple(comparison.lines()))
        return compared.ruled(paired, accepted, candidate, live=True) if baseline.kind == "baseline" else compared
    if suite.gate.against == "series-best" and earlier:
        found = best_earlier(earlier, suite, threshold, tail)
        if found is None:
            return Compared()
        best, record = found
        comparison = compare_with(record, Path(best.model).name)
        if comparison.passed:
            return Compared(comparison)
        return Compared(comparison, lines=(f"against the best earlier checkpoint of the series, {best.model}:",
                                           *comparison.lines()))  # fmt: skip
    if snapshot is not None:
        outcome = snapshot.check(candidate, alpha=alpha, correction=correction)
        compared = Compared(outcome.comparison, outcome.written, tuple(outcome.lines))
        return compared.ruled(paired, snapshot.stored() if paired is not None else None, candidate, live=False)
    return Compared()


class ReadOnlySnapshot:
    """A snapshot store that compares and never writes: what the repeats of a case are checked with
    (only repeat 0 may accept a new snapshot)."""

    def __init__(self, store: SnapshotStore) -> None:
        self.store = store

    def stored(self) -> MetricRecord | None:
        return self.store.stored()

    def check(self, record: MetricRecord, *, alpha: float | None = None, correction: str = "") -> SnapshotOutcome:
        from pytest_novelty.gate.snapshot import compared_outcome

        return compared_outcome(self.stored(), record, alpha=alpha, correction=correction)


def corrected_alpha(alpha: float, comparisons: int) -> tuple[float, str]:
    """The α each of a run's ``comparisons`` regression tests is held to, and the correction's name
    ('' when there is one test): Bonferroni's α / m. It needs no other case's p-value, so every
    case is decided on its own, under pytest-xdist too, and the chance that noise alone fails any
    of the run's tests stays at most α."""
    if comparisons <= 1:
        return alpha, ""
    return alpha / comparisons, f"Bonferroni over the run's {comparisons} comparisons (alpha {alpha:g} / {comparisons})"


def compared_cases(cases: Sequence[Suite], *, baseline: bool, snapshots: bool, series: bool) -> int:
    """How many of these cases (one entry per case: its suite run) will make a regression test: all
    of them with a baseline checkpoint or snapshots, a suite's own with references or series-best
    (given a series)."""
    return sum(
        1 for suite in cases
        if baseline or snapshots or suite.gate.reference or (series and suite.gate.against == "series-best")
    )  # fmt: skip


def case_interval(suite: Suite, threshold: Threshold, result: SuiteResult, tail: FrozenTail | None) -> Any:
    """The interval of the value a case decides on: the metrics step's (clustered by prompt, at the
    suite's 1 − α), or for q@Tail on a frozen tail other than the suite's own, one on that tail."""
    intervals = result.measured.intervals
    if tail is not None and tail.source != "candidate":
        from pytest_novelty.metrics.uncertainty import tail_interval

        try:
            return tail_interval(result.per_prompt["quality"], [p.id for p in result.prompts], tail.ids,
                                 confidence=1.0 - suite.gate.alpha)
        except ValueError:  # none of the tail's prompts is the suite's: the case says so itself
            return None
    return intervals.get(threshold.metric)
