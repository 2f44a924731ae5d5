"""The cluster bootstrap: intervals and p-values of any statistic of a suite's prompts.

The answers to one prompt share its difficulty, so every interval resamples *prompts*, each with all
its samples (Miller 2024; the gated statistics are in :mod:`.uncertainty`):

* A statistic is symmetric in the order of prompts, so it depends on a resample only through the
  multiplicities w_1 … w_G of the G prompts: it is a vectorised function of a (resamples × G) weight
  matrix (:class:`ClusterStatistic`), weight 1 everywhere being the data. :func:`per_resample` adapts
  any function of a (prompts × samples) array.
* Its linearisation (the delta method) gives per-prompt contributions e_i, T(w + dw) ≈ T(w) + Σ dw_i·e_i,
  and the standard error SE = √(G/(G − 1) · Σ w_i·e_i²) (the sandwich estimator with its small-sample
  factor), on the data and on every resample.
* ``method="studentized"`` (the default; the bootstrap-t): t* = (θ* − θ̂)/SE* on every resample and
  [θ̂ − t*₍₁₊c₎/₂·SE, θ̂ − t*₍₁₋c₎/₂·SE]. The percentile interval falls short on few prompts (10 prompts,
  q@Tail's tail: about 90 %) and on the skewed top-10 % mean, whose estimate and spread move together:
  on 100 prompts it covered 88 %, a symmetric t interval 90 %, the studentized one 93-95 %
  (``tests/metrics/test_uncertainty_simulation.py``). A resample with SE* = 0 gets t* = ±∞ (0 when
  θ* = θ̂): few prompts carry the statistic, and the interval widens. The interval is widened to
  contain θ̂; SE = 0 on the data gives the zero-width interval at θ̂.
* ``method="t"``: θ̂ ± t(G − 1, (1 + c)/2) · √(G/(G − 1)) · sd(θ*), for statistics without a
  linearisation. ``method="percentile"``: the (1 − c)/2 and (1 + c)/2 quantiles of θ* (numpy's linear
  interpolation), kept for comparison.
* ``bounds`` (the statistic's range) clip the interval.
* Resamples where the statistic is NaN are left out. Fewer than two prompts, fewer than two defined
  resamples or a NaN θ̂ give NaN bounds (:attr:`Interval.defined` false).
* :data:`DEFAULT_RESAMPLES` resamples, from numpy's default generator seeded with ``seed``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypedDict, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics._validate import as_float_array, check_confidence, check_count

Array = NDArray[np.float64]

#: Bootstrap resamples drawn for an interval unless told otherwise.
DEFAULT_RESAMPLES = 2000

#: Interval methods :func:`bootstrap_interval` knows.
METHODS = ("studentized", "t", "percentile")

#: Floor of a resample's standard error in the studentized pivot, as a share of the bootstrap's sd(θ*).
SE_FLOOR = 0.5

# Resample weights (and the top-fraction statistic's work arrays) are built in blocks of about this
# many elements, to bound memory.
BLOCK_ELEMENTS = 1_000_000


@dataclass(frozen=True)
class Interval:
    """A statistic on the data (``estimate``, the gated value) and its interval at ``confidence``.

    ``n_clusters`` counts the prompts resampled, ``method`` is one of :data:`METHODS`. NaN bounds:
    undefined; an infinite bound: the resamples cannot bound that side (only without ``bounds``).
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
    """A statistic of prompt multiplicities: one value per row of a (resamples × G) weight array
    (NaN where undefined); a row of ones is the data. :class:`Linearised` adds its linearisation."""

    def __call__(self, weights: Array) -> Array:
        """The statistic on every resample (row) of ``weights``."""
        ...


@runtime_checkable
class Linearised(ClusterStatistic, Protocol):
    """A :class:`ClusterStatistic` with a linearisation: what the studentized interval needs."""

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


@functools.lru_cache(maxsize=1024)
def t_quantile(df: float, probability: float) -> float:
    """The ``probability`` quantile of Student's t with ``df`` degrees of freedom (cached: scipy inverts it
    by iteration, about a millisecond a call)."""
    from scipy import special  # imported here: scipy is slow to import and most runs need none of it

    return float(special.stdtrit(df, probability))


def linearised_se(contributions: Array, weights: Array) -> Array:
    """√(G/(G − 1) · Σ_i w_i·e_i²) per row: the cluster-robust (sandwich) standard error, each drawn
    prompt a cluster; G/(G − 1) makes the variance of a mean over prompts the unbiased s²/G."""
    clusters = weights.shape[1]
    factor = clusters / (clusters - 1) if clusters > 1 else math.nan
    return np.sqrt(factor * np.sum(weights * contributions**2, axis=1))


