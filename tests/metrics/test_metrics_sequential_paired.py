"""The paired sequential rule's parts: the paired statistic at each look, live and frozen baselines,
the pairs kept paired, the top fraction, and the bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_novelty.metrics.sequential import (
    CONTINUE,
    DECISIONS,
    FAIL,
    PASS,
    Rounds,
    decide_looks,
    z_scores,
)
from pytest_novelty.metrics.sequential_paired import (
    paired_decision,
    paired_looks,
    paired_top_fraction_looks,
    randomised_scores,
)
from pytest_novelty.metrics.sequential_plan import SequentialPlan
from pytest_novelty.metrics.stats import top_fraction_mean


def _pair(rng: np.random.Generator, looks: int, *, prompts: int = 40, shift: float = 0.0) -> tuple[list, list]:
    effect = rng.normal(0.0, 0.2, size=(prompts, 1))  # common to both sides: pairing cancels it
    candidate = [0.5 + shift + effect + rng.normal(0.0, 0.2, size=(prompts, 2)) for _ in range(looks)]
    baseline = [0.5 + effect + rng.normal(0.0, 0.2, size=(prompts, 2)) for _ in range(looks)]
    return candidate, baseline


def test_the_statistic_is_the_mean_per_prompt_difference_over_the_rounds_so_far() -> None:
    rng = np.random.default_rng(1)
    candidate, baseline = _pair(rng, 3)
    live = paired_looks(Rounds.of(candidate), Rounds.of(baseline), frozen=False)
    stored = [baseline[0].mean(axis=1)]  # a snapshot keeps one value per prompt
    frozen = paired_looks(Rounds.of(candidate), Rounds.of(stored), frozen=True)
    for k in range(3):
        mine = np.hstack(candidate[: k + 1]).mean(axis=1)
        for found, theirs in ((live, np.hstack(baseline[: k + 1]).mean(axis=1)), (frozen, stored[0])):
            pairs = mine - theirs
            assert found.estimate[k] == pytest.approx(pairs.mean())
            assert found.se[k] == pytest.approx(pairs.std(ddof=1) / math.sqrt(pairs.size))
    # Pairing: the prompt effect (sd 0.2) would dominate an unpaired SE; the paired one is far smaller.
    unpaired = math.sqrt(np.hstack(candidate[:1]).mean(axis=1).var(ddof=1) * 2 / 40)
    assert live.se[0] < unpaired / 2


def test_what_later_rounds_average_away_depends_on_which_sides_draw_them() -> None:
    # Sample noise only (no interaction): a live pair's variance is nearly all renewable; against a
    # frozen snapshot the snapshot's half stays, and the renewable share falls as the candidate's shrinks.
    rng = np.random.default_rng(2)
    candidate, baseline = _pair(rng, 4, prompts=400)
    live = paired_looks(Rounds.of(candidate), Rounds.of(baseline), frozen=False)
    frozen = paired_looks(Rounds.of(candidate), Rounds.of([baseline[0].mean(axis=1)]), frozen=True)
    assert np.all(live.renewable > 0.8)
    assert frozen.renewable[0] == pytest.approx(0.5, abs=0.1) and np.all(np.diff(frozen.renewable) < 0)
    assert frozen.renewable[-1] == pytest.approx(1 / 5, abs=0.08)  # σ²/8 of the candidate against σ²/2 stored
    # The frozen snapshot's noise stays in every look's SE; the live pair's shrinks with the rounds.
    assert frozen.se[-1] > 1.4 * live.se[-1]
    without = paired_looks(Rounds(Rounds.of(candidate).sums, Rounds.of(candidate).counts), Rounds.of(baseline),
                           frozen=False)  # fmt: skip
    assert np.all(without.renewable == 1.0)  # no sums of squares: unknown, taken as all of it


def test_a_prompt_one_side_lacks_is_left_out_of_both() -> None:
    rng = np.random.default_rng(3)
    candidate, baseline = _pair(rng, 1, prompts=10)
    baseline[0][4] = np.nan  # prompt 4 unscored on the baseline
    found = paired_looks(Rounds.of(candidate), Rounds.of(baseline), frozen=False)
    keep = np.arange(10) != 4
    pairs = candidate[0].mean(axis=1)[keep] - baseline[0].mean(axis=1)[keep]
    assert found.estimate[0] == pytest.approx(pairs.mean()) and found.se[0] == pytest.approx(pairs.std(ddof=1) / 3)


def test_a_clear_regression_fails_at_once_and_an_improvement_passes() -> None:
    rng = np.random.default_rng(4)
    plan = SequentialPlan(0.05, 5)
    worse, baseline = _pair(rng, 3, shift=-0.2)
    down = paired_decision(worse, baseline, -0.02, higher_is_better=True, plan=plan, frozen=False)
    assert (down.decision, down.rounds) == (FAIL, 1)
    better, baseline = _pair(rng, 3, shift=0.2)
    up = paired_decision(better, [baseline[0]], -0.02, higher_is_better=True, plan=plan, frozen=True)
    assert (up.decision, up.rounds) == (PASS, 1)
    # A max case (lower is better) held to +tolerance reads the same data the other way round.
    assert paired_decision(better, baseline, 0.02, higher_is_better=False, plan=plan, frozen=False).decision == FAIL


def test_one_case_is_decided_as_the_vectorised_rule_decides_it() -> None:
    rng = np.random.default_rng(5)
    plan = SequentialPlan(0.05, 4, futility=True)
    for case in range(30):
        candidate, baseline = _pair(rng, 4, shift=rng.normal(0.0, 0.03))
        frozen = case % 2 == 1
        theirs = [baseline[0].mean(axis=1)] if frozen else baseline
        found = paired_decision(candidate, theirs, -0.02, higher_is_better=True, plan=plan, frozen=frozen)
        ours, accepted = Rounds.of(candidate), Rounds.of(theirs)
        stats = paired_looks(ours, accepted, frozen=frozen)
        z = randomised_scores(ours, accepted, -0.02, plan=plan, frozen=frozen, clusters=40)
        assert z is not None
        # normal answers: the randomisation test reads about the t statistic's Z (its tail at Z near 3
        # is a few dozen draws of 10,000, and the frozen test's reference is not the t one)
        t = z_scores(stats.estimate, stats.se, -0.02)
        assert np.array_equal(np.sign(z), np.sign(t)) and np.abs(z - t).max() < 0.6
        code, stop = decide_looks(z, plan, clusters=40, renewable=stats.renewable)
        assert found.decision == DECISIONS[int(code)] and found.rounds == int(stop)
        assert [look.z for look in found.looks] == pytest.approx(list(z[: found.rounds]))
        assert [look.decision for look in found.looks[:-1]] == [CONTINUE] * (found.rounds - 1)
        assert math.isfinite(found.detectable) and found.detectable > 0


def test_a_top_fraction_case_compares_the_two_top_fraction_means() -> None:
    rng = np.random.default_rng(6)
    candidate, baseline = _pair(rng, 2, prompts=50)
    live = paired_top_fraction_looks(candidate, baseline, 0.1, frozen=False)
    frozen = paired_top_fraction_looks(candidate, baseline[:1], 0.1, frozen=True)
    assert live.estimate[1] == pytest.approx(top_fraction_mean(np.hstack(candidate).ravel(), 0.1)
                                             - top_fraction_mean(np.hstack(baseline).ravel(), 0.1))  # fmt: skip
    assert frozen.estimate[1] == pytest.approx(top_fraction_mean(np.hstack(candidate).ravel(), 0.1)
                                               - top_fraction_mean(baseline[0].ravel(), 0.1))  # fmt: skip
    assert np.all(live.se > 0) and np.all(live.renewable == 1.0)
    plan = SequentialPlan(0.05, 3)
    found = paired_decision(candidate, baseline, -0.02, higher_is_better=True, plan=plan, frozen=False,
                            top_fraction=0.1)  # fmt: skip
    assert found.looks[0].estimate == pytest.approx(live.estimate[0])


@pytest.mark.parametrize(
    ("candidate", "baseline", "frozen", "words"),
    [
        ([np.zeros((5, 2))] * 2, [np.zeros((5, 2))] * 2, True, "a frozen baseline is one stored pass"),
        ([np.zeros((5, 2))] * 2, [np.zeros((5, 2))], False, "a live baseline draws a round with every round"),
        ([np.zeros((5, 2))], [np.zeros((4, 2))], False, "the pairs are the same prompts in the same order"),
    ],
)
def test_bad_pairs_say_what_is_wrong(candidate: list, baseline: list, frozen: bool, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        paired_decision(candidate, baseline, 0.0, higher_is_better=True, plan=SequentialPlan(0.05, 3), frozen=frozen)
