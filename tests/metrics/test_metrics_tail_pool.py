"""The pool ranking a tail is built from: the paper's score, NaNs, ties, and members that disagree."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pytest_novelty.metrics.tail import peak_prompts, prompt_scores, tail_prompts
from pytest_novelty.metrics.tail_pool import (
    DISAGREEING_TAU,
    disagreements,
    member_agreement,
    rank_pool,
    tail_overlap,
)

NAN = float("nan")


def _pool(seed: int, prompts: int = 40, members: int = 3) -> tuple[list[str], np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    ids = [f"p{i:02d}" for i in range(prompts)]
    own = rng.random(prompts)
    outputs = [rng.random((prompts, 2)) for _ in range(members)]
    outputs[0][prompts // 2] = NAN  # too short for a 4-gram: output novelty 0
    return ids, own, outputs


def test_the_ranking_is_prompt_scores_on_the_members_means() -> None:
    ids, own, outputs = _pool(0)
    ranking = rank_pool(ids, own, outputs)
    means = [np.nan_to_num(o).mean(axis=1) for o in outputs]
    expected = prompt_scores(own, [[m[j] for m in means] for j in range(len(ids))])
    np.testing.assert_array_equal(ranking.scores, expected)
    assert ranking.tail(0.1) == tail_prompts(ids, expected, 0.1)
    assert ranking.peak(0.1) == peak_prompts(ids, expected, 0.1)
    assert ranking.member_novelty[0, 20] == 0.0


def test_every_member_weighs_alike_whatever_its_samples() -> None:
    ids = ["a", "b"]
    # One member wrote eight answers, the other two: the pool's novelty is the mean of the two members' means.
    many = np.array([[0.0] * 8, [1.0] * 8])
    few = np.array([[1.0, 1.0], [0.0, 0.0]])
    ranking = rank_pool(ids, [0.5, 0.5], [many, few])
    np.testing.assert_array_equal(ranking.pool_novelty, [0.5, 0.5])
    np.testing.assert_array_equal(ranking.scores, [0.5, 0.5])


def test_a_prompt_without_its_own_ngram_is_unranked_not_dropped_silently() -> None:
    ids, own, outputs = _pool(1, prompts=10)
    own[[2, 7]] = NAN
    ranking = rank_pool(ids, own, outputs)
    assert ranking.unranked == ("p02", "p07")
    assert len(ranking.ranked) == 8 and not {"p02", "p07"} & set(ranking.ranked)
    assert len(ranking.tail(0.25)) == 2  # ceil(0.25 × 8 ranked)


def test_ties_are_broken_by_id_and_counted_at_the_cut() -> None:
    ids = ["d", "c", "b", "a", "e"]
    outputs = [np.array([[0.5], [0.5], [0.5], [0.5], [0.1]])]
    ranking = rank_pool(ids, [0.5, 0.5, 0.5, 0.5, 0.1], outputs)
    assert ranking.ranked == ("a", "b", "c", "d", "e")
    assert ranking.tail(0.4) == ("a", "b")
    assert ranking.ties_at_cut(0.4) == 4  # a, b, c, d share the score the cut falls in
    assert ranking.ties_at_cut(0.2, end="peak") == 0  # e alone is the peak
    assert ranking.ties_at_cut(0.8) == 0  # the cut falls between d and e
    reordered = rank_pool(list(reversed(ids)), [0.1, 0.5, 0.5, 0.5, 0.5], [outputs[0][::-1]])
    assert reordered.tail(0.4) == ranking.tail(0.4)  # the order the prompts are listed in does not matter


def test_members_that_disagree_are_named_and_kept_in_the_pool() -> None:
    ids = [f"p{i}" for i in range(20)]
    rising = np.linspace(0.0, 1.0, 20)[:, None]
    ranking = rank_pool(ids, np.full(20, 0.5), [rising, rising[::-1], rising + 0.0])
    pairs = {(i, j): tau for i, j, tau in member_agreement(ranking)}
    assert pairs[(0, 2)] == pytest.approx(1.0) and pairs[(0, 1)] == pytest.approx(-1.0)
    assert pairs[(0, 1)] == pytest.approx(stats.kendalltau(rising[:, 0], rising[::-1, 0]).statistic)
    found = disagreements(ranking, 0.1, ["up", "down", "again"])
    assert any(f.startswith("up and down rank") and f"< {DISAGREEING_TAU:g}" in f for f in found)
    assert not any("up and again" in f for f in found)
    shares = tail_overlap(ranking, 0.1)
    assert shares[1] == 0.0 and shares[0] == 1.0  # the reversed member's own tail is the pool's peak
    assert any(f.startswith("down's own tail holds 0%") for f in found)
    # The pool still averages all three: two members that rise outvote the one that falls.
    assert ranking.tail(0.1) == ("p19", "p18")


def test_bad_input_names_the_argument() -> None:
    ids, own, outputs = _pool(2, prompts=5)
    with pytest.raises(ValueError, match="pool is empty"):
        rank_pool(ids, own, [])
    with pytest.raises(ValueError, match=r"members\[1\] has shape"):
        rank_pool(ids, own, [outputs[0], outputs[1][:3]])
    with pytest.raises(ValueError, match="unique"):
        rank_pool(["a", "a", "b", "c", "d"], own, outputs)
