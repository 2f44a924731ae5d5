"""What a paired comparison of two runs of a suite can detect, and how many prompts it would need.

Source: Miller, "Adding Error Bars to Evals" (2024, arXiv 2411.00640), planning an eval's size by
the power of a paired comparison. The gate (:func:`pytest_novelty.metrics.sign_flip.paired_sign_flip`)
calls a regression when the (1 − α) interval of the paired change lies on the bad side of 0: a
one-sided test at level α/2. The studentised change is about t-distributed (n − 1 degrees of
freedom) around δ/SE, so the test has power 1 − β when

    δ = (t(n − 1, 1 − α/2) + t(n − 1, 1 − β)) · SE,    SE = sd_d / √n,

n the paired prompts and sd_d the per-prompt sd of the paired statistic (the normal-approximation
formula with Student quantiles: close to the exact noncentral-t answer from 10 prompts on; the
simulation test checks it within ten points of power).

Where sd_d comes from (:class:`NoiseFloor`):

* One run (:func:`resampling_sd`): a checkpoint against itself under new samples, the prompt effect
  cancelling, the difference of two means of m_i samples has variance 2·σ_i²/m_i (σ_i² prompt i's
  within-prompt variance); sd_d² is its mean over prompts. This is a floor: another checkpoint adds
  a prompt-by-checkpoint variance one run cannot see. With one value per prompt (one sample,
  distinct_k) σ_i² is unknown and √2 times the spread over prompts bounds sd_d from above.
* Two runs at hand (:func:`paired_sd`): the spread of the per-prompt differences.
* The top-10 % mean is linearised first (:func:`top_fraction_influence`): to first order it is the
  mean of ψ(x) = q + (x − q)₊/f (q the cut-off, f the fraction: an upper-tail mean's influence
  function). q@Tail uses the tail prompts' quality (n is the tail's size).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics._validate import (
    as_float_array,
    ceil_fraction,
    check_confidence,
    check_fraction,
    json_fields,
)
from pytest_novelty.metrics.bootstrap import rows_of, t_quantile

#: Power the detectable effect is computed for unless told otherwise.
DEFAULT_POWER = 0.8


def detectable_effect(sd: float, n: int, *, alpha: float = 0.05, power: float = DEFAULT_POWER) -> float:
    """The smallest change a paired comparison on ``n`` prompts detects with probability ``power``:
    (t(n − 1, 1 − α/2) + t(n − 1, power)) · sd / √n. NaN when n < 2 or ``sd`` is NaN."""
    level, strength = check_confidence(alpha, "alpha"), check_confidence(power, "power")
    if n < 2 or math.isnan(sd):
        return math.nan
    if sd < 0:
        raise ValueError(f"sd must not be negative, got {sd!r}")
    df = n - 1
    return (t_quantile(df, 1.0 - level / 2.0) + t_quantile(df, strength)) * sd / math.sqrt(n)


def prompts_needed(
    sd: float, effect: float, *, alpha: float = 0.05, power: float = DEFAULT_POWER, limit: int = 1_000_000
) -> int:
    """The fewest prompts whose :func:`detectable_effect` is at most ``effect``, by bisection; 2 when
    sd is 0, ``limit`` when even that many would not do; ``ValueError`` for a NaN sd or an effect ≤ 0."""
    if not effect > 0 or math.isnan(sd):
        raise ValueError(f"effect must be positive and sd a number, got effect {effect!r}, sd {sd!r}")
    low, high = 2, int(limit)
    if detectable_effect(sd, low, alpha=alpha, power=power) <= effect:
        return low
    if detectable_effect(sd, high, alpha=alpha, power=power) > effect:
        return high
    while high - low > 1:
        middle = (low + high) // 2
        if detectable_effect(sd, middle, alpha=alpha, power=power) <= effect:
            high = middle
        else:
            low = middle
    return high


def paired_sd(before: ArrayLike, after: ArrayLike) -> float:
    """Sample sd of the per-prompt differences after − before (NaN pairs dropped; NaN below two pairs)."""
    a = as_float_array(before, "before").ravel()
    b = as_float_array(after, "after").ravel()
    if a.shape != b.shape:
        raise ValueError(f"before and after must be paired: they have {a.size} and {b.size} values")
    d = (b - a)[~(np.isnan(a) | np.isnan(b))]
    return float(np.std(d, ddof=1)) if d.size >= 2 else math.nan


#: :attr:`NoiseFloor.basis` of an estimate from several samples per prompt.
WITHIN = "within-prompt variance"
#: :attr:`NoiseFloor.basis` of the upper bound used with one value per prompt.
BETWEEN = "spread over prompts (one value per prompt: an upper bound)"
#: :attr:`NoiseFloor.basis` when the run shows no variation at all (e.g. no unscored answer): the
#: detectable effect is then 0, and says nothing; a report should show it as not available.
CONSTANT = "no variation in this run"


@dataclass(frozen=True)
class NoiseFloor:
    """The per-prompt sd of a paired change between two runs of one checkpoint; ``basis`` is
    :data:`WITHIN`, :data:`BETWEEN` or :data:`CONSTANT` (module docstring)."""

    sd: float
    basis: str
    prompts: int


def resampling_sd(values: ArrayLike) -> NoiseFloor:
    """sd_d of a mean's paired change when the same checkpoint is sampled again: √(mean_i 2·s_i²/m_i)
    over the prompts with m_i ≥ 2 present values (s_i² the sample variance), else √2 times the sample
    sd over prompts; NaN when neither can be had."""
    rows = rows_of(values, "values")
    present = ~np.isnan(rows)
    counts = present.sum(axis=1)
    several = counts >= 2
    if several.any():
        variances = np.nanvar(rows[several], axis=1, ddof=1)
        sd = float(np.sqrt(np.mean(2.0 * variances / counts[several])))
        constant = sd == 0 and bool(np.all(rows[present] == rows[present][0]))
        return NoiseFloor(sd, CONSTANT if constant else WITHIN, int(several.sum()))
    flat = rows[present]
    sd = float(math.sqrt(2.0) * np.std(flat, ddof=1)) if flat.size >= 2 else math.nan
    return NoiseFloor(sd, CONSTANT if sd == 0 else BETWEEN, int(flat.size))


def top_fraction_influence(values: ArrayLike, fraction: float = 0.1) -> NDArray[np.float64]:
    """ψ(x) = q + (x − q)₊ / f for every generation (NaN stays NaN), q the smallest of the ceil(f·m)
    highest values: the top-fraction mean is the mean of ψ up to terms that vanish as the suite grows."""
    rows = rows_of(values, "values")
    share = check_fraction(fraction, "fraction")
    flat = rows[~np.isnan(rows)]
    if flat.size == 0:
        return np.full_like(rows, np.nan)
    cut = float(np.sort(flat)[flat.size - ceil_fraction(share, flat.size)])
    return cut + np.maximum(rows - cut, 0.0) / share


@dataclass(frozen=True)
class Detectable:
    """The minimum change (``effect``, in the metric's units) a paired comparison on ``prompts``
    prompts detects at ``alpha`` with ``power``, from the per-prompt ``sd`` and its ``basis``."""

    effect: float
    sd: float
    prompts: int
    alpha: float
    power: float
    basis: str

    def prompts_for(self, tolerance: float) -> int:
        """The prompts a comparison would need to detect a change of ``tolerance`` (the suite's note)."""
        return prompts_needed(self.sd, tolerance, alpha=self.alpha, power=self.power)

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly form (NaN becomes None)."""
        return json_fields(self)


def detectable(
    values: ArrayLike, *, alpha: float = 0.05, power: float = DEFAULT_POWER, top_fraction: float | None = None
) -> Detectable:
    """The detectable effect of a metric from one run's ``values``: what the metric averages, as
    :func:`pytest_novelty.metrics.uncertainty.suite_intervals` reads them (one value per prompt for
    distinct_k and utility_k, the tail's rows for q@Tail). ``top_fraction`` is set for
    ``top10_novelty@n``, whose values are linearised first."""
    rows = rows_of(values, "values")
    basis = rows if top_fraction is None else top_fraction_influence(rows, top_fraction)
    floor = resampling_sd(basis)
    prompts = int(np.sum(~np.isnan(rows).all(axis=1)))
    effect = detectable_effect(floor.sd, prompts, alpha=alpha, power=power)
    return Detectable(effect, floor.sd, prompts, alpha, power, floor.basis)
