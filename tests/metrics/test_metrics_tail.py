"""q@Tail(α): prompt scores, tail and peak selection, and the means over them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_novelty.metrics import (
    peak_prompts,
    prompt_scores,
    q_at_tail,
    tail_prompts,
)

# prompt_scores


def test_prompt_score_is_the_mean_of_prompt_and_pool_novelty() -> None:
    scores = prompt_scores([0.2, 0.8, 0.5], [[0.4, 0.6], [1.0], 0.1])
    np.testing.assert_allclose(scores, [0.35, 0.9, 0.3])


def test_prompt_score_leaves_unscored_pool_outputs_out() -> None:
    scores = prompt_scores([0.2, 0.2, math.nan], [[math.nan, 0.6], [math.nan], [0.5]])
    assert scores[0] == pytest.approx(0.4)
    assert math.isnan(scores[1]) and math.isnan(scores[2])


@pytest.mark.parametrize(
    ("prompts", "pool", "message"),
    [
        ([0.2, 0.3], [[0.5]], "pool_novelty has 1"),
        ([1.2], [[0.5]], "input_novelty must lie"),
        ([0.2], [[0.5, -0.5]], r"pool_novelty\[0\] must lie"),
        ([0.2], [[]], "empty"),
        ([], [], "empty"),
    ],
)
def test_prompt_scores_reject(prompts: list, pool: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        prompt_scores(prompts, pool)


# tail_prompts and peak_prompts


def test_tail_is_the_highest_scores_highest_first() -> None:
    ids = [f"p{index:02d}" for index in range(30)]
    scores = [index / 30 for index in range(30)]
    # ceil(0.1 × 30) = 3, not 4.
    assert tail_prompts(ids, scores, 0.1) == ("p29", "p28", "p27")
    assert peak_prompts(ids, scores, 0.1) == ("p00", "p01", "p02")


def test_tail_rounds_up() -> None:
    assert tail_prompts(["a", "b", "c"], [0.1, 0.9, 0.5], 0.1) == ("b",)
    assert tail_prompts(["a", "b", "c"], [0.1, 0.9, 0.5], 1.0) == ("b", "c", "a")


def test_ties_are_broken_by_id() -> None:
    ids = ["d", "b", "a", "c"]
    scores = [0.5, 0.5, 0.5, 0.5]
    assert tail_prompts(ids, scores, 0.5) == ("a", "b")
    # The peak is the same ranking read from the other end, so it does not overlap the tail.
    assert peak_prompts(ids, scores, 0.5) == ("d", "c")


@pytest.mark.parametrize(
    ("ids", "scores", "alpha", "message"),
    [
        (["a", "b"], [0.1], 0.5, "scores has 1"),
        (["a", "a"], [0.1, 0.2], 0.5, "unique"),
        (["a", "b"], [0.1, math.nan], 0.5, "NaN for prompts"),
        (["a", "b"], [0.1, 0.2], 0.0, "alpha"),
        (["a", "b"], [0.1, 0.2], 1.5, "alpha"),
        ([], [], 0.5, "empty"),
        ([1, 2], [0.1, 0.2], 0.5, "strings"),
    ],
)
def test_selection_rejects(ids: list, scores: list, alpha: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tail_prompts(ids, scores, alpha)


prompt_tables = st.dictionaries(
    st.text(alphabet="abcdefgh", min_size=1, max_size=4),
    st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]),  # few values, so ties are common
    min_size=1,
    max_size=40,
)
alphas = st.floats(min_value=0.01, max_value=1.0)


@given(prompt_tables, alphas, st.randoms(use_true_random=False))
def test_selection_is_stable_under_reordering(table: dict[str, float], alpha: float, rng) -> None:
    items = list(table.items())
    shuffled = list(items)
    rng.shuffle(shuffled)
    for select in (tail_prompts, peak_prompts):
        original = select([key for key, _ in items], [value for _, value in items], alpha)
        reordered = select([key for key, _ in shuffled], [value for _, value in shuffled], alpha)
        assert original == reordered


@given(prompt_tables, alphas)
def test_tail_holds_the_highest_scores(table: dict[str, float], alpha: float) -> None:
    ids, scores = list(table), list(table.values())
    tail = tail_prompts(ids, scores, alpha)
    # ceil(α·N): enough prompts to cover α·N, and one fewer would not.
    assert alpha * len(ids) - 1e-9 <= len(tail) < alpha * len(ids) + 1
    rest = [table[key] for key in ids if key not in tail]
    assert not rest or min(table[key] for key in tail) >= max(rest)
    peak = peak_prompts(ids, scores, alpha)
    if 2 * len(tail) <= len(ids):
        assert not set(tail) & set(peak)


# q_at_tail


def test_q_at_tail_from_a_mapping_and_from_an_array() -> None:
    quality = {"a": 0.2, "b": 0.9, "c": 0.4, "d": 0.6}
    assert q_at_tail(quality, ["b", "d"]) == pytest.approx(0.75)
    assert q_at_tail([0.2, 0.9, 0.4, 0.6], ["b", "d"], prompt_ids=["a", "b", "c", "d"]) == pytest.approx(0.75)


def test_q_at_tail_leaves_unscored_prompts_out() -> None:
    assert q_at_tail({"a": math.nan, "b": 0.5}, ["a", "b"]) == 0.5
    assert math.isnan(q_at_tail({"a": math.nan}, ["a"]))


@pytest.mark.parametrize(
    ("quality", "tail", "prompt_ids", "message"),
    [
        ({"a": 0.5}, ["b"], None, "no value for prompts"),
        ({"a": 0.5}, [], None, "empty"),
        ({"a": 0.5}, ["a", "a"], None, "unique"),
        ([0.5], ["a"], None, "pass prompt_ids"),
        ({"a": 0.5}, ["a"], ["a"], "do not pass prompt_ids"),
        ([0.5, 0.6], ["a"], ["a"], "prompt_ids has 1"),
        ({}, ["a"], None, "empty"),
    ],
)
def test_q_at_tail_rejects(quality: object, tail: list, prompt_ids: list | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        q_at_tail(quality, tail, prompt_ids=prompt_ids)  # type: ignore[arg-type]


def test_end_to_end_selection_and_scores() -> None:
    ids = ["common-1", "common-2", "rare-1", "rare-2"]
    scores = prompt_scores([0.1, 0.2, 0.9, 0.8], [[0.1, 0.1], [0.2], [0.7, 0.9], [0.6]])
    tail = tail_prompts(ids, scores, 0.5)
    peak = peak_prompts(ids, scores, 0.5)
    assert tail == ("rare-1", "rare-2")
    assert peak == ("common-1", "common-2")
    quality = dict(zip(ids, [0.9, 0.8, 0.3, 0.5], strict=True))
    assert q_at_tail(quality, tail) == pytest.approx(0.4)


@given(prompt_tables, alphas, st.randoms(use_true_random=False))
def test_q_at_tail_is_stable_under_reordering(table: dict[str, float], alpha: float, rng) -> None:
    ids = list(table)
    quality = {key: (index * 0.37) % 1.0 for index, key in enumerate(ids)}
    shuffled = list(ids)
    rng.shuffle(shuffled)
    tail = tail_prompts(ids, [table[key] for key in ids], alpha)
    tail_reordered = tail_prompts(shuffled, [table[key] for key in shuffled], alpha)
    first = q_at_tail(quality, tail)
    second = q_at_tail([quality[key] for key in shuffled], tail_reordered, prompt_ids=shuffled)
    assert first == pytest.approx(second, abs=1e-15)
