"""The case decision: one (suite, metric, threshold) of one run, decided once, in one place.

:func:`decide` takes typed inputs (the suite run, the threshold, the candidate's
:class:`~pytest_novelty.pipeline.results.SuiteResult`, and what it is compared with: a baseline
checkpoint or the human references, the best earlier checkpoint of a series, or the accepted
snapshot) and returns a :class:`CaseOutcome`. The pytest items (``plugin/items.py``) and
``pytest-novelty run`` call it and nothing else decides; the terminal table, the report and the
series read its outcomes. :func:`decide_in` gathers those inputs from a
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

After a comparison the value shown is the compared value (for q@Tail: on the tail both share), so
value − baseline = delta on every row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pytest_novelty.gate.agreement import agreement_failure, agreement_text
from pytest_novelty.gate.regression import (
    Comparison,
    FrozenTail,
    MetricRecord,
    choose_tail,
    compare,
    gated_metrics,
    result_record,
)
from pytest_novelty.gate.thresholds import check_threshold

if TYPE_CHECKING:
    from pytest_novelty.gate.snapshot import SnapshotOutcome
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.pipeline.session import Baseline, ResultsSession
    from pytest_novelty.suites.schema import Suite, Threshold

__all__ = ["CaseOutcome", "SnapshotStore", "case_id", "decide", "decide_in", "frozen_tail", "header"]


class SnapshotStore(Protocol):
    """Where one case's accepted snapshot lives (syrupy under pytest, the same files elsewhere)."""

    def stored(self) -> MetricRecord | None:
        """The accepted record, or None when there is none yet."""
        ...

    def check(self, record: MetricRecord, *, alpha: float | None = None, correction: str = "") -> SnapshotOutcome:
        """Compare ``record`` with the accepted one at ``alpha`` (after the run's ``correction``),
        writing it where the run accepts new snapshots."""
        ...


