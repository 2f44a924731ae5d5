"""Agreement statistics: Spearman, Kendall, pairwise accuracy, bootstrap CIs, calibration table."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from pytest_novelty.metrics.agreement import (
    agreement,
    calibration_table,
    kendall,
    pair_counts,
    pairwise_accuracy,
    spearman,
)


def brute_accuracy(judge: np.ndarray, human: np.ndarray, groups: list[object]) -> float:
    """The definition, pair by pair: same group, human grades differ; a judge tie counts 1/2."""
    right = total = 0.0
    for a, b in itertools.combinations(range(len(judge)), 2):
        if groups[a] != groups[b] or human[a] == human[b]:
            continue
        total += 1
        if judge[a] == judge[b]:
            right += 0.5
        elif (judge[a] > judge[b]) == (human[a] > human[b]):
            right += 1
    return right / total if total else math.nan


@pytest.mark.parametrize("seed", range(5))
def test_correlations_match_scipy_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    judge = rng.integers(0, 5, 40) / 5
    human = rng.integers(1, 4, 40).astype(float)
    assert spearman(judge, human) == pytest.approx(spearmanr(judge, human).statistic)
    assert kendall(judge, human) == pytest.approx(kendalltau(judge, human).statistic)


@pytest.mark.parametrize("seed", range(8))
def test_pairwise_accuracy_matches_the_pair_by_pair_definition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 30
    judge = rng.integers(0, 4, n).astype(float)
    human = rng.integers(0, 3, n).astype(float)
    groups: list[object] = [None if i % 7 == 0 else f"p{i % 4}" for i in range(n)]
    assert pairwise_accuracy(judge, human, groups) == pytest.approx(brute_accuracy(judge, human, groups))
    everything: list[object] = [None] * n
    assert pairwise_accuracy(judge, human) == pytest.approx(brute_accuracy(judge, human, everything))


def test_pair_counts_of_a_judge_that_ties_everything_and_of_tied_humans() -> None:
    assert pair_counts([0.5, 0.5, 0.5], [1, 2, 3]) == (0.0, 3)
    assert pairwise_accuracy([0.5, 0.5, 0.5], [1, 2, 3]) == 0.5
    assert pair_counts([0.1, 0.9], [2, 2]) == (0.0, 0)
    assert math.isnan(pairwise_accuracy([0.1, 0.9], [2, 2]))
    assert pairwise_accuracy([0.9, 0.1, 0.5], [3, 1, 2]) == 1.0
    assert pairwise_accuracy([0.1, 0.9, 0.5], [3, 1, 2]) == 0.0


def test_agreement_point_values_intervals_and_reproducibility() -> None:
    rng = np.random.default_rng(3)
    human = rng.integers(0, 5, 120).astype(float)
    judge = human + rng.normal(0, 1.5, 120)
    groups = [f"q{i // 6}" for i in range(120)]
    first = agreement(judge, human, groups, resamples=300, seed=7)
    again = agreement(judge, human, groups, resamples=300, seed=7)
    other = agreement(judge, human, groups, resamples=300, seed=8)
    assert first == again and first.spearman.ci_low != other.spearman.ci_low
    assert first.n == 120 and first.groups == 20 and first.resamples == 300
    assert first.spearman.value == pytest.approx(spearmanr(judge, human).statistic)
    assert first.pairwise_accuracy.value == pytest.approx(brute_accuracy(judge, human, groups))
    for estimate in (first.spearman, first.kendall, first.pairwise_accuracy):
        assert estimate.ci_low < estimate.value < estimate.ci_high
    assert first.spearman.ci_low > 0.3  # a judge that tracks the grades is clearly positive


def test_an_unrelated_judge_has_an_interval_around_zero() -> None:
    rng = np.random.default_rng(11)
    result = agreement(rng.random(200), rng.integers(0, 3, 200), resamples=400)
    assert result.spearman.ci_low < 0 < result.spearman.ci_high
    assert result.pairwise_accuracy.ci_low < 0.5 < result.pairwise_accuracy.ci_high


def test_constant_judge_gives_undefined_correlations_not_zero() -> None:
    result = agreement([0.4] * 6, [1, 2, 3, 1, 2, 3], resamples=50)
    assert math.isnan(result.spearman.value) and math.isnan(result.spearman.ci_low)
    assert math.isnan(result.kendall.value)
    assert result.pairwise_accuracy.value == 0.5


def test_calibration_table_means_per_grade() -> None:
    rows = calibration_table([0.2, 0.4, 0.9, 0.7, 0.5], [1, 1, 3, 3, 2])
    assert [(r.human, r.count, round(r.judge_mean, 6)) for r in rows] == [(1, 2, 0.3), (2, 1, 0.5), (3, 2, 0.8)]


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="same length"):
        spearman([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="NaN"):
        agreement([1, math.nan], [1, 2])
    with pytest.raises(ValueError, match="one entry per item"):
        pairwise_accuracy([1, 2], [1, 2], ["a"])
    with pytest.raises(ValueError, match="resamples"):
        agreement([1, 2], [1, 2], resamples=0)
