"""Agreement between a judge's scores and human grades of the same items.

A quality judge is only worth gating on if it ranks responses as people do. From the judge's scores
``j`` and the human grades ``h`` (any numeric scale) of the items it could score:

* **Spearman's ρ**: the Pearson correlation of the ranks (ties get their mean rank), as
  :func:`scipy.stats.spearmanr` computes it.
* **Kendall's τ-b**: ``(C − D) / sqrt((P0 − T_h)(P0 − T_j))`` over all ``P0 = n(n−1)/2`` pairs, ``C``/``D``
  the concordant/discordant pairs and ``T_h``/``T_j`` the pairs tied in ``h``/``j``, as
  :func:`scipy.stats.kendalltau` computes it.
* **Pairwise ranking accuracy**: over the pairs *of one group* (the same prompt) whose human grades
  differ, the share the judge orders alike; a judge tie counts one half, pairs people tie are left
  out: ``accuracy = (C + T/2) / P = 1/2 + (C − D) / (2P)``, 0.5 chance, 1 perfect. Items without a
  group form one group together.

Each comes with a **percentile bootstrap** interval over ``resamples`` resamples seeded with
``seed``, of items, or of whole groups when there are several (items of one prompt are not
independent); a resample where a statistic is undefined is left out of its interval. The
**calibration table** gives, per human grade, the items and the judge's mean score: a trustworthy
judge's means rise with the grade.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from pytest_novelty.metrics._validate import as_vector, check_confidence, check_count

#: Bootstrap resamples drawn by :func:`agreement` unless told otherwise.
DEFAULT_RESAMPLES = 2000
#: Seed of the bootstrap's random generator unless told otherwise.
DEFAULT_SEED = 0


@dataclass(frozen=True)
class Estimate:
    """A statistic and its bootstrap confidence interval (NaN where undefined)."""

    value: float
    ci_low: float
    ci_high: float

    @classmethod
    def from_draws(cls, value: float, draws: np.ndarray, confidence: float) -> Estimate:
        """``value`` with the percentile interval of its ``draws`` (NaN left out; none, or a NaN value: NaN)."""
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
    count: int
    judge_mean: float


@dataclass(frozen=True)
class Agreement:
    """What :func:`agreement` measured, and the bootstrap settings it used."""

    n: int
    spearman: Estimate
    kendall: Estimate
    pairwise_accuracy: Estimate
    pairs: int
    """The counted pairs of the pairwise accuracy (same group, different human grades)."""
    groups: int
    """The groups those pairs came from."""
    calibration: tuple[CalibrationRow, ...]
    """One row per distinct human grade, ascending."""
    resamples: int
    seed: int
    confidence: float


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
    return _spearman(*_pair(judge, human))


def kendall(judge: ArrayLike, human: ArrayLike) -> float:
    """Kendall's τ-b of the judge scores and the human grades (NaN when either is constant or n < 2)."""
    return _kendall(*_pair(judge, human))


def _constant(*vectors: np.ndarray) -> bool:
    """Whether one of ``vectors`` has fewer than two values or one value only: no rank correlation."""
    return any(x.size < 2 or bool(np.all(x == x[0])) for x in vectors)


def _spearman(j: np.ndarray, h: np.ndarray) -> float:
    if _constant(j, h):
        return float("nan")
    from scipy.stats import spearmanr

    return float(spearmanr(j, h).statistic)


def _kendall(j: np.ndarray, h: np.ndarray) -> float:
    if _constant(j, h):
        return float("nan")
    from scipy.stats import kendalltau

    return float(kendalltau(j, h).statistic)


def _tied_pairs(x: np.ndarray) -> int:
    _, counts = np.unique(x, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def pair_counts(judge: ArrayLike, human: ArrayLike) -> tuple[float, int]:
    """``(S, P)`` over the pairs of one group: ``P`` pairs with different human grades and
    ``S = C − D``, in O(n log n) from Kendall's τ-b: ``S = τ_b · sqrt((P0 − T_h)(P0 − T_j))``,
    ``P = P0 − T_h``."""
    return _pair_counts(*_pair(judge, human))


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


def pairwise_accuracy(judge: ArrayLike, human: ArrayLike, groups: Sequence[Hashable | None] | None = None) -> float:
    """The pairwise ranking accuracy (module docstring); NaN when no pair counts."""
    j, h = _pair(judge, human)
    s, p = _grouped_counts(j, h, _group_index(groups, j.size))
    return _accuracy(s.sum(), p.sum())


def _accuracy(s: float, p: float) -> float:
    """1/2 + S / (2P) from the pairs' ``S = C − D`` and count ``P``; NaN when no pair counts."""
    return float(0.5 + s / (2 * p)) if p else float("nan")


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
    graded = ((float(grade), j[h == grade]) for grade in np.unique(h))
    return tuple(CalibrationRow(grade, int(scores.size), float(scores.mean())) for grade, scores in graded)


def agreement(
    judge: ArrayLike,
    human: ArrayLike,
    groups: Sequence[Hashable | None] | None = None,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> Agreement:
    """Spearman's ρ, Kendall's τ-b and pairwise accuracy with bootstrap intervals, and the calibration
    table (module docstring), of the scored items only (no NaN); ``groups`` by item (None: ungrouped)."""
    j, h = _pair(judge, human)
    check_count(resamples, "resamples")
    check_confidence(confidence)
    keys = _group_index(groups, j.size)
    s, p = _grouped_counts(j, h, keys) if j.size else (np.zeros(0), np.zeros(0))
    point = (_spearman(j, h), _kendall(j, h), _accuracy(s.sum(), p.sum()))
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
            draws[r] = (_spearman(j[idx], h[idx]), _kendall(j[idx], h[idx]), _accuracy(ss, pp))
    rho, tau, accuracy = (Estimate.from_draws(value, draws[:, k], confidence) for k, value in enumerate(point))
    table = calibration_table(j, h) if j.size else ()
    pairs, counted = int(p.sum()), int(np.count_nonzero(p))
    return Agreement(int(j.size), rho, tau, accuracy, pairs, counted, table, resamples, seed, confidence)
