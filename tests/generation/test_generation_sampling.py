"""Per-row seeded sampling: filtering semantics and the distribution of the draws."""

from __future__ import annotations

import math
import random

import pytest
import torch

from pytest_novelty.generation.sampling import draw, filtered_probs, next_tokens

LOGITS = torch.log(torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05]]))


def test_top_k_keeps_the_k_most_likely() -> None:
    probs = filtered_probs(LOGITS, temperature=1.0, top_k=2)
    assert probs[0].tolist() == pytest.approx([0.5 / 0.7, 0.2 / 0.7, 0, 0, 0])


def test_top_p_keeps_the_smallest_set_reaching_p() -> None:
    # 0.5 + 0.2 = 0.7 < 0.8, so the third token is needed; the fourth is not.
    probs = filtered_probs(LOGITS, temperature=1.0, top_p=0.8)
    assert probs[0].tolist() == pytest.approx([0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0])
    # A tiny p still keeps the most likely token.
    assert filtered_probs(LOGITS, temperature=1.0, top_p=0.01)[0].tolist() == [1.0, 0, 0, 0, 0]


def test_temperature_sharpens_and_zero_is_greedy() -> None:
    cold = filtered_probs(LOGITS, temperature=0.5)[0]
    assert cold[0] > 0.5 and math.isclose(float(cold.sum()), 1.0)
    rngs = [random.Random(1)]
    assert next_tokens(LOGITS, rngs, temperature=0.0).tolist() == [0]


def test_draws_follow_the_distribution() -> None:
    rng = random.Random(0)
    probs = filtered_probs(LOGITS.repeat(20_000, 1), temperature=1.0)
    tokens = draw(probs, [rng.random() for _ in range(20_000)])
    freq = torch.bincount(tokens, minlength=5).double() / 20_000
    expected = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05], dtype=torch.float64)
    # Pearson chi-square with 4 degrees of freedom: 18.47 is the 0.1% critical value.
    chi2 = float((((freq - expected) ** 2) / expected).sum() * 20_000)
    assert chi2 < 18.47


def test_filtered_tokens_are_never_drawn() -> None:
    probs = filtered_probs(LOGITS.repeat(1000, 1), temperature=1.0, top_k=3)
    rng = random.Random(5)
    tokens = draw(probs, [rng.random() for _ in range(1000)] + [])
    assert set(tokens.tolist()) <= {0, 1, 2}
    # The edges of the unit interval land on allowed tokens too.
    edges = draw(probs[:3], [0.0, 0.999999999, 1.0])
    assert set(edges.tolist()) <= {0, 1, 2}


def test_a_row_draws_the_same_whatever_its_neighbours() -> None:
    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(0))
    alone = [int(next_tokens(logits[i : i + 1], [random.Random(i)], temperature=0.9, top_p=0.9)) for i in range(6)]
    together = next_tokens(logits, [random.Random(i) for i in range(6)], temperature=0.9, top_p=0.9).tolist()
    assert together == alone
