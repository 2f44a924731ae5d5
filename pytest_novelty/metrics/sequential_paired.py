"""The sequential rule for regressions: a candidate against its baseline, paired by prompt, at every look.

A regression case compares a candidate with an accepted record of the same suite on the same
prompts: a baseline checkpoint that the run generates too (**live**) or a snapshot an earlier run
stored (**frozen**). Under ``--novelty-adaptive`` it is judged as a threshold case is, by the rule of
:mod:`.sequential` (Lan-DeMets α-spending, Pocock-type, read on Student's t, with its futility stop
and the effect the budget left can detect); only the statistic differs: the paired difference,
held to a margin.

**Where Z is read.** The boundaries are Student's t quantiles; for a mean, Z_k is not read on the t
scale but from a randomisation test of look k, whose one-sided p-value p_k is turned into the t
score with that tail, Z_k = t⁻¹_{G−1}(p_k) (the sign of the side p_k is of): Z_k crosses the boundary
c_k exactly when p_k is below the look's nominal level Φ(−c_k). The t reading held its level for
normal answers but not for skewed, discrete per-prompt values read at a corrected α: 50 prompts,
α = 0.05 / 19, five looks against a frozen snapshot, values that drop a few points now and then
(utility_k's shape) failed 0.63 % of unchanged cases against the 0.13 % promised; the test below,
0.03 % (``tests/metrics/test_sequential_paired_simulation.py`` checks it at 20 prompts). Which
test, by what the null "the same checkpoint, other seeds" makes exchangeable:

* **frozen**: prompt i's snapshot pass and the candidate's k rounds are k + 1 draws of the same
  checkpoint, so any of them could have been the stored one: each draw picks, per prompt, which
  pass plays the snapshot, and the statistic is the mean over prompts of (the mean of the other
  passes − the picked one). A sign flip of d_{i,k} would not do: the candidate's mean of k rounds
  and the snapshot's one pass are not alike, so d_{i,k} is not symmetric, and that is what failed.
* **live**: each round's pair (candidate, baseline) of a prompt is exchangeable, so each draw
  flips the sign of every (prompt, round) difference on its own.

The candidate's values are shifted by the margin first (the null is "the candidate is the
baseline plus the margin"). Each pass counts alike (its mean over the samples it has); a prompt
missing a value in any pass is left out of the test, and with fewer than two prompts left, or
for a top fraction (whose statistic does not split by prompt), Z is read on the t scale as above.
Draws: :data:`DRAWS_PER_LEVEL` per unit of the smallest nominal level of the looks so far, from
10,000 to 400,000, seeded by the look, so the same data give the same decision; p counts the data
among the draws (Phipson and Smyth 2010).

**The statistic.** After look k, prompt i has the candidate's mean ȳᶜ_{i,k} over its rounds 1 … k
and the baseline's ȳᵇ_{i,k}: over the same rounds when live, over its one stored pass when frozen.
The pairs are d_{i,k} = ȳᶜ_{i,k} − ȳᵇ_{i,k} over the G_k prompts both sides have a value for (a
prompt one side lacks is left out of both, so the pairs stay paired), and

    θ̂_k = Σ_i d_{i,k} / G_k,    SE_k = √(Σ_i (d_{i,k} − θ̂_k)² / (G_k (G_k − 1))),
    Z_k = (θ̂_k − margin) / SE_k,

the mean per-prompt difference that the gate's comparison reads, its standard error over prompts,
and Z against the ``margin`` the difference is held to: −tolerance for a ``min`` case (higher is
better), so that decided-fail is a drop beyond the tolerance and decided-pass a drop within it,
each wrong at most α/2 of the time over all the looks; +tolerance for a ``max`` case. α is the one
the comparison is held to (after the run's correction for its number of comparisons). With
``top_fraction`` the statistic is the difference of the two top-fraction means, its SE that of the
difference of both sides' linearised per-prompt contributions
(:class:`.uncertainty.TopFractionStatistic`). A share is read on this Wald statistic too.

**What each side's rounds do to the variance.** Let prompt i have an effect β_i common to both
sides (it cancels in d_i: what pairing buys), an interaction δ_i (how differently the two
checkpoints do on it, spread τ²) and sample noise of within-prompt variance σ²_c, σ²_b with n_c, n_b
samples a round:

* **live baseline**, a new round of both sides at each look, pair by pair on the same prompts:
  Var(θ̂_k) = [τ² + σ²_c / (n_c·k) + σ²_b / (n_b·k)] / G. Both sample noises average away, and the
  cumulative estimates have the canonical covariance Cov(θ̂_j, θ̂_k) = Var(θ̂_k) for j ≤ k as a
  threshold case's do (each side's means share its prompts and average its earlier rounds with
  its later ones; the two sides' noises are independent).
* **frozen snapshot**, a new round of the candidate alone:
  Var(θ̂_k) = [τ² + σ²_b / n_b + σ²_c / (n_c·k)] / G. The snapshot's sample noise is the same at
  every look, so the covariance is still canonical (that term is common to θ̂_j and θ̂_k), but the
  information levels off at G / (τ² + σ²_b / n_b) however many rounds are drawn. The rule's
  information times t_k = k / K then run ahead of the true ones, the looks are more correlated than
  designed, and the rule is conservative (Slepian's inequality, :mod:`.sequential`); the simulation
  measures how much.

SE_k accounts for both without being told which: it is the spread of the observed pairs, which
carry whatever noise each side's means still hold (a frozen snapshot's undiminished, a live side's
shrinking with its rounds). What ``frozen`` says is which noise later rounds will average away,
for the futility stop and :func:`.sequential.detectable_left`: the renewable part of SE_k² is
W_k = Σ_i (σ̂²_c / Nᶜ_{i,k} + [live] σ̂²_b / Nᵇ_{i,k}) / G_k², σ̂² each side's within-prompt
variance pooled over its values so far (:func:`.sequential.within_variance`) and N_{i,k} prompt i's
values; the snapshot's noise stays in the fixed part. A frozen snapshot stores one value per
prompt, so nothing of its own within variance is needed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics.bootstrap import linearised_se
from pytest_novelty.metrics.sequential import (
    Array,
    LookStatistics,
    Rounds,
    SequentialDecision,
    decision_of,
    renewable_share,
    round_values,
    top_fraction_look,
    within_variance,
)
from pytest_novelty.metrics.sequential_plan import SequentialPlan
from pytest_novelty.metrics.sign_flip import one_sided

#: Draws of each look's randomisation test per unit of its smallest nominal level (module doc), and
#: the fewest and most drawn; draws are taken in blocks of :data:`_BLOCK` (the draws' choices are
#: the large part: a block's are a few MB).
DRAWS_PER_LEVEL, DRAWS = 20.0, (10_000, 400_000)
_BLOCK = 25_000


def _checked(prompts: tuple[int, int], rounds: tuple[int, int], frozen: bool) -> None:
    """The candidate's and the baseline's prompts and rounds, checked to pair: the same prompts, and the
    baseline's rounds those of its kind."""
    (ours, theirs), (mine, other) = prompts, rounds
    if ours != theirs:
        raise ValueError(f"the candidate has {ours} prompts and the baseline {theirs}: the pairs are the same "
                         "prompts in the same order")  # fmt: skip
    if frozen and other != 1:
        raise ValueError(f"a frozen baseline is one stored pass, got {other} rounds")
    if not frozen and other != mine:
        raise ValueError(f"a live baseline draws a round with every round of the candidate: {other} rounds "
                         f"against the candidate's {mine}")  # fmt: skip


