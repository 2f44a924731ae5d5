"""Holm's step-down correction (the gate's regression test itself is tested in test_sign_flip.py)."""

from __future__ import annotations

import math

import pytest


def test_holm_rejects_step_down_and_adjusts_the_p_values() -> None:
    from pytest_novelty.metrics.stats import holm, holm_adjusted

    p = [0.01, 0.04, 0.03, 0.005]
    # Sorted: 0.005 ≤ 0.05/4, 0.01 ≤ 0.05/3, 0.03 > 0.05/2: stop; 0.04 is not rejected either.
    assert holm(p, 0.05) == [True, False, False, True]
    assert holm_adjusted(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.001, math.nan], 0.05) == [True, False]  # no test: never rejected, still counted
    assert holm_adjusted([0.001, math.nan])[0] == pytest.approx(0.002)
    assert holm([], 0.05) == []
    bonferroni = [x * len(p) <= 0.05 for x in p]
    assert sum(holm(p, 0.05)) >= sum(bonferroni)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.5], 0.05)
