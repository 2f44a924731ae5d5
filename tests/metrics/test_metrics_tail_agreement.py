"""Agreement with a reference ranking per bin from peak to tail: a planted answer is recovered."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from pytest_novelty.metrics.tail_agreement import kendall_tau_b, reference_scores, tail_agreement

MODELS = [f"m{i}" for i in range(8)]
REFERENCE = np.arange(8, 0, -1, dtype=float)  # m0 the best


def _unrelated() -> tuple[int, ...]:
    """An order of the eight models with Kendall's τ exactly 0 against the reference."""
    return next(p for p in itertools.permutations(range(8)) if stats.kendalltau(p, REFERENCE).statistic == 0)


def _planted(seed: int = 0, prompts: int = 500) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Models whose quality follows the reference on the 40 % highest-scored prompts only (bins 4 and 5
    of five), and an order unrelated to it (τ = 0) on the rest, with a little noise."""
    rng = np.random.default_rng(seed)
    ids = [f"q{i:03d}" for i in range(prompts)]
    scores = rng.random(prompts)
    tail = scores >= np.quantile(scores, 0.6)
    unrelated = 8.0 - np.array(_unrelated(), dtype=float)
    quality = np.empty((8, prompts))
    for k in range(prompts):
        planted = REFERENCE if tail[k] else unrelated
        quality[:, k] = 0.5 + 0.04 * planted / 8 + rng.normal(0.0, 0.02, 8)
    return ids, scores, quality


def test_the_planted_tail_agrees_and_the_peak_does_not() -> None:
    ids, scores, quality = _planted()
    found = tail_agreement(ids, scores, quality, REFERENCE, models=MODELS, bins=5, alpha=0.1, resamples=1000)
    taus = [b.tau for b in found.bins]
    print("tau per bin, peak to tail:", [f"{t:+.2f}" for t in taus], f"q@Tail(0.1) {found.tail.tau:+.2f}")
    assert [b.prompts for b in found.bins] == [100] * 5
    for b in found.bins[:3]:
        assert abs(b.tau) <= 0.15 and b.low <= 0.0 <= b.high, b  # near 0, interval holds 0
    for b in found.bins[3:]:
        assert b.tau >= 0.85 and b.low > 0.5, b  # near 1, interval well clear of 0
    assert found.tail.tau >= 0.85 and found.tail.prompts == 50
    # The bins run from the peak (lowest scores) to the tail (highest) without overlapping.
    assert all(a.score_high <= b.score_low for a, b in itertools.pairwise(found.bins))


def test_a_reversed_reference_flips_every_tau_and_ranks_are_scores_negated() -> None:
    ids, scores, quality = _planted(1, prompts=200)
    ranks = {m: i + 1 for i, m in enumerate(MODELS)}  # m0 ranked first: the same order as REFERENCE
    as_scores = reference_scores(ranks, MODELS, kind="rank")
    same = tail_agreement(ids, scores, quality, as_scores, models=MODELS, resamples=200)
    planted = tail_agreement(ids, scores, quality, REFERENCE, models=MODELS, resamples=200)
    flipped = tail_agreement(ids, scores, quality, -REFERENCE, models=MODELS, resamples=200)
    for a, b, c in zip(same.bins, planted.bins, flipped.bins, strict=True):
        assert a.tau == pytest.approx(b.tau) and c.tau == pytest.approx(-b.tau)


def test_the_vectorised_tau_b_is_scipys_with_ties_and_gaps() -> None:
    rng = np.random.default_rng(3)
    rows = np.round(rng.normal(size=(200, 7)), 1)  # rounding makes ties
    rows[rng.random(rows.shape) < 0.1] = np.nan
    reference = np.array([3.0, 1.0, 2.0, 2.0, 5.0, 4.0, 0.0])  # a tie in the reference too
    ours = kendall_tau_b(rows, reference)
    for row, value in zip(rows, ours, strict=True):
        keep = ~np.isnan(row)
        if keep.sum() < 2 or np.ptp(row[keep]) == 0 or np.ptp(reference[keep]) == 0:
            assert np.isnan(value)
            continue
        assert value == pytest.approx(stats.kendalltau(row[keep], reference[keep], variant="b").statistic)


def test_unranked_prompts_are_left_out_and_unscored_models_drop_out_of_a_bin() -> None:
    ids, scores, quality = _planted(2, prompts=60)
    scores[[0, 1]] = np.nan
    quality[3, :] = np.nan  # m3 was never scored: every bin ranks the other seven
    found = tail_agreement(ids, scores, quality, REFERENCE, models=MODELS, bins=3, resamples=100)
    assert sum(b.prompts for b in found.bins) == 58
    assert all(np.isnan(b.means[3]) for b in found.bins)
    assert all(not np.isnan(b.tau) for b in found.bins)


@pytest.mark.parametrize(
    ("change", "words"),
    [({"models": MODELS[:2]}, "at least three"), ({"bins": 0}, "bins must be"), ({"bins": 999}, "cannot fill")],
)
def test_bad_input_says_what_is_wrong(change: dict, words: str) -> None:
    ids, scores, quality = _planted(3, prompts=50)
    models = change.get("models", MODELS)
    with pytest.raises(ValueError, match=words):
        tail_agreement(ids, scores, quality[: len(models)], REFERENCE[: len(models)], models=models,
                       bins=change.get("bins", 5), resamples=50)  # fmt: skip
    with pytest.raises(ValueError, match="no entry for 'm9'"):
        reference_scores({"m0": 1.0}, ["m0", "m9"], kind="score")
