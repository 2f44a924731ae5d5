"""How consistent a judge is with itself: the spread of its samples on the same answer.

A rubric judge scores every answer several times (``[scoring] judge_samples``, 5 by default) and
the answer's quality is their mean (:class:`pytest_novelty.scoring.judges.base.JudgeResult`
``scores``). When the samples of one answer disagree, that mean carries judge noise on top of the
checkpoint's own; a judge that often gives the same answer 1 point and 4 points is measuring
little. From the samples of every answer:

* ``mean_sd``: the mean over answers of the sample standard deviation of its scores (n − 1
  denominator, the unbiased variance's root: with 5 samples the population form would read 11 %
  lower), on the judge's own scale (0-5 rubric points, 1-10 for reward models);
* ``wide_share``: the share of answers whose samples span ``span`` points or more (max − min ≥
  2 by default): on a 0-5 rubric, two points is the difference between "weak" and "good".

Answers with fewer than two valid scores (an unscored answer, a judge asked once) say nothing about
consistency: they are left out of both and counted in ``skipped``. NaN for both when no answer has
two scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pytest_novelty.metrics._validate import as_float_array

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

        def clean(value: float) -> float | None:
            return None if math.isnan(value) else float(value)

        return {"mean_sd": clean(self.mean_sd), "wide_share": clean(self.wide_share), "answers": self.answers,
                "skipped": self.skipped, "span": self.span}


def judge_consistency(scores: Sequence[Sequence[float]], *, span: float = DEFAULT_SPAN) -> JudgeConsistency:
    """The mean within-answer sd of the judge's samples and the share of answers spanning ``span`` points.

    ``scores`` holds, per answer, the judge's valid sample scores (what ``JudgeResult.scores``
    holds; NaN entries are left out too). ``span`` must be positive.
    """
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
