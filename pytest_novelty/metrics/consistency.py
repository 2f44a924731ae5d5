"""How consistent a judge is with itself: the spread of its samples on the same answer.

A rubric judge scores every answer ``[scoring] judge_samples`` times (5 by default) and the quality
is their mean; when the samples disagree, the mean carries judge noise on top of the checkpoint's.

* ``mean_sd``: the mean over answers of the sample sd of its scores (n − 1 denominator: with 5
  samples the population form reads 11 % lower), on the judge's scale (0-5 rubric points, 1-10 for
  reward models);
* ``wide_share``: the share of answers whose samples span ``span`` points or more (2 by default: on
  a 0-5 rubric, "weak" against "good").

Answers with fewer than two valid scores are left out of both and counted in ``skipped``; NaN for
both when no answer has two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pytest_novelty.metrics._validate import as_float_array, json_fields

#: The spread of an answer's samples, in points, from which it counts as inconsistent.
DEFAULT_SPAN = 2.0


@dataclass(frozen=True)
class JudgeConsistency:
    """The judge's spread over its samples of the same answer (module docstring)."""

    mean_sd: float
    wide_share: float
    answers: int
    skipped: int
    span: float

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly form (NaN becomes None)."""
        return json_fields(self)


def judge_consistency(scores: Sequence[Sequence[float]], *, span: float = DEFAULT_SPAN) -> JudgeConsistency:
    """The judge's consistency (module docstring) from each answer's sample scores
    (``JudgeResult.scores``; NaN left out); ``span`` must be positive."""
    if isinstance(span, bool) or not isinstance(span, (int, float)) or not span > 0 or math.isinf(span):
        raise ValueError(f"span must be a positive number of points, got {span!r}")
    sds, wide, skipped = [], 0, 0
    for index, samples in enumerate(scores):
        values = as_float_array(list(samples), f"scores[{index}]", allow_empty=True).ravel()
        values = values[~np.isnan(values)]
        if values.size < 2:
            skipped += 1
            continue
        sds.append(float(np.std(values, ddof=1)))
        wide += bool(values.max() - values.min() >= span)
    if not sds:
        return JudgeConsistency(math.nan, math.nan, 0, skipped, float(span))
    return JudgeConsistency(float(np.mean(sds)), wide / len(sds), len(sds), skipped, float(span))
