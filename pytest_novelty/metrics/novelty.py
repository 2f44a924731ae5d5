"""Novelty of a generation: the harmonic mean of its quality and its originality.

Source: Padmakumar et al. (2025), "Beyond Memorization: Mapping the
Originality-Quality Frontier of Language Models" (arXiv 2504.09389; later titled "Measuring LLM
Novelty As The Frontier Of Original And High-Quality Output"). A text is novel when it is both
original (a large share of its n-grams are unseen in the training corpus) and good (a task-specific
quality score). The harmonic mean is low when either part is low, so neither memorised fluent text
nor original nonsense scores well. The paper reports n = 4, 5 and 6 side by side.

Saying little is not novel: a generation with fewer than n units has no n-gram of order n, so its
originality (a share of its n-grams) is undefined. The gate counts it as originality 0, hence
novelty 0, at that order (:func:`gated_novelty`), and reports the share of generations long enough
to be judged as ``coverage@n`` (:func:`coverage`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics._validate import as_float_array, check_range


def novelty(quality: ArrayLike, originality: ArrayLike) -> NDArray[np.float64]:
    """Elementwise novelty = 2·q·o / (q + o), the harmonic mean of quality q and originality o.

    Choices, each deliberate:

    * Both inputs must lie in [0, 1]: originality is the fraction of the text's n-grams absent from the
      corpus, and quality must already be rescaled to [0, 1] by the judge layer.
    * Where q = o = 0 the formula is 0/0; we return 0, the limit along any path into the origin
      (the harmonic mean is at most min(q, o) · 2 and so tends to 0).
    * NaN marks an item that was not scored (judge failure) or too short to have an n-gram; it
      propagates here. The gate does not leave a too-short generation out: it counts as
      originality 0 and so novelty 0 (:func:`gated_novelty`); an unscored one is left out of the
      means (:func:`pytest_novelty.metrics.mean_excluding_nan`) and counted (:func:`unscored_share`).
    * The result is per generation. The reference paper averages these per-generation values, which
      is why its published novelty sits below the harmonic mean of average quality and average
      originality; average the output of this function, not its inputs.

    Inputs broadcast like numpy arrays; the result is always a float64 array (0-d for two scalars).
    """
    q = as_float_array(quality, "quality", allow_empty=True)
    o = as_float_array(originality, "originality", allow_empty=True)
    if q.shape != o.shape:
        try:
            np.broadcast_shapes(q.shape, o.shape)
        except ValueError:
            raise ValueError(
                f"quality and originality have shapes {q.shape} and {o.shape}, which do not match"
            ) from None
    check_range(q, "quality", 0.0, 1.0)
    check_range(o, "originality", 0.0, 1.0)
    total = q + o
    product = 2.0 * q * o
    # np.divide with `where` leaves 0 where q + o == 0; NaN inputs give NaN sums and stay NaN.
    return np.divide(product, total, out=np.zeros_like(total), where=(total != 0) | np.isnan(total))


def originality_counting_short(originality: ArrayLike) -> NDArray[np.float64]:
    """Originality with a generation too short for the order (NaN: no n-gram at all) counted as 0.

    Padmakumar et al. define originality as the share of a generation's n-grams that are unseen in
    the corpus. A generation of fewer than n units has no n-gram, so the share is 0/0. Leaving it
    out of the suite's means (what an undefined value usually means) rewards saying little: a
    checkpoint whose answers mostly end at once, or shrink to "They smiled.", keeps only its few long
    answers in the mean and scores as novel as a good one. It cannot be novel at that length, so
    for every gated value (``originality@n``, ``novelty@n``, ``top10_novelty@n``, q@Tail's ranking,
    Novelty at Peak) such a generation counts as originality 0. The per-generation arrays keep the
    NaN, so :func:`coverage` can say how many generations were too short.
    """
    array = as_float_array(originality, "originality", allow_empty=True)
    check_range(array, "originality", 0.0, 1.0)
    return np.where(np.isnan(array), 0.0, array)


def gated_novelty(quality: ArrayLike, originality: ArrayLike) -> NDArray[np.float64]:
    """Per-generation novelty as the gate counts it: :func:`novelty` with too-short generations at 0.

    A generation with no n-gram of the order gets originality 0 (see
    :func:`originality_counting_short`). The harmonic mean of any quality with 0 is 0, so every
    generation whose originality is 0, too short or copied whole, has novelty 0 even when the judge
    gave it no score: 2·q·0 / (q + 0) = 0 for every q in [0, 1], and the missing score could not
    change it. Only an unscored generation with some originality above 0 (quality NaN) stays NaN
    and is left out of the means (the ``unscored`` share says how many).
    """
    o = originality_counting_short(originality)
    result = novelty(quality, o)
    return np.where(o == 0.0, 0.0, result)


def coverage(originality: ArrayLike) -> float:
    """Share of generations that have at least one n-gram of the order (``coverage@n``).

    ``originality`` holds one value per generation, NaN where the generation has fewer than n
    units. 1.0 means every generation was long enough to be judged at order n; the rest counted as
    originality 0 (see :func:`originality_counting_short`). NaN for no generations.
    """
    array = as_float_array(originality, "originality", allow_empty=True)
    return float(np.mean(~np.isnan(array))) if array.size else float("nan")


def unscored_share(quality: ArrayLike) -> float:
    """Share of generations the judge gave no quality score (``unscored``); NaN for no generations.

    Unscored generations are left out of ``quality`` and of the novelty means, so a judge that
    answers only now and then would otherwise look like one that answered well.
    """
    array = as_float_array(quality, "quality", allow_empty=True)
    return float(np.mean(np.isnan(array))) if array.size else float("nan")
