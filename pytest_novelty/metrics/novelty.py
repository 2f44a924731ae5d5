"""Novelty of a generation: the harmonic mean of its quality and its originality.

Source: Padmakumar et al. (2025), "Beyond Memorization: Mapping the Originality-Quality Frontier of
Language Models" (arXiv 2504.09389; later "Measuring LLM Novelty As The Frontier Of Original And
High-Quality Output"). A text is novel when it is original (a large share of its n-grams unseen in
the training corpus) and good (a task's quality score): the harmonic mean is low when either is, so
neither memorised fluent text nor original nonsense scores well. The paper reports n = 4, 5 and 6.

Saying little is not novel: a generation of fewer than n units has no n-gram of order n, and the
gate counts it as originality 0, hence novelty 0 (:func:`gated_novelty`); ``coverage@n``
(:func:`coverage`) is the share long enough to be judged.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics._validate import as_float_array, check_range


def novelty(quality: ArrayLike, originality: ArrayLike) -> NDArray[np.float64]:
    """Elementwise novelty = 2·q·o / (q + o), the harmonic mean of quality q and originality o.

    * Both inputs lie in [0, 1] (the judge layer rescales quality).
    * q = o = 0 gives 0, the limit along any path into the origin (the mean is at most 2·min(q, o)).
    * NaN (unscored, or too short for an n-gram) propagates; :func:`gated_novelty` is what the gate
      counts.
    * The result is per generation: the paper averages these values (so its novelty sits below the
      harmonic mean of the averages); average the output, not the inputs.

    Inputs broadcast like numpy arrays; the result is a float64 array (0-d for two scalars).
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
    """Originality with a generation too short for the order (NaN: no n-gram) counted as 0.

    Its share of unseen n-grams is 0/0, and leaving it out of the means would reward saying little:
    a checkpoint whose answers shrink to "They smiled." would keep only its few long answers. So
    every gated value (``originality@n``, ``novelty@n``, ``top10_novelty@n``, q@Tail's ranking,
    Novelty at Peak) counts it as 0; the per-generation arrays keep the NaN for :func:`coverage`.
    """
    array = as_float_array(originality, "originality", allow_empty=True)
    check_range(array, "originality", 0.0, 1.0)
    return np.where(np.isnan(array), 0.0, array)


def gated_novelty(quality: ArrayLike, originality: ArrayLike) -> NDArray[np.float64]:
    """Per-generation novelty as the gate counts it: :func:`novelty` of
    :func:`originality_counting_short`. Originality 0 (too short or copied whole) gives novelty 0
    even when unscored, since no quality could change it; only an unscored generation with some
    originality stays NaN (left out of the means, counted in ``unscored``)."""
    o = originality_counting_short(originality)
    result = novelty(quality, o)
    return np.where(o == 0.0, 0.0, result)


def coverage(originality: ArrayLike) -> float:
    """Share of generations with at least one n-gram of the order (``coverage@n``): the non-NaN
    values of ``originality``; NaN for no generations."""
    array = as_float_array(originality, "originality", allow_empty=True)
    return float(np.mean(~np.isnan(array))) if array.size else float("nan")


def unscored_share(quality: ArrayLike) -> float:
    """Share of generations the judge gave no quality score (``unscored``); NaN for no generations.
    They are left out of the means, so a judge that rarely answers would otherwise look good."""
    array = as_float_array(quality, "quality", allow_empty=True)
    return float(np.mean(np.isnan(array))) if array.size else float("nan")
