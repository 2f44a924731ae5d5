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

The plan is fixed before the first look: the budget (extra samples per suite run) buys
``BUDGET // (prompts × samples)`` rounds, so a case may look ``1 + that`` times; every case is
looked at from the first pass on (the rule's first boundary is wider than the first pass's
interval, and skipping the first look for cases the interval decided would break the rule's error
control). A time bound (``--novelty-adaptive-minutes``) may stop the rounds earlier: stopping early
leaves a case undecided and never makes a wrong decision more likely.

How a case ends:

* **decided** (the rule crossed a boundary): its threshold verdict is the rule's, pass or fail, in
  every threshold mode: each wrong decision has probability α/2 at most over all the looks;
* **undecided** within the budget: the mode reads what the rounds leave, as it reads an interval
  that contains the bound: ``lenient`` passes, ``strict`` fails, ``point`` compares the estimate of
  every round together with the bound.

The value the case shows stays its first pass's (as with repeats: comparisons with a snapshot or a
baseline are made on it); the rounds, the estimate over all of them and each look's Z and boundary
are the case's :class:`Adaptive`, which ``report.json`` keeps. Regressions are not adaptive: a
comparison decides on the first pass.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_novelty.gate.tail import FrozenTail
from pytest_novelty.gate.thresholds import Verdict
from pytest_novelty.metrics.sequential import CONTINUE, FAIL, PASS, UNDECIDED, SequentialPlan, sequential_decision
from pytest_novelty.metrics.table import family, values_of

if TYPE_CHECKING:
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.suites.schema import Suite, Threshold

__all__ = ["Adaptive", "AdaptiveBudget", "adaptive_verdict", "case_values"]


@dataclass(frozen=True)
class AdaptiveBudget:
    """What a suite run may spend on more rounds: ``samples`` extra samples, and at most ``minutes``
    (None: no time bound) from the moment its first case looked."""

    samples: int
    minutes: float | None = None

    def looks(self, per_round: int) -> int:
        """How many looks a case may take, the first pass included (a round costs ``per_round`` samples)."""
        return 1 + (self.samples // per_round if per_round > 0 else 0)


@dataclass(frozen=True)
class Look:
    """One look of the rule at a case: the estimate over the rounds so far, its standard error, Z and
    the boundary it was compared with."""

    estimate: float
    se: float
    z: float
    boundary: float

    def to_json(self) -> dict[str, float | None]:
        return {k: (v if math.isfinite(v) else None) for k, v in vars(self).items()}


@dataclass(frozen=True)
class Adaptive:
    """How the sequential rule ended a case: ``decision`` (``pass``, ``fail`` or ``undecided``), the
    looks it took (the first pass is look 1, so ``rounds`` extra rounds = looks − 1), the looks its
    budget allowed, and why it stopped where it is undecided (``budget`` or ``time``)."""

    decision: str
    looks: tuple[Look, ...]
    allowed: int
    stopped: str = ""

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

    def note(self) -> str:
        """``; decided after 2 extra rounds``, ``; undecided after 4 extra rounds (budget spent)``, or
        nothing for a case its first look decided."""
        rounds = f"{self.rounds} extra round{'' if self.rounds == 1 else 's'}"
        if self.decided:  # a case the first look decided says nothing more than a plain case
            return f"; decided after {rounds}" if self.rounds else ""
        return f"; undecided after {rounds} ({self.stopped or 'budget'} spent)"

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision, "rounds": self.rounds, "allowed_looks": self.allowed,
                "stopped": self.stopped or None, "looks": [look.to_json() for look in self.looks]}  # fmt: skip

    @classmethod
    def from_json(cls, data: Any) -> Adaptive:
        looks = tuple(
            Look(*(math.nan if look.get(k) is None else float(look[k]) for k in ("estimate", "se", "z", "boundary")))
            for look in data.get("looks") or ()
        )
        return cls(str(data["decision"]), looks, int(data.get("allowed_looks") or len(looks)),
                   str(data.get("stopped") or ""))  # fmt: skip


def case_values(result: SuiteResult, metric: str, subset: list[str] | None) -> tuple[np.ndarray, float | None, bool]:
    """What the rule reads of one case in one round: the (prompts × samples) values its statistic
    averages (the subset's rows for q@Tail and Novelty at Peak: the frozen tail or the peak;
    per-prompt values for NoveltyBench's metrics), the top fraction of a top-10 % metric, and
    whether the statistic is a share (coverage, unscored: read with Wilson's score statistic)."""
    fam = family(metric)
    if fam.per_prompt_only:
        return np.asarray(result.measured.per_prompt[metric], dtype=float), None, False
    values = np.asarray(values_of(metric, result.quality, result.originality, result.scores.uniqueness), dtype=float)
    if fam.subset is not None:
        index = {p.id: i for i, p in enumerate(result.prompts)}
        values = values[[index[i] for i in (subset or []) if i in index]]
    return values, fam.top_fraction, fam.share


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
    per_round = len(result.prompts) * suite.generation.samples
    plan = SequentialPlan(suite.gate.alpha, budget.looks(per_round))
    subset = list(tail.ids) if tail is not None else result.measured.tail_ids.get(threshold.metric)
    start = clock() if started is None else started
    values: list[np.ndarray] = []
    decision = None
    stopped = ""
    for look in range(plan.looks):
        if look and budget.minutes is not None and clock() - start > 60.0 * budget.minutes:
            stopped = "time"
            break
        now, top, share = case_values(result if look == 0 else rounds(look), threshold.metric, subset)
        values.append(now)
        decision = sequential_decision(values, threshold.value, higher_is_better=threshold.op == ">=", plan=plan,
                                       top_fraction=top, share=share)  # fmt: skip
        if decision.decision != CONTINUE:
            break
    assert decision is not None  # the first look always runs
    ended = decision.decision if decision.decision != CONTINUE else UNDECIDED
    looks = tuple(Look(float(x.estimate), float(x.se), float(x.z), float(x.boundary)) for x in decision.looks)
    adaptive = Adaptive(ended, looks, plan.looks, "" if ended in (PASS, FAIL) else (stopped or "budget"))
    return _verdict(first, adaptive), adaptive


def _verdict(first: Verdict, adaptive: Adaptive) -> Verdict:
    """``first`` as the rule ends it: the rule's decision, else the mode's reading of the rounds."""
    estimate, bound = adaptive.estimate, first.threshold
    if adaptive.decided:
        passed = adaptive.decision == PASS
        how = "decided by the sequential rule"
    elif first.mode == "lenient":
        passed, how = True, "undecided within the budget: lenient mode passes it"
    elif first.mode == "strict":
        passed, how = False, "undecided within the budget: strict mode fails it"
    else:
        passed = not math.isnan(estimate) and (estimate >= bound if first.op == ">=" else estimate <= bound)
        how = f"undecided within the budget: point mode reads the estimate of every round, {estimate:.4f}"
    last = adaptive.looks[-1]
    z = "n/a" if math.isnan(last.z) else f"{last.z:+.2f}"
    detail = f"{how}; Z {z} against {last.boundary:.2f} after {len(adaptive.looks)} looks"
    word = "meets" if passed else "does not meet"
    message = f"{first.suite}: {first.metric} {word} {first.op} {bound:g} ({detail})"
    return replace(first, passed=passed, message=message)
