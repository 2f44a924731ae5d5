"""Agreement between a judge's scores and human grades of the same items.

A quality judge is only worth gating on if it ranks responses the way people do. Given, for the
items the judge could score, its scores ``j`` and the human grades ``h`` (any numeric scale), this
module computes:

* **Spearman's ρ**: the Pearson correlation of the ranks of ``j`` and ``h`` (tied values get the
  mean of their ranks), as :func:`scipy.stats.spearmanr` computes it.
* **Kendall's τ-b**: ``(C − D) / sqrt((P0 − T_h)(P0 − T_j))`` over all ``P0 = n(n−1)/2`` pairs, with
  ``C``/``D`` the concordant/discordant pairs and ``T_h``/``T_j`` the pairs tied in ``h``/``j``, as
  :func:`scipy.stats.kendalltau` computes it (its default variant ``b``, which corrects for ties).
* **Pairwise ranking accuracy**: over the pairs of items *in the same group* (the same prompt)
  whose human grades differ, the share the judge orders the same way. A pair the judge ties
  counts one half (a coin flip would get it right half the time); pairs people tie are left out,
  since neither order is wrong. So ``accuracy = (C + T/2) / P = 1/2 + (C − D) / (2P)``, where ``P``
  is the number of counted pairs; 0.5 is chance, 1 is perfect. Items without a group form one
  group together, so a file with no groups at all is ranked as a whole.

Each statistic comes with a **percentile bootstrap** confidence interval: the items are resampled
with replacement ``resamples`` times (default :data:`DEFAULT_RESAMPLES`, seeded with ``seed``,
default 0, so a rerun gives the same interval); when the items come in more than one group, whole
groups are resampled instead (a cluster bootstrap: items of one prompt are not independent). A
resample where a statistic is undefined (all of ``j`` equal, or no counted pair) is left out of
that interval. The **calibration table** gives, for each distinct human grade, how many items
had it and the judge's mean score on them: a trustworthy judge's means rise with the grade.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pytest_novelty.metrics._validate import as_vector

#: Bootstrap resamples drawn by :func:`agreement` unless told otherwise.
DEFAULT_RESAMPLES = 2000
#: Seed of the bootstrap's random generator unless told otherwise.
DEFAULT_SEED = 0


@dataclass(frozen=True)
class Estimate:
    """A statistic and its bootstrap confidence interval (NaN where undefined)."""

    value: float
    """The statistic on all the items."""
    ci_low: float
    """The interval's lower bound, the ``(1 − confidence)/2`` percentile of the resamples."""
    ci_high: float
    """The interval's upper bound, the ``(1 + confidence)/2`` percentile of the resamples."""

    @classmethod
    def from_draws(cls, value: float, draws: np.ndarray, confidence: float) -> Estimate:
        """``value`` with the percentile interval of its bootstrap ``draws`` (NaN draws left out);
        the bounds are NaN when ``value`` is or no draw is defined."""
        defined = draws[~np.isnan(draws)]
        if not defined.size or np.isnan(value):
            return cls(value, float("nan"), float("nan"))
        tail = (1 - confidence) / 2 * 100
        low, high = np.percentile(defined, [tail, 100 - tail])
        return cls(value, float(low), float(high))


@dataclass(frozen=True)
class CalibrationRow:
    """The items with one human grade: how many, and the judge's mean score on them."""

    human: float
    """The human grade."""
    count: int
    """How many items have it."""
    judge_mean: float
    """The judge's mean score on those items."""

    @classmethod
    def of(cls, human: float, judge: np.ndarray) -> CalibrationRow:
        """The row of grade ``human``, from the judge's scores of the items with that grade."""
        return cls(float(human), int(judge.size), float(judge.mean()))


@dataclass(frozen=True)
class Agreement:
    """What :func:`agreement` measured, and the bootstrap settings it used."""

    n: int
    """The scored items used."""
    spearman: Estimate
    """Spearman's ρ."""
    kendall: Estimate
    """Kendall's τ-b."""
    pairwise_accuracy: Estimate
    """The share of same-group pairs the judge orders as people do (ties count one half)."""
    pairs: int
    """The counted pairs of the pairwise accuracy (same group, different human grades)."""
    groups: int
    """The groups those pairs came from."""
    calibration: tuple[CalibrationRow, ...]
    """One row per distinct human grade, ascending."""
    resamples: int
    """Bootstrap resamples drawn."""
    seed: int
    """Seed of the bootstrap's random generator."""
    confidence: float
    """Level of the confidence intervals."""


