"""``--novelty-adaptive`` in the gate: the futility stop of every case, and regressions judged by the
paired sequential rule over rounds of the candidate (and of a live baseline), on real suite results.

The results are the pipeline's own types, filled with quality values drawn from a model whose
parts are known: a prompt effect both checkpoints share, the candidate's shift, and sample noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from pytest_novelty.gate.adaptive import (
    MAX_LOOKS,
    Adaptive,
    AdaptiveBudget,
    Look,
    adaptive_verdict,
    regression_verdict,
)
from pytest_novelty.gate.comparison import Comparison
from pytest_novelty.gate.record import CaseRecord
from pytest_novelty.gate.regression import compare, result_record
from pytest_novelty.gate.thresholds import check_threshold
from pytest_novelty.pipeline.results import SuiteAnswers, SuiteMetrics, SuiteResult, SuiteScores
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.schema import Suite
from pytest_novelty.suites.suite_file import load_suite
from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder

PROMPTS = [Prompt(f"p{i:02d}", "story", f"prompt {i}") for i in range(40)]
SAMPLES = 4


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    folder = tmp_path_factory.mktemp("suite")
    text = suite_toml(samples=SAMPLES, gate="tolerance_abs = 0.02", thresholds=[("quality", 0.5)])
    return load_suite(write_story_suite_folder(folder, story_prompts(2), text) / "story.toml")


def result(suite: Suite, quality: np.ndarray, model: str = "candidate") -> SuiteResult:
    """A suite result of these (prompts × samples) quality values, measured as the metrics step does."""
    means = np.nanmean(quality, axis=1)
    measured = SuiteMetrics({"quality": float(np.nanmean(quality))}, {"quality": means.tolist()}, {}, order=4,
                            novelty={4: quality})  # fmt: skip
    scores = SuiteScores(originality={4: quality}, quality=quality)
    return SuiteResult(SuiteAnswers(suite, model, PROMPTS, [["a"] * quality.shape[1]] * len(PROMPTS)), scores, measured)


def drawn(
    suite: Suite, seed: int, *, shift: float, interaction: float, noise: float, model: str
) -> Callable[[int], SuiteResult]:
    """Round k of a checkpoint: 0.5 + a prompt effect common to every checkpoint (seed 0) + ``shift`` +
    its own per-prompt interaction (seed ``seed``), plus sample noise new in every round."""
    effect = np.random.default_rng(0).normal(0.0, 0.15, len(PROMPTS))
    own = np.random.default_rng(seed).normal(0.0, interaction, len(PROMPTS))

    def round_of(k: int) -> SuiteResult:
        rng = np.random.default_rng([seed, k])
        values = (0.5 + effect + own + shift)[:, None] + rng.normal(0.0, noise, (len(PROMPTS), SAMPLES))
        return result(suite, values, model)

    return round_of


class Asked:
    """A checkpoint's rounds, each request counted."""

    def __init__(self, rounds: Callable[[int], SuiteResult]) -> None:
        self.rounds, self.asked = rounds, []  # type: ignore[var-annotated]

    def __call__(self, k: int) -> SuiteResult:
        self.asked.append(k)
        return self.rounds(k)


def judged(
    suite: Suite, candidate: Callable[[int], SuiteResult], baseline: Callable[[int], SuiteResult], *, live: bool,
    samples: int = 4 * 40 * SAMPLES * 2,
) -> tuple[Comparison, Comparison, Adaptive]:  # fmt: skip
    threshold = suite.thresholds[0]
    accepted = result_record(baseline(0), threshold, suite=suite)
    record = result_record(candidate(0), threshold, suite=suite)
    first = compare(accepted, record, alpha=0.05)
    found = regression_verdict(suite, first, accepted, record, candidate, baseline if live else None,
                               AdaptiveBudget(samples))  # fmt: skip
    assert found is not None
    return first, found[0], found[1]


def test_a_clear_regression_against_a_live_baseline_is_decided_regressed_drawing_both_sides(suite: Suite) -> None:
    candidate = Asked(drawn(suite, 4, shift=-0.1, interaction=0.02, noise=0.6, model="candidate"))
    baseline = Asked(drawn(suite, 14, shift=0.0, interaction=0.02, noise=0.6, model="baseline"))
    first, comparison, adaptive = judged(suite, candidate, baseline, live=True)
    assert first.status != "regressed"  # the first pass alone cannot tell (sample noise dominates)
    assert adaptive.decision == "fail" and adaptive.rounds >= 1 and adaptive.stopped == ""
    assert comparison.status == "regressed" and not comparison.passed
    looks = len(adaptive.looks)
    assert comparison.message.endswith(f": regression (decided by the sequential rule after {looks} looks)")
    assert comparison.candidate_value == first.candidate_value  # the value shown stays the first pass's
    assert sorted(set(candidate.asked)) == sorted(set(baseline.asked)) == list(range(looks))  # paired rounds
    assert adaptive.allowed == 5  # 4 rounds of 160 samples a side within a budget of 1,280
    assert adaptive.note("regression") == f"; regression decided after {adaptive.rounds} extra round" + (
        "s" if adaptive.rounds != 1 else "")


def test_against_a_frozen_snapshot_only_the_candidate_draws_and_a_clear_gain_is_decided_a_pass(suite: Suite) -> None:
    candidate = Asked(drawn(suite, 2, shift=0.05, interaction=0.0, noise=0.3, model="candidate"))
    snapshot = Asked(drawn(suite, 12, shift=0.0, interaction=0.0, noise=0.3, model="snapshot"))
    first, comparison, adaptive = judged(suite, candidate, snapshot, live=False)
    assert snapshot.asked == [0]  # the snapshot was stored once: its first pass is all there is of it
    assert set(candidate.asked) == set(range(len(adaptive.looks)))
    assert adaptive.decision == "pass" and adaptive.rounds == 1
    assert adaptive.allowed == 9  # a round costs the candidate's 160 samples only
    assert comparison.status == first.status == "improved" and comparison.passed


