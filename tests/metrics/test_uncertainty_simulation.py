"""Proof by simulation: intervals cover, modes hold their error rate, the detectable effect is detected.

Synthetic suites are drawn from a known model with a prompt effect and a sample effect, as real
suites have: per prompt a quality effect u and an originality effect v correlated with it, per
generation a sample effect on top (logistic scale), answers too short for the n-gram order more
often on weak prompts, unscored answers more often on some prompts than others, and per-prompt
NoveltyBench values. The true value of every statistic is that of the population, computed once
from a draw of 200,000 prompts. Every draw is seeded, so each test gives the same numbers on every
run; the number of suites is chosen so that the binomial noise of a coverage (about 0.7 points at
1,000 suites) fits well inside the 93-97 % band, and the closing note of issue 22 quotes the
printed figures.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import numpy as np
import pytest

from pytest_novelty.gate.regression import MetricRecord, compare
from pytest_novelty.gate.thresholds import check_threshold
from pytest_novelty.metrics import power, uncertainty
from pytest_novelty.metrics.bootstrap import Interval, quantiles, resample
from pytest_novelty.metrics.novelty import gated_novelty, originality_counting_short
from pytest_novelty.metrics.sign_flip import paired_sign_flip
from pytest_novelty.metrics.stats import holm, top_fraction_mean
from pytest_novelty.suites.schema import Threshold

PROMPTS, SAMPLES, TAIL = 100, 4, 10
SUITES = 1000  # per statistic: binomial sd of a 95 % coverage ≈ 0.69 points
UNCLUSTERED = 300  # far below the band: a smaller count separates it
RESAMPLES = 400
METRICS = ("quality", "unscored", "coverage@4", "originality@4", "novelty@4", "top10_novelty@4", "distinct_k",
           "utility_k", "q_at_tail@0.1")
IDS = [f"p{i:03d}" for i in range(PROMPTS)]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def draw_suite(rng: np.random.Generator, prompts: int = PROMPTS, samples: int = SAMPLES) -> dict[str, np.ndarray]:
    """One suite: quality and originality@4 (prompts × samples, NaN as the pipeline has it), per-prompt
    distinct_k and utility_k."""
    u = rng.normal(0.0, 0.8, size=(prompts, 1))
    v = 0.5 * u + rng.normal(0.0, 0.64, size=(prompts, 1))
    judge = rng.normal(0.0, 1.0, size=(prompts, 1))
    quality = _sigmoid(0.3 + u + rng.normal(0.0, 0.6, size=(prompts, samples)))
    quality[rng.random((prompts, samples)) < _sigmoid(-4.2 + 2.0 * judge)] = np.nan
    originality = _sigmoid(-0.5 + v + rng.normal(0.0, 0.6, size=(prompts, samples)))
    originality[rng.random((prompts, samples)) < _sigmoid(-3.2 - 2.0 * u)] = np.nan
    distinct = 1.0 + rng.binomial(samples - 1, _sigmoid(0.4 + v[:, 0]))
    utility = 10.0 * _sigmoid(0.2 + u[:, 0] + rng.normal(0.0, 0.3, size=prompts))
    return {"quality": quality, "originality": originality, "distinct_k": distinct, "utility_k": utility}


@cache
def truth() -> dict[str, float]:
    """Every statistic's population value, from one draw of 200,000 prompts."""
    big = draw_suite(np.random.default_rng(2024), prompts=200_000)
    quality, originality = big["quality"], big["originality"]
    novelty = gated_novelty(quality, originality)
    return {
        "quality": float(np.nanmean(quality)),
        "unscored": float(np.mean(np.isnan(quality))),
        "coverage@4": float(np.mean(~np.isnan(originality))),
        "originality@4": float(np.mean(originality_counting_short(originality))),
        "novelty@4": float(np.nanmean(novelty)),
        "top10_novelty@4": top_fraction_mean(novelty.ravel(), 0.1),
        "distinct_k": float(np.mean(big["distinct_k"])),
        "utility_k": float(np.mean(big["utility_k"])),
        # The tail's prompts are drawn like any others here: q@Tail's true value is the mean
        # per-prompt quality, whose expectation is the population's mean quality.
        "q_at_tail@0.1": float(np.nanmean(quality)),
    }


