"""Proof by simulation: the paired sequential rule keeps each wrong regression decision within α/2
over all its looks, with and without the futility stop, where naive peeking does not.

Synthetic regression cases are drawn from a known model of two checkpoints on the same prompts:
per prompt an effect β_i common to both sides (what pairing cancels), an interaction δ_i (how
differently the two do on it), and sample noise on every answer. Each round draws new samples of
the same prompts: of both sides against a **live** baseline, of the candidate alone against a
**frozen** snapshot (stored once, as its per-prompt means). The candidate's true difference from
the baseline is set exactly at the margin the case is held to (−0.02: a tolerance of 0.02 on a
``min`` case), so every decision is wrong there: a fail says the drop is beyond the tolerance, a
pass that it is within it. Each line draws 4,000 cases, seeded, and runs the rule of
:mod:`pytest_novelty.metrics.sequential_paired` (its own vectorised code) at α = 0.05 over five
looks; each wrong decision is nominally α/2 = 2.5 %. The test asserts that each rate's Wilson 99 %
interval reaches down to α/2 or below and stays below α, with and without the futility stop; that
the stop decides nothing the rule without it would not have (it only turns decisions into
undecided ones); and that naive peeking (decide as soon as the 95 % interval clears the margin)
makes a wrong decision more often than α, which shows that the test can fail. It prints the table
docs/verdicts.md shows (``pytest -s``). These lines read Z on Student's t, as the rule does for normal
answers; the last test draws skewed, discrete ones, where the gate reads Z from a randomisation test
(:func:`pytest_novelty.metrics.sequential_paired.randomised_scores`) and the t reading breaks.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pytest

from pytest_novelty.metrics.sequential import (
    DECISIONS,
    FAIL,
    FUTILE,
    PASS,
    LookStatistics,
    Rounds,
    decide_looks,
    z_scores,
)
from pytest_novelty.metrics.sequential_paired import paired_decision, paired_looks
from pytest_novelty.metrics.sequential_plan import SequentialPlan

RUNS, LOOKS, ALPHA, MARGIN = 4000, 5, 0.05, -0.02
PLAN, STOPPING = SequentialPlan(ALPHA, LOOKS), SequentialPlan(ALPHA, LOOKS, futility=True)


@dataclass(frozen=True)
class Pairing:
    """A regression case's model: prompts, samples per round and side, whether the baseline is frozen,
    the spreads of the common prompt effect, of the interaction and of the sample noise."""

    name: str
    prompts: int
    frozen: bool
    samples: int = 2
    prompt_sd: float = 0.1
    interaction_sd: float = 0.03
    sample_sd: float = 0.25

    def first_se(self) -> float:
        """The first look's standard error of the paired difference, from the model (a frozen snapshot
        was drawn as one round of the baseline, so the first look is the same live or frozen)."""
        noise = 2 * self.sample_sd**2 / self.samples
        return math.sqrt((self.interaction_sd**2 + noise) / self.prompts)

    def draw(self, rng: np.random.Generator) -> tuple[Rounds, Rounds]:
        """RUNS cases' candidate and baseline rounds, shaped (runs, rounds, prompts), the candidate's true
        difference from the baseline at the margin (single precision: twice as fast, and ample)."""

        def normal(sd: float, *shape: int) -> np.ndarray:
            return sd * rng.standard_normal(size=shape, dtype=np.float32)

        common = normal(self.prompt_sd, RUNS, 1, self.prompts, 1)
        apart = normal(self.interaction_sd, RUNS, 1, self.prompts, 1)
        shape = (RUNS, LOOKS, self.prompts, self.samples)
        candidate = 0.5 + MARGIN + common + apart + normal(self.sample_sd, *shape)
        drawn = 0.5 + common + normal(self.sample_sd, RUNS, 1 if self.frozen else LOOKS, *shape[2:])
        counts = np.full(shape[:-1], float(self.samples), dtype=np.float32)
        ours = Rounds(candidate.sum(axis=-1), counts, (candidate**2).sum(axis=-1))
        if self.frozen:  # the snapshot keeps one value per prompt
            stored = drawn.mean(axis=-1)
            return ours, Rounds(stored, np.ones(stored.shape, dtype=np.float32))
        return ours, Rounds(drawn.sum(axis=-1), counts, (drawn**2).sum(axis=-1))


PAIRINGS = (
    Pairing("live baseline, sample noise first", 100, frozen=False),
    Pairing("live baseline, checkpoints apart by prompt", 100, frozen=False, interaction_sd=0.15, sample_sd=0.05),
    Pairing("live baseline, q@Tail's tail of 10 prompts", 10, frozen=False),
    Pairing("frozen snapshot, sample noise first", 100, frozen=True),
    Pairing("frozen snapshot, checkpoints apart by prompt", 100, frozen=True, interaction_sd=0.15, sample_sd=0.05),
    Pairing("frozen snapshot, q@Tail's tail of 10 prompts", 10, frozen=True),
)


def wilson(hits: int, runs: int, z: float = 2.576) -> tuple[float, float]:
    """Wilson's 99 % score interval of a binomial rate."""
    p = hits / runs
    centre = (p + z * z / (2 * runs)) / (1 + z * z / runs)
    half = z / (1 + z * z / runs) * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs))
    return centre - half, centre + half


