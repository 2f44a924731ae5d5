"""How sure a suite's numbers are: confidence intervals clustered by prompt.

Model and source: Miller, "Adding Error Bars to Evals: A Statistical Approach to Language Model
Evaluations" (2024, arXiv 2411.00640). A suite's prompts are a sample from a larger population of
prompts like them, and each prompt's answers are a sample of what the checkpoint could have written.
A gated value estimates the population's statistic; its noise comes from both draws. The answers to
one prompt share that prompt's difficulty, so they are correlated: an interval that treats the
generations of a suite as independent is too narrow by the square root of the design effect
1 + (m − 1)·ρ (m samples per prompt, ρ the correlation of two answers to the same prompt). Every
interval here therefore resamples *prompts* and keeps each prompt's samples together (a cluster
bootstrap), or, for shares, uses the clustered variance directly. What a comparison of two runs
can detect is in :mod:`.power`; the paired comparison itself in :mod:`.stats`.

The bootstrap, one engine for every statistic (:func:`resample`, :func:`interval_of`):

* A resample draws G prompts with replacement from the G prompts. Every statistic we gate is
  symmetric in the order of prompts, so it depends on a resample only through the multiplicities
  w_1 … w_G (how often each prompt was drawn). A statistic is therefore a function of a
  (resamples × G) weight matrix (:class:`ClusterStatistic`), vectorised; weight 1 everywhere gives
  its value on the data. :func:`per_resample` adapts any function of a resampled (prompts ×
  samples) array, for statistics without a vectorised form.
* Each statistic also gives its linearisation (the delta method / influence function): per-prompt
  contributions e_i with T(w + dw) ≈ T(w) + Σ dw_i·e_i, whose clustered sum of squares
  √(G/(G − 1) · Σ w_i·e_i²) is the statistic's standard error SE (the sandwich estimator with its
  usual small-sample factor), on the data and on every resample.
* ``method="studentized"`` (the default; the bootstrap-t): t* = (θ* − θ̂)/SE* on every resample
  and the interval [θ̂ − t*₍₁₊c₎/₂·SE, θ̂ − t*₍₁₋c₎/₂·SE], θ̂ the statistic on the data. Why not the
  plain percentile interval: on few prompts its coverage falls short (10 prompts, q@Tail's tail:
  about 90 %), and the top-10 % mean is carried by the few prompts that hold the best
  generations, so its estimate and its spread move together and its distribution is skewed; the
  percentile interval covered 88 % and a symmetric t interval 90 % of a 100-prompt suite in our
  simulation, the studentized one 93-95 % (``tests/metrics/test_uncertainty_simulation.py``). A
  resample whose SE* is 0 gets t* = ±∞ (0 when θ* = θ̂): it is evidence that few prompts carry the
  statistic, and widens the interval rather than being dropped. The interval is widened to contain
  θ̂ if both t* quantiles fall on one side of 0, so it always contains the reported value. An SE
  of 0 on the data (every prompt contributes alike) gives the zero-width interval at θ̂.
* ``method="t"``: θ̂ ± t(G − 1, (1 + c)/2) · √(G/(G − 1)) · sd(θ*), Student's t on the bootstrap
  standard error; used for statistics without a linearisation. ``method="percentile"``: the
  (1 − c)/2 and (1 + c)/2 quantiles of θ* (numpy's linear interpolation), kept for comparison.
* ``bounds`` (the statistic's range) clip the interval (a mean of values in [0, 1] stays there).
* Resamples on which the statistic is undefined (NaN, e.g. every drawn prompt unscored) are left
  out. With fewer than two prompts, fewer than two defined resamples or an undefined θ̂ the
  interval is undefined (NaN bounds, :attr:`Interval.defined` false).
* Resamples are drawn from numpy's default generator seeded with ``seed``, so a rerun gives the
  same interval; :data:`DEFAULT_RESAMPLES` of them.

Shares (``coverage@n``, ``unscored``: :func:`share_interval`) are often close to 0 or 1, where a
bootstrap sees too few events (0 unscored answers of 200 resample to [0, 0]). They get Wilson's
score interval on the effective number of generations n_eff = N / deff, where N is the number of
generations and deff = max(1, SE² · N / (p̂(1 − p̂))) the design effect, SE the clustered standard
error of the share p̂ (deff = 1 when p̂ is 0 or 1), with the t(G − 1) quantile in place of z:

    centre = (p̂ + z²/(2n)) / (1 + z²/n),   half = z / (1 + z²/n) · √(p̂(1 − p̂)/n + z²/(4n²)),

n = n_eff. Wilson (1927) for the score interval; Kish for the design effect; the effective-size
Wilson interval for clustered samples is the survey statisticians' standard choice for rare
proportions. It stays in [0, 1], contains p̂ and is not of zero width at 0 or 1.

The gated statistics (:func:`suite_intervals` maps each metric name to one; the definitions are
those of :mod:`pytest_novelty.metrics.suite`, and the tests check that every interval's estimate is
the suite's value to the last digit):

* means over generations, NaN (unscored) left out: ``quality``, ``originality@n`` (too short
  counted as 0), ``novelty@n`` (:func:`mean_interval`). Per resample Σ w_i·sum_i / Σ w_i·count_i,
  a ratio estimator, so prompts with more scored samples weigh more, as in the point value;
* shares over generations: ``coverage@n``, ``unscored`` (:func:`share_interval`);
* the top-10 % mean over all generations of the drawn prompts, each generation counted as often as
  its prompt was drawn: ``top10_novelty@n`` (:func:`top_fraction_interval`);
* means over prompts of per-prompt values, NaN left out: ``distinct_k``, ``utility_k``,
  ``novelty_overall`` (per-prompt output originality at n = 4), and ``q_at_tail@α`` and
  ``novelty_at_peak@α`` over the tail's or the peak's prompts only, which are then the clusters
  (:func:`tail_interval`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics._validate import as_float_array, check_fraction
from pytest_novelty.metrics.novelty import gated_novelty, originality_counting_short

Array = NDArray[np.float64]

#: Bootstrap resamples drawn for an interval unless told otherwise.
DEFAULT_RESAMPLES = 2000

#: Interval methods :func:`bootstrap_interval` knows.
METHODS = ("studentized", "t", "percentile")

#: The interval method of shares (:func:`share_interval`).
WILSON = "wilson"

#: Floor of a resample's standard error in the studentized pivot, as a share of the bootstrap's sd(θ*).
SE_FLOOR = 0.5

# Resample weights (and the top-fraction statistic's work arrays) are built in blocks of about this
# many elements, to bound memory.
_BLOCK_ELEMENTS = 1_000_000


@dataclass(frozen=True)
class Interval:
    """A statistic's value on the data and its confidence interval.

    ``estimate`` is the statistic on the data (the gated value); ``low`` and ``high`` bound it at
    ``confidence``; ``n_clusters`` counts the prompts resampled; ``method`` says how the interval was
    made (one of :data:`METHODS`). NaN bounds: undefined (too few prompts); an infinite bound: the
    resamples cannot bound that side (only without a ``bounds`` range, see
    :func:`bootstrap_interval`).
    """

    low: float
    high: float
    confidence: float
    n_clusters: int
    method: str
    estimate: float = math.nan

    @property
    def defined(self) -> bool:
        """Whether both bounds are numbers."""
        return not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def width(self) -> float:
        """high − low (NaN when undefined)."""
        return self.high - self.low

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies within [low, high]; an undefined interval contains every number."""
        if math.isnan(value):
            return False
        return not self.defined or self.low <= value <= self.high


