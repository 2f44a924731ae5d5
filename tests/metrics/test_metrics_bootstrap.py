"""The paired bootstrap the gate's significance test runs: of a mean, or of the top-10 % statistic."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_novelty.metrics import top_fraction_mean


def test_the_top_fraction_bootstrap_resamples_the_statistic_itself() -> None:
    from pytest_novelty.metrics.stats import _top_rows, paired_bootstrap

    rng = np.random.default_rng(0)
    values = rng.uniform(size=(6, 23))
    values[0, :7] = np.nan
    values[3, :] = np.nan
    expected = [top_fraction_mean(row, 0.1) if np.any(~np.isnan(row)) else math.nan for row in values]
    np.testing.assert_allclose(_top_rows(values, 0.1), expected)

    a = rng.uniform(0.2, 0.6, size=(30, 3))
    b = a.copy()
    b[:9, 0] = 0.99  # only the best generations change
    test = paired_bootstrap(a, b, top_fraction=0.1, n_boot=2000)
    assert test.difference == pytest.approx(top_fraction_mean(b.ravel(), 0.1) - top_fraction_mean(a.ravel(), 0.1))
    assert test.statistic == "top 10 %" and test.ci_low > 0 and test.excludes_zero()
    assert test.p_value < 0.01


def test_the_mean_bootstrap_drops_pairs_with_a_missing_value_and_agrees_with_its_p() -> None:
    from pytest_novelty.metrics.stats import paired_bootstrap

    rng = np.random.default_rng(1)
    a = rng.uniform(size=40)
    b = a + rng.normal(0.0, 0.2, size=40)
    a[5] = np.nan
    test = paired_bootstrap(a, b, n_boot=4000, confidence=0.9)
    assert test.n == 39 and test.statistic == "mean"
    assert test.difference == pytest.approx(float(np.nanmean(b - a)))
    assert test.ci_low < test.difference < test.ci_high
    assert test.excludes_zero() == (test.p_value < 0.1)


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
    from pytest_novelty.metrics.stats import paired_bootstrap

    with pytest.raises(ValueError, match=words):
        paired_bootstrap(a, b, **kwargs)  # type: ignore[arg-type]
