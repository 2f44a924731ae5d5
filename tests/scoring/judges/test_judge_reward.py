"""The reward: judge on tiny sequence classifiers built in the test (loading, batching, mapping)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.scoring.judges import DEFAULT_THRESHOLDS, JudgeItem, RewardJudge, open_judge
from pytest_novelty.scoring.judges.reward_scale import reward_to_utility
from tests.scoring.judges.judge_helpers import tiny_reward_model

ITEMS = [
    JudgeItem("open", "Name a colour.", "Blue."),
    JudgeItem("open", "Tell me a story about Lily and her kite " * 4, "Lily flew the kite and the story ends."),
    JudgeItem("open", "Why is the sky blue?", "Because of the way air scatters sunlight."),
]


@pytest.mark.parametrize(
    ("reward", "scale"),
    [
        (-9.0, 1),
        (-7.71875, 1),  # equal is not strictly below
        (-7.0, 2),
        (-6.0, 3),
        (-5.9, 4),
        (-5.0, 6),
        (-4.0, 8),
        (-2.046875, 9),
        (-2.0, 10),
        (3.0, 10),
    ],
)
def test_reward_mapping_used_by_the_judge(reward: float, scale: int) -> None:
    assert reward_to_utility(reward, DEFAULT_THRESHOLDS) == scale


@pytest.mark.parametrize(("reward", "scale"), [(-5.0, 6), (-3.0, 9)])
def test_known_reward_maps_to_the_scale(tmp_path: Path, reward: float, scale: int) -> None:
    model = tiny_reward_model(tmp_path / "rm", reward=reward)
    judge = open_judge(f"reward:{model}", cache_dir=tmp_path / "cache", batch_size=2, device="cpu")
    assert isinstance(judge, RewardJudge)
    assert judge.rewards(ITEMS) == [reward] * 3
    results = judge.score(ITEMS)
    assert [r.scores for r in results] == [(float(scale),)] * 3
    assert all(r.quality == pytest.approx(scale / 10) and r.judge == f"reward:{model}" for r in results)


def test_thresholds_are_configurable_and_rewards_cached(tmp_path: Path) -> None:
    model = tiny_reward_model(tmp_path / "rm", reward=-5.0)
    RewardJudge(str(model), cache_dir=tmp_path / "cache", device="cpu").score(ITEMS)
    shifted = tuple(t - 10 for t in DEFAULT_THRESHOLDS)
    judge = open_judge(f"reward:{model}", cache_dir=tmp_path / "cache", thresholds=shifted, device="cpu")
    assert judge.planned_calls(ITEMS) == 0  # type: ignore[attr-defined]
    assert [r.scores for r in judge.score(ITEMS)] == [(10.0,)] * 3
    assert judge._model is None  # type: ignore[attr-defined]  # answered from the cache
    with pytest.raises(ConfigError, match="9 ascending"):
        open_judge(f"reward:{model}", thresholds=(1.0, 2.0))


def test_batched_rewards_match_one_at_a_time(tmp_path: Path) -> None:
    model = tiny_reward_model(tmp_path / "random", reward=None)
    batched = RewardJudge(str(model), batch_size=3, device="cpu").rewards(ITEMS)
    alone = [RewardJudge(str(model), batch_size=1, device="cpu").rewards([item])[0] for item in ITEMS]
    assert batched == pytest.approx(alone, abs=1e-5)
    assert len(set(batched)) == 3  # the reward depends on the input


def test_chat_template_or_plain_text(tmp_path: Path) -> None:
    templated = RewardJudge(str(tiny_reward_model(tmp_path / "a", reward=-1.0)), device="cpu")
    templated._load()
    assert templated._format(ITEMS[0]) == ("user: Name a colour.\nassistant: Blue.\n", True)
    plain = RewardJudge(str(tiny_reward_model(tmp_path / "b", reward=-1.0, chat_template=None)), device="cpu")
    plain._load()
    assert plain._format(ITEMS[0]) == ("User: Name a colour.\n\nAssistant: Blue.", False)
    assert plain.rewards(ITEMS[:1]) == [-1.0]