class ClusterStatistic(Protocol):
    """A statistic as a function of prompt multiplicities.

    Called with a (resamples × G) array of non-negative weights (how often each of the G prompts was
    drawn), it returns one value per row (NaN where undefined). A row of ones is the data itself. A
    statistic may also have ``linearised(weights)``, returning its values and (resamples × G)
    contributions e_i with Σ_i w_i·e_i = 0, whose weighted sum of squares gives its standard error
    (the delta method: T(w + dw) ≈ T(w) + Σ_i dw_i·e_i); the studentized interval needs it.
    """

    def __call__(self, weights: Array) -> Array:
        """The statistic on every resample (row) of ``weights``."""
        ...


@runtime_checkable
class Linearised(ClusterStatistic, Protocol):
    """A :class:`ClusterStatistic` with a linearisation (the delta method): what the studentized
    interval needs."""

    def linearised(self, weights: Array) -> tuple[Array, Array]:
        """The values and the (resamples × G) contributions e_i, Σ_i w_i·e_i = 0, of every row."""
        ...


@runtime_checkable
class WithStandardErrors(ClusterStatistic, Protocol):
    """A :class:`ClusterStatistic` that computes its linearised standard errors directly, without
    building the (resamples × G) contributions (a ratio of weighted sums can)."""

    def values_and_ses(self, weights: Array) -> tuple[Array, Array]:
        """The values and their linearised standard errors on every row."""
        ...


def _check_confidence(confidence: float) -> float:
    level = check_fraction(confidence, "confidence")
    if level == 1.0:
        raise ValueError("confidence must lie in (0, 1), got 1")
    return level


def _check_resamples(n_boot: int) -> int:
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        raise ValueError(f"n_boot must be an integer of at least 2, got {n_boot!r}")
    return int(n_boot)


@functools.lru_cache(maxsize=1024)
def t_quantile(df: float, probability: float) -> float:
    """The ``probability`` quantile of Student's t with ``df`` degrees of freedom (cached: scipy inverts it
    by iteration, about a millisecond a call)."""
    from scipy import special  # imported here: scipy is slow to import and most runs need none of it

    return float(special.stdtrit(df, probability))


