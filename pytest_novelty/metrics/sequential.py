"""Verdicts that spend samples only where they are unsure: a group-sequential test of a case against its
bound, valid however many times it looks.

A case whose interval contains its bound is undecided: another run could land on either side. More
samples of its suite decide it, but looking again after every round and deciding as soon as an
interval clears the bound (a naive re-test) makes a wrong decision more likely with every look: at
5 looks, about twice the error the interval promised (``tests/metrics/test_sequential_simulation.py``
measures it). This module decides with boundaries that hold the error over all the looks together.

**The design.** A group-sequential test with α-spending (Lan and DeMets, "Discrete sequential
boundaries for clinical trials", Biometrika 70(3), 1983), two-sided and symmetric, with the
Pocock-type spending function α(t) = α·ln(1 + (e − 1)·t) (same paper); the O'Brien-Fleming-type is
offered too (``spending="obrien-fleming"``). Each side spends α/2 by the one-sided function, as
gsDesign and ldbounds do for symmetric designs: for the O'Brien-Fleming-type each side spends
2 − 2Φ(z₁₋α/₄ / √t); for the Pocock-type, linear in α, this is the same as spending α(t) on both
sides together. After round k:

* θ̂_k is the case's statistic on every sample so far (the first pass and k − 1 more rounds of the same
  prompts, each round's samples beside the others), SE_k its standard error clustered by prompt (the
  linearised sandwich estimator of :mod:`.uncertainty`), Z_k = (θ̂_k − bound) / SE_k; for a share
  (coverage, unscored) Z_k is the score statistic Wilson's interval inverts (:func:`z_scores`), as
  shares get Wilson's interval everywhere else;
* the information time is t_k = k / K, K the looks the budget allows (the first pass included):
  every round adds the same number of samples per prompt;
* with the boundary c_k for t_1 … t_k, a ``min`` case is **decided-pass** when Z_k ≥ c_k and
  **decided-fail** when Z_k ≤ −c_k (a ``max`` case the other way round), else it **continues**; at the
  last look (t = 1) whatever α is left is spent, and a case still inside is **undecided** within its
  budget. A case stops at its first crossing.

Each wrong decision (fail when the true value meets the bound, pass when it does not) has
probability α/2 at most, over all the looks together, the error of each tail of the case's own
two-sided 1 − α interval; α is the suite's ``[gate] alpha``. The boundaries rest on the normal (t)
approximation of a clustered mean, so this holds as closely as the case's interval does: the
simulation measured 1.0 to 2.9 % per side at α = 0.05, never above α.

**Why this design is valid here.** The rounds are not independent observations: they share the
suite's prompts, whose own spread is part of every interval (Miller 2024, :mod:`.uncertainty`). But
the cumulative estimates have the canonical covariance Cov(θ̂_j, θ̂_k) = Var(θ̂_k) for j ≤ k: the
prompt effects are common to both, and the sample noise of θ̂_k averages that of θ̂_j with the
rounds after it. That is the covariance group-sequential boundaries are computed for (Jennison and
Turnbull, *Group Sequential Methods with Applications to Clinical Trials*, 2000, ch. 3 and 7), with
the information I_k = 1 / Var(θ̂_k). When the prompts' own spread is negligible, I_k grows as k and
t_k = k / K is exact; when it is not, I_k grows more slowly, the looks are more correlated than the
design assumes, and the test is conservative (its error falls below α/2, never above). SE_k is
estimated from G prompts, so the boundary is read on Student's t with G − 1 degrees of freedom:
c_k' = t⁻¹_{G−1}(Φ(c_k)) (a q@Tail case has 10 prompts, where z would be too narrow).

**Why not a confidence sequence.** An anytime-valid confidence sequence (Howard, Ramdas,
McAuliffe and Sekhon, "Time-uniform, nonparametric, nonasymptotic confidence sequences", Annals of
Statistics 49(2), 2021) allows unlimited looks and an open horizon; ours are few (the budget caps
them) and known beforehand, and a sequence pays for the horizon it does not use with a wider final
boundary. Its guarantees also assume independent increments, which rounds on shared prompts are not.

**Why Pocock-type.** The first look is the first pass itself. O'Brien-Fleming-type spends almost
nothing there (c_1 ≈ 4.9 for 5 looks at α = 0.05), so nearly every case, clear or not, would draw a
second round; the Pocock-type boundary is nearly flat (≈ 2.44 … 2.39 for 5 looks) and decides a clear
case at once, spending samples only on the unsure ones. The price is a last boundary above 1.96.

**The boundaries** are computed by the recursive numerical integration of Armitage, McPherson and
Rowe ("Repeated significance tests on accumulating data", JRSS A 132(2), 1969), as Jennison and
Turnbull (ch. 19) set it out: the sub-density of the score S_k = Z_k·√t_k on the continuation
region is carried from look to look by the Gaussian increment N(0, t_k − t_{k−1}) on a grid, and
c_k is the root of P(first crossing at look k) = α(t_k) − α(t_{k−1}) (bisection). The tests check
them against published values.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics._validate import as_float_array, check_fraction

__all__ = [
    "CONTINUE",
    "DECISIONS",
    "FAIL",
    "PASS",
    "SPENDING",
    "UNDECIDED",
    "Look",
    "SequentialDecision",
    "SequentialPlan",
    "boundaries",
    "decide_looks",
    "look_statistics",
    "sequential_decision",
    "spent",
    "z_scores",
]

Array = NDArray[np.float64]

PASS, FAIL, CONTINUE, UNDECIDED = "pass", "fail", "continue", "undecided"
DECISIONS = (PASS, FAIL, CONTINUE, UNDECIDED)
SPENDING = ("pocock", "obrien-fleming")

# Grid points per look for the numerical integration, and the standard deviations of the score the
# grid spans beyond a boundary (probability beyond it below 1e-15).
_GRID = 801
_TAIL_SDS = 8.0


def _normal_cdf(x: Array | float) -> Array:
    from scipy import special

    return np.asarray(special.ndtr(x), dtype=float)


def _normal_quantile(p: float) -> float:
    from scipy import special

    return float(special.ndtri(p))


def spent(alpha: float, t: float, spending: str = "pocock") -> float:
    """α(t): the two-sided error spent by information time t ∈ [0, 1], both sides together (module doc)."""
    if t <= 0.0:
        return 0.0
    t = min(t, 1.0)
    if spending == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * t)
    if spending == "obrien-fleming":  # each side α/2 by the one-sided function (module doc)
        return float(2.0 * (2.0 - 2.0 * _normal_cdf(_normal_quantile(1.0 - alpha / 4.0) / math.sqrt(t))))
    raise ValueError(f"spending must be one of {', '.join(SPENDING)}, got {spending!r}")


def _exit_probability(grid: Array, density: Array, step: float, bound: float, sd: float) -> float:
    """P(|S_k| ≥ bound) from the sub-density on ``grid`` carried by an increment of sd ``sd``."""
    beyond = _normal_cdf((-bound - grid) / sd) + (1.0 - _normal_cdf((bound - grid) / sd))
    return float(np.trapezoid(density * beyond, dx=step))


@functools.lru_cache(maxsize=64)
def _boundaries(fractions: tuple[float, ...], alpha: float, spending: str) -> tuple[float, ...]:
    out: list[float] = []
    grid: Array | None = None
    density: Array | None = None
    step = 0.0
    previous_t, previous_spent = 0.0, 0.0
    for t in fractions:
        target = spent(alpha, t, spending) - previous_spent
        if target <= 1e-15:
            out.append(math.inf)
            continue
        if grid is None or density is None:  # the first look: S_1 ~ N(0, t_1)
            c = _normal_quantile(1.0 - target / 2.0)
            bound = c * math.sqrt(t)
            grid = np.linspace(-bound, bound, _GRID)
            step = float(grid[1] - grid[0])
            density = np.exp(-(grid**2) / (2.0 * t)) / math.sqrt(2.0 * math.pi * t)
        else:
            sd = math.sqrt(t - previous_t)
            low, high = 0.0, (float(abs(grid[-1])) + _TAIL_SDS * sd) * 2.0
            for _ in range(100):  # bisection on the boundary of S_k: the exit probability falls as it rises
                middle = (low + high) / 2.0
                if _exit_probability(grid, density, step, middle, sd) > target:
                    low = middle
                else:
                    high = middle
            bound = (low + high) / 2.0
            c = bound / math.sqrt(t)
            new_grid = np.linspace(-bound, bound, _GRID)
            gap = new_grid[:, None] - grid[None, :]
            kernel = np.exp(-(gap**2) / (2.0 * sd * sd)) / (sd * math.sqrt(2.0 * math.pi))
            density = np.asarray(np.trapezoid(kernel * density[None, :], dx=step, axis=1), dtype=float)
            grid, step = new_grid, float(new_grid[1] - new_grid[0])
        out.append(c)
        previous_t, previous_spent = t, previous_spent + target
    return tuple(out)


def boundaries(fractions: Sequence[float], alpha: float, spending: str = "pocock") -> Array:
    """The two-sided boundaries c_1 … c_k (on the z scale) of looks at information times ``fractions``
    (increasing, in (0, 1]) for a total two-sided ``alpha`` (module doc); inf where a look spends
    nothing. Lan-DeMets needs only the looks so far, so a plan's later looks do not change them."""
    times = tuple(float(t) for t in fractions)
    if not times or any(not 0.0 < t <= 1.0 for t in times) or any(b <= a for a, b in itertools.pairwise(times)):
        raise ValueError(f"fractions must increase within (0, 1], got {list(times)}")
    level = check_fraction(alpha, "alpha")
    if level >= 1.0:
        raise ValueError("alpha must lie in (0, 1)")
    if spending not in SPENDING:
        raise ValueError(f"spending must be one of {', '.join(SPENDING)}, got {spending!r}")
    return np.array(_boundaries(times, level, spending))


