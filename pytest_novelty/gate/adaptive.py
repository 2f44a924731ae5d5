"""Adaptive verdicts (``--novelty-adaptive BUDGET``): more samples, in rounds, only for the cases that
need them, under a sequential rule that keeps the case's error rates.

A threshold case is decided on its first pass as usual; with a budget, the sequential rule of
:mod:`pytest_novelty.metrics.sequential` (a group-sequential test with Lan-DeMets α-spending,
Pocock-type, at the suite's ``[gate] alpha``) looks at it too, and where the rule cannot decide it
the suite's next round is generated and the rule looks again, until the case is decided or the
budget is spent. A round is one more independent set of samples of the whole suite,
:meth:`pytest_novelty.suites.schema.Suite.repeated` (its own derived seed, its own cached rows, as a
``--novelty-repeat`` repeat: a rerun reuses them), so the cases of one suite share their rounds and
the suite costs as many rounds as its slowest case.

A regression case (the candidate against a ``--baseline-model`` checkpoint or its accepted
snapshot) is judged the same way on its paired difference
(:func:`pytest_novelty.metrics.sequential_paired.paired_decision`), held to its tolerance at the
comparison's α (after the run's correction), on the prompts the comparison pairs (a q@Tail case's
tail): a round draws the candidate and a live baseline together, on the same prompts, or the
candidate alone against a snapshot, which is frozen. A case the rule decides takes its verdict,
``regressed`` or a pass; an undecided one keeps its first pass's comparison. The human references
and a series' best earlier checkpoint are compared on the first pass only.

The plan is fixed before the first look: the budget (extra samples per suite run) buys
``BUDGET // (prompts × samples)`` rounds (half as many for a regression against a live baseline,
whose rounds draw both sides), so a case may look ``1 + that`` times, at most :data:`MAX_LOOKS`;
every case is looked at from the first pass on (the rule's first boundary is wider than the first
pass's interval, and skipping the first look for cases the interval decided would break the rule's
error control). Every case may stop for futility (:mod:`pytest_novelty.metrics.sequential`): when
even the budget left could not bring it across a boundary, it draws no more rounds and is undecided.
A time bound (``--novelty-adaptive-minutes``) may stop the rounds earlier: stopping early leaves a
case undecided and never makes a wrong decision more likely.

How a threshold case ends:

* **decided** (the rule crossed a boundary): its threshold verdict is the rule's, pass or fail, in
  every threshold mode: each wrong decision has probability α/2 at most over all the looks;
* **undecided** within the budget, or stopped for futility: the mode reads what the rounds leave,
  as it reads an interval that contains the bound: ``lenient`` passes, ``strict`` fails, ``point``
  compares the estimate of every round together with the bound.

The value the case shows stays its first pass's (as with repeats); the rounds, the estimate over
all of them, each look's Z and boundary and, where it is undecided, the effect the budget left
could still detect are the case's :class:`Adaptive` (its regression's too), which ``report.json``
keeps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_novelty.gate.comparison import Comparison, finite
from pytest_novelty.gate.regression import MetricRecord, compared_values, generation_rows
from pytest_novelty.gate.tail import FrozenTail
from pytest_novelty.gate.thresholds import Verdict
from pytest_novelty.metrics.sequential import (
    CONTINUE,
    FAIL,
    FUTILE,
    PASS,
    UNDECIDED,
    SequentialDecision,
    sequential_decision,
)
from pytest_novelty.metrics.sequential_paired import paired_decision
from pytest_novelty.metrics.sequential_plan import SequentialPlan
from pytest_novelty.metrics.table import family
from pytest_novelty.pipeline.measure import metric_values

if TYPE_CHECKING:
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.suites.schema import Suite, Threshold

__all__ = ["MAX_LOOKS", "Adaptive", "AdaptiveBudget", "adaptive_verdict", "case_values", "regression_verdict"]

MAX_LOOKS = 10
"""The most looks a case takes, the first pass included, however large the budget. Spending α over
more looks widens every boundary: the first look's is 2.44 standard errors at 5 looks, 2.66 at 10,
2.87 at 20 and 3.14 at 50 (α = 0.05), while more rounds of the same prompts shrink only the sample
noise, not the prompts' own spread; past 10 looks a case gains less from a round than its
boundaries cost it."""



@dataclass(frozen=True)
class AdaptiveBudget:
    """What a suite run may spend on more rounds: ``samples`` extra samples, and at most ``minutes``
    (None: no time bound) from the moment its first case looked."""

    samples: int
    minutes: float | None = None

    def looks(self, per_round: int) -> int:
        """How many looks a case may take, the first pass included (a round costs ``per_round``
        samples), at most :data:`MAX_LOOKS`."""
        return min(MAX_LOOKS, 1 + (self.samples // per_round if per_round > 0 else 0))


@dataclass(frozen=True)
class Look:
    """One look of the rule at a case: the estimate over the rounds so far, its standard error, Z and
    the boundary it was compared with."""

    estimate: float
    se: float
    z: float
    boundary: float

    def to_json(self) -> dict[str, float | None]:
        return {k: finite(v) for k, v in vars(self).items()}


@dataclass(frozen=True)
class Adaptive:
    """How the sequential rule ended a case: ``decision`` (``pass``, ``fail`` or ``undecided``), the
    looks it took (the first pass is look 1, so ``rounds`` extra rounds = looks − 1), the looks its
    budget allowed, why it stopped where it is undecided (``budget``, ``time`` or ``futility``), and
    ``detectable``, the distance from its bound (a regression's: from its margin) the budget left
    could still decide with 80 % power, from its last look (NaN where none was computed)."""

    decision: str
    looks: tuple[Look, ...]
    allowed: int
    stopped: str = ""
    detectable: float = math.nan

    @property
    def rounds(self) -> int:
        """The extra rounds the case drew (its first pass not counted)."""
        return max(0, len(self.looks) - 1)

    @property
    def decided(self) -> bool:
        return self.decision in (PASS, FAIL)

    @property
    def estimate(self) -> float:
        """The estimate over every round the case looked at."""
        return self.looks[-1].estimate if self.looks else math.nan

    def why(self) -> str:
        """Why an undecided case stopped: ``budget spent``, ``time spent``, or ``stopped for futility;
        the budget left could detect 0.0412``."""
        if self.stopped != "futility":
            return f"{self.stopped or 'budget'} spent"
        left = "" if math.isnan(self.detectable) else f"; the budget left could detect {self.detectable:.4f}"
        return f"stopped for futility{left}"

    def note(self, what: str = "") -> str:
        """``; decided after 2 extra rounds``, ``; undecided after 4 extra rounds (budget spent)``,
        ``; undecided after 1 extra round (stopped for futility; the budget left could detect 0.0412)``,
        or nothing for a case its first look decided; ``what`` names the rule's case (``regression``)."""
        rounds = f"{self.rounds} extra round{'' if self.rounds == 1 else 's'}"
        lead = f"; {what} " if what else "; "
        if self.decided:  # a case the first look decided says nothing more than a plain case
            return f"{lead}decided after {rounds}" if self.rounds else ""
        return f"{lead}undecided after {rounds} ({self.why()})"

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision, "rounds": self.rounds, "allowed_looks": self.allowed,
                "stopped": self.stopped or None, "detectable": finite(self.detectable),
                "looks": [look.to_json() for look in self.looks]}  # fmt: skip

    @classmethod
    def from_json(cls, data: Any) -> Adaptive:
        looks = tuple(
            Look(*(math.nan if look.get(k) is None else float(look[k]) for k in ("estimate", "se", "z", "boundary")))
            for look in data.get("looks") or ()
        )
        left = data.get("detectable")
        return cls(str(data["decision"]), looks, int(data.get("allowed_looks") or len(looks)),
                   str(data.get("stopped") or ""), math.nan if left is None else float(left))  # fmt: skip