def t_two_sided_p(statistic: float, df: float) -> float:
    """Two-sided p-value of a t statistic with ``df`` degrees of freedom: 2 · P(T ≥ |statistic|)."""
    from scipy import special

    return float(min(1.0, 2.0 * special.stdtr(df, -abs(statistic))))


def linearised_se(contributions: Array, weights: Array) -> Array:
    """√(G/(G − 1) · Σ_i w_i·e_i²) per row: the cluster-robust (sandwich) standard error.

    Each drawn prompt is one cluster, a prompt drawn twice counting twice; G/(G − 1) is the usual
    small-sample factor of the clustered variance (it makes the variance of a mean over prompts the
    unbiased s²/G).
    """
    clusters = weights.shape[1]
    factor = clusters / (clusters - 1) if clusters > 1 else math.nan
    return np.sqrt(factor * np.sum(weights * contributions**2, axis=1))


@dataclass(frozen=True)
class Resamples:
    """A statistic on the data and on its cluster resamples, what every interval and p-value reads.

    ``estimate`` and ``se`` (the linearised standard error; NaN when the statistic has none) are on
    the data; ``values`` and ``ses`` on each resample (NaN where undefined; ``ses`` None without a
    linearisation).
    """

    estimate: float
    se: float
    values: Array
    ses: Array | None
    n_clusters: int

    def spread(self) -> float:
        """sd(θ*) over the defined resamples (0 with fewer than two)."""
        defined = self.values[~np.isnan(self.values)]
        return float(np.std(defined, ddof=1)) if defined.size >= 2 else 0.0

    def scale(self) -> float:
        """The studentized interval's standard error on the data: max(SE, λ·sd(θ*)), λ = :data:`SE_FLOOR`."""
        return max(self.se, SE_FLOOR * self.spread()) if not math.isnan(self.se) else math.nan

    def pivots(self) -> Array:
        """t* = (θ* − θ̂) / max(SE*, λ·sd(θ*)) of every resample with a defined value (λ = :data:`SE_FLOOR`).

        ±inf where the denominator is 0 and θ* ≠ θ̂, 0 where θ* = θ̂.
        """
        if self.ses is None:
            raise ValueError("a studentized interval needs a statistic with a linearisation")
        keep = ~np.isnan(self.values)
        shift = self.values[keep] - self.estimate
        scale = np.maximum(self.ses[keep], SE_FLOOR * self.spread())
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(scale > 0, shift / np.where(scale > 0, scale, 1.0), np.sign(shift) * np.inf)


def _with_se(statistic: ClusterStatistic) -> Callable[[Array], tuple[Array, Array]] | None:
    """The statistic's way to its values and standard errors, if it has a linearisation."""
    if isinstance(statistic, WithStandardErrors):
        return statistic.values_and_ses
    if isinstance(statistic, Linearised):
        linear = statistic.linearised

        def from_contributions(weights: Array) -> tuple[Array, Array]:
            value, contributions = linear(weights)
            return value, linearised_se(contributions, weights)

        return from_contributions
    return None


def _evaluate(statistic: ClusterStatistic, weights: Array) -> tuple[Array, Array]:
    """Values and linearised standard errors (NaN without a linearisation) on every row of ``weights``."""
    with_se = _with_se(statistic)
    if with_se is None:
        values = statistic(weights)
        return values, np.full(values.shape, np.nan)
    return with_se(weights)


def _weights(n_clusters: int, n_boot: int, seed: int) -> tuple[Array, ...]:
    """The resamples' prompt multiplicities, in blocks of bounded size (read-only).

    Each resample draws ``n_clusters`` prompt indices uniformly with replacement from numpy's
    default generator seeded with ``seed`` and counts how often each prompt was drawn. The same
    (prompts, resamples, seed) always gives the same weights, so the intervals of one suite's
    metrics, and the comparisons of one run, are computed on the same resamples; up to
    :data:`_CACHED_ELEMENTS` weights are kept for the next call instead of being drawn again.
    """
    if n_clusters * n_boot <= _CACHED_ELEMENTS:
        return _cached_weights(n_clusters, n_boot, seed)
    return _draw_weights(n_clusters, n_boot, seed)


def _draw_weights(n_clusters: int, n_boot: int, seed: int) -> tuple[Array, ...]:
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK_ELEMENTS // max(n_clusters, 1))
    blocks = []
    for start in range(0, n_boot, block):
        rows = min(n_boot, start + block) - start
        drawn = rng.integers(0, n_clusters, size=(rows, n_clusters))
        drawn += np.arange(rows)[:, None] * n_clusters
        weights = np.bincount(drawn.ravel(), minlength=rows * n_clusters).reshape(rows, n_clusters).astype(float)
        weights.setflags(write=False)
        blocks.append(weights)
    return tuple(blocks)


