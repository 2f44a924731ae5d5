"""The sequential rule's parts: boundaries against published values, one case's looks, the edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_novelty.metrics import sequential_plan
from pytest_novelty.metrics.sequential import (
    CONTINUE,
    DECISIONS,
    FAIL,
    FUTILE,
    FUTILITY_REACH,
    PASS,
    UNDECIDED,
    Rounds,
    decide_looks,
    detectable_left,
    mean_looks,
    sequential_decision,
    within_variance,
    z_scores,
)
from pytest_novelty.metrics.sequential_plan import SequentialPlan, boundaries, spent
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
        estimate, se, _ = mean_looks(Rounds(sums, counts))
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


def test_a_huge_budget_plans_only_the_looks_it_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """--novelty-adaptive 99999999999999999999 buys 5·10¹⁷ looks of 200 samples: the rule must not
    compute a boundary for each (it did, and hung)."""
    asked: list[int] = []
    real = sequential_plan._boundaries

    def counted(fractions: tuple[float, ...], alpha: float, spending: str) -> tuple[float, ...]:
        asked.append(len(fractions))
        assert len(fractions) <= 10, f"boundaries of {len(fractions)} looks asked for"
        return real(fractions, alpha, spending)

    monkeypatch.setattr(sequential_plan, "_boundaries", counted)
    rng = np.random.default_rng(8)
    rounds = _rounds(rng, shift=0.0, looks=2)
    found = sequential_decision(rounds, 0.5, higher_is_better=True, plan=SequentialPlan(0.05, 100_000))
    assert found.decision == CONTINUE and asked and max(asked) <= 2
    huge = SequentialPlan(0.05, 99999999999999999999 // 200 + 1, futility=True)
    clear = sequential_decision(_rounds(rng, shift=0.8, looks=1), 0.5, higher_is_better=True, plan=huge)
    assert (clear.decision, clear.rounds) == (PASS, 1)  # a clear case (Z near 20) still passes its first look
    unsure = sequential_decision(rounds, 0.5, higher_is_better=True, plan=huge)
    assert unsure.decision == CONTINUE and math.isfinite(unsure.detectable)


def test_a_look_that_spends_almost_nothing_gets_its_finite_boundary() -> None:
    looks = 5 * 10**17
    first, second = boundaries([1 / looks, 2 / looks], 0.05)
    from scipy import special

    assert first == pytest.approx(-special.ndtri(spent(0.05, 1 / looks) / 2)) and 9.0 < first < 9.1
    assert second < first  # Pocock-type: nearly flat, a little lower as the looks add up
    assert np.isfinite(SequentialPlan(0.05, looks).critical(100, 2)).all()  # read by the tail, not Φ(c) = 1
    assert np.isinf(boundaries([1e-12, 1.0], 0.05, "obrien-fleming")[0])  # it spends nothing so early


@pytest.mark.parametrize(("looks", "spending"), [(2, "pocock"), (5, "pocock"), (20, "pocock"), (5, "obrien-fleming")])
@pytest.mark.parametrize("clusters", [10, 100])
def test_no_boundary_lies_below_the_floor(looks: int, spending: str, clusters: int) -> None:
    plan = SequentialPlan(0.05, looks, spending)
    assert np.all(plan.critical(clusters) >= plan.floor(clusters))
    assert plan.floor(10_000) == pytest.approx(1.96, abs=1e-3)


def _futility_paths(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Z paths of 20,000 cases over 5 looks near their bounds, and a renewable share for each."""
    rng = np.random.default_rng(seed)
    share = rng.uniform(0.0, 1.0, size=(20_000, 1))
    steps = rng.normal(rng.normal(0.0, 0.6, size=(20_000, 1)), 1.0, size=(20_000, 5))
    z = np.cumsum(steps, axis=1) / np.sqrt(np.arange(1, 6))
    return z, np.broadcast_to(share, z.shape)


def test_the_futility_stop_only_turns_decisions_into_undecided_ones() -> None:
    z, share = _futility_paths(9)
    without = decide_looks(z, SequentialPlan(0.05, 5), clusters=40, renewable=share)
    code, stop = decide_looks(z, SequentialPlan(0.05, 5, futility=True), clusters=40, renewable=share)
    decided = np.isin(code, [DECISIONS.index(PASS), DECISIONS.index(FAIL)])
    assert np.array_equal(code[decided], without[0][decided]) and np.array_equal(stop[decided], without[1][decided])
    futile = code == DECISIONS.index(FUTILE)
    assert futile.sum() > 1000 and np.all(stop[futile] < 5)  # it stops many, before the last look
    assert np.all(stop[futile] <= without[1][futile])  # never after the rule without it would have ended
    lost = np.isin(without[0][futile], [DECISIONS.index(PASS), DECISIONS.index(FAIL)]).mean()
    assert lost < 0.05  # what it gives up: a few cases the rule would have decided later


