"""Novelty of a generation: the harmonic mean of its quality and its originality.

Source: Padmakumar et al. (2025), "Beyond Memorization: Mapping the
Originality-Quality Frontier of Language Models" (arXiv 2504.09389; later titled "Measuring LLM
Novelty As The Frontier Of Original And High-Quality Output"). A text is novel when it is both
original (a large share of its n-grams are unseen in the training corpus) and good (a task-specific
quality score). The harmonic mean is low when either part is low, so neither memorised fluent text
nor original nonsense scores well. The paper reports n = 4, 5 and 6 side by side.
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
      propagates so the caller can exclude it from means and count it (see
      :func:`pytest_novelty.metrics.mean_excluding_nan`).
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