def intervals_of(suite: dict[str, np.ndarray]) -> dict[str, Interval]:
    """The intervals the gate would compute for this suite (the tail: its first ten prompts), with the
    gate's seed 0: the resampling is the same for every suite, the data are not."""
    quality = suite["quality"]
    scored = (~np.isnan(quality)).sum(axis=1)
    means = np.where(scored > 0, np.nansum(quality, axis=1) / np.maximum(scored, 1), np.nan)
    per_prompt = {"quality": list(means), "distinct_k": list(suite["distinct_k"]),
                  "utility_k": list(suite["utility_k"])}
    return uncertainty.suite_intervals(
        quality=quality, originality={4: suite["originality"]}, metrics=METRICS, per_prompt=per_prompt,
        prompt_ids=IDS, tails={"q_at_tail@0.1": IDS[:TAIL]}, n_boot=RESAMPLES,
    )


def coverage(intervals: list[Interval], value: float) -> float:
    return float(np.mean([interval.contains(value) for interval in intervals]))


def test_clustered_intervals_cover_the_true_value_and_lenient_and_strict_hold_their_rate() -> None:
    # One test for both, so that the suites are drawn and measured once (also under xdist).
    # Coverage: 93-97 % of the 95 % intervals contain the true value. Modes: the checkpoint's true
    # value sits exactly at the bound, so a lenient failure or a strict pass is a wrong call; with a
    # two-sided 95 % interval each is one tail, nominally 2.5 %, and must stay at most 5 %.
    found: dict[str, list[Interval]] = {name: [] for name in METRICS}
    for index in range(SUITES):
        intervals = intervals_of(draw_suite(np.random.default_rng(10_000 + index)))
        for name in METRICS:
            found[name].append(intervals[name])
    problems = []
    for name in METRICS:
        value = truth()[name]
        covered = coverage(found[name], value)
        rates = []
        for op in (">=", "<="):
            threshold = Threshold(name, op, value)
            checks = [(check_threshold("s", threshold, {name: i.estimate}, interval=i, mode=mode).passed, mode)
                      for i in found[name] for mode in ("lenient", "strict")]
            rates.append(sum(not ok for ok, mode in checks if mode == "lenient") / SUITES)
            rates.append(sum(ok for ok, mode in checks if mode == "strict") / SUITES)
        low, high, low_max, high_max = (f"{100 * rate:.1f}" for rate in rates)
        print(f"{name}: covers {100 * covered:.1f} % of {SUITES}; at the bound lenient fails / strict passes "
              f"{low} / {high} % (min), {low_max} / {high_max} % (max)")
        if not (0.93 <= covered <= 0.97 and max(rates) <= 0.05 and all(i.defined for i in found[name])):
            problems.append(name)
    assert problems == []


def _unclustered(suite: dict[str, np.ndarray], metric: str) -> Interval:
    """The statistic's interval with every generation a cluster of its own (as if the samples of a
    prompt were independent)."""
    quality, originality = suite["quality"], suite["originality"]
    values = {
        "quality": quality, "unscored": np.isnan(quality), "coverage@4": ~np.isnan(originality),
        "originality@4": originality_counting_short(originality), "novelty@4": gated_novelty(quality, originality),
        "top10_novelty@4": gated_novelty(quality, originality),
    }[metric]
    flat = values.reshape(-1, 1)
    if metric in ("unscored", "coverage@4"):
        return uncertainty.share_interval(flat)
    if metric == "top10_novelty@4":
        return uncertainty.top_fraction_interval(flat, 0.1, n_boot=RESAMPLES)
    return uncertainty.mean_interval(flat, n_boot=RESAMPLES)


def test_an_unclustered_interval_on_the_same_data_does_not_cover() -> None:
    # The samples of a prompt share its effect, so an interval that treats the generations as
    # independent is too narrow: on the first suites of the coverage test it covers far less than
    # its 95 % (the clustered intervals of the same suites: that test).
    problems = []
    for metric in ("quality", "unscored", "coverage@4", "originality@4", "novelty@4", "top10_novelty@4"):
        found = [_unclustered(draw_suite(np.random.default_rng(10_000 + i)), metric) for i in range(UNCLUSTERED)]
        covered = coverage(found, truth()[metric])
        print(f"{metric}: unclustered 95 % interval covers the true value in {100 * covered:.1f} % of {UNCLUSTERED}")
        if not covered < 0.90:
            problems.append(metric)
    assert problems == []