_cached_weights = functools.lru_cache(maxsize=4)(_draw_weights)

#: The largest weight matrix (prompts × resamples) kept between calls: 8 MB; four are kept.
_CACHED_ELEMENTS = 1_000_000


def resample(statistic: ClusterStatistic, n_clusters: int, *, n_boot: int, seed: int) -> Resamples:
    """The statistic on the data and on ``n_boot`` cluster resamples of ``n_clusters`` prompts.

    Each resample draws ``n_clusters`` prompt indices uniformly with replacement (:func:`_weights`,
    seeded with ``seed``); blocks of resamples bound the memory used. The linearised standard error
    is computed alongside when the statistic has one.
    """
    if n_clusters < 1:
        raise ValueError("there are no prompts to resample")
    ones = np.ones((1, n_clusters))
    studentizable = _with_se(statistic) is not None
    first, first_se = _evaluate(statistic, ones)
    estimate, se = float(first[0]), float(first_se[0]) if studentizable else math.nan
    values = np.empty(n_boot)
    ses = np.empty(n_boot) if studentizable else None
    start = 0
    for weights in _weights(n_clusters, n_boot, seed):
        stop = start + weights.shape[0]
        value, value_se = _evaluate(statistic, weights)
        values[start:stop] = value
        if ses is not None:
            ses[start:stop] = value_se
        start = stop
    return Resamples(estimate, se, values, ses, n_clusters)


_HUGE = 1e300  # stands for an infinite pivot inside np.quantile, whose interpolation would give NaN


def _quantiles(values: Array, level: float) -> tuple[float, float]:
    """The (1 − c)/2 and (1 + c)/2 quantiles (numpy's linear interpolation; infinities kept)."""
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(np.clip(values, -_HUGE, _HUGE), [tail, 1.0 - tail])
    return (float(low) if abs(low) < _HUGE else math.copysign(math.inf, low),
            float(high) if abs(high) < _HUGE else math.copysign(math.inf, high))


def usable_method(draws: Resamples, method: str, confidence: float) -> str:
    """The method :func:`interval_of` and :func:`p_value_of` really use: ``method``, or ``"t"``.

    The studentized interval needs a linearisation, a positive linearised SE on the data and
    finite pivot quantiles; otherwise it falls back to the t interval on the bootstrap standard
    error. The linearisation of a top-fraction mean is blind to ties at its cut-off (the best
    generations all equal, e.g. a dozen at novelty 1.0): it is locally flat there (SE = 0) while
    larger moves of the resampling, losing some of those prompts, still change the statistic; the
    reflected bootstrap-t would then give the zero-width [1, 1]. Near such ties, SE* can be tiny on
    some resamples, and the floor in :meth:`Resamples.pivots` keeps their pivots from stretching
    the interval without bound.
    """
    if method != "studentized":
        return method
    if draws.ses is None or not draws.se > 0:
        return "t"
    low, high = _quantiles(draws.pivots(), _check_confidence(confidence))
    return "studentized" if math.isfinite(low) and math.isfinite(high) else "t"


def interval_of(
    draws: Resamples, *, confidence: float, method: str, bounds: tuple[float, float] | None = None
) -> Interval:
    """The interval of :func:`resample`'s draws by ``method`` (module docstring), clipped to ``bounds``."""
    level = _check_confidence(confidence)
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    estimate, clusters = draws.estimate, draws.n_clusters
    defined = draws.values[~np.isnan(draws.values)]
    if clusters < 2 or math.isnan(estimate) or defined.size < 2:
        return Interval(math.nan, math.nan, level, clusters, method, estimate)
    method = usable_method(draws, method, level)
    if method == "studentized":
        t_low, t_high = _quantiles(draws.pivots(), level)
        scale = draws.scale()
        low, high = estimate - t_high * scale, estimate - t_low * scale
        low, high = min(low, estimate), max(high, estimate)
    elif method == "t":
        half = t_quantile(clusters - 1, (1.0 + level) / 2.0) * bootstrap_se(draws)
        low, high = estimate - half, estimate + half
    else:
        low, high = _quantiles(defined, level)
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return Interval(float(low), float(high), level, clusters, method, estimate)


def bootstrap_se(draws: Resamples) -> float:
    """√(G/(G − 1)) · sd(θ*): the bootstrap standard error with the small-sample factor (NaN left out)."""
    defined = draws.values[~np.isnan(draws.values)]
    if defined.size < 2 or draws.n_clusters < 2:
        return math.nan
    return float(np.std(defined, ddof=1) * math.sqrt(draws.n_clusters / (draws.n_clusters - 1)))