@dataclass(frozen=True)
class Resamples:
    """A statistic on the data (``estimate``, ``se``) and on each resample (``values``, ``ses``): what
    every interval and p-value reads. Without a linearisation ``se`` is NaN and ``ses`` None."""

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
        """t* = (θ* − θ̂) / max(SE*, λ·sd(θ*)) of every defined resample (λ = :data:`SE_FLOOR`); ±inf
        where the denominator is 0 and θ* ≠ θ̂, 0 where θ* = θ̂."""
        if self.ses is None:
            raise ValueError("a studentized interval needs a statistic with a linearisation")
        keep = ~np.isnan(self.values)
        shift = self.values[keep] - self.estimate
        scale = np.maximum(self.ses[keep], SE_FLOOR * self.spread())
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(scale > 0, shift / np.where(scale > 0, scale, 1.0), np.sign(shift) * np.inf)


def _evaluate(statistic: ClusterStatistic, weights: Array) -> tuple[Array, Array]:
    """Values and linearised standard errors (NaN without a linearisation) on every row of ``weights``."""
    if isinstance(statistic, WithStandardErrors):
        return statistic.values_and_ses(weights)
    if isinstance(statistic, Linearised):
        values, contributions = statistic.linearised(weights)
        return values, linearised_se(contributions, weights)
    values = statistic(weights)
    return values, np.full(values.shape, np.nan)


