"""The sequential rule's parts: boundaries against published values, one case's looks, the edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_novelty.metrics.sequential import (
    CONTINUE,
    DECISIONS,
    FAIL,
    PASS,
    UNDECIDED,
    SequentialPlan,
    boundaries,
    decide_looks,
    look_statistics,
    sequential_decision,
    spent,
    z_scores,
)
from pytest_novelty.metrics.stats import top_fraction_mean

FIVE = [0.2, 0.4, 0.6, 0.8, 1.0]


@pytest.mark.parametrize(
    ("fractions", "spending", "published"),
    [
        # Lan-DeMets, two-sided alpha 0.05, equally spaced looks (as gsDesign and ldbounds print them).
        (FIVE, "pocock", [2.4380, 2.4268, 2.4101, 2.3966, 2.3859]),
        (FIVE, "obrien-fleming", [4.8769, 3.3569, 2.6803, 2.2898, 2.0310]),
        ([1 / 3, 2 / 3, 1.0], "obrien-fleming", [3.7103, 2.5114, 1.9930]),
        ([1.0], "pocock", [1.9600]),
    ],
)
def test_boundaries_are_the_published_ones(fractions: list[float], spending: str, published: list[float]) -> None:
    np.testing.assert_allclose(boundaries(fractions, 0.05, spending), published, atol=5e-4)


def test_a_look_does_not_depend_on_the_looks_after_it() -> None:
    whole = boundaries(FIVE, 0.05)
    np.testing.assert_allclose(boundaries(FIVE[:3], 0.05), whole[:3])
    assert spent(0.05, 1.0) == pytest.approx(0.05) and spent(0.05, 1.0, "obrien-fleming") == pytest.approx(0.05)
    assert spent(0.05, 0.2) > spent(0.05, 0.2, "obrien-fleming")  # Pocock spends early


def test_the_boundary_on_few_prompts_is_read_on_students_t() -> None:
    plan = SequentialPlan(0.05, 5)
    ten, many = plan.critical(10), plan.critical(10_000)
    assert np.all(ten > many) and many == pytest.approx(plan.boundaries(), abs=2e-3)
    assert np.all(np.isinf(plan.critical(1)))


def _rounds(rng: np.random.Generator, shift: float, looks: int, prompts: int = 40) -> list[np.ndarray]:
    effect = rng.normal(0.0, 0.1, size=(prompts, 1))
    return [0.5 + shift + effect + rng.normal(0.0, 0.3, size=(prompts, 2)) for _ in range(looks)]


def test_one_case_is_decided_as_the_vectorised_rule_decides_it() -> None:
    rng = np.random.default_rng(5)
    plan = SequentialPlan(0.05, 4)
    for case in range(40):
        rounds = _rounds(rng, shift=rng.normal(0.0, 0.05), looks=4)
        rounds[case % 4][0, 0] = np.nan  # an unscored sample is left out
        decision = sequential_decision(rounds, 0.5, higher_is_better=True, plan=plan)
        present = [~np.isnan(r) for r in rounds]
        sums = np.stack([np.where(p, r, 0.0).sum(axis=1) for r, p in zip(rounds, present, strict=True)])
        counts = np.stack([p.sum(axis=1) for p in present]).astype(float)
        estimate, se = look_statistics(sums, counts)
        code, stop = decide_looks(z_scores(estimate, se, 0.5), plan, clusters=40)
        assert decision.decision == DECISIONS[int(code)] and decision.rounds == int(stop)
        everything = np.hstack(rounds[: decision.rounds])
        assert decision.looks[-1].estimate == pytest.approx(np.nanmean(everything))
        assert [look.decision for look in decision.looks[:-1]] == [CONTINUE] * (decision.rounds - 1)


def test_it_stops_at_the_first_crossing_and_a_max_bound_reads_the_other_way() -> None:
    rng = np.random.default_rng(6)
    plan = SequentialPlan(0.05, 5)
    high = _rounds(rng, shift=0.3, looks=3)
    up = sequential_decision(high, 0.5, higher_is_better=True, plan=plan)
    assert (up.decision, up.rounds, up.decided) == (PASS, 1, True)  # rounds 2 and 3 are never looked at
    down = sequential_decision(high, 0.5, higher_is_better=False, plan=plan)
    assert (down.decision, down.rounds) == (FAIL, 1)
    assert up.looks[0].boundary == pytest.approx(plan.critical(40)[0])


def test_at_the_bound_it_continues_then_is_undecided_at_the_last_look() -> None:
    plan = SequentialPlan(0.05, 3)
    rounds = [np.array([[0.4, 0.6], [0.6, 0.4], [0.5, 0.5]])] * 3
    assert sequential_decision(rounds[:2], 0.5, higher_is_better=True, plan=plan).decision == CONTINUE
    last = sequential_decision(rounds, 0.5, higher_is_better=True, plan=plan)
    assert (last.decision, last.rounds, last.decided) == (UNDECIDED, 3, False)
    with pytest.raises(ValueError, match="6 looks for a plan of 3"):
        sequential_decision(rounds * 2, 0.5, higher_is_better=True, plan=plan)


def test_constant_values_and_unscored_cases() -> None:
    plan = SequentialPlan(0.05, 2)
    same = [np.full((5, 2), 0.7)]
    assert sequential_decision(same, 0.5, higher_is_better=True, plan=plan).decision == PASS  # SE 0, above
    assert sequential_decision([np.full((5, 2), 0.5)], 0.5, higher_is_better=True, plan=plan).decision == CONTINUE
    unscored = [np.full((5, 2), np.nan)] * 2
    assert sequential_decision(unscored, 0.5, higher_is_better=True, plan=plan).decision == UNDECIDED
    per_prompt = [np.linspace(0.6, 0.9, 30)]  # one value per prompt (NoveltyBench's metrics)
    assert sequential_decision(per_prompt, 0.5, higher_is_better=True, plan=plan).decision == PASS


def test_a_top_fraction_case_is_judged_on_its_own_statistic() -> None:
    rng = np.random.default_rng(7)
    rounds = [rng.random((50, 4)) for _ in range(2)]
    plan = SequentialPlan(0.05, 3)
    found = sequential_decision(rounds, 0.5, higher_is_better=True, plan=plan, top_fraction=0.1)
    assert found.looks[0].estimate == pytest.approx(top_fraction_mean(rounds[0].ravel(), 0.1))
    assert found.decision == PASS and found.rounds == 1


def test_a_share_uses_the_score_statistic_not_walds() -> None:
    # 0 of 200 answers unscored against unscored <= 0.05: Wald's SE is 0 (Z = -inf); the score
    # statistic's is the bound's own, sqrt(0.05 * 0.95 / 200), and still decides it at once.
    plan = SequentialPlan(0.05, 5)
    none = [np.zeros((100, 2))]
    found = sequential_decision(none, 0.05, higher_is_better=False, plan=plan, share=True)
    assert found.decision == PASS and found.looks[0].z == pytest.approx(-0.05 / math.sqrt(0.05 * 0.95 / 200))
    # 8 of 200 (4 %) against 5 %: within noise, so it continues, where Wald would be more confident.
    some = np.zeros((100, 2))
    some[:8, 0] = 1.0
    share = sequential_decision([some], 0.05, higher_is_better=False, plan=plan, share=True)
    wald = sequential_decision([some], 0.05, higher_is_better=False, plan=plan)
    assert share.decision == CONTINUE and abs(share.looks[0].z) < abs(wald.looks[0].z)


@pytest.mark.parametrize(
    ("call", "words"),
    [(lambda: SequentialPlan(0.05, 0), "looks must be"), (lambda: SequentialPlan(1.0, 3), "alpha must lie"),
     (lambda: SequentialPlan(0.05, 3, "linear"), "spending must be one of"),
     (lambda: boundaries([0.5, 0.4], 0.05), "fractions must increase")],
)  # fmt: skip
def test_bad_plans_say_what_is_wrong(call: object, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        call()  # type: ignore[operator]