def p_value_of(draws: Resamples, method: str, confidence: float = 0.95) -> float:
    """Two-sided p-value of "the statistic is 0" from the same draws as :func:`interval_of`.

    ``studentized``: 2 · min(P*(t* ≥ τ), P*(t* ≤ τ)) with τ = θ̂/SE; ``t``: Student's t with G − 1
    degrees of freedom on θ̂ / bootstrap SE; ``percentile``: 2 · min(P*(θ* ≤ 0), P*(θ* ≥ 0)); the
    bootstrap shares count the data as a resample (:func:`_bootstrap_p`). Each is capped at 1 and
    agrees with the interval at ``confidence`` (which decides a studentized method's fallback,
    :func:`usable_method`): that interval excludes 0 exactly when
    p < 1 − confidence, up to the quantile interpolation. A zero standard error gives p = 1 when
    θ̂ = 0, else 0.
    """
    estimate = draws.estimate
    defined = draws.values[~np.isnan(draws.values)]
    if math.isnan(estimate) or defined.size < 2 or draws.n_clusters < 2:
        return math.nan
    method = usable_method(draws, method, confidence)
    if method == "percentile":
        return _bootstrap_p(defined, 0.0)
    se = draws.scale() if method == "studentized" else bootstrap_se(draws)
    if se == 0:
        return 1.0 if estimate == 0 else 0.0
    tau = estimate / se
    if method == "t":
        return t_two_sided_p(tau, draws.n_clusters - 1)
    return _bootstrap_p(draws.pivots(), tau)


def _bootstrap_p(draws: Array, observed: float) -> float:
    """2 · min(1 + #(draws ≥ observed), 1 + #(draws ≤ observed)) / (B + 1), capped at 1.

    The +1 counts the data as one of the resamples (Davison and Hinkley 1997, §4.2), so a p-value
    from B resamples is never 0: with 10,000 it is at least 0.0002, small enough for any family.
    """
    count = draws.size
    above = 1 + int(np.sum(draws >= observed))
    below = 1 + int(np.sum(draws <= observed))
    return min(1.0, 2.0 * min(above, below) / (count + 1))


def bootstrap_interval(
    statistic: ClusterStatistic,
    n_clusters: int,
    *,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    method: str = "studentized",
    bounds: tuple[float, float] | None = None,
) -> Interval:
    """The clustered bootstrap interval of ``statistic`` over ``n_clusters`` prompts (module docstring).

    ``bounds`` (the statistic's possible range) clips the interval; it never moves the estimate.
    """
    _check_confidence(confidence)
    draws = resample(statistic, n_clusters, n_boot=_check_resamples(n_boot), seed=seed)
    return interval_of(draws, confidence=confidence, method=method, bounds=bounds)


def rows_of(values: ArrayLike, name: str) -> Array:
    """``values`` as a (prompts × samples) float array; a 1-D input is one value per prompt."""
    array = as_float_array(values, name)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValueError(f"{name} must be (prompts × samples) or one value per prompt, got shape {array.shape}")
    return array


class RatioStatistic:
    """Σ w_i·numerator_i / Σ w_i·denominator_i: a mean whose prompts weigh by their counts.

    With per-prompt sums of present values as numerators and their counts as denominators it is the
    mean over generations with NaN left out; with one value per prompt it is the mean over prompts.
    NaN where the drawn prompts have no present value. Linearisation: e_i = (n_i − T·d_i) / Σ w·d.
    """

    def __init__(self, numerators: Array, denominators: Array) -> None:
        self.numerators, self.denominators = numerators, denominators

    @classmethod
    def mean_of(cls, values: Array) -> RatioStatistic:
        """The mean over all present (non-NaN) entries of a (prompts × samples) array."""
        present = ~np.isnan(values)
        return cls(np.where(present, values, 0.0).sum(axis=1), present.sum(axis=1).astype(np.float64))

    def __call__(self, weights: Array) -> Array:
        """The ratio on every row of ``weights``."""
        top, bottom = weights @ self.numerators, weights @ self.denominators
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)

    def values_and_ses(self, weights: Array) -> tuple[Array, Array]:
        """The ratio and its linearised standard error on every row, from weighted sums alone.

        Σ w·e² = (Σ w·n² − 2T·Σ w·n·d + T²·Σ w·d²) / (Σ w·d)², so no (rows × G) array is built.
        """
        bottom = weights @ self.denominators
        value = self(weights)
        t = np.nan_to_num(value)
        squares = (
            weights @ (self.numerators**2)
            - 2.0 * t * (weights @ (self.numerators * self.denominators))
            + t * t * (weights @ (self.denominators**2))
        )
        clusters = weights.shape[1]
        factor = clusters / (clusters - 1) if clusters > 1 else math.nan
        scale = np.where(bottom > 0, bottom, 1.0)
        return value, np.sqrt(factor * np.maximum(squares, 0.0)) / scale

    def linearised(self, weights: Array) -> tuple[Array, Array]:
        """The ratio and the per-prompt contributions (n_i − T·d_i) / Σ w·d of every row."""
        bottom = weights @ self.denominators
        value = self(weights)
        scale = np.where(bottom > 0, bottom, 1.0)[:, None]
        centred = self.numerators[None, :] - np.nan_to_num(value)[:, None] * self.denominators[None, :]
        return value, centred / scale


