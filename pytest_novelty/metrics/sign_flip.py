"""The paired sign-flip (randomisation) test: how the gate decides that a change is more than noise.

Under "no change" (the candidate is the accepted checkpoint, sampled with other seeds) the two sides
of a prompt are exchangeable: swapping a prompt's candidate answers with its accepted ones gives data
exactly as likely as the data seen. The test draws ``n_flips`` such swaps, each prompt swapped or not
with probability ½ (all of a prompt's samples go with it), recomputes the gated statistic's change on
each, and asks how often a swap moves it at least as far as the data did (Fisher 1935; the
clustered, paired form of Good, *Permutation Tests*, 2000):

* one-sided p-values p₊ = (1 + #{T* ≥ T})/(1 + B) and p₋ = (1 + #{T* ≤ T})/(1 + B), B draws
  (Phipson & Smyth 2010: a Monte-Carlo p-value never below 1/(1 + B), so it never overstates);
  two-sided p = min(1, 2·min(p₊, p₋)). Where 2ⁿ ≤ B, all 2ⁿ swaps of n prompts are taken instead
  and p is exact; the smallest p-value n prompts can give is then 2/2ⁿ (:func:`smallest_p`): six
  prompts cannot show any change at α below 0.031, however large.
* Level: exact at any number of prompts and for any distribution of the per-prompt values (discrete
  as utility_k's, skewed, heavy-tailed, tied at zero), because nothing is assumed of them; only
  exchangeability. Where the null is wider ("the same mean", not the same checkpoint) it holds
  asymptotically, as a t-test does. The percentile bootstrap it replaces read its 0.13 % tail from
  50 prompts and raised false alarms at several times its level (``docs/verdicts.md``).
* Interval: the shifts δ that the test does not reject at 1 − c, "the candidate is the accepted
  checkpoint plus δ" (test inversion; Hartigan 1969). For a mean the swap of prompt i turns dᵢ − δ
  into −(dᵢ − δ), so each draw b rejects δ on one side exactly when δ passes one number,
  δ_b = (T − m_b)/(1 − s_b) (m_b the draw's mean of ±dᵢ, s_b its mean sign): the bounds are order
  statistics of the δ_b, in closed form. For a top fraction the candidate's generations are shifted
  by δ and the bounds found by bisection. The interval excludes 0 exactly when p ≤ 1 − c, so the
  shown interval and the verdict always agree.
* Swaps come from numpy's default generator seeded with ``seed``: the same data give the same
  result.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics._validate import as_vector, check_confidence, check_count, check_fraction
from pytest_novelty.metrics.uncertainty import TopFractionStatistic

Array = NDArray[np.float64]

#: Swaps drawn unless told otherwise (a p-value's resolution is 1/(1 + B)).
DEFAULT_FLIPS = 10_000

#: Name of the test, as comparisons and reports print it.
SIGN_FLIP_TEST = "paired sign-flip test over prompts"

#: Bisection steps for a top-fraction bound (the range halves each step).
_BISECTIONS = 10


@dataclass(frozen=True)
class PairedChange:
    """Result of :func:`paired_sign_flip`: the change b − a of ``statistic`` ("mean" or "top 10 %") on
    ``n`` prompts, its interval at ``confidence`` and the two-sided p-value of "no change", from
    ``n_flips`` swaps (every one of the 2ⁿ where they are fewer)."""

    statistic: str
    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int
    confidence: float
    n_flips: int


def flips(n_prompts: int, n_flips: int, seed: int) -> tuple[Array, bool]:
    """Random signs ±1, one row per swap (−1 swaps the prompt's two sides), and whether they are all
    2ⁿ patterns (where 2ⁿ ≤ ``n_flips``: the test is then exact, with no Monte-Carlo error)."""
    if n_prompts < 31 and 2**n_prompts <= n_flips:
        patterns = (np.arange(2**n_prompts)[:, None] >> np.arange(n_prompts)) & 1
        return patterns.astype(np.float64) * 2.0 - 1.0, True
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2, size=(n_flips, n_prompts)).astype(np.float64) * 2.0 - 1.0, False


def smallest_p(n_prompts: int, n_flips: int = DEFAULT_FLIPS) -> float:
    """The smallest two-sided p-value the test can give on ``n_prompts`` prompts: 2/2ⁿ (every prompt
    on one side), or 2/(1 + B) where B random swaps stand for the 2ⁿ."""
    return min(1.0, 2.0 / min(2.0**n_prompts, n_flips + 1))


def one_sided(observed: float, drawn: Array, exact: bool, scale: float = 0.0) -> tuple[float, float]:
    """p₊ and p₋ of ``observed`` among the draws: all patterns (the data among them), or random
    draws with Phipson & Smyth's +1 for the data. Draws within 10⁻¹² × ``scale`` of ``observed``
    count as ties (a sum taken in another order may differ in its last bit)."""
    extra, slack = (0 if exact else 1), 1e-12 * scale
    count = drawn.size + extra
    return ((extra + int(np.sum(drawn >= observed - slack))) / count,
            (extra + int(np.sum(drawn <= observed + slack))) / count)  # fmt: skip


def _two_sided(p_high: float, p_low: float) -> float:
    return min(1.0, 2.0 * min(p_high, p_low))


def mean_change(differences: ArrayLike, *, n_flips: int = DEFAULT_FLIPS, seed: int = 0,
                confidence: float = 0.95) -> tuple[float, float, float, float]:
    """The mean of paired ``differences`` (candidate − accepted per prompt, NaN-free), its interval at
    ``confidence`` by test inversion and the two-sided p-value of "no change": (T, low, high, p)."""
    d = as_vector(differences, "differences")
    if d.size < 2 or np.isnan(d).any():
        raise ValueError(f"a sign-flip test needs at least two NaN-free differences, got {d.size}")
    check_count(n_flips, "n_flips")
    level = check_confidence(confidence)
    signs, exact = flips(d.size, n_flips, seed)
    n, estimate = d.size, float(d.mean())
    means, mean_signs = signs @ d / n, signs.sum(axis=1) / n
    p = _two_sided(*one_sided(estimate, means, exact, scale=float(np.abs(d).mean())))
    # Draw b rejects δ from above when δ < δ_b and from below when δ > δ_b (δ_b: the mean of the
    # differences it swaps); a draw that swaps nothing never rejects.
    moved = mean_signs < 1.0
    cuts = np.sort((estimate - means[moved]) / (1.0 - mean_signs[moved]))
    always = int(np.sum(~moved)) + (0 if exact else 1)
    count = signs.shape[0] + (0 if exact else 1)
    needed = math.floor((1.0 - level) / 2 * count - always) + 1  # draws a bound needs on its side
    if needed <= 0 or needed > cuts.size:  # too few prompts to reject any shift at this level
        return estimate, -math.inf, math.inf, p
    return estimate, float(cuts[needed - 1]), float(cuts[-needed]), p


def top_fraction_change(a: ArrayLike, b: ArrayLike, fraction: float, *, n_flips: int = DEFAULT_FLIPS,
                        seed: int = 0, confidence: float = 0.95) -> tuple[float, float, float, float]:
    """The change of the top-``fraction`` mean over (prompts × samples) values from ``a`` to ``b``
    (NaN left out), a prompt's rows swapped whole; its interval at ``confidence`` by bisection on the
    shift of ``b``, and the two-sided p-value: (T, low, high, p)."""
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if first.ndim != 2 or first.shape != second.shape:
        raise ValueError("a top-fraction sign-flip test needs two (prompts × samples) arrays of one shape")
    share = check_fraction(fraction, "fraction")
    check_count(n_flips, "n_flips")
    level = check_confidence(confidence)
    n = first.shape[0]
    if n < 2 or np.all(np.isnan(first)) or np.all(np.isnan(second)):
        raise ValueError("a top-fraction sign-flip test needs two prompts with values on both sides")
    signs, exact = flips(n, n_flips, seed)
    keep = (signs > 0).astype(np.float64)
    to_b = np.hstack([np.zeros((1, n)), np.ones((1, n))])
    on_b = np.vstack([to_b, np.hstack([1.0 - keep, keep])])  # row 0: the data; then the draws
    on_a = 1.0 - on_b

    def changes(shift: float) -> tuple[float, Array]:
        statistic = TopFractionStatistic(np.vstack([first, second - shift]), share)
        values = statistic(on_b) - statistic(on_a)
        return float(values[0]), values[1:]

    estimate, drawn = changes(0.0)
    scale = float(np.nanmax(np.abs(np.vstack([first, second]))))
    p = _two_sided(*one_sided(estimate, drawn, exact, scale))
    span = (float(np.nanmin(second) - np.nanmax(first)), float(np.nanmax(second) - np.nanmin(first)))
    tail, reach = (1.0 - level) / 2, 4.0 * float(np.std(drawn)) or 1.0

    def accepted(shift: float, side: int) -> bool:
        observed, drawn = changes(shift)
        return one_sided(observed, drawn, exact, scale)[side] > tail

    low = _bisect(estimate, -reach, span[0], lambda s: accepted(s, 0))
    high = _bisect(estimate, reach, span[1], lambda s: accepted(s, 1))
    return estimate, low, high, p


def _bisect(inner: float, step: float, end: float, accepted: Callable[[float], bool]) -> float:
    """The accepted shift farthest from ``inner`` (the estimate, never rejected) towards ``end`` (the
    range's end): a bracket of ``step`` doubled until its far end is rejected or reaches ``end``, then
    :data:`_BISECTIONS` halvings (to 2⁻¹⁰ of the bracket)."""
    outer = inner + step
    while (outer - end) * step < 0 and accepted(outer):
        inner, outer, step = outer, outer + 2 * step, 2 * step
    if (outer - end) * step >= 0:
        if accepted(end):
            return end
        outer = end
    for _ in range(_BISECTIONS):
        middle = (outer + inner) / 2
        if accepted(middle):
            inner = middle
        else:
            outer = middle
    return inner


def paired_sign_flip(a: ArrayLike, b: ArrayLike, *, top_fraction: float | None = None,
                     n_flips: int = DEFAULT_FLIPS, seed: int = 0, confidence: float = 0.95) -> PairedChange:
    """The gate's test of the change from accepted ``a`` to candidate ``b``, prompts paired by row: per
    prompt values (NaN pairs dropped) and their mean change, or with ``top_fraction`` (prompts ×
    samples) values and the change of the top-fraction mean. ``ValueError`` below two usable prompts."""
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if first.shape[:1] != second.shape[:1]:
        raise ValueError(f"a and b must be paired by prompt: they have {len(first)} and {len(second)} rows")
    if top_fraction is None:
        first, second = as_vector(first, "a"), as_vector(second, "b")
        d = (second - first)[~(np.isnan(first) | np.isnan(second))]
        found, name = mean_change(d, n_flips=n_flips, seed=seed, confidence=confidence), "mean"
        n = int(d.size)
    else:
        found = top_fraction_change(first, second, top_fraction, n_flips=n_flips, seed=seed, confidence=confidence)
        name, n = f"top {100 * top_fraction:g} %", int(first.shape[0])
    estimate, low, high, p = found
    return PairedChange(name, estimate, low, high, p, n, confidence, int(n_flips))