def case_values(result: SuiteResult, metric: str, subset: list[str] | None) -> tuple[np.ndarray, float | None, bool]:
    """What the rule reads of one case in one round: the (prompts × samples) values its statistic
    averages (the subset's rows for q@Tail and Novelty at Peak: the frozen tail or the peak;
    per-prompt values for NoveltyBench's metrics), the top fraction of a top-10 % metric, and
    whether the statistic is a share (coverage, unscored: read with Wilson's score statistic)."""
    fam = family(metric)
    return metric_values(result, metric, subset or []), fam.top_fraction, fam.share


def _on(result: SuiteResult, metric: str, ids: list[str]) -> np.ndarray:
    """The values of ``metric`` on the prompts ``ids``, in that order (NaN rows for a prompt the round lacks)."""
    values = metric_values(result, metric)
    index = {p.id: i for i, p in enumerate(result.prompts)}
    missing = np.full(values.shape[1:], np.nan)
    return np.stack([values[index[i]] if i in index else missing for i in ids])


def _looked(
    plan: SequentialPlan,
    budget: AdaptiveBudget,
    look_at: Callable[[int], SequentialDecision],
    start: float,
    clock: Callable[[], float],
) -> Adaptive:
    """Look after look (``look_at(k)``: the rule's decision with round k in), until the rule stops,
    the budget's looks are spent or its time is: how the case ended."""
    decision = None
    stopped = ""
    for look in range(plan.looks):
        if look and budget.minutes is not None and clock() - start > 60.0 * budget.minutes:
            stopped = "time"
            break
        decision = look_at(look)
        if decision.decision != CONTINUE:
            break
    assert decision is not None  # the first look always runs
    ended = decision.decision
    if ended == FUTILE:
        ended, stopped = UNDECIDED, "futility"
    elif ended == CONTINUE:
        ended = UNDECIDED
    looks = tuple(Look(float(x.estimate), float(x.se), float(x.z), float(x.boundary)) for x in decision.looks)
    return Adaptive(ended, looks, plan.looks, "" if ended in (PASS, FAIL) else (stopped or "budget"),
                    float(decision.detectable))  # fmt: skip


