"""Suite-level statistics: NaN-aware means, the top-fraction mean, paired comparisons and Holm's correction.

A suite's per-item values (novelty, originality, quality) may contain NaN for items that could not be
scored; every function here says what it does with them, and the mean helper reports how many it
left out so the report can show it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pytest_novelty.metrics._validate import as_vector, ceil_fraction, check_fraction

#: Bootstrap resamples drawn by :func:`paired_test` unless told otherwise.
DEFAULT_BOOTSTRAP_RESAMPLES = 10_000

# Resampled indices are drawn in blocks of about this many elements to bound memory use.
_BOOTSTRAP_BLOCK_ELEMENTS = 1_000_000


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


@dataclass(frozen=True)
class PairedTest:
    """Result of :func:`paired_test`: the mean paired difference b − a, its confidence interval and p-value.

    ``n`` is the number of pairs used and ``dropped`` the number left out because either value was
    NaN. ``ci_low`` and ``ci_high`` bound ``difference`` at level ``confidence`` (percentile
    bootstrap over ``n_boot`` resamples); ``p_value`` is the two-sided paired t-test p-value.
    """

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
    """Compare two paired samples (per-prompt values of a baseline ``a`` and a candidate ``b``).

    Definitions and choices:

    * Pairs where either value is NaN are dropped (counted in ``dropped``); at least one pair must
      remain.
    * ``difference`` = mean(b_i − a_i): positive when the candidate ``b`` scores higher.
    * Confidence interval: percentile bootstrap. Draw ``n_boot`` resamples of the n paired
      differences with replacement (numpy's default generator seeded with ``seed``, so the interval
      is reproducible), take the mean of each, and report the (1 − c)/2 and (1 + c)/2 quantiles
      (numpy's default linear interpolation).
    * p-value: two-sided paired t-test, ``scipy.stats.ttest_rel(b, a)``. scipy returns NaN when
      all differences are equal (zero variance), so that case is handled here: all differences 0
      gives p = 1 (no evidence of any change); all equal to a non-zero constant, with n ≥ 2, gives
      p = 0 (the limit of the test as the variance goes to 0: an exact, consistent shift). With a
      single non-zero pair no test is possible and p is NaN.
    """
    first = as_vector(a, "a")
    second = as_vector(b, "b")
    if first.shape != second.shape:
        raise ValueError(f"a and b must be paired: they have {first.size} and {second.size} values")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    level = check_fraction(confidence, "confidence")
    if level == 1.0:
        raise ValueError("confidence must lie in (0, 1), got 1")
    keep = ~(np.isnan(first) | np.isnan(second))
    if not keep.any():
        raise ValueError("a and b have no pair where both values are present (all pairs contain NaN)")
    first, second = first[keep], second[keep]
    differences = second - first
    n = int(differences.size)
    difference = float(differences.mean())
    low, high = _bootstrap_interval(differences, int(n_boot), seed, level)
    return PairedTest(
        difference=difference,
        ci_low=low,
        ci_high=high,
        p_value=_paired_p_value(first, second, differences),
        n=n,
        dropped=int(keep.size - n),
        confidence=level,
        n_boot=int(n_boot),
    )


def _paired_p_value(first: np.ndarray, second: np.ndarray, differences: np.ndarray) -> float:
    """Two-sided paired t-test p-value, with the zero-variance cases decided explicitly."""
    if np.all(differences == differences[0]):
        if differences[0] == 0.0:
            return 1.0
        return 0.0 if differences.size >= 2 else float("nan")
    from scipy import stats as scipy_stats  # imported here: it is slow to import and rarely needed

    return float(scipy_stats.ttest_rel(second, first).pvalue)


def _bootstrap_interval(differences: np.ndarray, n_boot: int, seed: int, level: float) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``differences``."""
    rng = np.random.default_rng(seed)
    n = differences.size
    block = max(1, _BOOTSTRAP_BLOCK_ELEMENTS // n)
    means = np.empty(n_boot)
    for start in range(0, n_boot, block):
        stop = min(n_boot, start + block)
        indices = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = differences[indices].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


#: Name of the test :func:`paired_bootstrap` runs, as reports print it.
BOOTSTRAP_TEST = "paired bootstrap over prompts"

#: Interval methods :func:`paired_bootstrap` knows (see :mod:`pytest_novelty.metrics.bootstrap`).
PAIRED_METHODS = ("t", "studentized", "percentile")


@dataclass(frozen=True)
class BootstrapTest:
    """Result of :func:`paired_bootstrap`: the difference b − a of a statistic, its interval and p-value.

    ``statistic`` names what was compared ("mean" or "top 10 %") and ``method`` how the interval
    was made (one of :data:`PAIRED_METHODS`); ``n`` counts the prompts resampled;
    ``ci_low``/``ci_high`` is the interval at ``confidence`` and ``p_value`` the two-sided p-value
    of "no change" from the same resamples, so the interval excludes 0 exactly when p < 1 −
    ``confidence`` (up to the quantile interpolation).
    """

    statistic: str
    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int
    confidence: float
    n_boot: int
    method: str = "t"

    def excludes_zero(self) -> bool:
        """Whether the interval lies entirely on one side of 0 (the test's significance decision)."""
        return self.ci_low > 0.0 or self.ci_high < 0.0


def paired_bootstrap(
    a: ArrayLike,
    b: ArrayLike,
    *,
    top_fraction: float | None = None,
    n_boot: int = DEFAULT_BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    method: str = "t",
) -> BootstrapTest:
    """Paired bootstrap of the difference of a statistic between baseline ``a`` and candidate ``b``.

    Rows are prompts, paired by position; each resample draws prompts with replacement (numpy's
    default generator seeded with ``seed``) and recomputes the statistic of both on the same
    prompts, every sample of a drawn prompt with it (clustered: samples of a prompt are
    correlated), so the interval is that of the gated statistic itself:

    * ``top_fraction=None``: ``a`` and ``b`` hold one value per prompt (the per-prompt means of its
      samples); prompts where either is NaN are dropped; the statistic is the mean, so Δ is the mean
      per-prompt difference.
    * ``top_fraction=f``: ``a`` and ``b`` are (prompts × samples) per-generation values; the
      statistic is :func:`top_fraction_mean` over all generations of the drawn prompts (the
      ``top10_novelty`` statistic for f = 0.1), NaN values left out.

    The interval (``method``, see :mod:`pytest_novelty.metrics.bootstrap`): ``"t"``, the default,
    is Δ ± t(n − 1, (1 + c)/2) · √(n/(n − 1)) · sd(Δ*), Student's t on the bootstrap standard error
    (for a mean, the paired t-test up to the Monte Carlo error of sd(Δ*)). In simulation under "no
    change" it raised 4.7 % false alarms (two-sided, nominal 5 %) on 10 prompts (a q@Tail tail),
    where the ``"percentile"`` interval, this function's method before, raised 10 %; on 100 prompts
    all methods are near 5 %. ``"studentized"`` (the bootstrap-t) is offered too; for the paired
    top-10 % change it is fragile where few prompts hold the best generations, so it is not the
    default here. The interval is clipped to the range the change can take (for a mean, that of the
    per-prompt differences). The gate calls a change significant when the interval excludes 0
    (:meth:`BootstrapTest.excludes_zero`); the same resamples give the p-value, which agrees with
    it. At least two prompts are needed; ``ValueError`` when no resample has values on both sides.
    """
    from pytest_novelty.metrics import bootstrap, uncertainty

    level = check_fraction(confidence, "confidence")
    if level == 1.0:
        raise ValueError("confidence must lie in (0, 1), got 1")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    if method not in PAIRED_METHODS:
        raise ValueError(f"method must be one of {', '.join(PAIRED_METHODS)}, got {method!r}")
    first = np.asarray(a, dtype=float)
    second = np.asarray(b, dtype=float)
    if first.shape[:1] != second.shape[:1]:
        raise ValueError(f"a and b must be paired by prompt: they have {len(first)} and {len(second)} rows")
    statistic: bootstrap.ClusterStatistic
    if top_fraction is None:
        first, second = as_vector(first, "a"), as_vector(second, "b")
        keep = ~(np.isnan(first) | np.isnan(second))
        differences = (second - first)[keep]
        statistic = uncertainty.RatioStatistic.mean_of(differences[:, None])
        bounds = (float(differences.min()), float(differences.max())) if differences.size else (0.0, 0.0)
        name = "mean"
    else:
        check_fraction(top_fraction, "top_fraction")
        if first.ndim != 2 or second.ndim != 2:
            raise ValueError("a top-fraction bootstrap needs (prompts × samples) arrays")
        before = uncertainty.TopFractionStatistic(first, top_fraction)
        statistic = uncertainty.DifferenceStatistic(before, uncertainty.TopFractionStatistic(second, top_fraction))
        bounds = (float(np.nanmin(second) - np.nanmax(first)), float(np.nanmax(second) - np.nanmin(first))) \
            if np.any(~np.isnan(first)) and np.any(~np.isnan(second)) else (0.0, 0.0)
        name = f"top {100 * top_fraction:g} %"
        keep = np.ones(first.shape[0], dtype=bool)
    n = int(keep.sum())
    if n < 2:
        raise ValueError(f"a paired bootstrap needs at least two prompts, got {n}")
    draws = bootstrap.resample(statistic, n, n_boot=max(int(n_boot), 2), seed=seed)
    if np.isnan(draws.estimate) or np.sum(~np.isnan(draws.values)) < 2:
        raise ValueError("no resample has values on both sides: nothing to compare")
    interval = bootstrap.interval_of(draws, confidence=level, method=method, bounds=bounds)
    p = bootstrap.p_value_of(draws, method, level)
    return BootstrapTest(name, draws.estimate, interval.low, interval.high, p, n, level, int(n_boot), interval.method)


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
