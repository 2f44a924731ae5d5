"""NaN-aware means, the top-fraction mean and the paired comparison."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from pytest_novelty.metrics import mean_excluding_nan, paired_test, top_fraction_mean

values_strategy = st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=60)
fractions = st.floats(min_value=1e-3, max_value=1.0, exclude_min=False)


# mean_excluding_nan


def test_mean_excluding_nan_counts_what_it_leaves_out() -> None:
    summary = mean_excluding_nan([1.0, math.nan, 3.0, math.nan])
    assert (summary.mean, summary.count, summary.excluded) == (2.0, 2, 2)


def test_mean_excluding_nan_all_nan() -> None:
    summary = mean_excluding_nan([math.nan, math.nan])
    assert math.isnan(summary.mean)
    assert (summary.count, summary.excluded) == (0, 2)


@pytest.mark.parametrize(("values", "message"), [([], "empty"), ([[1.0, 2.0]], "one-dimensional")])
def test_mean_excluding_nan_rejects(values: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mean_excluding_nan(values)


# top_fraction_mean


def test_top_tenth_of_thirty_is_three_values() -> None:
    # 0.1 × 30 is 3.0000000000000004 in floating point; the top 10 % of 30 values is still 3 values.
    assert top_fraction_mean(list(range(30)), 0.1) == 28.0


def test_top_fraction_rounds_up() -> None:
    assert top_fraction_mean([1.0, 2.0, 3.0, 4.0, 5.0], 0.1) == 5.0
    assert top_fraction_mean([1.0, 2.0, 3.0, 4.0, 5.0], 0.5) == 4.0


def test_top_fraction_leaves_out_nan() -> None:
    assert top_fraction_mean([math.nan, 1.0, 9.0, math.nan], 0.5) == 9.0
    assert math.isnan(top_fraction_mean([math.nan, math.nan]))


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5, math.nan, "0.1"])
def test_top_fraction_rejects_fraction(fraction: object) -> None:
    with pytest.raises(ValueError, match="fraction"):
        top_fraction_mean([1.0, 2.0], fraction)  # type: ignore[arg-type]


def test_top_fraction_rejects_empty() -> None:
    with pytest.raises(ValueError, match="empty"):
        top_fraction_mean([])


@given(values_strategy, fractions)
def test_top_fraction_between_mean_and_max(values: list[float], fraction: float) -> None:
    result = top_fraction_mean(values, fraction)
    assert np.mean(values) - 1e-6 <= result <= max(values) + 1e-6


@given(values_strategy)
def test_top_fraction_one_is_the_mean(values: list[float]) -> None:
    assert top_fraction_mean(values, 1.0) == pytest.approx(float(np.mean(values)), rel=1e-12, abs=1e-9)


@given(values_strategy, fractions, st.randoms(use_true_random=False))
def test_top_fraction_ignores_order(values: list[float], fraction: float, rng) -> None:
    shuffled = list(values)
    rng.shuffle(shuffled)
    assert top_fraction_mean(shuffled, fraction) == top_fraction_mean(values, fraction)


@given(values_strategy, fractions, fractions)
def test_top_fraction_shrinks_as_the_fraction_grows(values: list[float], a: float, b: float) -> None:
    small, large = sorted((a, b))
    assert top_fraction_mean(values, small) >= top_fraction_mean(values, large) - 1e-6


# paired_test


def test_paired_test_agrees_with_scipy() -> None:
    rng = np.random.default_rng(1)
    a = rng.normal(size=40)
    b = a + rng.normal(0.2, 1.0, size=40)
    result = paired_test(a, b, n_boot=2000)
    assert result.difference == pytest.approx(float(np.mean(b - a)))
    assert result.p_value == pytest.approx(float(scipy_stats.ttest_rel(b, a).pvalue), rel=1e-12)
    assert result.ci_low < result.difference < result.ci_high
    assert (result.n, result.dropped, result.n_boot, result.confidence) == (40, 0, 2000, 0.95)


def test_paired_test_is_seeded() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=30), rng.normal(size=30)
    assert paired_test(a, b, n_boot=500, seed=7) == paired_test(a, b, n_boot=500, seed=7)


def test_paired_test_drops_nan_pairs() -> None:
    result = paired_test([1.0, math.nan, 3.0, 4.0], [2.0, 5.0, math.nan, 6.0], n_boot=200)
    assert (result.n, result.dropped) == (2, 2)
    assert result.difference == pytest.approx(1.5)


def test_paired_test_constant_shift_is_certain() -> None:
    result = paired_test([1.0, 2.0, 3.0], [3.0, 4.0, 5.0], n_boot=200)
    assert (result.difference, result.p_value, result.ci_low, result.ci_high) == (2.0, 0.0, 2.0, 2.0)


def test_paired_test_single_pair() -> None:
    assert paired_test([1.0], [1.0], n_boot=10).p_value == 1.0
    assert math.isnan(paired_test([1.0], [2.0], n_boot=10).p_value)


@pytest.mark.parametrize(
    ("a", "b", "options", "message"),
    [
        ([1.0, 2.0], [1.0], {}, "paired"),
        ([math.nan], [1.0], {}, "no pair"),
        ([], [], {}, "empty"),
        ([1.0], [1.0], {"n_boot": 0}, "n_boot"),
        ([1.0], [1.0], {"confidence": 1.0}, "confidence"),
        ([1.0], [1.0], {"confidence": 0.0}, "confidence"),
    ],
)
def test_paired_test_rejects(a: list, b: list, options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        paired_test(a, b, **options)


@settings(max_examples=50)
@given(values_strategy)
def test_paired_test_identical_inputs(values: list[float]) -> None:
    result = paired_test(values, values, n_boot=100)
    assert (result.difference, result.p_value, result.ci_low, result.ci_high) == (0.0, 1.0, 0.0, 0.0)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(min_value=20, max_value=80),
    st.floats(min_value=0.5, max_value=5.0),
    st.integers(min_value=0, max_value=2**32 - 1),
)
def test_paired_test_detects_a_shift(n: int, shift: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.0, 10.0, size=n)
    b = a + shift + rng.normal(0.0, 0.1, size=n)
    result = paired_test(a, b, n_boot=500, seed=seed)
    assert result.p_value < 0.05
    assert 0.0 < result.ci_low <= result.difference <= result.ci_high
    assert paired_test(b, a, n_boot=500, seed=seed).difference == pytest.approx(-result.difference)