@dataclass(frozen=True)
class SequentialPlan:
    """A case's sequential plan: the suite's two-sided ``alpha``, the ``looks`` its budget allows (the
    first pass and every extra round of the same size: K = 1 + extra rounds) and the spending function."""

    alpha: float
    looks: int
    spending: str = "pocock"

    def __post_init__(self) -> None:
        if isinstance(self.looks, bool) or not isinstance(self.looks, int) or self.looks < 1:
            raise ValueError(f"looks must be a whole number of at least 1, got {self.looks!r}")
        boundaries([1.0], self.alpha, self.spending)  # checks alpha and the spending function

    def boundaries(self, looks: int | None = None) -> Array:
        """c_1 … c_k on the z scale for the first ``looks`` looks (all of them by default)."""
        count = self.looks if looks is None else looks
        return boundaries([(k + 1) / self.looks for k in range(count)], self.alpha, self.spending)

    def critical(self, clusters: int) -> Array:
        """The boundaries on Student's t scale with ``clusters`` − 1 degrees of freedom (module doc)."""
        from scipy import special

        c = self.boundaries()
        if clusters < 2:
            return np.full(c.shape, math.inf)
        return np.asarray(special.stdtrit(clusters - 1, _normal_cdf(c)), dtype=float)


@dataclass(frozen=True)
class Look:
    """One look at a case: its number (1 the first pass), information time, the statistic, its clustered
    SE, Z, the boundary it was held to (t scale) and the decision."""

    number: int
    fraction: float
    estimate: float
    se: float
    z: float
    boundary: float
    decision: str


