"""The judge's consistency with itself: the spread of its samples on one answer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_novelty.metrics.consistency import judge_consistency


def test_mean_sd_and_wide_share_of_the_samples() -> None:
    scores = [(3, 3, 3, 3, 3), (1, 4, 2, 3, 2), (4, 5, 4, 4, 5), (2,), ()]
    result = judge_consistency(scores)
    expected_sd = np.mean([0.0, np.std([1, 4, 2, 3, 2], ddof=1), np.std([4, 5, 4, 4, 5], ddof=1)])
    assert result.mean_sd == pytest.approx(expected_sd)
    assert result.wide_share == pytest.approx(1 / 3)  # only (1 .. 4) spans two points or more
    assert (result.answers, result.skipped, result.span) == (3, 2, 2.0)
    assert judge_consistency(scores, span=1.0).wide_share == pytest.approx(2 / 3)


def test_exactly_two_points_counts_as_wide_and_nan_samples_are_left_out() -> None:
    result = judge_consistency([(2.0, 4.0, math.nan), (3.0, 4.9)])
    assert result.wide_share == 0.5 and result.answers == 2


def test_no_answer_with_two_scores_gives_nan() -> None:
    result = judge_consistency([(5.0,), ()])
    assert math.isnan(result.mean_sd) and math.isnan(result.wide_share)
    assert result.as_dict() == {"mean_sd": None, "wide_share": None, "answers": 0, "skipped": 2, "span": 2.0}


@pytest.mark.parametrize("span", [0, -1.0, math.inf, True])
def test_a_bad_span_is_refused(span: float) -> None:
    with pytest.raises(ValueError, match="span"):
        judge_consistency([(1, 2)], span=span)