def adaptive_verdict(
    suite: Suite,
    threshold: Threshold,
    first: Verdict,
    rounds: Callable[[int], SuiteResult],
    tail: FrozenTail | None,
    budget: AdaptiveBudget,
    *,
    started: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Verdict, Adaptive]:
    """The threshold verdict of a case under the sequential rule, and how the rule ended it.

    ``first`` is the first pass's verdict (its mode decides an undecided case); ``rounds(k)`` gives
    the suite's result on round k (0: the first pass); ``tail`` the frozen tail a q@Tail case is
    judged on (None: the metric's own subset, the candidate's peak for Novelty at Peak);
    ``started`` when the suite's first look began (for the time bound).
    """
    result = rounds(0)
    plan = SequentialPlan(suite.gate.alpha, budget.looks(len(result.prompts) * suite.generation.samples),
                          futility=True)  # fmt: skip
    subset = list(tail.ids) if tail is not None else result.measured.tail_ids.get(threshold.metric)
    values: list[np.ndarray] = []

    def look_at(look: int) -> SequentialDecision:
        now, top, share = case_values(result if look == 0 else rounds(look), threshold.metric, subset)
        values.append(now)
        return sequential_decision(values, threshold.value, higher_is_better=threshold.op == ">=", plan=plan,
                                   top_fraction=top, share=share)  # fmt: skip

    adaptive = _looked(plan, budget, look_at, clock() if started is None else started, clock)
    return _verdict(first, adaptive), adaptive