def _renewable(sums: Array, counts: Array, squares: Array | None, paired: NDArray[np.bool_]) -> Array:
    """Σ_i σ̂² / N_i over the paired prompts: one side's part of G²·W_k (module doc)."""
    keep = [np.where(paired, a, 0.0) for a in (sums, counts)]
    variance = within_variance(keep[0], keep[1], None if squares is None else np.where(paired, squares, 0.0))
    return variance * np.where(paired, 1.0 / np.where(counts > 0, counts, 1.0), 0.0).sum(axis=-1)


def paired_looks(candidate: Rounds, baseline: Rounds, *, frozen: bool) -> LookStatistics:
    """The paired difference (candidate − baseline) at every look, its SE and renewable share (module doc).

    Both are :class:`.sequential.Rounds` shaped (..., rounds, prompts) on the same prompts; a live
    baseline has as many rounds as the candidate, a frozen one has one (its stored values: sums of
    one value per prompt, counts 1), held at every look. Vectorised over the leading axes.
    """
    _checked((candidate.sums.shape[-1], baseline.sums.shape[-1]), (candidate.looks, baseline.looks), frozen)
    sc, cc, qc = candidate.cumulative()
    sb, cb, qb = baseline.cumulative()
    if frozen:
        sb, cb = np.broadcast_to(sb, sc.shape), np.broadcast_to(cb, cc.shape)
    paired = (cc > 0) & (cb > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        pairs = np.where(paired, sc / np.where(cc > 0, cc, 1.0) - sb / np.where(cb > 0, cb, 1.0), 0.0)
        count = paired.sum(axis=-1).astype(float)
        estimate = np.where(count > 0, pairs.sum(axis=-1) / np.where(count > 0, count, 1.0), np.nan)
        spread = np.where(paired, pairs - np.nan_to_num(estimate)[..., None], 0.0)
        usable = count > 1
        se = np.where(usable, np.sqrt((spread**2).sum(axis=-1) / np.where(usable, count * (count - 1.0), 1.0)), np.nan)
        renewable = _renewable(sc, cc, qc, paired)
        if not frozen:
            renewable = renewable + _renewable(sb, cb, qb, paired)
        renewable = renewable / np.where(count > 0, count**2, np.nan)
    return LookStatistics(estimate, se, renewable_share(renewable, se))


def paired_top_fraction_looks(
    candidate: Sequence[ArrayLike], baseline: Sequence[ArrayLike], fraction: float, *, frozen: bool
) -> LookStatistics:
    """The difference of the top-fraction means at every look, each side pooling its rounds' samples
    per prompt, its SE from the difference of both sides' linearised per-prompt contributions; the
    renewable share is 1 (unknown). The prompts are the same, in the same order, on both sides."""
    ours, theirs = round_values(candidate), round_values(baseline)
    _checked((ours[0].shape[0], theirs[0].shape[0]), (len(ours), len(theirs)), frozen)
    estimates, ses = [], []
    ones = np.ones((1, ours[0].shape[0]))
    for k in range(len(ours)):
        mine, _, mine_parts = top_fraction_look(np.hstack(ours[: k + 1]), fraction)
        other, _, other_parts = top_fraction_look(np.hstack(theirs[:1] if frozen else theirs[: k + 1]), fraction)
        estimates.append(mine - other)
        ses.append(float(linearised_se((mine_parts - other_parts)[None, :], ones)[0]))
    estimate = np.array(estimates, dtype=float)
    return LookStatistics(estimate, np.array(ses, dtype=float), np.ones_like(estimate))


def paired_decision(
    candidate: Sequence[ArrayLike],
    baseline: Sequence[ArrayLike],
    margin: float,
    *,
    higher_is_better: bool,
    plan: SequentialPlan,
    frozen: bool,
    top_fraction: float | None = None,
) -> SequentialDecision:
    """The rule on one regression case after ``len(candidate)`` looks (module doc).

    ``candidate[k]`` holds round k's values of the case (prompts × samples; NaN: no value, left out):
    round 0 is the first pass. ``baseline`` holds the baseline's values on the same prompts in the
    same order: one array per round of the candidate when live, the snapshot's one array when
    ``frozen`` (a vector of per-prompt values, or per-generation values for a top fraction).
    ``margin`` is the difference the case is held to (−tolerance for a ``min`` case, whose
    ``higher_is_better`` is True). Decided-fail is a regression beyond the margin; decided-pass none;
    with the plan's futility stop the case may end ``futile``.
    """
    if top_fraction is not None:
        found = paired_top_fraction_looks(candidate, baseline, top_fraction, frozen=frozen)
        clusters = round_values(candidate)[0].shape[0]
    else:
        ours, theirs = Rounds.of(candidate), Rounds.of(baseline)
        found = paired_looks(ours, theirs, frozen=frozen)
        clusters = int(((ours.counts[0] > 0) & (theirs.counts[0] > 0)).sum())
        scores = randomised_scores(ours, theirs, float(margin), plan=plan, frozen=frozen, clusters=clusters)
        return decision_of(found, float(margin), higher_is_better=higher_is_better, plan=plan, clusters=clusters,
                           scores=scores)  # fmt: skip
    return decision_of(found, float(margin), higher_is_better=higher_is_better, plan=plan, clusters=clusters)


def randomised_scores(
    candidate: Rounds, baseline: Rounds, margin: float, *, plan: SequentialPlan, frozen: bool, clusters: int
) -> Array | None:
    """Z at every look read from the randomisation test of the module doc (one case: shaped (rounds,
    prompts)); None with fewer than two prompts that have a value in every pass."""
    from scipy import special

    with np.errstate(invalid="ignore", divide="ignore"):
        ours = np.where(candidate.counts > 0, candidate.sums / candidate.counts, np.nan) - margin
        theirs = np.where(baseline.counts > 0, baseline.sums / baseline.counts, np.nan)
    keep = ~(np.isnan(ours).any(axis=0) | np.isnan(theirs).any(axis=0))
    if keep.sum() < 2:  # (then clusters >= 2 too: they are the prompts with a first pass)
        return None
    ours, theirs = ours[:, keep], theirs[:, keep]
    looks = ours.shape[0]
    level = float(special.ndtr(-plan.boundaries(looks).max()))
    draws = int(min(max(DRAWS_PER_LEVEL / max(level, 1e-300), DRAWS[0]), DRAWS[1]))
    scores = np.empty(looks)
    for k in range(1, looks + 1):
        low, high = _one_look(ours[:k], theirs[:1] if frozen else theirs[:k], frozen, draws, seed=k)
        # the t score with the smaller tail's probability; a tail above one half reads as 0
        scores[k - 1] = special.stdtrit(clusters - 1, min(low, 0.5)) if low <= high else \
            -special.stdtrit(clusters - 1, min(high, 0.5))  # fmt: skip
    return scores


def _one_look(ours: Array, theirs: Array, frozen: bool, draws: int, *, seed: int) -> tuple[float, float]:
    """One look's one-sided p-values (below, above) of the mean paired difference: ``ours`` the
    candidate's passes (shifted by the margin), ``theirs`` the snapshot's one pass or the live
    baseline's passes, each (passes, prompts)."""
    rng = np.random.default_rng(seed)
    prompts, rounds = ours.shape[1], ours.shape[0]
    if frozen:
        passes = np.vstack([theirs, ours])  # row 0 plays the snapshot
        total, columns = passes.sum(axis=0), np.arange(prompts)
        observed = float(np.mean(ours.mean(axis=0) - theirs[0]))

        def drawn(count: int) -> Array:
            picked = passes[rng.integers(0, rounds + 1, size=(count, prompts)), columns]
            return np.asarray(((total - picked) / rounds - picked).mean(axis=1))
    else:
        differences = (ours - theirs).T.reshape(-1)  # prompt by prompt, round by round
        observed = float(differences.mean())

        def drawn(count: int) -> Array:
            signs = rng.integers(0, 2, size=(count, differences.size)) * 2.0 - 1.0
            return np.asarray(signs @ differences / differences.size)

    values = np.concatenate([drawn(min(_BLOCK, draws - start)) for start in range(0, draws, _BLOCK)])
    above, below = one_sided(observed, values, False, scale=float(np.abs(ours).mean() + np.abs(theirs).mean()))
    return below, above