@dataclass(frozen=True)
class CaseOutcome:
    """How one case was decided: its numbers, what it was compared with, and why it failed.

    ``value`` is the value decided on (None when it could not be computed); ``failures`` the
    reasons it failed, each a line (empty: it passed); ``message`` the threshold's verdict in words
    (or the reason that replaced it); ``comparison`` the regression check, when one ran, against
    ``against`` (``baseline``, ``human references``, ``snapshot`` or an earlier checkpoint's path);
    ``warnings`` drifts that passed (within tolerance, or not significant).
    """

    suite: str
    metric: str
    op: str
    threshold: float
    value: float | None
    message: str
    failures: tuple[str, ...] = ()
    header: str = ""
    tail: str | None = None
    tail_source: str | None = None
    tail_ids: tuple[str, ...] | None = None
    """For q@Tail: the ids of the frozen tail the case was judged on (the series reuses them)."""
    comparison: Comparison | None = None
    against: str | None = None
    snapshot_written: bool = False
    judge_agreement: str | None = None
    warnings: tuple[str, ...] = field(default=())
    ci: tuple[float, float] | None = None
    """The interval of the value decided on, at the suite's 1 − α (None where none could be
    computed); clustered by prompt (:mod:`pytest_novelty.metrics.uncertainty`)."""
    confidence: float | None = None
    within_noise: bool | None = None
    """Whether the interval contains the bound: another run could land on the other side."""
    mode: str = "point"
    """The threshold mode that decided (``point``, ``lenient``, ``strict``)."""
    threshold_passed: bool = True
    """Whether the threshold alone passed, as its mode read it (a regression may still fail the case)."""
    repeats: tuple[tuple[float | None, bool], ...] = ()
    """With ``--novelty-repeat N``: (value, passed) of the case on each of the N independent sets of
    samples, repeat 0 (the one that decides) first; empty without repeats."""

    @property
    def passed(self) -> bool:
        """Whether the case passed (no reason to fail)."""
        return not self.failures

    @property
    def label(self) -> str:
        """``novelty@5>=0.3``: the threshold's label, as in the case's id."""
        return f"{self.metric}{self.op}{self.threshold:g}"

    def row(self) -> dict[str, Any]:
        """The case as a JSON-ready row: what the table and the report show, and what crosses from
        an xdist worker to the controller (NaN becomes None)."""
        row: dict[str, Any] = {
            "suite": self.suite,
            "metric": self.metric,
            "op": self.op,
            "threshold": self.threshold,
            "value": self.value,
            "passed": self.passed,
            "message": self.message,
            "header": self.header,
        }
        row["ci"] = None if self.ci is None else [_finite(b) for b in self.ci]
        row["within_noise"] = self.within_noise
        row["threshold_mode"] = self.mode
        row["threshold_passed"] = self.threshold_passed
        row["confidence"] = self.confidence
        if self.tail is not None:
            row["tail"], row["tail_source"] = self.tail, self.tail_source
            row["tail_ids"] = None if self.tail_ids is None else list(self.tail_ids)
        if self.judge_agreement:
            row["judge_agreement"] = self.judge_agreement
        if self.comparison is not None and not self.snapshot_written:  # a written snapshot replaced it
            compared = self.comparison.as_dict()
            compared["delta_ci"] = compared.pop("ci")  # the change's interval; "ci" is the value's
            row.update(compared)
            if self.comparison.candidate_value is not None:
                row["value"] = self.comparison.candidate_value
        if self.against is not None:
            row["against"] = self.against
        if self.snapshot_written:
            row["verdict"] = "snapshot written"
        if self.repeats:
            import statistics

            values = [v for v, _ in self.repeats if v is not None]
            row["repeats"] = {
                "values": [v for v, _ in self.repeats],
                "passed": [p for _, p in self.repeats],
                "pass_rate": sum(p for _, p in self.repeats) / len(self.repeats),
                "spread": [min(values), statistics.median(values), max(values)] if values else None,
            }
        value = row.get("value")
        if isinstance(value, float) and math.isnan(value):
            row["value"] = None
        return row


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def case_id(suite: Suite, threshold: Threshold) -> str:
    """The case's id, as pytest parametrizes it: ``story-novelty@5>=0.3``."""
    return f"{suite.name}-{threshold.label}"


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
    :func:`pytest_novelty.gate.regression.choose_tail`)."""
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
) -> CaseOutcome:
    """Decide one case (see the module doc for the rules, in order).

    ``baseline`` is the paired comparison the session found (a checkpoint or the human
    references); ``earlier`` the series' earlier checkpoints in step order (used with
    ``[gate] against = "series-best"``); ``snapshot`` the case's snapshot store when snapshots are on.
    ``mode`` is the threshold mode (the command line's, else the suite's ``[gate] threshold_mode``).
    ``comparisons`` is the number of regression tests the whole run makes: each is held to
    α / comparisons (Bonferroni), so that an unchanged checkpoint fails any of them in at most α of
    runs, not α of cases.
    """
    base = None if baseline is None else baseline.result
    tail: FrozenTail | None = None
    metrics = result.metrics
    used: list[str] = []
    if threshold.base == "q_at_tail":
        tail = frozen_tail(suite, threshold, result, baseline=base, snapshot=snapshot)
        ids = [p.id for p in result.prompts]
        metrics, used = gated_metrics(threshold.metric, metrics, ids, result.per_prompt["quality"], tail)
    interval = case_interval(suite, threshold, result, tail)
    mode = mode or suite.gate.threshold_mode
    verdict = check_threshold(suite.name, threshold, metrics, interval=interval,
                              mode=mode if interval is not None else "point")
    message = verdict.message
    failures = [] if verdict.passed else [verdict.message]
    agreement = agreement_text(result.judge_agreement)
    distrusted = agreement_failure(suite, threshold, result.judge_agreement)
    if distrusted:
        message, failures = distrusted, [distrusted]
    if tail is not None and not used:
        message = (
            f"{suite.name}: {threshold.metric}: none of the {len(tail.ids)} prompts of the {tail.describe(0)} "
            "is among the suite's prompts; point [gate] tail at a tail of these prompts"
        )
        failures = [message]
    comparison: Comparison | None = None
    against: str | None = None
    written = False
    candidate = result_record(result, threshold, suite=suite, tail=tail, metrics=metrics)
    alpha, correction = corrected_alpha(suite.gate.alpha, comparisons)

    def compare_with(accepted: MetricRecord) -> Comparison:
        return compare(accepted, candidate, alpha=alpha, correction=correction)

    if base is not None:
        from pytest_novelty.pipeline.session import HUMAN_REFERENCES

        comparison = compare_with(result_record(base, threshold, suite=suite, tail=tail))
        against = HUMAN_REFERENCES if baseline is not None and baseline.kind == "references" else "baseline"
        if not comparison.passed:
            failures.extend(comparison.lines())
    elif suite.gate.against == "series-best" and earlier:
        found = best_earlier(earlier, suite, threshold, tail)
        if found is not None:
            best, record = found
            comparison, against = compare_with(record), best.model
            if not comparison.passed:
                failures.append(f"against the best earlier checkpoint of the series, {best.model}:")
                failures.extend(comparison.lines())
    elif snapshot is not None:
        outcome = snapshot.check(candidate, alpha=alpha, correction=correction)
        comparison, against, written = outcome.comparison, "snapshot", outcome.written
        failures.extend(outcome.lines)
    warnings = (comparison.message,) if comparison is not None and comparison.passed and comparison.warning else ()
    head = header(result) + (f", {agreement}" if agreement else "")
    value = metrics.get(threshold.metric, math.nan)
    return CaseOutcome(
        suite=suite.name,
        metric=threshold.metric,
        op=threshold.op,
        threshold=threshold.value,
        value=None if value is None or math.isnan(value) else float(value),
        message=message,
        failures=tuple(failures),
        header=head,
        tail=None if tail is None else tail.describe(len(used)),
        tail_source=None if tail is None else tail.source,
        tail_ids=None if tail is None else tuple(tail.ids),
        comparison=comparison,
        against=against,
        snapshot_written=written,
        judge_agreement=agreement,
        warnings=warnings,
        ci=verdict.ci,
        confidence=verdict.confidence,
        within_noise=verdict.within_noise,
        mode=verdict.mode,
        threshold_passed=verdict.passed and not distrusted,
    )


def decide_in(
    session: ResultsSession,
    suite: Suite,
    threshold: Threshold,
    *,
    snapshot: SnapshotStore | None = None,
    mode: str | None = None,
    comparisons: int = 1,
) -> CaseOutcome:
    """:func:`decide` with its inputs from ``session``: the candidate's result, the baseline or
    references, and the earlier checkpoints of a series (only when the suite compares with them)."""
    result = session.result(suite)
    baseline = session.baseline(suite)
    earlier = session.earlier(suite) if baseline is None and suite.gate.against == "series-best" else []
    return decide(suite, threshold, result, baseline=baseline, earlier=earlier, snapshot=snapshot, mode=mode,
                  comparisons=comparisons)


class ReadOnlySnapshot:
    """A snapshot store that compares and never writes: what the repeats of a case are checked with
    (only repeat 0 may accept a new snapshot)."""

    def __init__(self, store: SnapshotStore) -> None:
        self.store = store

    def stored(self) -> MetricRecord | None:
        return self.store.stored()

    def check(self, record: MetricRecord, *, alpha: float | None = None, correction: str = "") -> SnapshotOutcome:
        from pytest_novelty.gate.snapshot import NO_SNAPSHOT, SnapshotOutcome

        accepted = self.stored()
        if accepted is None:
            return SnapshotOutcome(passed=False, comparison=None, lines=[NO_SNAPSHOT])
        comparison = compare(accepted, record, alpha=alpha, correction=correction)
        return SnapshotOutcome(passed=comparison.passed, comparison=comparison,
                               lines=[] if comparison.passed else comparison.lines())


def with_repeats(
    session: ResultsSession,
    suite: Suite,
    threshold: Threshold,
    first: CaseOutcome,
    repeats: int,
    *,
    snapshot: SnapshotStore | None = None,
    mode: str | None = None,
    comparisons: int = 1,
) -> CaseOutcome:
    """``first`` (the case decided on repeat 0) with how it fares on ``repeats`` independent sets of
    samples (``--novelty-repeat``): each repeat is generated with its own seed
    (:meth:`pytest_novelty.suites.schema.Suite.repeated`) and decided exactly as repeat 0, against the
    same baseline or snapshot (read only). The verdict stays repeat 0's; the pass rate and the spread
    of the value say how much it owes to the seed."""
    if repeats <= 1:
        return first
    from dataclasses import replace

    found = [(first.value, first.passed)]
    read_only = None if snapshot is None else ReadOnlySnapshot(snapshot)
    for index in range(1, repeats):
        again = decide_in(session, suite.repeated(index), threshold, snapshot=read_only, mode=mode,
                          comparisons=comparisons)
        found.append((again.value, again.passed))
    return replace(first, repeats=tuple(found))


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