@dataclass(frozen=True)
class SequentialDecision:
    """What the rule says after the looks so far: ``decision`` is one of :data:`DECISIONS`."""

    decision: str
    looks: tuple[Look, ...]

    @property
    def decided(self) -> bool:
        """Whether the case ended decided (pass or fail)."""
        return self.decision in (PASS, FAIL)

    @property
    def rounds(self) -> int:
        """The looks it took, the first pass included."""
        return len(self.looks)


def look_statistics(sums: ArrayLike, counts: ArrayLike) -> tuple[Array, Array]:
    """The mean over generations and its clustered SE at every look, from per-round, per-prompt sums and
    counts of present values, shaped (..., looks, prompts): look k pools rounds 1 … k.

    θ̂ = Σ_i s_i / Σ_i c_i over the cumulative s_i, c_i of prompt i (a ratio estimator: a prompt's
    unscored samples are left out, as in :func:`.uncertainty.mean_interval`), e_i = (s_i − θ̂·c_i) / Σ c,
    SE = √(G/(G − 1)·Σ e_i²). NaN where nothing is present; vectorised over the leading axes.
    """
    s = np.cumsum(np.asarray(sums, dtype=float), axis=-2)
    c = np.cumsum(np.asarray(counts, dtype=float), axis=-2)
    total = c.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = np.where(total > 0, s.sum(axis=-1) / np.where(total > 0, total, 1.0), np.nan)
        parts = (s - np.nan_to_num(estimate)[..., None] * c) / np.where(total > 0, total, 1.0)[..., None]
    clusters = s.shape[-1]
    factor = clusters / (clusters - 1) if clusters > 1 else math.nan
    return estimate, np.sqrt(factor * np.sum(parts**2, axis=-1))


