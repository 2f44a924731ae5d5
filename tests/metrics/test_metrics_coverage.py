"""Saying little is not novel: too-short generations count as 0, and coverage@n / unscored are reported."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_novelty.metrics import novelty
from pytest_novelty.metrics.suite import suite_metrics

NAN = math.nan


def _metrics(quality: list[list[float]], orig: list[list[float]], **kwargs: object) -> dict[str, float]:
    q = np.array(quality, dtype=float)
    o = np.array(orig, dtype=float)
    values, _, _ = suite_metrics(
        quality=q,
        originality={4: o, 5: o},
        prompt_ids=[f"p{i}" for i in range(len(q))],
        metrics=list(kwargs.pop("metrics", [])),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )
    return values


def test_a_generation_too_short_for_n_counts_as_novelty_zero() -> None:
    # Nine answers too short for a 5-gram, one long and good one: the old mean over the long one
    # alone said 0.8; saying little must not score as novel.
    quality = [[0.8, 0.8]] + [[0.6, 0.6]] * 4
    orig = [[0.8, NAN]] + [[NAN, NAN]] * 4
    values = _metrics(quality, orig)
    assert values["novelty@5"] == pytest.approx(0.8 / 10)
    assert values["originality@5"] == pytest.approx(0.8 / 10)
    assert values["coverage@5"] == pytest.approx(0.1)
    # top 10 % of ten generations is the single best one, still 0.8: shown beside coverage.
    assert values["top10_novelty@5"] == pytest.approx(0.8)


def test_top10_counts_short_generations_in_its_denominator() -> None:
    # 20 generations, 2 long ones: the top 10 % is 2 values, so one short answer is not dropped out
    # of the count and the two best are the long ones.
    quality = [[0.9, 0.9]] * 10
    orig = [[0.5, 0.3]] + [[NAN, NAN]] * 9
    values = _metrics(quality, orig)
    best = novelty(np.array([0.9, 0.9]), np.array([0.5, 0.3]))
    assert values["top10_novelty@5"] == pytest.approx(float(best.mean()))
    # Make the long ones few enough that the top 10 % must include a short one (at 0).
    orig = [[0.5, NAN]] + [[NAN, NAN]] * 9
    values = _metrics(quality, orig)
    assert values["top10_novelty@5"] == pytest.approx(float(novelty(0.9, 0.5)) / 2)


def test_unscored_answers_are_left_out_and_counted() -> None:
    quality = [[0.5, NAN], [NAN, NAN]]
    orig = [[0.5, 0.4], [0.2, NAN]]
    values = _metrics(quality, orig)
    assert values["quality"] == pytest.approx(0.5)
    assert values["unscored"] == pytest.approx(0.75)
    # The one scored answer counts; the unscored answer too short for an n-gram is 0 anyway.
    assert values["novelty@5"] == pytest.approx((0.5 + 0.0) / 2)
    assert values["coverage@5"] == pytest.approx(0.75)


def test_gated_novelty_and_shares_elementwise() -> None:
    from pytest_novelty.metrics import coverage, gated_novelty, originality_counting_short, unscored_share

    q = np.array([0.5, NAN, 0.5, NAN])
    o = np.array([NAN, NAN, 0.5, 0.5])
    assert gated_novelty(q, o).tolist()[:3] == [0.0, 0.0, 0.5]
    assert math.isnan(gated_novelty(q, o)[3])
    assert originality_counting_short(o).tolist() == [0.0, 0.0, 0.5, 0.5]
    assert coverage(o) == 0.5
    assert unscored_share(q) == 0.5
    assert math.isnan(coverage(np.array([])))


def test_q_at_tail_ranks_prompts_whose_outputs_are_all_too_short() -> None:
    # p0's outputs have no 4-gram: they count as output novelty 0, so p0 is ranked (peak), not dropped.
    quality = [[0.1, 0.1], [0.9, 0.9], [0.5, 0.5], [0.6, 0.6]]
    orig = [[NAN, NAN], [0.9, 0.9], [0.5, 0.5], [0.6, 0.6]]
    values, _, tails = suite_metrics(
        quality=np.array(quality),
        originality={4: np.array(orig)},
        prompt_ids=["p0", "p1", "p2", "p3"],
        metrics=["q_at_tail@0.25"],
        prompt_novelty=np.array([0.5, 0.5, 0.5, 0.5]),
    )
    assert tails["q_at_tail@0.25"] == ["p1"]
    assert values["novelty_at_peak@0.25"] == pytest.approx(0.0)  # p0, the most common, at 0
    assert values["novelty_overall"] == pytest.approx((0.0 + 0.9 + 0.5 + 0.6) / 4)
