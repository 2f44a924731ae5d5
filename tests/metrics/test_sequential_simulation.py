"""Proof by simulation: the sequential rule keeps each wrong decision within α over all its looks.

Synthetic suites are drawn from a known model with a prompt effect and a sample effect, as real
suites have: per prompt an effect b_i, per sample noise on top, every round drawing new samples of
the same prompts (the prompts are drawn once per suite). The true value is the population mean, so
a suite drawn with its mean exactly at the bound makes every decision wrong: a fail where the value
meets a ``min`` bound, or a pass where it does not (the pass rate at the bound is the limit of the
false-pass rate just below it). Each scenario draws 4,000 suites, seeded, and runs the rule of
:mod:`pytest_novelty.metrics.sequential` on them (its own vectorised code), with α = 0.05 and five
looks (the first pass and four more rounds). Each wrong decision is nominally α/2 = 2.5 %; the test
asserts that each rate's Wilson 99 % interval reaches down to α/2 or below and stays below α, and
prints the rates with their intervals (the figures the closing note quotes). A naive re-test (decide
as soon as the 95 % interval clears the bound) is run on the same suites to show what the rule
prevents, and suites far from the bound must be decided by the first pass, with no extra round.
The same suites are judged with the futility stop too (``SequentialPlan(futility=True)``): the same
bounds on each rate, nothing decided that the rule without it would not decide, fewer rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from pytest_novelty.metrics.sequential import (
    DECISIONS,
    FAIL,
    FUTILE,
    PASS,
    Rounds,
    decide_looks,
    mean_looks,
    z_scores,
)
from pytest_novelty.metrics.sequential_plan import SequentialPlan

RUNS, LOOKS, ALPHA = 4000, 5, 0.05
PLAN, FUTILE_PLAN = SequentialPlan(ALPHA, LOOKS), SequentialPlan(ALPHA, LOOKS, futility=True)


@dataclass(frozen=True)
class Scenario:
    """A suite model: prompts, samples per round, the prompt effect's and the sample noise's spread
    (``kind="normal"``), or per-prompt Bernoulli shares drawn from Beta(a, b) (``kind="share"``)."""

    name: str
    prompts: int
    samples: int
    prompt_sd: float = 0.1
    sample_sd: float = 0.25
    kind: str = "normal"
    a: float = 2.0
    b: float = 5.0

    @property
    def truth(self) -> float:
        return 0.5 if self.kind == "normal" else self.a / (self.a + self.b)

    def first_se(self) -> float:
        """The first pass's standard error of the mean, from the model (for 'far from the bound')."""
        if self.kind == "normal":
            return math.sqrt(self.prompt_sd**2 / self.prompts + self.sample_sd**2 / (self.prompts * self.samples))
        p = self.truth
        between = self.a * self.b / ((self.a + self.b) ** 2 * (self.a + self.b + 1))
        return math.sqrt(between / self.prompts + (p * (1 - p) - between) / (self.prompts * self.samples))

    def draw(self, rng: np.random.Generator, shift: float = 0.0) -> Rounds:
        """Per-round, per-prompt sums, counts and sums of squares of RUNS suites, shaped (runs, looks, prompts)."""
        shape = (RUNS, LOOKS, self.prompts, self.samples)
        if self.kind == "normal":
            effect = rng.normal(0.0, self.prompt_sd, size=(RUNS, 1, self.prompts, 1))
            values = self.truth + shift + effect + rng.normal(0.0, self.sample_sd, size=shape)
        else:
            p = np.clip(rng.beta(self.a, self.b, size=(RUNS, 1, self.prompts, 1)) + shift, 0.0, 1.0)
            values = (rng.random(shape) < p).astype(float)
        return Rounds(values.sum(axis=-1), np.full(values.shape[:-1], float(self.samples)), (values**2).sum(axis=-1))