class TopFractionStatistic:
    """The mean of the highest ceil(f × m) generations of a resample, m its number of present values.

    Each generation counts as often as its prompt was drawn. The generations are sorted once
    (highest first); on a resample the k = ceil(f·m) highest are taken by walking the cumulative
    multiplicities, the last one partly when its copies straddle the cut. ceil is taken exactly on
    the decimal value of f, as :func:`pytest_novelty.metrics.top_fraction_mean` does, so on the
    data itself (all weights 1) the two agree to the last digit.

    Linearisation (the influence function of an upper-tail mean): with q the resample's cut-off,
    ψ(x) = q + (x − q)₊ / f, s_i = Σ_j ψ(x_ij) over prompt i's present generations, c_i their
    number and M = Σ w·s / Σ w·c, e_i = (s_i − M·c_i) / Σ w·c.
    """

    def __init__(self, values: Array, fraction: float) -> None:
        self.fraction = check_fraction(fraction, "fraction")
        share = Fraction(repr(self.fraction))
        self.numerator, self.denominator = share.numerator, share.denominator
        prompts = np.repeat(np.arange(values.shape[0]), values.shape[1])
        flat = values.ravel()
        keep = ~np.isnan(flat)
        order = np.argsort(-flat[keep], kind="stable")
        self.values = flat[keep][order]
        self.prompts = prompts[keep][order]
        self.counts = (~np.isnan(values)).sum(axis=1).astype(np.float64)

    def _walk(self, weights: Array) -> tuple[Array, Array, Array, int]:
        """(k, copies, cumulative copies) over the shortest prefix of the ranking that every row needs."""
        total = np.rint(weights @ self.counts).astype(np.int64)
        take = -(-total * self.numerator // self.denominator)  # exact ceil(f × m)
        size = self.values.size
        prefix = min(size, 2 * int(take.max(initial=0)) + 64)
        while True:
            copies = weights[:, self.prompts[:prefix]]
            cumulative = np.cumsum(copies, axis=1)
            if prefix == size or bool(np.all(cumulative[:, -1] >= take)):
                return take, copies, cumulative, prefix
            prefix = min(size, 2 * prefix)

    def _by_prompt(self, ranked: Array, prefix: int) -> Array:
        """Sum each row of a (rows × prefix) array of ranked generations per prompt: (rows × G)."""
        owners = self.prompts[:prefix]
        order = np.argsort(owners, kind="stable")
        grouped = owners[order]
        starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
        out = np.zeros((ranked.shape[0], self.counts.size))
        out[:, grouped[starts]] = np.add.reduceat(ranked[:, order], starts, axis=1)
        return out

    def __call__(self, weights: Array) -> Array:
        """The top-fraction mean on every row of ``weights``."""
        return self.linearised(weights, contributions=False)[0]

    def linearised(self, weights: Array, *, contributions: bool = True) -> tuple[Array, Array]:
        """The top-fraction mean and the per-prompt contributions of ψ (class docstring) of every row."""
        rows, clusters = weights.shape[0], self.counts.size
        values, out = np.full(rows, np.nan), np.zeros((rows, clusters) if contributions else (0, 0))
        if self.values.size == 0:
            return values, out
        step = max(1, _BLOCK_ELEMENTS // self.values.size)
        for start in range(0, rows, step):
            w = weights[start : start + step]
            take, copies, cumulative, prefix = self._walk(w)
            used = np.clip(take[:, None] - (cumulative - copies), 0.0, copies)
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = used @ self.values[:prefix] / np.maximum(take, 1)
                values[start : start + step] = np.where(take > 0, mean, np.nan)
            if not contributions:
                continue
            reached = cumulative >= np.maximum(take, 1)[:, None]
            cut = self.values[:prefix][np.argmax(reached, axis=1)]
            excess = np.maximum(self.values[None, :prefix] - cut[:, None], 0.0) / self.fraction
            s = self.counts[None, :] * cut[:, None] + self._by_prompt(excess, prefix)
            total = w @ self.counts
            scale = np.where(total > 0, total, 1.0)
            mean = np.sum(w * s, axis=1) / scale
            out[start : start + step] = (s - mean[:, None] * self.counts[None, :]) / scale[:, None]
        return values, out


class DifferenceStatistic:
    """``after(w) − before(w)``: the paired change of a statistic, both sides on the same resample."""

    def __init__(self, before: Linearised, after: Linearised) -> None:
        self.before, self.after = before, after

    def __call__(self, weights: Array) -> Array:
        """The change on every row of ``weights``."""
        return self.after(weights) - self.before(weights)

    def linearised(self, weights: Array) -> tuple[Array, Array]:
        """The change and the difference of the two sides' contributions (both need a linearisation)."""
        after, after_parts = self.after.linearised(weights)
        before, before_parts = self.before.linearised(weights)
        return after - before, after_parts - before_parts


def per_resample(values: ArrayLike, function: Callable[[Array], float]) -> ClusterStatistic:
    """Any ``function`` of a (prompts × samples) array as a :class:`ClusterStatistic`.

    Each resample is materialised (prompt i repeated w_i times, its samples kept together) and
    ``function`` called on it: general, and slower than the vectorised statistics (one Python call
    per resample). It has no linearisation, so its intervals use the ``t`` method.
    """
    rows = rows_of(values, "values")

    def statistic(weights: Array) -> Array:
        return np.array([function(np.repeat(rows, np.rint(w).astype(np.int64), axis=0)) for w in weights])

    return statistic


# --- the gated statistics --------------------------------------------------------------------------


def mean_interval(
    values: ArrayLike,
    *,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    method: str = "studentized",
    bounds: tuple[float, float] | None = None,
) -> Interval:
    """Interval of the mean over generations of a (prompts × samples) array, NaN left out.

    A one-dimensional input is one value per prompt (``distinct_k``, ``utility_k``): the mean over
    prompts. Rows are the clusters; passing ``values.reshape(-1, 1)`` instead gives the unclustered
    interval that treats every generation as independent (too narrow when samples of a prompt are
    correlated; the simulation test shows by how much).
    """
    rows = rows_of(values, "values")
    return bootstrap_interval(
        RatioStatistic.mean_of(rows), rows.shape[0], confidence=confidence, n_boot=n_boot, seed=seed,
        method=method, bounds=bounds,
    )


def share_interval(
    mask: ArrayLike,
    *,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    method: str = WILSON,
) -> Interval:
    """Interval of the share of true entries of a (prompts × samples) boolean array (coverage, unscored).

    ``method="wilson"`` (the default): Wilson's score interval on the effective number of
    generations (module docstring); ``n_boot`` and ``seed`` are then unused. A bootstrap method
    (:data:`METHODS`) resamples prompts instead, clipped to [0, 1].
    """
    rows = rows_of(np.asarray(mask, dtype=bool).astype(np.float64), "mask")
    if method != WILSON:
        return mean_interval(rows, confidence=confidence, n_boot=n_boot, seed=seed, method=method, bounds=(0.0, 1.0))
    level = _check_confidence(confidence)
    clusters, total = rows.shape[0], rows.size
    share = float(rows.mean())
    if clusters < 2:
        return Interval(math.nan, math.nan, level, clusters, WILSON, share)
    ones = np.ones((1, clusters))
    _, contributions = RatioStatistic.mean_of(rows).linearised(ones)
    se = float(linearised_se(contributions, ones)[0])
    spread = share * (1.0 - share)
    design = max(1.0, se * se * total / spread) if spread > 0 else 1.0
    n = total / design
    z = t_quantile(clusters - 1, (1.0 + level) / 2.0)
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(spread / n + z * z / (4 * n * n))
    low, high = max(0.0, min(centre - half, share)), min(1.0, max(centre + half, share))
    return Interval(low, high, level, clusters, WILSON, share)


def top_fraction_interval(
    values: ArrayLike,
    fraction: float = 0.1,
    *,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    method: str = "studentized",
    bounds: tuple[float, float] | None = (0.0, 1.0),
) -> Interval:
    """Interval of the top-fraction mean (``top10_novelty@n`` for 0.1) of a (prompts × samples) array."""
    rows = rows_of(values, "values")
    return bootstrap_interval(
        TopFractionStatistic(rows, fraction), rows.shape[0], confidence=confidence, n_boot=n_boot, seed=seed,
        method=method, bounds=bounds,
    )


def tail_interval(
    per_prompt: ArrayLike,
    prompt_ids: Sequence[str],
    tail_ids: Sequence[str],
    *,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    method: str = "studentized",
) -> Interval:
    """Interval of q@Tail on a frozen tail: the mean per-prompt quality over the tail ids.

    ``per_prompt`` is aligned with ``prompt_ids``; tail ids the suite lacks are left out and NaN
    values (unscored prompts) too, the rule :func:`pytest_novelty.gate.regression.tail_value`
    applies, so the estimate is the gated value. The clusters are the tail's prompts: the tail is a
    sample of the prompts that rank like it, and each prompt's quality carries its samples' noise.
    """
    values = as_float_array(per_prompt, "per_prompt", allow_empty=True)
    if values.ndim != 1 or values.size != len(prompt_ids):
        raise ValueError(f"per_prompt has shape {values.shape} but prompt_ids has {len(prompt_ids)} entries")
    index = {str(i): k for k, i in enumerate(prompt_ids)}
    known = [index[str(i)] for i in dict.fromkeys(tail_ids) if str(i) in index]
    if not known:
        raise ValueError("none of the tail ids is among the suite's prompts")
    return mean_interval(
        values[known], confidence=confidence, n_boot=n_boot, seed=seed, method=method, bounds=(0.0, 1.0)
    )


def suite_intervals(
    *,
    quality: ArrayLike,
    originality: Mapping[int, ArrayLike],
    metrics: Sequence[str],
    per_prompt: Mapping[str, Sequence[float]] | None = None,
    prompt_ids: Sequence[str] | None = None,
    tails: Mapping[str, Sequence[str]] | None = None,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict[str, Interval]:
    """The interval of every metric in ``metrics``, for the statistic :mod:`.suite` gates.

    Inputs are those of :func:`pytest_novelty.metrics.suite.suite_metrics` (quality and originality
    by n as prompts × samples arrays) and, for ``distinct_k``, ``utility_k``, ``q_at_tail@α``,
    ``novelty_overall`` and ``novelty_at_peak@α``, its per-prompt values, the prompt ids and each
    q@Tail metric's tail ids and Novelty at Peak metric's peak ids (the frozen tail, when the gate
    has chosen one; an empty tail gives an undefined interval). Shares use Wilson's interval,
    everything else the studentized bootstrap, all with the same ``seed``, so a rerun gives the same
    intervals. Raises ``ValueError`` for a metric it has no statistic for or inputs it lacks.
    """
    q = rows_of(quality, "quality")
    level = _check_confidence(confidence)

    def mean(values: ArrayLike, bounds: tuple[float, float]) -> Interval:
        return mean_interval(values, confidence=level, n_boot=n_boot, seed=seed, bounds=bounds)

    def share(mask: ArrayLike) -> Interval:
        return share_interval(mask, confidence=level)

    out: dict[str, Interval] = {}
    for name in metrics:
        base, _, arg = name.partition("@")
        if base in ("coverage", "originality", "novelty", "top10_novelty"):
            if not arg.isdigit() or int(arg) not in originality:
                raise ValueError(f"{name}: no originality at that n-gram order")
            orig = rows_of(originality[int(arg)], f"originality@{arg}")
            if orig.shape != q.shape:
                raise ValueError(f"originality@{arg} has shape {orig.shape}, quality {q.shape}")
            if base == "coverage":
                out[name] = share(~np.isnan(orig))
            elif base == "originality":
                out[name] = mean(originality_counting_short(orig), (0.0, 1.0))
            elif base == "novelty":
                out[name] = mean(gated_novelty(q, orig), (0.0, 1.0))
            else:
                novelty = gated_novelty(q, orig)
                out[name] = top_fraction_interval(novelty, 0.1, confidence=level, n_boot=n_boot, seed=seed)
        elif name == "quality":
            out[name] = mean(q, (0.0, 1.0))
        elif name == "unscored":
            out[name] = share(np.isnan(q))
        elif name in ("distinct_k", "utility_k"):
            if per_prompt is None or name not in per_prompt:
                raise ValueError(f"{name} needs its per-prompt values")
            limits = (1.0, float(q.shape[1])) if name == "distinct_k" else (0.0, 10.0)
            out[name] = mean(np.asarray(per_prompt[name], dtype=float), limits)
        elif base == "q_at_tail":
            if per_prompt is None or prompt_ids is None or tails is None or name not in tails:
                raise ValueError(f"{name} needs per-prompt quality, the prompt ids and its tail ids")
            if tails[name]:
                out[name] = tail_interval(per_prompt["quality"], prompt_ids, tails[name], confidence=level,
                                          n_boot=n_boot, seed=seed)
            else:
                out[name] = Interval(math.nan, math.nan, level, 0, "studentized")
        elif base in ("novelty_overall", "novelty_at_peak"):
            if per_prompt is None or "originality@4" not in per_prompt:
                raise ValueError(f"{name} needs the per-prompt originality@4")
            series = np.asarray(per_prompt["originality@4"], dtype=float)
            if base == "novelty_overall":
                out[name] = mean(series, (0.0, 1.0))
            elif prompt_ids is None or tails is None or name not in tails:
                raise ValueError(f"{name} needs the prompt ids and its peak ids")
            elif tails[name]:
                out[name] = tail_interval(series, prompt_ids, tails[name], confidence=level, n_boot=n_boot, seed=seed)
            else:
                out[name] = Interval(math.nan, math.nan, level, 0, "studentized")
        else:
            raise ValueError(f"no interval is defined for metric {name!r}")
    return out