@functools.cache
def _drawn(index: int) -> LookStatistics:
    """The paired statistic of RUNS cases of pairing ``index`` at every look, drawn once per process."""
    pairing = PAIRINGS[index]
    candidate, baseline = pairing.draw(np.random.default_rng(500 + index))
    return paired_looks(candidate, baseline, frozen=pairing.frozen)


def looks_of(index: int, shift: float = 0.0) -> tuple[LookStatistics, np.ndarray]:
    """The statistic of pairing ``index``'s cases with their true difference at MARGIN + ``shift``, and Z
    against the margin. A shift moves every candidate answer alike: the estimate moves by it, the SE
    and its renewable share stay (so every shift reads the same draws)."""
    found = _drawn(index)
    moved = LookStatistics(found.estimate + shift, found.se, found.renewable)
    return moved, z_scores(moved.estimate, moved.se, MARGIN)


def naive(z: np.ndarray, clusters: int) -> np.ndarray:
    """Naive peeking: decide at the first look whose 95 % t interval clears the margin (-1: never)."""
    from scipy import special

    crossed = np.abs(z) >= float(special.stdtrit(clusters - 1, 0.975))
    first = np.argmax(crossed, axis=1)
    sign = np.take_along_axis(z, first[:, None], axis=1)[:, 0]
    return np.where(crossed.any(axis=1), np.where(sign > 0, DECISIONS.index(PASS), DECISIONS.index(FAIL)), -1)


def _rate(code: np.ndarray, word: str) -> tuple[float, float, float]:
    hits = int(np.sum(code == DECISIONS.index(word)))
    return (hits / RUNS, *wilson(hits, RUNS))


def _shown(rate: tuple[float, float, float]) -> str:
    return f"{100 * rate[0]:5.2f} % [{100 * rate[1]:.2f}, {100 * rate[2]:.2f}]"


@pytest.mark.parametrize("index", range(len(PAIRINGS)), ids=[p.name for p in PAIRINGS])
def test_at_the_margin_each_wrong_decision_stays_within_alpha(index: int) -> None:
    pairing = PAIRINGS[index]
    found, z = looks_of(index)
    rows = []
    ends = {}
    for label, plan in (("the rule", PLAN), ("with futility", STOPPING)):
        code, stop = decide_looks(z, plan, clusters=pairing.prompts, renewable=found.renewable)
        ends[label] = (code, stop)
        rates = {word: _rate(code, word) for word in (FAIL, PASS)}
        for word, (_, low, high) in rates.items():
            assert low <= ALPHA / 2 and high < ALPHA, (pairing.name, label, word, rates[word])
        futile = f", {100 * np.mean(code == DECISIONS.index(FUTILE)):4.1f} % futile" if plan.futility else ""
        rows.append(f"{label:<14} false fail {_shown(rates[FAIL])}  false pass {_shown(rates[PASS])}  "
                    f"extra rounds {np.mean(stop - 1):.2f}{futile}")  # fmt: skip
    peeked = naive(z, pairing.prompts)
    wrong = int(np.sum(peeked >= 0))  # every decision at the margin is wrong
    rows.append(f"{'naive peeking':<14} false fail {_shown(_rate(peeked, FAIL))}  false pass "
                f"{_shown(_rate(peeked, PASS))}  either {100 * wrong / RUNS:.2f} %")  # fmt: skip
    print("".join(f"\n{pairing.name:<46} {row}" for row in rows))
    assert wilson(wrong, RUNS)[0] > ALPHA, (pairing.name, wrong / RUNS)  # the test can fail: peeking does
    # The stop decides nothing the rule without it would not: each decided case ends the same, at the same look.
    (plain, plain_stop), (code, stop) = ends["the rule"], ends["with futility"]
    decided = np.isin(code, [DECISIONS.index(PASS), DECISIONS.index(FAIL)])
    assert np.array_equal(code[decided], plain[decided]) and np.array_equal(stop[decided], plain_stop[decided])
    assert np.mean(stop - 1) <= np.mean(plain_stop - 1)


