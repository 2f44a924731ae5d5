"""The paired sign-flip test: exact on few prompts, its interval agrees with its p-value, and the
gate says when a suite has too few prompts to show any change."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pytest_novelty.gate.regression import MetricRecord, compare
from pytest_novelty.metrics.sign_flip import mean_change, paired_sign_flip, smallest_p, top_fraction_change


def test_on_few_prompts_every_swap_is_taken_and_p_is_exact() -> None:
    d = np.array([-0.8, -0.5, -0.9, -0.1, 0.2, -0.7, -0.3])
    # Brute force: the share of the 2⁷ sign patterns whose mean is at most the data's, doubled.
    means = [np.mean(d * np.array(s)) for s in itertools.product((-1, 1), repeat=d.size)]
    expected = min(1.0, 2 * sum(m <= d.mean() + 1e-12 for m in means) / len(means))
    estimate, _, _, p = mean_change(d, n_flips=10_000, seed=5)
    assert estimate == pytest.approx(d.mean()) and p == pytest.approx(expected)
    assert mean_change(d, seed=99)[3] == p  # no Monte-Carlo error: the seed changes nothing


def test_the_interval_excludes_zero_exactly_when_p_is_at_most_its_level() -> None:
    rng = np.random.default_rng(0)
    seen = set()
    for shift in np.linspace(-0.6, 0.6, 25):
        d = rng.normal(shift, 1.0, 40)
        _, low, high, p = mean_change(d, n_flips=4000, seed=1, confidence=0.95)
        assert (low > 0 or high < 0) == (p <= 0.05), (shift, low, high, p)
        assert low <= d.mean() <= high
        seen.add(p <= 0.05)
    assert seen == {True, False}


def test_the_interval_of_a_mean_matches_the_t_interval_on_normal_data() -> None:
    d = np.random.default_rng(2).normal(0.3, 1.0, 200)
    _, low, high, _ = mean_change(d, n_flips=20_000, seed=3)
    half = 1.972 * d.std(ddof=1) / math.sqrt(d.size)
    assert low == pytest.approx(d.mean() - half, abs=0.02) and high == pytest.approx(d.mean() + half, abs=0.02)


def test_a_top_fraction_change_is_found_and_bounded() -> None:
    rng = np.random.default_rng(4)
    a = rng.random((60, 3))
    worse = paired_sign_flip(a, a - 0.1, top_fraction=0.1, n_flips=2000)
    assert worse.difference == pytest.approx(-0.1) and worse.ci_high < 0 < worse.ci_high + 0.2
    same = top_fraction_change(a, a + rng.normal(0, 0.01, a.shape), 0.1, n_flips=2000)
    assert same[1] < 0 < same[2] and same[3] > 0.05


def test_six_prompts_can_show_no_change_at_the_gate_s_alpha_and_the_gate_says_so() -> None:
    assert smallest_p(6) == pytest.approx(2 / 64) and smallest_p(30) == pytest.approx(2 / 10_001)
    ids = [f"p{i}" for i in range(6)]
    accepted = MetricRecord(suite="s", metric="quality", value=0.9, higher_is_better=True,
                            per_prompt=dict.fromkeys(ids, 0.9))  # fmt: skip
    candidate = MetricRecord(suite="s", metric="quality", value=0.1, higher_is_better=True,
                             per_prompt=dict.fromkeys(ids, 0.1))  # fmt: skip
    found = compare(accepted, candidate, alpha=0.025)
    assert found.status == "not_significant" and found.p_value == pytest.approx(2 / 64)
    assert "6 paired prompts can give no p-value below 0.0312" in found.message
    assert compare(accepted, candidate, alpha=0.05).status == "regressed"  # 0.031 is within 0.05


def test_a_draw_equal_to_the_data_counts_whatever_the_order_of_its_sum() -> None:
    """Twelve equal drops: only the identity swap reaches the data's mean, so p = 2/2¹², never 0
    (the identity's product-sum may differ from the data's mean in its last bit)."""
    d = np.full(12, -0.8333333333333334) + np.array([0.0, 1e-17] * 6)
    assert mean_change(d)[3] == pytest.approx(2 / 4096)
