"""NoveltyBench's mapping from a reward model's raw reward to its 1-10 quality scale.

Source: Zhang et al. (2025), "NoveltyBench"; reference code ``src/score.py``
(``reward_thresholds``). Pure Python, no model: the ``reward:`` judge maps its rewards with it; the
metrics layer receives the mapped 1-10 scores and never the rewards themselves.
"""

from __future__ import annotations

import bisect
import itertools
import math
import numbers
from collections.abc import Sequence

#: NoveltyBench's cut points from a raw Skywork-Reward-Gemma-2-27B-v0.2 reward to the 1-10 scale
#: (``reward_thresholds`` in the reference's ``src/score.py``).
NOVELTYBENCH_REWARD_THRESHOLDS: tuple[float, ...] = (
    -7.71875, -6.28125, -6.0, -5.71875, -5.5, -5.0, -4.375, -3.4375, -2.046875,
)  # fmt: skip


def reward_to_utility(reward: float, thresholds: Sequence[float] = NOVELTYBENCH_REWARD_THRESHOLDS) -> int:
    """Map a reward model's raw reward to NoveltyBench's 1-10 scale: 1 + the number of thresholds
    strictly below ``reward`` (the reference's ``bisect_left(thresholds, reward) + 1``), so a reward on
    a threshold gets the lower score. ``thresholds`` must be sorted ascending; NaN or infinite
    rewards are rejected."""
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real):
        raise ValueError(f"reward must be a number, got {reward!r}")
    if not math.isfinite(float(reward)):
        raise ValueError(f"reward must be finite, got {reward!r}")
    cuts = [float(value) for value in thresholds]
    if not cuts:
        raise ValueError("thresholds is empty")
    if any(not math.isfinite(value) for value in cuts) or any(low > high for low, high in itertools.pairwise(cuts)):
        raise ValueError(f"thresholds must be finite and sorted ascending, got {tuple(cuts)}")
    return bisect.bisect_left(cuts, float(reward)) + 1