def _draw_weights(n_clusters: int, n_boot: int, seed: int) -> tuple[Array, ...]:
    """The resamples' prompt multiplicities (each resample draws ``n_clusters`` prompts with
    replacement), read-only, in blocks of bounded size. The same (prompts, resamples, seed) gives the
    same weights, so one suite's metrics and one run's comparisons share resamples; up to
    :data:`_CACHED_ELEMENTS` weights are kept for the next call (:func:`resample`)."""
    rng = np.random.default_rng(seed)
    block = max(1, BLOCK_ELEMENTS // max(n_clusters, 1))
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
    """The statistic (and its linearised SE, if it has one) on the data and on ``n_boot`` resamples."""
    if n_clusters < 1:
        raise ValueError("there are no prompts to resample")
    ones = np.ones((1, n_clusters))
    studentizable = isinstance(statistic, WithStandardErrors | Linearised)
    first, first_se = _evaluate(statistic, ones)
    estimate, se = float(first[0]), float(first_se[0]) if studentizable else math.nan
    draw = _cached_weights if n_clusters * n_boot <= _CACHED_ELEMENTS else _draw_weights
    blocks = [_evaluate(statistic, weights) for weights in draw(n_clusters, n_boot, seed)]
    values = np.concatenate([value for value, _ in blocks]).astype(np.float64)
    ses = np.concatenate([value_se for _, value_se in blocks]).astype(np.float64) if studentizable else None
    return Resamples(estimate, se, values, ses, n_clusters)


_HUGE = 1e300  # stands for an infinite pivot inside np.quantile, whose interpolation would give NaN


def quantiles(values: Array, level: float) -> tuple[float, float]:
    """The (1 − c)/2 and (1 + c)/2 quantiles (numpy's linear interpolation; infinities kept)."""
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(np.clip(values, -_HUGE, _HUGE), [tail, 1.0 - tail])
    return (
        float(low) if abs(low) < _HUGE else math.copysign(math.inf, low),
        float(high) if abs(high) < _HUGE else math.copysign(math.inf, high),
    )


def usable_method(draws: Resamples, method: str, confidence: float) -> str:
    """The method :func:`interval_of` and :func:`p_value_of` really use: ``method``, or ``"t"``.

    The studentized interval needs a linearisation, a positive SE on the data and finite pivot
    quantiles, else it falls back to ``"t"``. A top-fraction mean's linearisation is blind to ties at
    its cut-off (a dozen generations at novelty 1.0): SE = 0 there, while resampling still moves the
    statistic, and the bootstrap-t would give the zero-width [1, 1]. Near such ties SE* can be tiny,
    and the floor in :meth:`Resamples.pivots` keeps those pivots from stretching the interval.
    """
    if method != "studentized":
        return method
    if draws.ses is None or not draws.se > 0:
        return "t"
    low, high = quantiles(draws.pivots(), check_confidence(confidence))
    return "studentized" if math.isfinite(low) and math.isfinite(high) else "t"


def interval_of(
    draws: Resamples, *, confidence: float, method: str, bounds: tuple[float, float] | None = None
) -> Interval:
    """The interval of :func:`resample`'s draws by ``method`` (module docstring), clipped to ``bounds``."""
    level = check_confidence(confidence)
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    estimate, clusters = draws.estimate, draws.n_clusters
    defined = draws.values[~np.isnan(draws.values)]
    if clusters < 2 or math.isnan(estimate) or defined.size < 2:
        return Interval(math.nan, math.nan, level, clusters, method, estimate)
    method = usable_method(draws, method, level)
    if method == "studentized":
        t_low, t_high = quantiles(draws.pivots(), level)
        scale = draws.scale()
        low, high = estimate - t_high * scale, estimate - t_low * scale
        low, high = min(low, estimate), max(high, estimate)
    elif method == "t":
        half = t_quantile(clusters - 1, (1.0 + level) / 2.0) * bootstrap_se(draws)
        low, high = estimate - half, estimate + half
    else:
        low, high = quantiles(defined, level)
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return Interval(float(low), float(high), level, clusters, method, estimate)


def bootstrap_se(draws: Resamples) -> float:
    """√(G/(G − 1)) · sd(θ*): the bootstrap standard error with the small-sample factor (NaN left out)."""
    if np.sum(~np.isnan(draws.values)) < 2 or draws.n_clusters < 2:
        return math.nan
    return draws.spread() * math.sqrt(draws.n_clusters / (draws.n_clusters - 1))


def p_value_of(draws: Resamples, method: str, confidence: float = 0.95) -> float:
    """Two-sided p-value of "the statistic is 0" from the same draws as :func:`interval_of`.

    ``studentized``: 2 · min(P*(t* ≥ τ), P*(t* ≤ τ)), τ = θ̂/SE; ``t``: Student's t with G − 1 degrees
    of freedom on θ̂ / bootstrap SE; ``percentile``: 2 · min(P*(θ* ≤ 0), P*(θ* ≥ 0)) (the shares count
    the data as a resample, :func:`_bootstrap_p`). Capped at 1, it agrees with the interval at
    ``confidence`` (which decides the fallback, :func:`usable_method`): the interval excludes 0 exactly
    when p < 1 − confidence, up to the quantile interpolation. SE = 0 gives p = 1 when θ̂ = 0, else 0.
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
    if method == "t":  # 2 · P(T ≥ |τ|), T Student's with G − 1 degrees of freedom
        from scipy import special

        return float(min(1.0, 2.0 * special.stdtr(draws.n_clusters - 1, -abs(tau))))
    return _bootstrap_p(draws.pivots(), tau)


def _bootstrap_p(draws: Array, observed: float) -> float:
    """2 · min(1 + #(draws ≥ observed), 1 + #(draws ≤ observed)) / (B + 1), capped at 1: the +1 counts
    the data as a resample (Davison and Hinkley 1997, §4.2), so p ≥ 0.0002 with 10,000 resamples."""
    count = draws.size
    above = 1 + int(np.sum(draws >= observed))
    below = 1 + int(np.sum(draws <= observed))
    return min(1.0, 2.0 * min(above, below) / (count + 1))


class Options(TypedDict, total=False):
    """The keywords of :func:`bootstrap_interval` that an interval of a gated statistic passes on to it
    (:mod:`.uncertainty`); :func:`bootstrap_interval`'s signature holds their defaults."""

    confidence: float
    n_boot: int
    seed: int
    method: str
    bounds: tuple[float, float] | None


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
    """The clustered bootstrap interval of ``statistic`` over ``n_clusters`` prompts (module docstring):
    at ``confidence``, from ``n_boot`` resamples drawn with ``seed``, by ``method`` (one of
    :data:`METHODS`); ``bounds`` clips the interval, never the estimate."""
    check_confidence(confidence)
    draws = resample(statistic, n_clusters, n_boot=check_count(n_boot, "n_boot", 2), seed=seed)
    return interval_of(draws, confidence=confidence, method=method, bounds=bounds)


def rows_of(values: ArrayLike, name: str) -> Array:
    """``values`` as a (prompts × samples) float array; a 1-D input is one value per prompt."""
    array = as_float_array(values, name)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValueError(f"{name} must be (prompts × samples) or one value per prompt, got shape {array.shape}")
    return array


def per_resample(values: ArrayLike, function: Callable[[Array], float]) -> ClusterStatistic:
    """Any ``function`` of a (prompts × samples) array as a :class:`ClusterStatistic`, called once per
    materialised resample (prompt i repeated w_i times): general and slow, and without a
    linearisation (its intervals use ``t``)."""
    rows = rows_of(values, "values")

    def statistic(weights: Array) -> Array:
        return np.array([function(np.repeat(rows, np.rint(w).astype(np.int64), axis=0)) for w in weights])

    return statistic
