"""NoveltyBench's mapping from a reward model's raw reward to its 1-10 scale (used by the reward: judge)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_novelty.scoring.judges.reward_scale import NOVELTYBENCH_REWARD_THRESHOLDS, reward_to_utility


def test_reward_table() -> None:
    thresholds = NOVELTYBENCH_REWARD_THRESHOLDS
    assert len(thresholds) == 9
    assert reward_to_utility(-100.0) == 1
    assert reward_to_utility(0.0) == 10
    for index, threshold in enumerate(thresholds):
        # Exactly on a threshold: that threshold is not strictly below, so the lower score.
        assert reward_to_utility(threshold) == index + 1
        assert reward_to_utility(math.nextafter(threshold, math.inf)) == index + 2
        assert reward_to_utility(math.nextafter(threshold, -math.inf)) == index + 1


@given(st.floats(min_value=-20.0, max_value=5.0))
def test_reward_counts_thresholds_strictly_below(reward: float) -> None:
    below = sum(1 for threshold in NOVELTYBENCH_REWARD_THRESHOLDS if threshold < reward)
    assert reward_to_utility(reward) == 1 + below


def test_reward_with_custom_thresholds() -> None:
    assert reward_to_utility(0.5, thresholds=(0.0, 1.0)) == 2
    assert reward_to_utility(1, thresholds=(0.0, 1.0)) == 2


@pytest.mark.parametrize(
    ("reward", "thresholds", "message"),
    [
        (math.nan, NOVELTYBENCH_REWARD_THRESHOLDS, "finite"),
        (math.inf, NOVELTYBENCH_REWARD_THRESHOLDS, "finite"),
        ("high", NOVELTYBENCH_REWARD_THRESHOLDS, "number"),
        (0.0, (1.0, 0.0), "sorted"),
        (0.0, (), "empty"),
    ],
)
def test_reward_rejects(reward: object, thresholds: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        reward_to_utility(reward, thresholds)  # type: ignore[arg-type]