def paired_draw(seed: int, effect: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Per-generation novelty of a snapshot and a candidate of the same checkpoint on the same prompts
    (shared prompt effects, fresh samples), the candidate lowered by ``effect``."""
    rng = np.random.default_rng(seed)
    u = rng.normal(0.0, 0.8, size=(PROMPTS, 1))
    v = 0.5 * u + rng.normal(0.0, 0.64, size=(PROMPTS, 1))

    def sample() -> np.ndarray:
        quality = _sigmoid(0.3 + u + rng.normal(0.0, 0.6, size=(PROMPTS, SAMPLES)))
        originality = _sigmoid(-0.5 + v + rng.normal(0.0, 0.6, size=(PROMPTS, SAMPLES)))
        return gated_novelty(quality, originality)

    return sample(), sample() - effect


@pytest.mark.parametrize(("statistic", "rows"), [("mean", PROMPTS), ("top10", PROMPTS), ("mean", TAIL)])
def test_the_predicted_detectable_effect_is_detected_with_about_80_percent_power(statistic: str, rows: int) -> None:
    # The prediction uses a run's own data, as a suite's report does (the noise floor of the whole
    # suite; a 10-prompt comparison, a q@Tail tail, is planned from it with n = 10); the simulation
    # then asks how often the gate's paired comparison calls a regression of exactly that size. One
    # run's estimate of the floor is itself noisy (about 12 % for the top-10 % mean on 100 prompts),
    # so the prediction averages 20 runs' estimates: the test checks the formula, not one run's luck.
    top = 0.1 if statistic == "top10" else None
    floors = [power.detectable(paired_draw(seed)[0], alpha=0.05, top_fraction=top) for seed in range(1, 21)]
    sd = float(np.mean([floor.sd for floor in floors]))
    predicted = replace(floors[0], sd=sd, effect=power.detectable_effect(sd, rows, alpha=0.05), prompts=rows)
    detected, trials = 0, 400
    for index in range(trials):
        before, after = paired_draw(100 + index, predicted.effect)
        before, after = before[:rows], after[:rows]
        if top is None:
            test = paired_sign_flip(np.nanmean(before, axis=1), np.nanmean(after, axis=1), n_flips=RESAMPLES)
        else:
            test = paired_sign_flip(before, after, top_fraction=top, n_flips=RESAMPLES)
        detected += test.ci_high < 0  # the gate's call: the whole interval on the bad side
    rate = detected / trials
    print(f"{statistic} on {rows} prompts: detectable effect {predicted.effect:.4f}, detected in {100 * rate:.1f} %")
    assert abs(rate - 0.80) <= 0.10


def test_holm_holds_a_runs_false_alarms_at_alpha_where_each_case_alone_does_not() -> None:
    # An unchanged checkpoint sampled again, 18 regression cases a run (as the demo's suites make):
    # at α per case about one run in three fails somewhere; Holm's step-down over the run's
    # p-values keeps the share of failing runs at most α.
    runs, cases, alpha = 300, 18, 0.05
    per_case = corrected = 0
    for run in range(runs):
        ps, bad = [], []
        for case in range(cases):
            before, after = paired_draw(50_000 + run * cases + case)
            test = paired_sign_flip(np.nanmean(before[:40], axis=1), np.nanmean(after[:40], axis=1), n_flips=300,
                                    confidence=1 - alpha)
            ps.append(test.p_value)
            bad.append(test.difference < 0)  # only a drop is a regression
        per_case += any(p < alpha and b for p, b in zip(ps, bad, strict=True))
        corrected += any(r and b for r, b in zip(holm(ps, alpha), bad, strict=True))
    print(f"runs with a false regression: {100 * per_case / runs:.1f} % per case, "
          f"{100 * corrected / runs:.1f} % with Holm")
    assert per_case / runs > 0.2
    assert corrected / runs <= alpha


def test_a_q_at_tail_comparison_on_its_ten_prompts_holds_its_false_alarm_rate() -> None:
    # q@Tail's tail is ten prompts. An unchanged checkpoint sampled again must be called a
    # regression (the whole 95 % interval below 0) in at most its nominal 2.5 %; the percentile
    # interval of a bootstrap did so about twice as often.
    trials, alarms, percentile = 1000, 0, 0
    tail = IDS[:TAIL]
    for index in range(trials):
        before, after = (np.nanmean(run[:TAIL], axis=1) for run in paired_draw(90_000 + index))
        snapshot = MetricRecord("story", "q_at_tail@0.1", float(before.mean()), True,
                                dict(zip(tail, before.tolist(), strict=True)), tail_ids=tail, tolerance_abs=0.0)
        candidate = MetricRecord("story", "q_at_tail@0.1", float(after.mean()), True,
                                 dict(zip(tail, after.tolist(), strict=True)), tolerance_abs=0.0)
        alarms += compare(snapshot, candidate, n_boot=RESAMPLES).status == "regressed"
        draws = resample(uncertainty.RatioStatistic.mean_of((after - before)[:, None]), TAIL, n_boot=RESAMPLES, seed=0)
        percentile += quantiles(draws.values, 0.95)[1] < 0
    print(f"false regressions on {TAIL} pairs: {100 * alarms / trials:.1f} % "
          f"(percentile: {100 * percentile / trials:.1f} %)")
    assert alarms / trials <= 0.035
    assert percentile / trials >= 0.04