def test_the_futility_rule_is_the_stated_inequality() -> None:
    plan = SequentialPlan(0.05, 5, futility=True)
    q = plan.floor(40)
    for look, share in ((1, 0.0), (2, 0.3), (4, 0.9), (1, 0.9)):  # the last: futile at no Z
        final = math.sqrt(1 - share + share * look / 5)
        move = math.sqrt(share * (1 - look / 5))
        edge = q * final - FUTILITY_REACH * move  # |Z| below this is futile
        path = np.full((2, look), np.nan)  # the earlier looks neither cross nor stop (no value)
        path[:, -1] = [edge - 1e-6, edge + 1e-6] if edge > 0 else [0.0, 1e-6]
        code, _ = decide_looks(path, plan, clusters=40, renewable=np.full(path.shape, share))
        expected = [FUTILE, CONTINUE] if edge > 0 else [CONTINUE, CONTINUE]
        assert [DECISIONS[int(c)] for c in code] == expected, (look, share, edge)
    # Nothing but the prompts' spread (w = 0): at the first look, a Z of 1 cannot become a decision.
    assert DECISIONS[int(decide_looks([1.0], plan, clusters=40, renewable=[0.0])[0])] == FUTILE
    # All of it renewable: the same Z continues; at the plan's last look a case is undecided, not futile.
    assert DECISIONS[int(decide_looks([1.0], plan, clusters=40, renewable=[1.0])[0])] == CONTINUE
    last = [np.nan] * 4 + [0.0]  # only the last look has a value
    assert DECISIONS[int(decide_looks(last, plan, clusters=40, renewable=[0.0] * 5)[0])] == UNDECIDED


def test_what_the_budget_left_can_detect() -> None:
    from scipy import special

    plan = SequentialPlan(0.05, 5)
    found = detectable_left([0.02, 0.02], [0.5, 0.0], [1, 1], plan, clusters=40)
    reach = special.stdtrit(39, 0.975) + special.stdtrit(39, 0.8)
    np.testing.assert_allclose(found, [reach * 0.02 * math.sqrt(0.5 + 0.5 / 5), reach * 0.02])
    assert detectable_left(0.02, 1.0, 5, plan, clusters=40) == pytest.approx(reach * 0.02)  # nothing left to add


def test_the_renewable_share_is_the_within_prompt_variance_over_the_values_so_far() -> None:
    rng = np.random.default_rng(10)
    rounds = _rounds(rng, shift=0.0, looks=3)
    rounds[1][3, 1] = np.nan
    data = Rounds.of(rounds)
    found = mean_looks(data)
    everything = np.hstack(rounds)
    spread = np.nansum((everything - np.nanmean(everything, axis=1, keepdims=True)) ** 2)
    pooled = spread / (np.sum(~np.isnan(everything)) - everything.shape[0])
    s, c, q = data.cumulative()
    assert within_variance(s[2], c[2], q[2]) == pytest.approx(pooled)
    assert found.renewable[2] == pytest.approx(pooled / np.sum(~np.isnan(everything)) / found.se[2] ** 2)
    plain = mean_looks(Rounds(data.sums, data.counts))
    np.testing.assert_allclose(found.estimate, plain.estimate)
    assert np.all(plain.renewable == 1.0)  # no squares: unknown


def test_a_case_more_samples_cannot_move_stops_for_futility_with_what_it_could_detect() -> None:
    # Prompts spread 0.1, no sample noise to speak of, the value at the bound: rounds cannot help.
    rng = np.random.default_rng(11)
    effect = rng.normal(0.0, 0.1, size=(40, 1))
    effect -= effect.mean()
    rounds = [0.5 + effect + rng.normal(0.0, 0.001, size=(40, 2)) for _ in range(2)]
    found = sequential_decision(rounds, 0.5, higher_is_better=True, plan=SequentialPlan(0.05, 5, futility=True))
    assert (found.decision, found.rounds, found.decided) == (FUTILE, 1, False)
    assert found.detectable == pytest.approx(detectable_left(found.looks[0].se, 0.0, 1, SequentialPlan(0.05, 5),
                                                             clusters=40), rel=1e-3)  # fmt: skip
    plain = sequential_decision(rounds, 0.5, higher_is_better=True, plan=SequentialPlan(0.05, 5))
    assert plain.decision == CONTINUE
