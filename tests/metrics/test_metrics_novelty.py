"""Per-generation novelty: the harmonic mean of quality and originality."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_novelty.metrics import novelty

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def test_known_values() -> None:
    result = novelty([0.5, 1.0, 0.25, 0.0, 1.0], [0.5, 1.0, 1.0, 0.0, 0.0])
    np.testing.assert_allclose(result, [0.5, 1.0, 0.4, 0.0, 0.0])
    assert result.dtype == np.float64


def test_both_zero_gives_zero_without_warning() -> None:
    with np.errstate(all="raise"):
        assert novelty(0.0, 0.0) == 0.0
        assert novelty([0.0, 0.0], [0.0, 0.0]).tolist() == [0.0, 0.0]


def test_nan_propagates() -> None:
    result = novelty([math.nan, 0.5, math.nan, 0.0], [0.5, math.nan, math.nan, math.nan])
    assert np.isnan(result).all()


def test_broadcasts_a_scalar() -> None:
    np.testing.assert_allclose(novelty(1.0, [0.0, 1.0]), [0.0, 1.0])


@pytest.mark.parametrize(
    ("quality", "originality", "message"),
    [
        ([0.5, 0.5], [0.5, 0.5, 0.5], "do not match"),
        ([1.5], [0.5], "quality must lie in"),
        ([0.5], [-0.1], "originality must lie in"),
        ([math.inf], [0.5], "finite"),
        (["high"], [0.5], "must be numbers"),
    ],
)
def test_rejects_bad_input(quality: list, originality: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        novelty(quality, originality)


@given(unit, unit)
def test_symmetric(q: float, o: float) -> None:
    assert novelty(q, o) == novelty(o, q)


@given(unit, unit)
def test_between_min_and_arithmetic_mean(q: float, o: float) -> None:
    value = float(novelty(q, o))
    tolerance = 1e-12
    assert min(q, o) - tolerance <= value <= (q + o) / 2 + tolerance
    assert value <= max(q, o) + tolerance


@given(unit)
def test_equals_the_value_when_both_agree(q: float) -> None:
    assert float(novelty(q, q)) == pytest.approx(q, abs=1e-15)


@given(st.lists(st.tuples(unit, unit), min_size=1, max_size=20))
def test_elementwise_matches_scalar(pairs: list[tuple[float, float]]) -> None:
    q, o = zip(*pairs, strict=True)
    together = novelty(list(q), list(o))
    one_by_one = [float(novelty(a, b)) for a, b in pairs]
    assert together.tolist() == one_by_one
