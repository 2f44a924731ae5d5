"""Suite-level statistics: NaN-aware means, the top-fraction mean, Holm's correction and Wilson's
interval of a rate.

NaN marks an item that could not be scored; each function says what it does with it. Comparing two
checkpoints on the same prompts is :mod:`.paired`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pytest_novelty.metrics._validate import as_vector, ceil_fraction, check_fraction, check_range


@dataclass(frozen=True)
class MeanSummary:
    """A mean over the non-NaN values, with how many values it used and how many were NaN."""

    mean: float
    count: int
    excluded: int


def mean_excluding_nan(values: ArrayLike) -> MeanSummary:
    """Mean of the non-NaN values of a vector and the NaNs left out (all NaN: mean NaN, count 0).
    Empty input raises ``ValueError``: a suite with no items is a configuration mistake, not a zero."""
    array = as_vector(values, "values")
    present = array[~np.isnan(array)]
    mean = float(present.mean()) if present.size else float("nan")
    return MeanSummary(mean=mean, count=int(present.size), excluded=int(array.size - present.size))


def top_fraction_mean(values: ArrayLike, fraction: float = 0.1) -> float:
    """Mean of the highest ceil(fraction × m) values, where m is the number of non-NaN values.

    A suite's "top 10 %" (``fraction=0.1``): how good the best outputs are, which a plain mean hides.
    NaN is left out before counting (all NaN: NaN); rounding up uses at least one value, and ceil is
    taken on the decimal value of ``fraction`` (0.1 × 30 is 3, not 4); ties at the cut-off do not
    matter.
    """
    array = as_vector(values, "values")
    share = check_fraction(fraction, "fraction")
    present = array[~np.isnan(array)]
    if present.size == 0:
        return float("nan")
    take = ceil_fraction(share, present.size)
    highest = np.sort(present)[present.size - take :]
    return float(highest.mean())


def holm(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Holm's step-down rejections at family-wise error rate ``alpha``, in the order given.

    With p₍₁₎ ≤ … ≤ p₍ₘ₎, reject p₍₁₎ … p₍ₖ₎ for the largest k with p₍ⱼ₎ ≤ α/(m − j + 1) for every
    j ≤ k (Holm 1979): any false rejection among the m tests has probability at most α, whatever their
    dependence (each of 18 cases at α alone fails an unchanged checkpoint about one run in three).
    NaN is never rejected and counts in m. Equivalent to ``holm_adjusted(p) <= alpha``.
    """
    level = check_fraction(alpha, "alpha")
    return [p <= level for p in holm_adjusted(p_values)]


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given: p̃₍ⱼ₎ = max over i ≤ j of min(1, (m − i + 1)·p₍ᵢ₎).

    Each is the smallest family-wise α at which :func:`holm` rejects it. NaN stays NaN (and counts in m).
    """
    values = np.asarray(list(p_values), dtype=float)
    if values.ndim != 1:
        raise ValueError("p_values must be one-dimensional")
    check_range(values, "p-values", 0.0, 1.0)
    m = values.size
    order = np.argsort(np.where(np.isnan(values), np.inf, values), kind="stable")
    adjusted = np.full(m, np.nan)
    running = 0.0
    for rank, index in enumerate(order):
        if np.isnan(values[index]):
            break
        running = max(running, min(1.0, (m - rank) * float(values[index])))
        adjusted[index] = running
    return [float(v) for v in adjusted]


def wilson(hits: int, runs: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval (Wilson 1927) of a rate seen ``hits`` times in ``runs`` tries: it stays
    inside [0, 1] and keeps its coverage near 0 and 1, where a false-alarm rate lives."""
    from statistics import NormalDist

    if runs < 1 or not 0 <= hits <= runs:
        raise ValueError(f"need 0 <= hits <= runs and runs >= 1, got {hits} of {runs}")
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    rate = hits / runs
    centre = (rate + z * z / (2 * runs)) / (1 + z * z / runs)
    half = z / (1 + z * z / runs) * (rate * (1 - rate) / runs + z * z / (4 * runs * runs)) ** 0.5
    return max(0.0, centre - half), min(1.0, centre + half)