def z_scores(
    estimate: ArrayLike, se: ArrayLike, bound: float, *, generations: ArrayLike | None = None
) -> Array:
    """Z = (θ̂ − bound) / SE, elementwise; ±inf for SE 0 away from the bound, 0 at it, NaN without a value.

    With ``generations`` (the number of generations behind each θ̂) the value is a share (coverage,
    unscored) and Z is the score statistic Wilson's interval inverts, on the effective number of
    generations n_eff = N / deff (:func:`.uncertainty.share_interval`): Z = (p̂ − p₀) / √(p₀(1 − p₀) /
    n_eff), deff = max(1, SE²·N / (p̂(1 − p̂))) (1 when p̂ is 0 or 1), p₀ the bound. The SE of the
    plain Wald statistic shrinks with p̂ near 0 or 1, which makes a share look decided too early on
    the side away from 0.5; the score statistic's does not (the simulation measures both).
    """
    se = np.asarray(se, dtype=float)
    value = np.asarray(estimate, dtype=float)
    if generations is not None:
        total = np.asarray(generations, dtype=float)
        spread = value * (1.0 - value)
        with np.errstate(invalid="ignore", divide="ignore"):
            design = np.where(spread > 0, np.maximum(1.0, se**2 * total / np.where(spread > 0, spread, 1.0)), 1.0)
        null = bound * (1.0 - bound)
        se = np.sqrt(design * null / np.where(total > 0, total, np.nan)) if null > 0 else np.zeros_like(value)
    shift = value - bound
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(se > 0, shift / np.where(se > 0, se, 1.0), np.sign(shift) * np.inf)
    return np.where(np.isnan(shift), np.nan, np.where((se == 0) & (shift == 0), 0.0, z))