def test_a_case_the_budget_cannot_decide_stops_for_futility_and_keeps_its_first_comparison(suite: Suite) -> None:
    # The checkpoints differ prompt by prompt (interaction), by about the tolerance: more samples of the
    # same prompts cannot move the paired difference, so the rule gives up at once.
    candidate = drawn(suite, 1, shift=-0.02, interaction=0.2, noise=0.05, model="candidate")
    baseline = drawn(suite, 2, shift=0.0, interaction=0.2, noise=0.05, model="baseline")
    first, comparison, adaptive = judged(suite, candidate, baseline, live=True)
    assert adaptive.decision == "undecided" and adaptive.stopped == "futility"
    assert adaptive.rounds < adaptive.allowed - 1  # stopped with budget left
    assert comparison is first  # undecided: the first pass's comparison stands
    assert 0.0 < adaptive.detectable < 1.0
    assert adaptive.note("regression") == (f"; regression undecided after {adaptive.rounds} extra round"
                                           f"{'' if adaptive.rounds == 1 else 's'} (stopped for futility; the budget "
                                           f"left could detect {adaptive.detectable:.4f})")  # fmt: skip


def test_the_rule_leaves_alone_what_it_cannot_judge(suite: Suite) -> None:
    candidate = drawn(suite, 1, shift=0.0, interaction=0.0, noise=0.3, model="candidate")
    threshold = suite.thresholds[0]
    record = result_record(candidate(0), threshold, suite=suite)
    empty = result_record(result(suite, np.full((len(PROMPTS), SAMPLES), 0.5)), threshold, suite=suite)
    empty = replace(empty, value=None, per_prompt={})  # a snapshot whose value could not be computed
    first = compare(empty, record)
    assert regression_verdict(suite, first, empty, record, candidate, None, AdaptiveBudget(1000)) is None


def test_a_threshold_case_whose_samples_cannot_move_stops_for_futility_and_its_mode_reads_it(suite: Suite) -> None:
    # Every sample of a prompt alike: no round can change the estimate, and it is near its bound.
    effect = np.random.default_rng(0).normal(0.0, 0.2, len(PROMPTS))
    values = np.repeat((0.5 + effect - effect.mean() + 0.01)[:, None], SAMPLES, axis=1)
    rounds = Asked(lambda k: result(suite, values))
    threshold = suite.thresholds[0]
    first = check_threshold(suite.name, threshold, rounds(0).metrics)
    verdict, adaptive = adaptive_verdict(suite, threshold, first, rounds, None, AdaptiveBudget(10_000))
    assert adaptive.decision == "undecided" and adaptive.stopped == "futility" and adaptive.rounds == 0
    assert set(rounds.asked) == {0}  # no round drawn
    assert verdict.passed and "undecided (stopped for futility; the budget left could detect" in verdict.message
    assert "point mode reads the estimate of every round, 0.5100" in verdict.message


def test_a_time_bound_stops_the_rounds(suite: Suite) -> None:
    candidate = drawn(suite, 1, shift=-0.02, interaction=0.0, noise=1.0, model="candidate")
    baseline = drawn(suite, 2, shift=0.0, interaction=0.0, noise=1.0, model="baseline")
    threshold = suite.thresholds[0]
    accepted, record = (result_record(r(0), threshold, suite=suite) for r in (baseline, candidate))
    first = compare(accepted, record, alpha=0.05)
    ticks = iter(range(100, 10_000, 100))  # past the minute at the first look after the first pass
    found = regression_verdict(suite, first, accepted, record, candidate, baseline, AdaptiveBudget(10**6, minutes=1),
                               started=0.0, clock=lambda: float(next(ticks)))  # fmt: skip
    assert found is not None
    _, adaptive = found
    assert adaptive.rounds == 0 and adaptive.stopped == "time"


def test_a_budget_plans_at_most_max_looks() -> None:
    assert AdaptiveBudget(10_000_000).looks(200) == MAX_LOOKS
    assert AdaptiveBudget(600).looks(200) == 4 and AdaptiveBudget(100).looks(200) == 1


def test_how_a_rule_ended_a_case_round_trips_through_report_json() -> None:
    futile = Adaptive("undecided", (Look(0.31, 0.02, 0.5, 2.6), Look(0.30, 0.015, 0.0, 2.55)), 5, "futility", 0.0412)
    assert futile.note() == ("; undecided after 1 extra round (stopped for futility; the budget left could detect "
                             "0.0412)")  # fmt: skip
    assert Adaptive.from_json(futile.to_json()) == futile
    record = CaseRecord("story", "quality", ">=", 0.3, 0.31, "passed", regression_adaptive=futile)
    again = CaseRecord.from_json(record.to_json())
    assert again.regression_adaptive == futile and again.adaptive is None
    assert again.verdict_text() == ("pass; regression undecided after 1 extra round (stopped for futility; the budget "
                                    "left could detect 0.0412)")  # fmt: skip
    spent = Adaptive("undecided", futile.looks, 2, "budget")
    assert spent.note() == "; undecided after 1 extra round (budget spent)" and math.isnan(spent.detectable)
    assert Adaptive.from_json(spent.to_json()).stopped == "budget"

