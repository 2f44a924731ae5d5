"""Two checkpoints on the same prompts: the plain test of two series of per-prompt values (a
percentile interval and the paired t-test). The gate's own test of a regression is the paired
sign-flip test, :mod:`.sign_flip`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pytest_novelty.metrics._validate import as_vector, check_confidence, check_count
from pytest_novelty.metrics.bootstrap import quantiles, resample
from pytest_novelty.metrics.uncertainty import RatioStatistic

#: Bootstrap resamples drawn by :func:`paired_test` unless told otherwise.
DEFAULT_BOOTSTRAP_RESAMPLES = 10_000


@dataclass(frozen=True)
class PairedTest:
    """Result of :func:`paired_test`: the mean paired difference b − a, its interval and p-value, on
    ``n`` pairs (``dropped``: the pairs with a NaN)."""

    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int
    dropped: int
    confidence: float
    n_boot: int


def paired_test(
    a: ArrayLike,
    b: ArrayLike,
    *,
    n_boot: int = DEFAULT_BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> PairedTest:
    """Compare per-prompt values of a baseline ``a`` and a candidate ``b``.

    * Pairs with a NaN are dropped; at least one must remain.
    * ``difference`` = mean(b_i − a_i): positive when ``b`` scores higher.
    * Interval: the (1 − c)/2 and (1 + c)/2 quantiles (numpy's linear interpolation) of the means of
      ``n_boot`` resamples of the differences (numpy's default generator seeded with ``seed``).
    * p-value: two-sided ``scipy.stats.ttest_rel(b, a)``, which is NaN at zero variance, so: all
      differences 0 gives p = 1; all equal to a non-zero constant with n ≥ 2 gives p = 0 (the test's
      limit as the variance goes to 0); a single non-zero pair gives NaN.
    """
    first = as_vector(a, "a")
    second = as_vector(b, "b")
    if first.shape != second.shape:
        raise ValueError(f"a and b must be paired: they have {first.size} and {second.size} values")
    check_count(n_boot, "n_boot")
    level = check_confidence(confidence)
    keep = ~(np.isnan(first) | np.isnan(second))
    if not keep.any():
        raise ValueError("a and b have no pair where both values are present (all pairs contain NaN)")
    first, second = first[keep], second[keep]
    differences = second - first
    n = int(differences.size)
    draws = resample(RatioStatistic.mean_of(differences[:, None]), n, n_boot=int(n_boot), seed=seed)
    low, high = quantiles(draws.values, level)
    return PairedTest(float(differences.mean()), low, high, _paired_p_value(first, second, differences), n,
                      int(keep.size - n), level, int(n_boot))  # fmt: skip


def _paired_p_value(first: np.ndarray, second: np.ndarray, differences: np.ndarray) -> float:
    """Two-sided paired t-test p-value, with the zero-variance cases decided explicitly."""
    if np.all(differences == differences[0]):
        if differences[0] == 0.0:
            return 1.0
        return 0.0 if differences.size >= 2 else float("nan")
    from scipy import stats as scipy_stats  # imported here: it is slow to import and rarely needed

    return float(scipy_stats.ttest_rel(second, first).pvalue)
