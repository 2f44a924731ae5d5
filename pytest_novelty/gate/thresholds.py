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
    head = f"{suite}: {threshold.metric}"
    unknown = f"{head} could not be computed (no scored generations); threshold {threshold.op} {threshold.value:g}"
    if interval is None:
        passed = threshold.holds(value)
        message = unknown if math.isnan(value) else f"{head} = {value:.4f} {_verb(threshold, passed)}"
        return Verdict(suite, threshold.metric, threshold.op, threshold.value, value, passed, message)
    band = _Band.of(interval)
    if math.isnan(value):
        passed, message = False, f"{unknown} ({mode} mode)"
    else:
        passed, words = _BY_MODE[mode](threshold, value, band)
        message = f"{head} = {value:.4f} {words}"
    return Verdict(
        suite, threshold.metric, threshold.op, threshold.value, value, passed, message,
        mode=mode, ci=(band.low, band.high), within_noise=band.reaches(threshold.value), confidence=band.confidence,
    )


@dataclass(frozen=True)
class _Band:
    """A value's interval as a threshold check reads it (an undefined one is (−inf, inf))."""

    low: float
    high: float
    confidence: float | None

    @classmethod
    def of(cls, interval: Interval | tuple[float, float]) -> _Band:
        if isinstance(interval, Interval):
            low, high, confidence = interval.low, interval.high, interval.confidence
        else:
            (low, high), confidence = interval, None
        low, high = float(low), float(high)
        if math.isnan(low) or math.isnan(high):
            return cls(-math.inf, math.inf, confidence)
        if low > high:
            raise ValueError(f"the interval's low bound {low!r} is above its high bound {high!r}")
        return cls(low, high, confidence)

    @property
    def defined(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def ci(self) -> str:
        """``95% CI [0.2900, 0.3880]``, or that it is undefined."""
        level = f"{100 * self.confidence:g}% CI" if self.confidence is not None else "CI"
        return f"{level} [{self.low:.4f}, {self.high:.4f}]" if self.defined else f"{level} undefined (too few prompts)"

    def reaches(self, bound: float) -> bool:
        """Whether the interval contains ``bound``: the case is within noise."""
        return self.low <= bound <= self.high

    def noise(self, bound: float) -> str:
        return ", within noise" if self.reaches(bound) else ""


def _verb(threshold: Threshold, passed: bool) -> str:
    """``meets >= 0.3`` or ``is below the minimum 0.3``."""
    side = "below the minimum" if threshold.op == ">=" else "above the maximum"
    return f"meets {threshold.op} {threshold.value:g}" if passed else f"is {side} {threshold.value:g}"


def _point(threshold: Threshold, value: float, band: _Band) -> tuple[bool, str]:
    """``point``: the value against the bound, the interval shown beside it."""
    passed = threshold.holds(value)
    return passed, f"{_verb(threshold, passed)} (point mode; {band.ci}{band.noise(threshold.value)})"


def _lenient(threshold: Threshold, value: float, band: _Band) -> tuple[bool, str]:
    """``lenient``: fail only when the whole interval lies on the wrong side of the bound."""
    bound, minimum = threshold.value, threshold.op == ">="
    if band.high < bound if minimum else band.low > bound:
        return False, f"{_verb(threshold, False)} in lenient mode: its whole {band.ci} lies " \
                      f"{'below' if minimum else 'above'} the bound"  # fmt: skip
    if band.reaches(bound) and not threshold.holds(value):
        reason = "reaches the bound" if band.defined else "cannot show it"
        return True, f"passes {threshold.op} {bound:g} in lenient mode: its {band.ci} {reason} (within noise)"
    return True, f"{_verb(threshold, True)} (lenient mode; {band.ci}{band.noise(bound)})"


def _strict(threshold: Threshold, value: float, band: _Band) -> tuple[bool, str]:
    """``strict``: pass only when the whole interval lies on the right side of the bound."""
    bound, minimum = threshold.value, threshold.op == ">="
    if band.low >= bound if minimum else band.high <= bound:
        return True, f"{_verb(threshold, True)} in strict mode: its whole {band.ci} lies " \
                     f"{'above' if minimum else 'below'} the bound"  # fmt: skip
    if threshold.holds(value):
        reason = f"reaches {'below' if minimum else 'above'} the bound" if band.defined else "gives no evidence"
        return False, f"fails {threshold.op} {bound:g} in strict mode: its {band.ci} {reason} (within noise)"
    return False, f"{_verb(threshold, False)} (strict mode; {band.ci}{band.noise(bound)})"


_BY_MODE = {"point": _point, "lenient": _lenient, "strict": _strict}