def _pair(judge: ArrayLike, human: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    j = as_vector(judge, "judge")
    h = as_vector(human, "human")
    if j.shape != h.shape:
        raise ValueError(f"judge and human must have the same length, got {j.size} and {h.size}")
    if np.isnan(j).any() or np.isnan(h).any():
        raise ValueError("judge and human must not contain NaN: leave unscored items out first")
    return j, h


def spearman(judge: ArrayLike, human: ArrayLike) -> float:
    """Spearman's ρ of the judge scores and the human grades (NaN when either is constant or n < 2)."""
    j, h = _pair(judge, human)
    return _spearman(j, h)


def kendall(judge: ArrayLike, human: ArrayLike) -> float:
    """Kendall's τ-b of the judge scores and the human grades (NaN when either is constant or n < 2)."""
    j, h = _pair(judge, human)
    return _kendall(j, h)


def _constant(x: np.ndarray) -> bool:
    return x.size < 2 or bool(np.all(x == x[0]))


def _spearman(j: np.ndarray, h: np.ndarray) -> float:
    if _constant(j) or _constant(h):
        return float("nan")
    from scipy.stats import spearmanr

    return float(spearmanr(j, h).statistic)


def _kendall(j: np.ndarray, h: np.ndarray) -> float:
    if _constant(j) or _constant(h):
        return float("nan")
    from scipy.stats import kendalltau

    return float(kendalltau(j, h).statistic)


def _tied_pairs(x: np.ndarray) -> int:
    _, counts = np.unique(x, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def pair_counts(judge: ArrayLike, human: ArrayLike) -> tuple[float, int]:
    """``(S, P)`` over all pairs of one group: ``P`` pairs with different human grades and
    ``S = C − D``, the sum of sign(Δhuman)·sign(Δjudge) over them.

    Computed in O(n log n) from Kendall's τ-b: ``S = τ_b · sqrt((P0 − T_h)(P0 − T_j))`` and
    ``P = P0 − T_h`` (pairs tied in both grades add 0 to S), so large groups stay cheap.
    """
    j, h = _pair(judge, human)
    return _pair_counts(j, h)


def _pair_counts(j: np.ndarray, h: np.ndarray) -> tuple[float, int]:
    n = j.size
    total = n * (n - 1) // 2
    untied_h = total - _tied_pairs(h)
    if untied_h == 0:
        return 0.0, 0
    untied_j = total - _tied_pairs(j)
    if untied_j == 0:
        return 0.0, untied_h  # the judge ties every pair: each counts one half
    tau = _kendall(j, h)
    return float(tau * np.sqrt(float(untied_h) * float(untied_j))), untied_h


def pairwise_accuracy(
    judge: ArrayLike, human: ArrayLike, groups: Sequence[Hashable | None] | None = None
) -> float:
    """Share of same-group pairs with different human grades that the judge orders alike
    (judge ties count one half); NaN when there is no such pair. See the module docstring."""
    j, h = _pair(judge, human)
    keys = _group_index(groups, j.size)
    s, p = _grouped_counts(j, h, keys)
    return float(0.5 + s.sum() / (2 * p.sum())) if p.sum() else float("nan")


def _group_index(groups: Sequence[Hashable | None] | None, n: int) -> np.ndarray:
    if groups is None:
        return np.zeros(n, dtype=np.int64)
    if len(groups) != n:
        raise ValueError(f"groups must have one entry per item, got {len(groups)} for {n} items")
    codes: dict[Hashable | None, int] = {}
    return np.array([codes.setdefault(g, len(codes)) for g in groups], dtype=np.int64)


def _grouped_counts(j: np.ndarray, h: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group (by code), the pair counts ``S`` and ``P``."""
    count = int(keys.max()) + 1 if keys.size else 0
    s, p = np.zeros(count), np.zeros(count)
    order = np.argsort(keys, kind="stable")
    bounds = np.flatnonzero(np.diff(keys[order])) + 1
    for members in np.split(order, bounds):
        if members.size >= 2:
            g = keys[members[0]]
            s[g], p[g] = _pair_counts(j[members], h[members])
    return s, p


def calibration_table(judge: ArrayLike, human: ArrayLike) -> tuple[CalibrationRow, ...]:
    """For each distinct human grade, ascending: its item count and the judge's mean score."""
    j, h = _pair(judge, human)
    return tuple(CalibrationRow.of(grade, j[h == grade]) for grade in np.unique(h))


def agreement(
    judge: ArrayLike,
    human: ArrayLike,
    groups: Sequence[Hashable | None] | None = None,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> Agreement:
    """Spearman's ρ, Kendall's τ-b and pairwise accuracy with bootstrap CIs, and the calibration table.

    ``judge`` and ``human`` hold the scored items only (no NaN); ``groups`` gives each item's group
    (None: ungrouped). The bootstrap resamples whole groups when there is more than one, items
    otherwise; intervals are the ``(1 − confidence)/2`` and ``(1 + confidence)/2`` percentiles.
    """
    j, h = _pair(judge, human)
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    keys = _group_index(groups, j.size)
    s, p = _grouped_counts(j, h, keys) if j.size else (np.zeros(0), np.zeros(0))
    point = (_spearman(j, h), _kendall(j, h), float(0.5 + s.sum() / (2 * p.sum())) if p.sum() else float("nan"))
    rng = np.random.default_rng(seed)
    draws = np.full((resamples, 3), np.nan)
    clusters = [np.flatnonzero(keys == g) for g in range(s.size)]
    if j.size >= 2:
        for r in range(resamples):
            if len(clusters) > 1:
                picked = rng.integers(0, len(clusters), len(clusters))
                idx = np.concatenate([clusters[g] for g in picked])
                ss, pp = s[picked].sum(), p[picked].sum()
            else:
                idx = rng.integers(0, j.size, j.size)
                ss, pp = _pair_counts(j[idx], h[idx])
            draws[r] = (_spearman(j[idx], h[idx]), _kendall(j[idx], h[idx]), 0.5 + ss / (2 * pp) if pp else np.nan)
    estimates = [Estimate.from_draws(value, draws[:, k], confidence) for k, value in enumerate(point)]
    return Agreement(
        n=int(j.size),
        spearman=estimates[0],
        kendall=estimates[1],
        pairwise_accuracy=estimates[2],
        pairs=int(p.sum()),
        groups=int(np.count_nonzero(p)),
        calibration=calibration_table(j, h) if j.size else (),
        resamples=resamples,
        seed=seed,
        confidence=confidence,
    )
