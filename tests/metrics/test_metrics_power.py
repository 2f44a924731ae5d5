"""What a paired comparison can detect: the formula, its inverse, and the noise floor of one run."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pytest_novelty.metrics import power, top_fraction_mean


def test_the_detectable_effect_is_the_t_sample_size_formula() -> None:
    sd, n = 0.12, 40
    expected = (stats.t.ppf(0.975, n - 1) + stats.t.ppf(0.8, n - 1)) * sd / math.sqrt(n)
    assert power.detectable_effect(sd, n) == pytest.approx(expected)
    assert power.detectable_effect(sd, n, alpha=0.01) > expected  # stricter α: a larger effect
    assert power.detectable_effect(sd, n, power=0.9) > expected
    assert power.detectable_effect(sd, 4 * n) == pytest.approx(expected / 2, rel=0.02)  # about 1/√n
    assert power.detectable_effect(0.0, n) == 0.0
    assert math.isnan(power.detectable_effect(sd, 1)) and math.isnan(power.detectable_effect(math.nan, n))


def test_prompts_needed_is_the_smallest_n_whose_effect_reaches_the_tolerance() -> None:
    for sd, tolerance in ((0.1, 0.02), (0.3, 0.05), (0.05, 0.04)):
        n = power.prompts_needed(sd, tolerance)
        assert power.detectable_effect(sd, n) <= tolerance < power.detectable_effect(sd, n - 1)
    assert power.prompts_needed(0.0, 0.01) == 2
    assert power.prompts_needed(1.0, 1e-6, limit=1000) == 1000
    with pytest.raises(ValueError, match="effect must be positive"):
        power.prompts_needed(0.1, 0.0)


def test_the_noise_floor_is_the_within_prompt_variance_of_two_fresh_samples() -> None:
    rng = np.random.default_rng(4)
    prompt = rng.normal(0.0, 0.5, size=(4000, 1))  # a large prompt effect: it cancels in the pairing
    values = prompt + rng.normal(0.0, 0.1, size=(4000, 3))
    floor = power.resampling_sd(values)
    assert floor.basis == power.WITHIN and floor.prompts == 4000
    assert floor.sd == pytest.approx(math.sqrt(2 * 0.01 / 3), rel=0.03)  # √(2σ²/m)
    # A fresh sample of the same checkpoint on the same prompts: the observed paired sd agrees.
    again = prompt + rng.normal(0.0, 0.1, size=(4000, 3))
    assert power.paired_sd(values.mean(axis=1), again.mean(axis=1)) == pytest.approx(floor.sd, rel=0.05)


def test_one_value_per_prompt_gives_the_upper_bound_and_says_so() -> None:
    values = np.array([1.0, 2.0, 4.0, 3.0, np.nan])
    floor = power.resampling_sd(values)
    assert floor.basis == power.BETWEEN
    assert floor.sd == pytest.approx(math.sqrt(2) * np.std([1, 2, 4, 3], ddof=1))
    assert math.isnan(power.resampling_sd([0.3]).sd)


def test_a_run_without_variation_says_so() -> None:
    none_unscored = np.zeros((100, 2))
    found = power.detectable(none_unscored)
    assert (found.effect, found.basis) == (0.0, power.CONSTANT)
    # Every prompt constant within, but prompts differing: a real within-prompt floor of 0.
    assert power.resampling_sd(np.repeat([[0.2], [0.4]], 3, axis=1)).basis == power.WITHIN


def test_the_top_fraction_linearisation_averages_to_the_top_fraction_mean() -> None:
    values = np.random.default_rng(0).uniform(size=(100, 5))
    psi = power.top_fraction_influence(values, 0.1)
    assert float(psi.mean()) == pytest.approx(top_fraction_mean(values.ravel(), 0.1), abs=1e-12)
    assert power.detectable(values, top_fraction=0.1).sd == pytest.approx(power.resampling_sd(psi).sd)


def test_detectable_from_one_run_and_the_prompts_its_tolerance_needs() -> None:
    rng = np.random.default_rng(1)
    values = 0.5 + rng.normal(0.0, 0.2, size=(50, 1)) + rng.normal(0.0, 0.1, size=(50, 2))
    values[3] = np.nan  # a prompt with no value is not counted
    found = power.detectable(values)
    assert found.prompts == 49 and found.basis == power.WITHIN
    assert found.effect == pytest.approx(power.detectable_effect(found.sd, 49))
    needed = found.prompts_for(found.effect / 2)
    assert 3.5 * 49 < needed < 4.5 * 49  # half the effect needs about four times the prompts
    assert found.as_dict()["prompts"] == 49 and found.as_dict()["basis"] == power.WITHIN


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: power.detectable_effect(0.1, 10, alpha=0.0), "alpha"),
        (lambda: power.detectable_effect(0.1, 10, power=1.0), "power"),
        (lambda: power.detectable_effect(-0.1, 10), "sd must not be negative"),
        (lambda: power.paired_sd([1.0, 2.0], [1.0]), "paired"),
    ],
)
def test_bad_power_input_is_refused(call: object, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        call()  # type: ignore[operator]