@pytest.mark.parametrize("index", range(len(PAIRINGS)), ids=[p.name for p in PAIRINGS])
def test_near_the_margin_the_futility_stop_saves_rounds_and_gives_up_almost_no_decision(index: int) -> None:
    """1.5 first-look standard errors on the good side of the margin (a drop well within the
    tolerance, but within noise at the first look): how often the rule decides, with how many extra
    rounds, with and without the stop, against the four a fixed --novelty-repeat 5 spends."""
    pairing = PAIRINGS[index]
    found, z = looks_of(index, shift=1.5 * pairing.first_se())
    ends = [decide_looks(z, plan, clusters=pairing.prompts, renewable=found.renewable) for plan in (PLAN, STOPPING)]
    decided = [np.isin(code, [DECISIONS.index(PASS), DECISIONS.index(FAIL)]) for code, _ in ends]
    extra = [float(np.mean(stop - 1)) for _, stop in ends]
    lost = float(np.mean(decided[0] & ~decided[1]))
    wrong = float(np.mean(ends[1][0] == DECISIONS.index(FAIL)))
    print(f"\n{pairing.name:<46} 1.5 SE inside the margin: decided {100 * decided[0].mean():.1f} % -> "
          f"{100 * decided[1].mean():.1f} % with futility ({100 * lost:.2f} % given up, {100 * wrong:.2f} % "
          f"wrongly failed); extra rounds {extra[0]:.2f} -> {extra[1]:.2f}")  # fmt: skip
    assert lost < 0.01 and wrong < ALPHA / 2 and extra[1] <= extra[0] < LOOKS - 1


@pytest.mark.parametrize("index", range(len(PAIRINGS)), ids=[p.name for p in PAIRINGS])
def test_far_from_the_margin_the_first_look_decides(index: int) -> None:
    pairing = PAIRINGS[index]
    # 8 first-look SEs of the model (the same live or frozen), 10 on a tail of 10 prompts: its SE is
    # estimated on 9 degrees of freedom and its first boundary is 3.0 (at 8, 1 case in 4,000 continued).
    far = (10.0 if pairing.prompts < 20 else 8.0) * pairing.first_se()
    for sign, word in ((1.0, PASS), (-1.0, FAIL)):
        found, z = looks_of(index, shift=sign * far)
        code, stop = decide_looks(z, STOPPING, clusters=pairing.prompts, renewable=found.renewable)
        assert np.all(stop == 1) and np.all(code == DECISIONS.index(word)), (pairing.name, word)


#: Skewed, discrete answers against a frozen snapshot (utility_k's shape): 20 prompts, a per-prompt
#: level, and each value one or two points above it, or now and then (8 %) 2 to 5 points below.
SKEWED_RUNS, SKEWED_PROMPTS = 1000, 20


def _skewed(rng: np.random.Generator, shape: tuple[int, ...], level: np.ndarray) -> np.ndarray:
    drop = rng.random(shape) < 0.08
    return level + np.where(drop, -rng.integers(2, 6, shape), rng.integers(0, 2, shape)).astype(float)


def test_skewed_discrete_answers_against_a_snapshot_keep_the_level_read_by_randomisation() -> None:
    """Unchanged weights (the candidate draws as the snapshot did; tolerance 0): every fail is false.
    Z read on Student's t failed about 5 % of these cases against the 2.5 % promised (the randomisation
    test's docstring in :mod:`pytest_novelty.metrics.sequential_paired` says why); the rule as the gate
    runs it (:func:`paired_decision`) stays within α/2."""
    rng = np.random.default_rng(900)
    level = rng.gamma(2.0, 2.0, size=(SKEWED_RUNS, 1, SKEWED_PROMPTS)).round()
    candidate = _skewed(rng, (SKEWED_RUNS, LOOKS, SKEWED_PROMPTS), level)
    stored = _skewed(rng, (SKEWED_RUNS, 1, SKEWED_PROMPTS), level)
    ones = np.ones_like(candidate)
    found = paired_looks(Rounds(candidate, ones), Rounds(stored, ones[:, :1]), frozen=True)
    on_t, _ = decide_looks(z_scores(found.estimate, found.se, 0.0), STOPPING, clusters=SKEWED_PROMPTS,
                           renewable=found.renewable)  # fmt: skip
    by_t = int(np.sum(on_t == DECISIONS.index(FAIL)))
    fails = sum(
        paired_decision(list(candidate[r]), [stored[r, 0]], 0.0, higher_is_better=True, plan=STOPPING,
                        frozen=True).decision == FAIL
        for r in range(SKEWED_RUNS)
    )  # fmt: skip
    print(f"\nskewed discrete answers, frozen snapshot, {SKEWED_PROMPTS} prompts: false fail on the t reading "
          f"{_shown((by_t / SKEWED_RUNS, *wilson(by_t, SKEWED_RUNS)))}, by randomisation "
          f"{_shown((fails / SKEWED_RUNS, *wilson(fails, SKEWED_RUNS)))} (alpha/2 = {100 * ALPHA / 2:.1f} %)")
    assert wilson(by_t, SKEWED_RUNS)[0] > ALPHA / 2  # the t reading's level is broken here: the test can fail
    assert wilson(fails, SKEWED_RUNS)[0] <= ALPHA / 2 and fails / SKEWED_RUNS <= ALPHA / 2
