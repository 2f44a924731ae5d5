"""Threshold checks: does a suite's metric value meet the bound its suite file sets?

A threshold case compares the suite's value of one metric with a ``min`` or ``max`` bound. Given the
value's confidence interval (:mod:`pytest_novelty.metrics.uncertainty`) the check can also say
whether the bound lies within the noise, and decide by one of three modes
(:data:`pytest_novelty.suites.schema.THRESHOLD_MODES`, ``[gate] threshold_mode``):

* ``point`` (the default): the value against the bound, as without an interval;
* ``lenient``: fail only when the whole interval lies on the wrong side of the bound (the
  checkpoint is significantly below a ``min``, above a ``max``): a gate that tolerates noise;
* ``strict``: pass only when the whole interval lies on the right side (for release gates that
  need evidence, not absence of evidence).

With a (1 − α) two-sided interval each of ``lenient``'s false failures and ``strict``'s false
passes, for a checkpoint whose true value sits exactly at the bound, happens at most α/2 of the
time (one tail of the interval); the simulation tests check it. A case is *within noise* when its
interval contains the bound: another run of the same checkpoint could well land on the other
side. An undefined interval (too few prompts) reaches every number: ``lenient`` passes, ``strict``
fails, and the case is within noise. A value that could not be computed fails in every mode.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pytest_novelty.metrics.bootstrap import Interval
from pytest_novelty.suites.schema import THRESHOLD_MODES, Threshold


@dataclass(frozen=True)
class Verdict:
    """The outcome of one (suite, metric, threshold) case.

    ``mode`` is the threshold mode that decided; ``ci`` the value's interval at ``confidence`` and
    ``within_noise`` whether it contains the bound (both None when no interval was given).
    """

    suite: str
    metric: str
    op: str
    threshold: float
    value: float
    passed: bool
    message: str
    mode: str = "point"
    ci: tuple[float, float] | None = None
    within_noise: bool | None = None
    confidence: float | None = None

    @property
    def outcome(self) -> str:
        """``pass``, ``FAIL``, or either with `` (within noise)``: the word a table shows."""
        word = "pass" if self.passed else "FAIL"
        return f"{word} (within noise)" if self.within_noise else word


def _bounds(interval: Interval | tuple[float, float]) -> tuple[float, float, float | None]:
    """(low, high, confidence) with an undefined interval read as (−inf, inf)."""
    if isinstance(interval, Interval):
        low, high, confidence = interval.low, interval.high, interval.confidence
    else:
        (low, high), confidence = interval, None
    low, high = float(low), float(high)
    if math.isnan(low) or math.isnan(high):
        return -math.inf, math.inf, confidence
    if low > high:
        raise ValueError(f"the interval's low bound {low!r} is above its high bound {high!r}")
    return low, high, confidence


def _format_ci(low: float, high: float, confidence: float | None) -> str:
    level = f"{100 * confidence:g}% CI" if confidence is not None else "CI"
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{level} undefined (too few prompts)"
    return f"{level} [{low:.4f}, {high:.4f}]"


def check_threshold(
    suite: str,
    threshold: Threshold,
    metrics: Mapping[str, float],
    *,
    interval: Interval | tuple[float, float] | None = None,
    mode: str = "point",
) -> Verdict:
    """Compare the suite's value of ``threshold.metric`` with its bound, by ``mode`` (module docstring).

    Without ``interval`` only ``point`` is possible and the verdict is today's; ``lenient`` and
    ``strict`` need the interval (``ValueError`` otherwise). ``interval`` is the value's
    :class:`~pytest_novelty.metrics.bootstrap.Interval` or a ``(low, high)`` pair.
    """
    if mode not in THRESHOLD_MODES:
        raise ValueError(f"threshold mode must be one of {', '.join(THRESHOLD_MODES)}, got {mode!r}")
    if interval is None and mode != "point":
        raise ValueError(f"the {mode} threshold mode needs the value's confidence interval")
    value = float(metrics.get(threshold.metric, math.nan))
    bound, minimum = threshold.value, threshold.op == ">="
    side = "below the minimum" if minimum else "above the maximum"
    if interval is None:
        passed = threshold.holds(value)
        if math.isnan(value):
            message = (
                f"{suite}: {threshold.metric} could not be computed (no scored generations); "
                f"threshold {threshold.op} {bound:g}"
            )
        elif passed:
            message = f"{suite}: {threshold.metric} = {value:.4f} meets {threshold.op} {bound:g}"
        else:
            message = f"{suite}: {threshold.metric} = {value:.4f} is {side} {bound:g}"
        return Verdict(suite, threshold.metric, threshold.op, bound, value, passed, message)

    low, high, confidence = _bounds(interval)
    ci = _format_ci(low, high, confidence)
    defined = math.isfinite(low) and math.isfinite(high)
    within = low <= bound <= high
    noise = ", within noise" if within else ""
    # Which side of the bound the whole interval lies on, if any.
    right = low >= bound if minimum else high <= bound
    wrong = high < bound if minimum else low > bound
    if math.isnan(value):
        passed = False
        message = (
            f"{suite}: {threshold.metric} could not be computed (no scored generations); "
            f"threshold {threshold.op} {bound:g} ({mode} mode)"
        )
    elif mode == "point":
        passed = threshold.holds(value)
        verb = f"meets {threshold.op} {bound:g}" if passed else f"is {side} {bound:g}"
        message = f"{suite}: {threshold.metric} = {value:.4f} {verb} (point mode; {ci}{noise})"
    elif mode == "lenient":
        passed = not wrong
        if wrong:
            message = (
                f"{suite}: {threshold.metric} = {value:.4f} is {side} {bound:g} in lenient mode: "
                f"its whole {ci} lies {'below' if minimum else 'above'} the bound"
            )
        elif within and not threshold.holds(value):
            reason = f"its {ci} reaches the bound" if defined else f"its {ci} cannot show it"
            message = (
                f"{suite}: {threshold.metric} = {value:.4f} passes {threshold.op} {bound:g} in lenient mode: "
                f"{reason} (within noise)"
            )
        else:
            message = (
                f"{suite}: {threshold.metric} = {value:.4f} meets {threshold.op} {bound:g} (lenient mode; {ci}{noise})"
            )
    else:
        passed = right
        if right:
            message = (
                f"{suite}: {threshold.metric} = {value:.4f} meets {threshold.op} {bound:g} in strict mode: "
                f"its whole {ci} lies {'above' if minimum else 'below'} the bound"
            )
        elif threshold.holds(value):
            direction = "below" if minimum else "above"
            reason = f"its {ci} reaches {direction} the bound" if defined else f"its {ci} gives no evidence"
            message = (
                f"{suite}: {threshold.metric} = {value:.4f} fails {threshold.op} {bound:g} in strict mode: "
                f"{reason} (within noise)"
            )
        else:
            message = f"{suite}: {threshold.metric} = {value:.4f} is {side} {bound:g} (strict mode; {ci}{noise})"
    return Verdict(
        suite, threshold.metric, threshold.op, bound, value, passed, message,
        mode=mode, ci=(low, high), within_noise=within, confidence=confidence,
    )
