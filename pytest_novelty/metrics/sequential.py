"""Verdicts that spend samples only where they are unsure: a group-sequential test of a case against its
bound, valid however many times it looks.

A case whose interval contains its bound is undecided: another run could land on either side. More
samples of its suite decide it, but looking again after every round and deciding as soon as an
interval clears the bound (a naive re-test) makes a wrong decision more likely with every look: at
5 looks, about twice the error the interval promised (``tests/metrics/test_sequential_simulation.py``
measures it). This module decides with boundaries that hold the error over all the looks together:
those of a Lan-DeMets α-spending plan, Pocock-type by default (:mod:`.sequential_plan`, which says
how they are computed and why this design). After round k:

* θ̂_k is the case's statistic on every sample so far (the first pass and k − 1 more rounds of the same
  prompts, each round's samples beside the others), SE_k its standard error clustered by prompt (the
  linearised sandwich estimator of :mod:`.uncertainty`), Z_k = (θ̂_k − bound) / SE_k; for a share
  (coverage, unscored) Z_k is the score statistic Wilson's interval inverts (:func:`z_scores`), as
  shares get Wilson's interval everywhere else;
* t_k = k / K is the information time, K the looks the budget allows (the first pass included);
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
design assumes (Corr(Z_j, Z_k) = √(I_j / I_k) ≥ √(j / k)), and the test is conservative: by
Slepian's inequality ("The one-sided barrier problem for Gaussian noise", Bell System Technical
Journal 41(2), 1962), raising the correlations of Gaussian looks of unit variance lowers the
probability that any of them crosses a given one-sided boundary, so each wrong decision's error
falls below α/2, never above (up to the design's own probability, below 10⁻⁶, that a path crosses
both boundaries).

**The futility stop** (``SequentialPlan(..., futility=True)``). The rule may also stop a case early,
undecided, when even the budget left could not bring its statistic across a boundary. At look
k < K of a case that continues, split the variance of its statistic, SE_k², into the part more
rounds average away, W_k, and the rest, F_k = SE_k² − W_k, and let w_k = W_k / SE_k² ∈ [0, 1]
(:class:`LookStatistics`): for a mean, W_k = σ̂²_w / N_k, σ̂²_w the within-prompt variance pooled
over prompts and N_k the values so far; F_k holds the prompts' own spread (and, in a paired
comparison with a frozen snapshot, the snapshot's own samples, :mod:`.sequential_paired`). Where the
split cannot be estimated (one value per prompt, a top fraction) w_k = 1, the design's own model,
which overstates what more rounds can do and so only makes the stop later. If each remaining round
adds as much as each so far, the standard error at the budget's last look is SE_k·ρ with
ρ = √(1 − w_k + w_k·k / K), and the move of the estimate from look k to look K has the predictive
standard deviation SE_k·μ with μ = √(w_k·(1 − k / K)) (the prompts fixed, a flat prior on the value
they converge to; Spiegelhalter, Freedman and Blackburn, "Monitoring clinical trials: conditional or
predictive power?", Controlled Clinical Trials 7(1), 1986). The case **stops for futility**
(:data:`FUTILE`) at look k when

    |Z_k| + r·μ < q·ρ,    q = t⁻¹_{G−1}(1 − α/2),    r = :data:`FUTILITY_REACH` = 3:

even a move of r predictive standard deviations towards the nearer boundary would leave the last
look inside the lowest boundary the plan can have.

*Why "could not".* No boundary lies below z_{1−α/2}: P(|Z_j| ≥ c_j) ≤ P(a crossing by look j) =
α(t_j) ≤ α. So q is a floor of every boundary on the t scale, known without computing the plan's
later looks. The reach to look j, r·SE_k·√(w_k(1 − k / j)), grows with j while q·SE_j falls, so a
case futile at the last look is futile at every look left. Under the predictive model the estimate's
path over the looks left is a Gaussian martingale with independent increments (the posterior mean of
a Gaussian model), and by the reflection principle it moves r standard deviations of its last look
at any look with probability at most 4·(1 − Φ(r)) = 0.54 %: the stop gives up a decision the budget
would have made with at most that predictive probability (the simulation counts what it gives up).

*Why it keeps the error rates.* The stop acts only at a look where the rule continues, and the
boundaries are those of the rule without it (a non-binding futility rule; on stochastic curtailment,
Jennison and Turnbull, ch. 10). On any data, a case the rule with the stop decides is decided the
same way, at the same look, by the rule without it: the stop only turns would-be decisions into
undecided ones, so no wrong decision becomes more likely (:func:`decide_looks` is tested for
exactly that).

**What the budget left can detect** (:func:`detectable_left`): (q + t⁻¹_{G−1}(power))·SE_k·ρ, the
smallest distance of the true value from the bound that the budget's last look would decide with
probability ``power`` (80 %, as :mod:`.power`), on a normal approximation: the figure to report
beside an undecided case. q is the boundaries' floor, so it understates the distance a little (at
5 looks the last boundary is 2.39, q 1.96 on many prompts): the budget cannot do better.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics._validate import check_fraction
from pytest_novelty.metrics.bootstrap import linearised_se, rows_of
from pytest_novelty.metrics.sequential_plan import SequentialPlan
from pytest_novelty.metrics.uncertainty import TopFractionStatistic

Array = NDArray[np.float64]

PASS, FAIL, CONTINUE, UNDECIDED, FUTILE = "pass", "fail", "continue", "undecided", "futile"
DECISIONS = (PASS, FAIL, CONTINUE, UNDECIDED, FUTILE)
"""Every decision the rule gives: ``futile`` is undecided too, stopped for futility with budget left."""

FUTILITY_REACH = 3.0
"""r of the futility stop: how many predictive standard deviations the estimate may still move (module doc)."""

DEFAULT_POWER = 0.8
"""The power :func:`detectable_left` reads the budget left at (that of :mod:`.power`)."""


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
    """What the rule says after the looks so far: ``decision`` is one of :data:`DECISIONS`;
    ``detectable`` is the distance from the bound the budget left could still decide with 80 %
    power at its last look (:func:`detectable_left`, from the last look taken; NaN without one)."""

    decision: str
    looks: tuple[Look, ...]
    detectable: float = math.nan

    @property
    def decided(self) -> bool:
        """Whether the case ended decided (pass or fail)."""
        return self.decision in (PASS, FAIL)

    @property
    def rounds(self) -> int:
        """The looks it took, the first pass included."""
        return len(self.looks)


class LookStatistics(NamedTuple):
    """A statistic at every look, shaped (..., looks): the estimate, its clustered SE, and w ∈ [0, 1],
    the share of SE² that further rounds average away (1 where it cannot be estimated; module doc)."""

    estimate: Array
    se: Array
    renewable: Array


@dataclass(frozen=True)
class Rounds:
    """A case's values round by round, per prompt, as sums: ``sums``, ``counts`` (of present values)
    and ``squares`` (sums of squares; None: unknown, so the renewable share is 1), each shaped
    (..., rounds, prompts). The prompts are the same, in the same order, in every round."""

    sums: Array
    counts: Array
    squares: Array | None = None

    @classmethod
    def of(cls, rounds: Sequence[ArrayLike]) -> Rounds:
        """From each round's (prompts × samples) values, NaN left out (one value per prompt: a vector)."""
        arrays = round_values(rounds)
        present = [~np.isnan(a) for a in arrays]
        values = [np.where(p, a, 0.0) for a, p in zip(arrays, present, strict=True)]
        return cls(np.stack([v.sum(axis=1) for v in values]), np.stack([p.sum(axis=1) for p in present]).astype(float),
                   np.stack([(v * v).sum(axis=1) for v in values]))  # fmt: skip

    @property
    def looks(self) -> int:
        """How many rounds it holds."""
        return int(self.sums.shape[-2])

    def cumulative(self) -> tuple[Array, Array, Array | None]:
        """Sums, counts and squares over rounds 1 … k at every look k."""
        s, c = np.cumsum(self.sums, axis=-2), np.cumsum(self.counts, axis=-2)
        return s, c, None if self.squares is None else np.cumsum(self.squares, axis=-2)


