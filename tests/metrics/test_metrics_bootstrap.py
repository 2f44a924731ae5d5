"""The paired bootstrap the gate's significance test runs: of a mean, or of the top-10 % statistic."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_novelty.metrics import top_fraction_mean


def test_the_top_fraction_bootstrap_resamples_the_statistic_itself() -> None:
    from pytest_novelty.metrics.paired import paired_bootstrap

    rng = np.random.default_rng(0)
    a = rng.uniform(0.2, 0.6, size=(30, 3))
    b = a.copy()
    b[:9, 0] = 0.99  # only the best generations change
    test = paired_bootstrap(a, b, top_fraction=0.1, n_boot=2000)
    assert test.difference == pytest.approx(top_fraction_mean(b.ravel(), 0.1) - top_fraction_mean(a.ravel(), 0.1))
    assert test.statistic == "top 10 %" and test.ci_low > 0 and test.excludes_zero()
    assert test.p_value < 0.01


def test_the_mean_bootstrap_drops_pairs_with_a_missing_value_and_agrees_with_its_p() -> None:
    from pytest_novelty.metrics.paired import paired_bootstrap

    rng = np.random.default_rng(1)
    a = rng.uniform(size=40)
    b = a + rng.normal(0.0, 0.2, size=40)
    a[5] = np.nan
    test = paired_bootstrap(a, b, n_boot=4000, confidence=0.9)
    assert test.n == 39 and test.statistic == "mean"
    assert test.difference == pytest.approx(float(np.nanmean(b - a)))
    assert test.ci_low < test.difference < test.ci_high
    assert test.excludes_zero() == (test.p_value < 0.1)


def test_the_paired_statistic_is_the_gated_change_on_the_data_with_its_range_and_standard_error() -> None:
    from pytest_novelty.metrics.bootstrap import Linearised, linearised_se
    from pytest_novelty.metrics.paired import paired_statistic

    a, b = np.array([0.2, 0.5, np.nan, 0.4]), np.array([0.3, 0.4, 0.9, 0.8])
    mean = paired_statistic(a, b)
    ones = np.ones((1, mean.n))
    assert (mean.name, mean.n, mean.bounds) == ("mean", 3, pytest.approx((-0.1, 0.4)))
    assert mean.statistic(ones)[0] == pytest.approx(np.mean([0.1, -0.1, 0.4]))
    rows_a, rows_b = np.array([[0.1, 0.9], [0.3, 0.2]]), np.array([[0.5, 0.6], [0.8, 0.1]])
    top = paired_statistic(rows_a, rows_b, 0.5)
    assert (top.name, top.n, top.bounds) == ("top 50 %", 2, pytest.approx((0.1 - 0.9, 0.8 - 0.1)))
    assert top.statistic(np.ones((1, 2)))[0] == pytest.approx(
        top_fraction_mean(rows_b.ravel(), 0.5) - top_fraction_mean(rows_a.ravel(), 0.5))
    for paired in (mean, top):  # both are linearised: a look of the sequential rule can take their SE
        assert isinstance(paired.statistic, Linearised)
        weights = np.ones((1, paired.n))
        assert linearised_se(paired.statistic.linearised(weights)[1], weights)[0] > 0


@pytest.mark.parametrize(
    ("a", "b", "kwargs", "words"),
    [
        ([0.1], [0.2], {}, "at least two prompts"),
        ([0.1, 0.2], [0.2, 0.3, 0.4], {}, "paired by prompt"),
        ([0.1, 0.2], [0.2, 0.3], {"top_fraction": 0.1}, "prompts × samples"),
        ([0.1, 0.2], [0.2, 0.3], {"confidence": 1.0}, "confidence"),
    ],
)
def test_bad_bootstrap_input_is_refused(a: list[float], b: list[float], kwargs: dict[str, float], words: str) -> None:
    from pytest_novelty.metrics.paired import paired_bootstrap

    with pytest.raises(ValueError, match=words):
        paired_bootstrap(a, b, **kwargs)  # type: ignore[arg-type]


def test_on_ten_pairs_the_default_interval_is_the_paired_t_interval() -> None:
    # A q@Tail tail is ten prompts. The percentile interval of the resampled mean is too narrow
    # there (its spread is √(9/10) of the standard error and its tails normal, not t); the default
    # is Student's t on the bootstrap standard error, i.e. the paired t interval.
    from scipy import stats

    from pytest_novelty.metrics.paired import paired_bootstrap

    rng = np.random.default_rng(11)
    a = rng.uniform(0.3, 0.7, size=10)
    b = a + rng.normal(0.0, 0.08, size=10)
    d = b - a
    half = stats.t.ppf(0.975, 9) * d.std(ddof=1) / math.sqrt(10)
    test = paired_bootstrap(a, b)
    assert test.method == "t"
    assert test.ci_low == pytest.approx(d.mean() - half, abs=0.03 * half)
    assert test.ci_high == pytest.approx(d.mean() + half, abs=0.03 * half)
    assert test.p_value == pytest.approx(stats.ttest_rel(b, a).pvalue, rel=0.05)
    old = paired_bootstrap(a, b, method="percentile")
    assert old.ci_high - old.ci_low < 0.9 * (test.ci_high - test.ci_low)


def test_the_t_verdict_and_its_p_value_always_agree() -> None:
    from pytest_novelty.metrics.paired import paired_bootstrap

    for seed in range(60):
        rng = np.random.default_rng(seed)
        a = rng.uniform(size=12)
        b = a - 0.05 + rng.normal(0.0, 0.1, size=12)
        test = paired_bootstrap(a, b, n_boot=500, confidence=0.9)
        assert test.excludes_zero() == (test.p_value < 0.1), seed
    rows = rng.uniform(size=(30, 2))
    top = paired_bootstrap(rows, rows - 0.05, top_fraction=0.1, n_boot=500)
    assert top.method == "t" and top.ci_high < 0 and top.p_value < 0.05


def test_an_unknown_comparison_method_is_refused() -> None:
    from pytest_novelty.metrics.paired import paired_bootstrap

    with pytest.raises(ValueError, match="method must be one of"):
        paired_bootstrap([0.1, 0.2], [0.2, 0.3], method="bca")


def test_holm_rejects_step_down_and_adjusts_the_p_values() -> None:
    from pytest_novelty.metrics.stats import holm, holm_adjusted

    p = [0.01, 0.04, 0.03, 0.005]
    # Sorted: 0.005 ≤ 0.05/4, 0.01 ≤ 0.05/3, 0.03 > 0.05/2: stop; 0.04 is not rejected either.
    assert holm(p, 0.05) == [True, False, False, True]
    assert holm_adjusted(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.001, math.nan], 0.05) == [True, False]  # no test: never rejected, still counted
    assert holm_adjusted([0.001, math.nan])[0] == pytest.approx(0.002)
    assert holm([], 0.05) == []
    bonferroni = [x * len(p) <= 0.05 for x in p]
    assert sum(holm(p, 0.05)) >= sum(bonferroni)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.5], 0.05)