def decide_looks(
    z: ArrayLike, plan: SequentialPlan, *, clusters: int, higher_is_better: bool = True
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The rule on Z at every look so far, shaped (..., looks): per case the decision code (index into
    :data:`DECISIONS`) and the look it stopped at (1-based; the last look given when it continues).

    The boundary is the plan's on the t scale with ``clusters`` − 1 degrees of freedom. A case stops at
    its first crossing; at the plan's last look an uncrossed case is undecided, before it it continues.
    """
    values = np.asarray(z, dtype=float)
    given = values.shape[-1]
    if given > plan.looks:
        raise ValueError(f"{given} looks for a plan of {plan.looks}")
    critical = plan.critical(clusters)[:given]
    signed = values if higher_is_better else -values
    up = signed >= critical
    down = signed <= -critical
    crossed = up | down
    any_crossed = crossed.any(axis=-1)
    first = np.where(any_crossed, np.argmax(crossed, axis=-1), given - 1)
    went_up = np.take_along_axis(up, first[..., None], axis=-1)[..., 0]
    last = UNDECIDED if given == plan.looks else CONTINUE
    code = np.where(any_crossed, np.where(went_up, DECISIONS.index(PASS), DECISIONS.index(FAIL)),
                    DECISIONS.index(last))  # fmt: skip
    return code.astype(np.int64), (first + 1).astype(np.int64)


def _round_values(rounds: Sequence[ArrayLike]) -> list[Array]:
    out: list[Array] = []
    for index, values in enumerate(rounds):
        array = as_float_array(values, f"rounds[{index}]")
        if array.ndim == 1:
            array = array[:, None]  # one value per prompt (NoveltyBench's per-prompt metrics)
        if array.ndim != 2 or (out and array.shape[0] != out[0].shape[0]):
            raise ValueError(f"rounds[{index}] has shape {array.shape}: every round is (prompts × samples) "
                             "of the same prompts")  # fmt: skip
        out.append(array)
    if not out:
        raise ValueError("give at least the first pass's values")
    return out


def _top_fraction_look(values: Array, fraction: float) -> tuple[float, float]:
    from pytest_novelty.metrics.uncertainty import TopFractionStatistic, linearised_se

    ones = np.ones((1, values.shape[0]))
    value, contributions = TopFractionStatistic(values, fraction).linearised(ones)
    return float(value[0]), float(linearised_se(contributions, ones)[0])


def sequential_decision(
    rounds: Sequence[ArrayLike],
    bound: float,
    *,
    higher_is_better: bool,
    plan: SequentialPlan,
    top_fraction: float | None = None,
    share: bool = False,
) -> SequentialDecision:
    """The rule (module doc) on one case after ``len(rounds)`` looks.

    ``rounds[k]`` holds round k's values of the case (prompts × samples, the same prompts in every
    round; NaN: no value, left out): round 0 is the first pass. The statistic is the mean over
    generations, or with ``top_fraction`` the mean of the top fraction (``top10_novelty``: 0.1),
    each with its clustered SE; ``share`` (0/1 values: coverage, unscored) reads Z as Wilson's score
    statistic (:func:`z_scores`). ``higher_is_better`` is True for a ``min`` threshold.
    """
    arrays = _round_values(rounds)
    clusters = arrays[0].shape[0]
    estimates, ses = [], []
    present = [~np.isnan(a) for a in arrays]
    counts = np.stack([p.sum(axis=1) for p in present]).astype(float)
    if top_fraction is None:
        sums = np.stack([np.where(p, a, 0.0).sum(axis=1) for a, p in zip(arrays, present, strict=True)])
        mean, se = look_statistics(sums, counts)
        estimates, ses = list(mean), list(se)
    else:
        for k in range(len(arrays)):
            value, se_k = _top_fraction_look(np.hstack(arrays[: k + 1]), top_fraction)
            estimates.append(value)
            ses.append(se_k)
    generations = np.cumsum(counts.sum(axis=1)) if share else None
    z = z_scores(np.array(estimates), np.array(ses), float(bound), generations=generations)
    code, stop = decide_looks(z, plan, clusters=clusters, higher_is_better=higher_is_better)
    critical = plan.critical(clusters)
    looks = []
    for k in range(int(stop)):
        word = DECISIONS[int(code)] if k == int(stop) - 1 else CONTINUE
        looks.append(Look(k + 1, (k + 1) / plan.looks, float(estimates[k]), float(ses[k]), float(z[k]),
                          float(critical[k]), word))  # fmt: skip
    return SequentialDecision(DECISIONS[int(code)], tuple(looks))
