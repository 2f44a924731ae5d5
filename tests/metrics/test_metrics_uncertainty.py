"""Intervals clustered by prompt: each is of the gated statistic itself, exact on the data, seeded."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_novelty.gate.tail import tail_value
from pytest_novelty.metrics import bootstrap as b
from pytest_novelty.metrics import top_fraction_mean
from pytest_novelty.metrics import uncertainty as u
from pytest_novelty.metrics.suite import suite_metrics


def _suite(seed: int = 0, prompts: int = 40, samples: int = 3) -> dict[str, np.ndarray]:
    """A small suite with a prompt effect, unscored answers and answers too short for n = 6."""
    rng = np.random.default_rng(seed)
    effect = rng.normal(0.0, 0.15, size=(prompts, 1))
    quality = np.clip(0.55 + effect + rng.normal(0.0, 0.1, size=(prompts, samples)), 0.0, 1.0)
    quality[rng.random((prompts, samples)) < 0.08] = np.nan
    originality = {
        n: np.clip(0.5 + effect - 0.05 * n + rng.normal(0.0, 0.1, size=(prompts, samples)), 0.0, 1.0) for n in (4, 6)
    }
    originality[6][rng.random((prompts, samples)) < 0.15] = np.nan
    return {"quality": quality, "orig4": originality[4], "orig6": originality[6],
            "prompt_novelty": rng.uniform(0.2, 0.9, size=prompts)}


def test_every_interval_is_of_the_value_the_suite_gates() -> None:
    data = _suite()
    ids = [f"p{i:02d}" for i in range(40)]
    words = ["the cat sat", "a dog ran", "the cat sat", "birds sang", "a dog ran"]
    answers = [[words[(i + j * (i % 3)) % 5] for j in range(3)] for i in range(40)]
    metrics = ["quality", "unscored", "coverage@6", "originality@6", "novelty@6", "top10_novelty@6",
               "novelty@4", "q_at_tail@0.25", "distinct_k", "utility_k"]
    values, per_prompt, tails = suite_metrics(
        quality=data["quality"], originality={4: data["orig4"], 6: data["orig6"]}, prompt_ids=ids,
        metrics=metrics, prompt_novelty=data["prompt_novelty"], answers=answers, equivalent=lambda a, b: a == b,
    )
    intervals = u.suite_intervals(
        quality=data["quality"], originality={4: data["orig4"], 6: data["orig6"]}, metrics=metrics,
        per_prompt=per_prompt, prompt_ids=ids, tails=tails, n_boot=500,
    )
    assert set(intervals) == set(metrics)
    for name, interval in intervals.items():
        assert interval.estimate == pytest.approx(values[name], abs=1e-12), name
        assert interval.defined and interval.low <= values[name] <= interval.high, name
        assert interval.low < interval.high, name  # real spread: none of these is constant
        assert interval.confidence == 0.95
    assert intervals["q_at_tail@0.25"].n_clusters == len(tails["q_at_tail@0.25"]) == 10
    assert intervals["quality"].n_clusters == 40
    assert intervals["coverage@6"].method == u.WILSON and intervals["novelty@6"].method == "studentized"
    assert intervals["distinct_k"].low >= 1.0 and intervals["distinct_k"].high <= 3.0


def test_the_tail_interval_is_of_tail_value_on_the_frozen_tail() -> None:
    quality = np.array([0.2, np.nan, 0.6, 0.9, 0.4, 0.7])
    ids = ["a", "b", "c", "d", "e", "f"]
    interval = u.tail_interval(quality, ids, ["c", "b", "x", "d", "f"], n_boot=300)
    expected, used = tail_value(dict(zip(ids, quality, strict=True)), ["c", "b", "x", "d", "f"])
    assert interval.estimate == pytest.approx(expected) and used == ["c", "b", "d", "f"]
    assert interval.n_clusters == 4  # the tail's prompts the suite has, the unscored one included
    with pytest.raises(ValueError, match="none of the tail ids"):
        u.tail_interval(quality, ids, ["x"])


def test_weights_are_exactly_resampled_prompts() -> None:
    # A statistic of prompt weights must equal the statistic of the materialised resample, for the
    # ratio mean (NaN left out) and for the top fraction (copies straddling the cut taken in part).
    rng = np.random.default_rng(5)
    values = rng.uniform(size=(25, 3))
    values[rng.random(values.shape) < 0.2] = np.nan
    weights = rng.multinomial(25, np.full(25, 1 / 25), size=30).astype(float)
    mean, top = u.RatioStatistic.mean_of(values), u.TopFractionStatistic(values, 0.1)
    for row, w in enumerate(weights):
        drawn = np.repeat(values, w.astype(int), axis=0)
        assert mean(weights)[row] == pytest.approx(float(np.nanmean(drawn)))
        assert top(weights)[row] == pytest.approx(top_fraction_mean(drawn.ravel(), 0.1))
    ones = np.ones((1, 25))
    assert top(ones)[0] == top_fraction_mean(values.ravel(), 0.1)  # to the last digit on the data


def test_the_linearised_standard_error_is_the_bootstraps() -> None:
    rng = np.random.default_rng(2)
    values = rng.uniform(size=(200, 2)) + rng.normal(0.0, 0.3, size=(200, 1))
    for statistic in (u.RatioStatistic.mean_of(values), u.TopFractionStatistic(values, 0.1)):
        draws = b.resample(statistic, 200, n_boot=3000, seed=1)
        assert draws.se == pytest.approx(b.bootstrap_se(draws), rel=0.1)
    # The fast weighted-sums path gives the same standard errors as the contributions.
    ratio = u.RatioStatistic.mean_of(values)
    weights = rng.multinomial(200, np.full(200, 1 / 200), size=5).astype(float)
    _, parts = ratio.linearised(weights)
    np.testing.assert_allclose(ratio.values_and_ses(weights)[1], b.linearised_se(parts, weights))
    # The mean over prompts' standard error is the textbook s/√G.
    per_prompt = values.mean(axis=1)
    se = b.resample(u.RatioStatistic.mean_of(per_prompt[:, None]), 200, n_boot=2, seed=0).se
    assert se == pytest.approx(per_prompt.std(ddof=1) / math.sqrt(200))


def test_intervals_are_seeded_and_methods_differ() -> None:
    values = _suite(3)["quality"]
    first, again = u.mean_interval(values, seed=4), u.mean_interval(values, seed=4)
    assert first == again
    assert u.mean_interval(values, seed=5) != first
    methods = {m: u.mean_interval(values, method=m, n_boot=800) for m in b.METHODS}
    assert {i.method for i in methods.values()} == set(b.METHODS)
    assert len({(i.low, i.high) for i in methods.values()}) == 3
    for interval in methods.values():
        assert interval.estimate == first.estimate and interval.contains(first.estimate)


def test_an_unclustered_interval_is_narrower_on_correlated_samples() -> None:
    rng = np.random.default_rng(8)
    values = 0.5 + rng.normal(0.0, 0.2, size=(60, 5)).mean(axis=1, keepdims=True) + rng.normal(0.0, 0.05, (60, 5))
    clustered, unclustered = u.mean_interval(values), u.mean_interval(values.reshape(-1, 1))
    assert clustered.estimate == pytest.approx(unclustered.estimate)
    assert unclustered.width < 0.6 * clustered.width


def test_shares_get_wilson_intervals_that_see_the_clusters() -> None:
    none = u.share_interval(np.zeros((50, 4), dtype=bool))
    assert none.estimate == 0.0 and none.low == 0.0 and 0.0 < none.high < 0.05  # 0 of 200 is not "surely 0"
    every = u.share_interval(np.ones((50, 4), dtype=bool))
    assert every.high == 1.0 and 0.95 < every.low < 1.0
    spread = np.zeros((50, 4), dtype=bool)
    spread[:20, 0] = True  # 20 of 200, one per prompt
    clumped = np.zeros((50, 4), dtype=bool)
    clumped[:5, :] = True  # 20 of 200, all the samples of 5 prompts
    wide, narrow = u.share_interval(clumped), u.share_interval(spread)
    assert wide.estimate == narrow.estimate == 0.1
    assert narrow.contains(0.1) and wide.contains(0.1)
    assert wide.width > 1.5 * narrow.width  # the same share is much less sure when prompts carry it
    assert u.share_interval(clumped, method="t", n_boot=500).method == "t"


def test_ties_at_the_top_still_get_a_finite_honest_interval() -> None:
    # Several generations at novelty exactly 1.0: the top-10 % mean's linearisation is flat there,
    # yet losing those prompts in another sample would move the statistic.
    rng = np.random.default_rng(0)
    values = rng.uniform(0.2, 0.7, size=(60, 2))
    values[:14, 0] = 1.0  # more than the 12 generations of the top 10 %
    interval = u.top_fraction_interval(values)
    assert interval.estimate == 1.0
    assert b.resample(u.TopFractionStatistic(values, 0.1), 60, n_boot=10, seed=0).se == 0.0  # flat here
    assert interval.method == "t"  # so the bootstrap's own spread bounds it, not the reflected [1, 1]
    assert math.isfinite(interval.low) and interval.low < 0.98 and interval.high == 1.0


def test_degenerate_inputs_give_undefined_or_zero_width_intervals() -> None:
    assert not u.mean_interval([[0.5, 0.6]]).defined  # one prompt: no spread over prompts
    assert u.mean_interval([[0.5, 0.6]]).estimate == pytest.approx(0.55)
    assert not u.mean_interval(np.full((5, 2), np.nan)).defined
    constant = u.mean_interval(np.full((8, 2), 0.4))
    assert (constant.low, constant.high) == (pytest.approx(0.4), pytest.approx(0.4))
    clipped = u.mean_interval([[0.99], [1.0], [0.9], [1.0]], bounds=(0.0, 1.0))
    assert clipped.high <= 1.0
    assert b.Interval(math.nan, math.nan, 0.95, 1, "t").contains(0.3)


def test_a_function_of_the_resampled_array_is_a_statistic_too() -> None:
    values = _suite(1)["orig4"]
    general = b.bootstrap_interval(b.per_resample(values, lambda rows: float(np.nanmedian(rows))), 40, n_boot=300)
    assert general.method == "t"  # no linearisation
    assert general.estimate == pytest.approx(float(np.nanmedian(values)))
    assert general.contains(general.estimate)


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: u.mean_interval([[0.1], [0.2]], confidence=1.0), "confidence"),
        (lambda: u.mean_interval([[0.1], [0.2]], n_boot=1), "n_boot"),
        (lambda: u.mean_interval([[0.1], [0.2]], method="bca"), "method must be one of"),
        (lambda: u.mean_interval(np.zeros((2, 2, 2))), "prompts × samples"),
        (lambda: u.top_fraction_interval([[0.1], [0.2]], 0.0), "fraction"),
        (lambda: u.suite_intervals(quality=np.zeros((2, 2)), originality={}, metrics=["novelty@5"]), "novelty@5"),
        (lambda: u.suite_intervals(quality=np.zeros((2, 2)), originality={}, metrics=["bogus"]), "bogus"),
        (lambda: u.suite_intervals(quality=np.zeros((2, 2)), originality={}, metrics=["distinct_k"]), "per-prompt"),
    ],
)
def test_bad_input_is_refused_with_its_name(call: object, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        call()  # type: ignore[operator]
