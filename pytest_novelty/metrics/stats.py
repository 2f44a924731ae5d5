"""Suite-level statistics: NaN-aware means, the top-fraction mean and Holm's correction.

A suite's per-item values (novelty, originality, quality) may contain NaN for items that could not be
scored; every function here says what it does with them, and the mean helper reports how many it
left out so the report can show it. Comparing two checkpoints on the same prompts is :mod:`.paired`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pytest_novelty.metrics._validate import as_vector, ceil_fraction, check_fraction


@dataclass(frozen=True)
class MeanSummary:
    """A mean over the non-NaN values, with how many values it used and how many were NaN."""

    mean: float
    count: int
    excluded: int


def mean_excluding_nan(values: ArrayLike) -> MeanSummary:
    """Mean of the non-NaN values of a one-dimensional sequence, and the number of NaNs left out.

    NaN marks an unscored or too-short item; it is left out of the mean and counted in
    ``excluded``. When every value is NaN the mean is NaN and ``count`` is 0. Empty input raises
    ``ValueError``: a suite with no items is a configuration mistake, not a zero.
    """
    array = as_vector(values, "values")
    present = array[~np.isnan(array)]
    mean = float(present.mean()) if present.size else float("nan")
    return MeanSummary(mean=mean, count=int(present.size), excluded=int(array.size - present.size))


def top_fraction_mean(values: ArrayLike, fraction: float = 0.1) -> float:
    """Mean of the highest ceil(fraction × m) values, where m is the number of non-NaN values.

    This is the "top 10 %" statistic of a suite (``fraction=0.1``): how good the best outputs are,
    which a plain mean hides when most outputs are ordinary. Choices:

    * NaN values are left out before counting, so m counts scored items only; when every value is
      NaN the result is NaN.
    * The count is rounded up, so at least one value is always used and ``fraction=1`` gives the
      plain mean. ceil is taken on the decimal value of ``fraction`` (0.1 × 30 is 3, not 4).
    * Ties at the cut-off do not matter: equal values contribute equally whichever is taken.
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

    Sort the m p-values ascending, p₍₁₎ ≤ … ≤ p₍ₘ₎; reject the hypotheses of p₍₁₎ … p₍ₖ₎ where k is
    the largest index with p₍ⱼ₎ ≤ α/(m − j + 1) for every j ≤ k (Holm 1979, "A simple sequentially
    rejective multiple test procedure"). The probability of any false rejection among all m tests
    is then at most α, whatever their dependence, which is what a run of many regression cases
    needs: each case at α alone makes an unchanged checkpoint fail a run of 18 cases about one time
    in three. NaN (no test possible) is never rejected and still counts in m (the cautious
    reading). Equivalent to ``holm_adjusted(p) <= alpha``.
    """
    level = check_fraction(alpha, "alpha")
    return [p <= level for p in holm_adjusted(p_values)]


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given: p̃₍ⱼ₎ = max over i ≤ j of min(1, (m − i + 1)·p₍ᵢ₎).

    A case's adjusted p-value is the smallest family-wise α at which :func:`holm` rejects it, so a
    report can print one number per case. NaN stays NaN (and counts in m).
    """
    values = np.asarray(list(p_values), dtype=float)
    if values.ndim != 1:
        raise ValueError("p_values must be one-dimensional")
    present = values[~np.isnan(values)]
    if present.size and (present.min() < 0.0 or present.max() > 1.0):
        raise ValueError("p-values must lie in [0, 1]")
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