SCENARIOS = (
    Scenario("quality, sample noise first", 100, 2),
    Scenario("quality, prompts first", 100, 2, prompt_sd=0.2, sample_sd=0.05),
    Scenario("q@Tail's tail, 10 prompts", 10, 2),
    Scenario("a share (coverage)", 100, 2, kind="share"),
    Scenario("a rare share (unscored)", 100, 2, kind="share", a=1.0, b=19.0),
)


def wilson(hits: int, runs: int, z: float = 2.576) -> tuple[float, float]:
    """Wilson's 99 % score interval of a binomial rate."""
    p = hits / runs
    centre = (p + z * z / (2 * runs)) / (1 + z * z / runs)
    half = z / (1 + z * z / runs) * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs))
    return centre - half, centre + half


def run(
    scenario: Scenario, seed: int, shift: float = 0.0, plan: SequentialPlan = PLAN
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rule's decision code and stopping look per suite, each suite's Z at every look (a share's the
    score statistic, as :func:`sequential_decision` reads a share) and its renewable share."""
    drawn = scenario.draw(np.random.default_rng(seed), shift)
    found = mean_looks(drawn)
    generations = np.cumsum(drawn.counts, axis=-2).sum(axis=-1) if scenario.kind == "share" else None
    z = z_scores(found.estimate, found.se, scenario.truth, generations=generations)
    code, stop = decide_looks(z, plan, clusters=scenario.prompts, renewable=found.renewable)
    return code, stop, z, found.renewable


def naive(z: np.ndarray, clusters: int) -> np.ndarray:
    """A naive re-test: decide at the first look whose 95 % t interval clears the bound."""
    from scipy import special

    critical = float(special.stdtrit(clusters - 1, 0.975))
    crossed = np.abs(z) >= critical
    first = np.argmax(crossed, axis=1)
    sign = np.take_along_axis(z, first[:, None], axis=1)[:, 0]
    return np.where(crossed.any(axis=1), np.where(sign > 0, DECISIONS.index(PASS), DECISIONS.index(FAIL)), -1)


@pytest.mark.parametrize("index", range(len(SCENARIOS)), ids=[s.name for s in SCENARIOS])
def test_at_the_bound_each_wrong_decision_stays_within_alpha(index: int) -> None:
    scenario = SCENARIOS[index]
    code, stop, z, renewable = run(scenario, seed=100 + index)
    rates = {}
    for word in (FAIL, PASS):
        hits = int(np.sum(code == DECISIONS.index(word)))
        rates[word] = (hits / RUNS, *wilson(hits, RUNS))
    hits = int(np.sum(naive(z, scenario.prompts) == DECISIONS.index(FAIL)))
    naive_fail = (hits / RUNS, *wilson(hits, RUNS))
    extra = float(np.mean(stop - 1))
    print(f"{scenario.name}: {RUNS} suites at the bound, {LOOKS} looks; false fail {100 * rates[FAIL][0]:.2f} % "
          f"[{100 * rates[FAIL][1]:.2f}, {100 * rates[FAIL][2]:.2f}], false pass {100 * rates[PASS][0]:.2f} % "
          f"[{100 * rates[PASS][1]:.2f}, {100 * rates[PASS][2]:.2f}] (99 % Wilson; nominal {100 * ALPHA / 2:g} % "
          f"each); naive re-test false fail {100 * naive_fail[0]:.2f} % [{100 * naive_fail[1]:.2f}, "
          f"{100 * naive_fail[2]:.2f}]; mean extra rounds {extra:.2f}")  # fmt: skip
    for word, (_, low, high) in rates.items():
        assert low <= ALPHA / 2 and high < ALPHA, (scenario.name, word, rates[word])
    if scenario.name == "quality, sample noise first":  # independent-ish rounds: naive looks inflate the error
        assert naive_fail[1] > ALPHA / 2, naive_fail
    # The same suites with the futility stop: no more wrong decisions (it decides nothing the rule
    # without it would not, at the same look), and fewer rounds.
    futile, futile_stop = decide_looks(z, FUTILE_PLAN, clusters=scenario.prompts, renewable=renewable)
    decided = np.isin(futile, [DECISIONS.index(PASS), DECISIONS.index(FAIL)])
    assert np.array_equal(futile[decided], code[decided]) and np.array_equal(futile_stop[decided], stop[decided])
    stopped = {word: (hits / RUNS, *wilson(hits, RUNS)) for word in (FAIL, PASS)
               for hits in [int(np.sum(futile == DECISIONS.index(word)))]}  # fmt: skip
    for word, (_, low, high) in stopped.items():
        assert low <= ALPHA / 2 and high < ALPHA, (scenario.name, "futility", word, stopped[word])
    print(f"{scenario.name}: with the futility stop, false fail {100 * stopped[FAIL][0]:.2f} % "
          f"[{100 * stopped[FAIL][1]:.2f}, {100 * stopped[FAIL][2]:.2f}], false pass {100 * stopped[PASS][0]:.2f} % "
          f"[{100 * stopped[PASS][1]:.2f}, {100 * stopped[PASS][2]:.2f}]; mean extra rounds {extra:.2f} -> "
          f"{float(np.mean(futile_stop - 1)):.2f}, {100 * np.mean(futile == DECISIONS.index(FUTILE)):.1f} % "
          "stopped for futility")  # fmt: skip
    assert np.mean(futile_stop - 1) <= extra


@pytest.mark.parametrize("index", range(len(SCENARIOS)), ids=[s.name for s in SCENARIOS])
def test_far_from_the_bound_the_first_pass_decides_with_no_extra_round(index: int) -> None:
    # Far: 8 first-pass standard errors of the model away. A share of 5 % cannot lie that far below its
    # bound (0 is 3 standard errors away with 200 answers), so the rare share is checked above it only,
    # at 10 standard errors (the shifted shares spread more than the model's SE at the bound says).
    scenario = SCENARIOS[index]
    rare = scenario.name.startswith("a rare share")
    for sign, word in ((1.0, PASS), (-1.0, FAIL)):
        if rare and sign < 0:
            continue
        code, stop, _, _ = run(scenario, seed=200 + index, shift=sign * (10.0 if rare else 8.0) * scenario.first_se(),
                               plan=FUTILE_PLAN)  # fmt: skip
        assert np.all(stop == 1), (scenario.name, word, int(np.sum(stop > 1)))
        assert np.all(code == DECISIONS.index(word)), (scenario.name, word)


def test_near_the_bound_it_spends_rounds_and_decides_most_cases() -> None:
    """Within noise at the first pass (the true value 1.5 first-pass SEs above the bound): how many
    extra rounds the rule asks for, and how often it ends decided, against the four extra rounds a
    fixed --novelty-repeat 5 spends on every case."""
    scenario = SCENARIOS[0]
    code, stop, z, renewable = run(scenario, seed=300, shift=1.5 * scenario.first_se())
    decided = float(np.mean((code == DECISIONS.index(PASS)) | (code == DECISIONS.index(FAIL))))
    wrong = float(np.mean(code == DECISIONS.index(FAIL)))
    extra = float(np.mean(stop - 1))
    print(f"1.5 SE above the bound: decided {100 * decided:.1f} % of {RUNS} suites ({100 * wrong:.2f} % wrongly "
          f"failed), {extra:.2f} extra rounds on average against {LOOKS - 1} for a fixed repeat")  # fmt: skip
    assert decided > 0.5 and wrong < ALPHA / 2 and extra < LOOKS - 1
    futile, futile_stop = decide_looks(z, FUTILE_PLAN, clusters=scenario.prompts, renewable=renewable)
    kept = float(np.mean(np.isin(futile, [DECISIONS.index(PASS), DECISIONS.index(FAIL)])))
    print(f"1.5 SE above the bound, with the futility stop: decided {100 * kept:.1f} %, "
          f"{float(np.mean(futile_stop - 1)):.2f} extra rounds on average")  # fmt: skip
    assert decided - kept < 0.01 and np.mean(futile_stop - 1) <= extra
