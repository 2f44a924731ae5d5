"""What a paired comparison of two runs of a suite can detect, and how many prompts it would need.

Source: Miller, "Adding Error Bars to Evals" (2024, arXiv 2411.00640), on planning the number of
questions of an eval by power analysis for a paired comparison. The gate's comparison
(:func:`pytest_novelty.metrics.paired.paired_bootstrap`, called by
:func:`pytest_novelty.gate.regression.compare`) calls a regression when the (1 − α) interval of the
paired change lies entirely on the bad side of 0: a one-sided test at level α/2. For a true change δ
the studentised change is about t-distributed with n − 1 degrees of freedom around δ/SE, so the
test has power 1 − β when

    δ = (t(n − 1, 1 − α/2) + t(n − 1, 1 − β)) · SE,    SE = sd_d / √n,

n the number of paired prompts and sd_d the per-prompt standard deviation of the paired statistic.
This is the normal-approximation sample-size formula with Student quantiles in place of normal
ones (close to the exact noncentral-t answer from 10 prompts on; the simulation test checks the
prediction within ten points of power). :func:`detectable_effect` gives δ for 80 % power,
:func:`prompts_needed` the n whose δ reaches a given tolerance.

Where sd_d comes from (:class:`NoiseFloor`):

* From one run (:func:`resampling_sd`): comparing a checkpoint with itself under new samples, the
  prompt effect cancels in the pairing, and the difference of two per-prompt means of m_i samples
  has variance 2·σ_i²/m_i, σ_i² prompt i's within-prompt variance; sd_d² is its mean over prompts.
  This is the noise floor of any comparison of the suite: a different checkpoint adds a
  prompt-by-checkpoint variance that one run cannot see, so the real detectable effect is at least
  this large. With one value per prompt (one sample, or per-prompt statistics such as distinct_k)
  σ_i² is unknown, and √2 times the spread over prompts bounds sd_d from above (it is the sd of a
  difference of two independent draws from the spread of prompts); the basis says which was used.
* From two runs at hand (:func:`paired_sd`): the spread of the observed per-prompt differences.
* The top-10 % mean is linearised first (:func:`top_fraction_influence`): to first order it is
  the mean over generations of ψ(x) = q + (x − q)₊/f (q the cut-off, f the fraction: the influence
  function of an upper-tail mean), so its sd_d is that of ψ. q@Tail uses the tail prompts' quality
  (n is then the tail's size).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics._validate import as_float_array, ceil_fraction, check_fraction
from pytest_novelty.metrics.bootstrap import rows_of as _rows
from pytest_novelty.metrics.bootstrap import t_quantile

#: Power the detectable effect is computed for unless told otherwise.
DEFAULT_POWER = 0.8


def _check(alpha: float, power: float) -> tuple[float, float]:
    level = check_fraction(alpha, "alpha")
    strength = check_fraction(power, "power")
    if level == 1.0 or strength == 1.0:
        raise ValueError("alpha and power must lie in (0, 1)")
    return level, strength


def detectable_effect(sd: float, n: int, *, alpha: float = 0.05, power: float = DEFAULT_POWER) -> float:
    """The smallest change a paired comparison on ``n`` prompts detects with probability ``power``.

    (t(n − 1, 1 − α/2) + t(n − 1, power)) · sd / √n, ``sd`` the per-prompt standard deviation of
    the paired statistic (module docstring). NaN when n < 2 or ``sd`` is NaN; 0 when sd is 0.
    """
    level, strength = _check(alpha, power)
    if n < 2 or math.isnan(sd):
        return math.nan
    if sd < 0:
        raise ValueError(f"sd must not be negative, got {sd!r}")
    df = n - 1
    return (t_quantile(df, 1.0 - level / 2.0) + t_quantile(df, strength)) * sd / math.sqrt(n)


def prompts_needed(
    sd: float, effect: float, *, alpha: float = 0.05, power: float = DEFAULT_POWER, limit: int = 1_000_000
) -> int:
    """The fewest prompts whose :func:`detectable_effect` is at most ``effect``.

    Found by bisection (the detectable effect falls as n grows); 2 when sd is 0, ``limit`` when even
    that many would not do. Raises ``ValueError`` for an effect that is not positive or a NaN sd.
    """
    _check(alpha, power)
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
    """Standard deviation (n − 1 denominator) of the per-prompt differences after − before, NaN pairs dropped.

    The basis of the detectable effect when two runs are at hand (a snapshot and its candidate): it
    includes the prompt-by-checkpoint variance one run cannot show. NaN for fewer than two pairs.
    """
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
    """The per-prompt sd of a paired change between two runs of one checkpoint, and how it was found.

    ``basis`` is :data:`WITHIN` (several samples per prompt: the prompt effect cancels in the
    pairing), :data:`BETWEEN` (one value per prompt, so within- and between-prompt noise cannot be
    told apart and √2 times the spread over prompts bounds the paired sd from above) or
    :data:`CONSTANT` (sd 0: every value the same); ``prompts`` counts the prompts it used.
    """

    sd: float
    basis: str
    prompts: int


def resampling_sd(values: ArrayLike) -> NoiseFloor:
    """The per-prompt sd of the paired change of a mean when the same checkpoint is sampled again.

    For a (prompts × samples) array, NaN left out: sd_d = √(mean_i 2·s_i²/m_i) over the prompts with
    m_i ≥ 2 present values, s_i² their sample variance (n − 1 denominator). With at most one value
    per prompt, √2 times the sample sd over prompts (module docstring). NaN when neither can be had.
    """
    rows = _rows(values, "values")
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
    """ψ(x) = q + (x − q)₊ / f for every generation: the top-fraction mean's linearisation.

    q is the cut-off (the smallest of the ceil(f·m) highest present values) and f the fraction. The
    top-fraction mean equals the mean of ψ up to terms that vanish as the suite grows, and a small
    change of the values moves both alike, so the paired change of the top-fraction mean has the
    per-prompt noise of ψ. NaN stays NaN.
    """
    rows = _rows(values, "values")
    share = check_fraction(fraction, "fraction")
    flat = rows[~np.isnan(rows)]
    if flat.size == 0:
        return np.full_like(rows, np.nan)
    cut = float(np.sort(flat)[flat.size - ceil_fraction(share, flat.size)])
    return cut + np.maximum(rows - cut, 0.0) / share


@dataclass(frozen=True)
class Detectable:
    """What a paired comparison of a suite's metric can detect.

    ``effect`` is the minimum detectable change at ``alpha`` with ``power``, in the metric's units,
    for ``prompts`` paired prompts whose paired statistic has per-prompt sd ``sd``, found from
    ``basis`` (see :class:`NoiseFloor`).
    """

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

        def clean(value: float) -> float | None:
            return None if math.isnan(value) else float(value)

        return {"effect": clean(self.effect), "sd": clean(self.sd), "prompts": self.prompts,
                "alpha": self.alpha, "power": self.power, "basis": self.basis}


def detectable(
    values: ArrayLike, *, alpha: float = 0.05, power: float = DEFAULT_POWER, top_fraction: float | None = None
) -> Detectable:
    """The detectable effect of a metric from one run's values.

    ``values`` are what the metric averages: (prompts × samples) per-generation values (the same
    arrays :func:`pytest_novelty.metrics.uncertainty.suite_intervals` reads: gated novelty,
    originality with too-short as 0, quality, a 0/1 share), one value per prompt for per-prompt
    metrics (distinct_k, utility_k), or only the tail's rows for q@Tail. ``top_fraction`` is set for
    ``top10_novelty@n``, whose values are linearised first. ``prompts`` counts the rows with a present
    value.
    """
    rows = _rows(values, "values")
    basis = rows if top_fraction is None else top_fraction_influence(rows, top_fraction)
    floor = resampling_sd(basis)
    prompts = int(np.sum(~np.isnan(rows).all(axis=1)))
    effect = detectable_effect(floor.sd, prompts, alpha=alpha, power=power)
    return Detectable(effect, floor.sd, prompts, alpha, power, floor.basis)