def _verdict(first: Verdict, adaptive: Adaptive) -> Verdict:
    """``first`` as the rule ends it: the rule's decision, else the mode's reading of the rounds."""
    estimate, bound = adaptive.estimate, first.threshold
    undecided = "undecided within the budget" if adaptive.stopped != "futility" else f"undecided ({adaptive.why()})"
    if adaptive.decided:
        passed = adaptive.decision == PASS
        how = "decided by the sequential rule"
    elif first.mode == "lenient":
        passed, how = True, f"{undecided}: lenient mode passes it"
    elif first.mode == "strict":
        passed, how = False, f"{undecided}: strict mode fails it"
    else:
        passed = not math.isnan(estimate) and (estimate >= bound if first.op == ">=" else estimate <= bound)
        how = f"{undecided}: point mode reads the estimate of every round, {estimate:.4f}"
    last = adaptive.looks[-1]
    z = "n/a" if math.isnan(last.z) else f"{last.z:+.2f}"
    detail = f"{how}; Z {z} against {last.boundary:.2f} after {len(adaptive.looks)} looks"
    word = "meets" if passed else "does not meet"
    message = f"{first.suite}: {first.metric} {word} {first.op} {bound:g} ({detail})"
    return replace(first, passed=passed, message=message)


def regression_verdict(
    suite: Suite,
    first: Comparison,
    accepted: MetricRecord,
    candidate: MetricRecord,
    rounds: Callable[[int], SuiteResult],
    baseline: Callable[[int], SuiteResult] | None,
    budget: AdaptiveBudget,
    *,
    started: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Comparison, Adaptive] | None:
    """A regression case's comparison under the paired sequential rule, and how the rule ended it;
    None where the rule cannot judge it (a value missing, fewer than two paired prompts, a top-10 %
    snapshot stored without its per-generation values).

    ``first`` is the first pass's comparison of ``candidate`` with ``accepted`` (its α, after the
    run's correction, and its tolerance hold the rule); ``rounds(k)`` gives the candidate's result
    on round k (0: the first pass) and ``baseline(k)`` a live baseline's on the same round, or None
    against a frozen snapshot (``accepted`` itself, the same at every look). The pairs are the
    prompts the comparison pairs, in its order (:func:`~pytest_novelty.gate.regression.compared_values`).
    Decided fail is ``regressed``, decided pass keeps a passing status (``within_tolerance`` for a
    first pass that regressed); undecided keeps ``first``.
    """
    _, _, ids, note = compared_values(accepted, candidate)
    metric, top = candidate.metric, family(candidate.metric).top_fraction
    stored = accepted.per_generation if top is not None else None
    if first.accepted_value is None or first.candidate_value is None or len(ids) < 2 or (
            baseline is None and top is not None and not stored):  # fmt: skip
        return None
    if baseline is None:
        frozen = generation_rows([(stored or {}).get(i, []) for i in ids]) if top is not None else \
            np.array([accepted.per_prompt.get(i, math.nan) for i in ids], dtype=float)  # fmt: skip
    per_round = len(rounds(0).prompts) * suite.generation.samples * (1 if baseline is None else 2)
    plan = SequentialPlan(first.alpha, budget.looks(per_round), futility=True)
    margin = -first.tolerance if candidate.higher_is_better else first.tolerance
    ours: list[np.ndarray] = []
    theirs: list[np.ndarray] = [frozen] if baseline is None else []

    def look_at(look: int) -> SequentialDecision:
        ours.append(_on(rounds(look), metric, ids))
        if baseline is not None:
            theirs.append(_on(baseline(look), metric, ids))
        return paired_decision(ours, theirs, margin, higher_is_better=candidate.higher_is_better, plan=plan,
                               frozen=baseline is None, top_fraction=top)  # fmt: skip

    adaptive = _looked(plan, budget, look_at, clock() if started is None else started, clock)
    if not adaptive.decided:
        return first, adaptive
    status = "regressed" if adaptive.decision == FAIL else (first.status if first.passed else "within_tolerance")
    looks = len(adaptive.looks)
    decided = f" (decided by the sequential rule after {looks} look{'' if looks == 1 else 's'})"
    return replace(first, status=status).with_message(note, decided), adaptive