def within_variance(sums: Array, counts: Array, squares: Array | None) -> Array:
    """σ̂²_w, the within-prompt variance pooled over prompts, from one look's cumulative per-prompt
    sums, counts and squares shaped (..., prompts): Σ_i (Q_i − S_i²/C_i) / Σ_i (C_i − 1) over the
    prompts with values; NaN without squares or without a prompt of two values."""
    if squares is None:
        return np.full(sums.shape[:-1], np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        spread = np.where(counts > 0, squares - sums * sums / np.where(counts > 0, counts, 1.0), 0.0)
        freedom = np.maximum(counts - 1.0, 0.0).sum(axis=-1)
        return np.where(freedom > 0, np.maximum(spread, 0.0).sum(axis=-1) / np.where(freedom > 0, freedom, 1.0), np.nan)


def renewable_share(renewable: ArrayLike, se: ArrayLike) -> Array:
    """w = W / SE², clipped to [0, 1]; 1 where either is unknown or SE is 0 (module doc)."""
    part, total = np.asarray(renewable, dtype=float), np.asarray(se, dtype=float) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.clip(part / np.where(total > 0, total, np.nan), 0.0, 1.0)
    return np.where(np.isfinite(share), share, 1.0)


def mean_looks(rounds: Rounds) -> LookStatistics:
    """The mean over generations, its clustered SE and the renewable share of its variance at every
    look, from :class:`Rounds` shaped (..., looks, prompts): look k pools rounds 1 … k.

    θ̂ = Σ_i s_i / Σ_i c_i over the cumulative s_i, c_i of prompt i (a ratio estimator: a prompt's
    unscored samples are left out, as in :func:`.uncertainty.mean_interval`), e_i = (s_i − θ̂·c_i) / Σ c,
    SE = √(G/(G − 1)·Σ e_i²); W_k = σ̂²_w / N_k (:func:`within_variance` over the rounds so far, N_k
    the present values), w_k = W_k / SE_k². NaN where nothing is present; vectorised over the leading axes.
    """
    s, c, q = rounds.cumulative()
    total = c.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = np.where(total > 0, s.sum(axis=-1) / np.where(total > 0, total, 1.0), np.nan)
        parts = (s - np.nan_to_num(estimate)[..., None] * c) / np.where(total > 0, total, 1.0)[..., None]
        clusters = s.shape[-1]
        factor = clusters / (clusters - 1) if clusters > 1 else math.nan
        se = np.sqrt(factor * np.sum(parts**2, axis=-1))
        renewable = within_variance(s, c, q) / np.where(total > 0, total, np.nan)
    return LookStatistics(estimate, se, renewable_share(renewable, se))


def _statistic_se(estimate: Array, se: Array, bound: float, generations: ArrayLike | None) -> Array:
    """The standard error Z divides by: ``se`` itself, or for a share the score statistic's (:func:`z_scores`)."""
    if generations is None:
        return se
    total = np.asarray(generations, dtype=float)
    spread = estimate * (1.0 - estimate)
    with np.errstate(invalid="ignore", divide="ignore"):
        design = np.where(spread > 0, np.maximum(1.0, se**2 * total / np.where(spread > 0, spread, 1.0)), 1.0)
    null = bound * (1.0 - bound)
    return np.sqrt(design * null / np.where(total > 0, total, np.nan)) if null > 0 else np.zeros_like(estimate)


def z_scores(estimate: ArrayLike, se: ArrayLike, bound: float, *, generations: ArrayLike | None = None) -> Array:
    """Z = (θ̂ − bound) / SE, elementwise; ±inf for SE 0 away from the bound, 0 at it, NaN without a value.

    With ``generations`` (the number of generations behind each θ̂) the value is a share (coverage,
    unscored) and Z is the score statistic Wilson's interval inverts, on the effective number of
    generations n_eff = N / deff (:func:`.uncertainty.share_interval`): Z = (p̂ − p₀) / √(p₀(1 − p₀) /
    n_eff), deff = max(1, SE²·N / (p̂(1 − p̂))) (1 when p̂ is 0 or 1), p₀ the bound. The SE of the
    plain Wald statistic shrinks with p̂ near 0 or 1, which makes a share look decided too early on
    the side away from 0.5; the score statistic's does not (the simulation measures both).
    """
    value = np.asarray(estimate, dtype=float)
    se = _statistic_se(value, np.asarray(se, dtype=float), bound, generations)
    shift = value - bound
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(se > 0, shift / np.where(se > 0, se, 1.0), np.sign(shift) * np.inf)
    return np.where(np.isnan(shift), np.nan, np.where((se == 0) & (shift == 0), 0.0, z))


def _projection(renewable: Array, plan: SequentialPlan, looks: Array) -> tuple[Array, Array]:
    """ρ and μ of each look (module doc): the last look's SE and the predictive move's SD, in SE_k."""
    done = looks / float(plan.looks)  # k / K as a float: exact enough, and K may exceed 64 bits
    return np.sqrt(1.0 - renewable + renewable * done), np.sqrt(renewable * (1.0 - done))


def decide_looks(
    z: ArrayLike,
    plan: SequentialPlan,
    *,
    clusters: int,
    higher_is_better: bool = True,
    renewable: ArrayLike | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The rule on Z at every look so far, shaped (..., looks): per case the decision code (index into
    :data:`DECISIONS`) and the look it stopped at (1-based; the last look given when it continues).

    The boundary is the plan's on the t scale with ``clusters`` − 1 degrees of freedom, computed for
    the looks given only. A case stops at its first crossing; with the plan's futility stop, at a look
    before the plan's last where it does not cross and |Z| + r·μ < q·ρ (module doc; ``renewable`` is
    each look's w, 1 where not given), it stops as :data:`FUTILE`. At the plan's last look an
    uncrossed case is undecided, before it it continues.
    """
    values = np.asarray(z, dtype=float)
    given = values.shape[-1]
    if given > plan.looks:
        raise ValueError(f"{given} looks for a plan of {plan.looks}")
    critical = plan.critical(clusters, given)
    signed = values if higher_is_better else -values
    up = signed >= critical
    down = signed <= -critical
    crossed = up | down
    futile = np.zeros_like(crossed)
    if plan.futility:
        share = np.broadcast_to(np.asarray(1.0 if renewable is None else renewable, dtype=float), values.shape)
        final, move = _projection(share, plan, np.arange(1, given + 1, dtype=float))
        futile = ~crossed & (np.abs(values) + FUTILITY_REACH * move < plan.floor(clusters) * final)  # NaN: never
        if given == plan.looks:
            futile[..., -1] = False  # the last look ends undecided anyway
    stops = crossed | futile
    any_stop = stops.any(axis=-1)
    first = np.where(any_stop, np.argmax(stops, axis=-1), given - 1)
    went_up = np.take_along_axis(up, first[..., None], axis=-1)[..., 0]
    went_down = np.take_along_axis(down, first[..., None], axis=-1)[..., 0]
    last = UNDECIDED if given == plan.looks else CONTINUE
    words = [DECISIONS.index(PASS), DECISIONS.index(FAIL), DECISIONS.index(FUTILE)]
    code = np.select([any_stop & went_up, any_stop & went_down, any_stop], words, DECISIONS.index(last))
    return code.astype(np.int64), (first + 1).astype(np.int64)


def detectable_left(
    se: ArrayLike,
    renewable: ArrayLike,
    look: ArrayLike,
    plan: SequentialPlan,
    *,
    clusters: int,
    power: float = DEFAULT_POWER,
) -> Array:
    """(q + t⁻¹_{G−1}(power))·SE·ρ at each look (module doc): the smallest distance of the true value from
    the bound that the plan's last look would decide with probability ``power``, from what look
    ``look`` (1-based) has seen; the figure to report beside an undecided case (NaN without an SE)."""
    strength = check_fraction(power, "power")
    final, _ = _projection(np.asarray(renewable, dtype=float), plan, np.asarray(look, dtype=float))
    reach = plan.floor(clusters) + float(plan.quantile(clusters, min(strength, 1.0 - 1e-12)))
    return np.asarray(reach * np.asarray(se, dtype=float) * final, dtype=float)


def round_values(rounds: Sequence[ArrayLike]) -> list[Array]:
    """Each round's values as a (prompts × samples) array (a vector: one value per prompt), checked to
    be numbers on the same prompts in every round."""
    out = [rows_of(values, f"rounds[{index}]") for index, values in enumerate(rounds)]
    for index, array in enumerate(out):
        if array.shape[0] != out[0].shape[0]:
            raise ValueError(f"rounds[{index}] has {array.shape[0]} prompts, the first pass {out[0].shape[0]}")
    if not out:
        raise ValueError("give at least the first pass's values")
    return out


def top_fraction_look(values: Array, fraction: float) -> tuple[float, float, Array]:
    """The top-fraction mean of (prompts × samples) ``values``, its linearised SE and the per-prompt
    contributions (:class:`.uncertainty.TopFractionStatistic`)."""
    ones = np.ones((1, values.shape[0]))
    value, contributions = TopFractionStatistic(values, fraction).linearised(ones)
    return float(value[0]), float(linearised_se(contributions, ones)[0]), contributions[0]


def top_fraction_looks(rounds: Sequence[ArrayLike], fraction: float) -> LookStatistics:
    """The top-fraction mean and its linearised SE at every look, each look pooling its rounds' samples
    per prompt; the renewable share is 1 (unknown: module doc)."""
    arrays = round_values(rounds)
    found = [top_fraction_look(np.hstack(arrays[: k + 1]), fraction)[:2] for k in range(len(arrays))]
    estimate, se = (np.array(column, dtype=float) for column in zip(*found, strict=True))
    return LookStatistics(estimate, se, np.ones_like(estimate))


def decision_of(
    found: LookStatistics,
    bound: float,
    *,
    higher_is_better: bool,
    plan: SequentialPlan,
    clusters: int,
    generations: ArrayLike | None = None,
    scores: ArrayLike | None = None,
) -> SequentialDecision:
    """One case's :class:`SequentialDecision` from its statistic at the looks so far (1-D arrays), held
    to ``bound``; ``generations`` reads it as a share (:func:`z_scores`); ``scores`` are Z at each look
    read from a randomisation test's p-values instead (:mod:`.sequential_paired`)."""
    se = _statistic_se(found.estimate, found.se, float(bound), generations)
    z = z_scores(found.estimate, found.se, float(bound), generations=generations) if scores is None else \
        np.asarray(scores, dtype=float)  # fmt: skip
    code, stop = decide_looks(z, plan, clusters=clusters, higher_is_better=higher_is_better,
                              renewable=found.renewable)  # fmt: skip
    given, end = z.shape[-1], int(stop)
    critical = plan.critical(clusters, given)
    looks = []
    for k in range(end):
        word = DECISIONS[int(code)] if k == end - 1 else CONTINUE
        looks.append(Look(k + 1, (k + 1) / plan.looks, float(found.estimate[k]), float(found.se[k]), float(z[k]),
                          float(critical[k]), word))  # fmt: skip
    left = detectable_left(se[end - 1], found.renewable[end - 1], end, plan, clusters=clusters)
    return SequentialDecision(DECISIONS[int(code)], tuple(looks), float(left))


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
    statistic (:func:`z_scores`). ``higher_is_better`` is True for a ``min`` threshold. With the
    plan's futility stop the case may end :data:`FUTILE`; ``detectable`` says what the budget left
    could still decide.
    """
    data = Rounds.of(rounds)
    clusters = int(data.sums.shape[-1])
    found = mean_looks(data) if top_fraction is None else top_fraction_looks(rounds, top_fraction)
    generations = np.cumsum(data.counts.sum(axis=-1)) if share else None
    return decision_of(found, bound, higher_is_better=higher_is_better, plan=plan, clusters=clusters,
                       generations=generations)  # fmt: skip
