"""The per-generation arrays a report is drawn from, and how they are read (no metric is computed here)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypedDict

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["GenerationArrays", "SuiteData", "as_vector", "novelty_of"]


class GenerationArrays(TypedDict, total=False):
    """Per-generation values of one checkpoint on one suite (shape prompts × samples, or flat).

    ``novelty`` is the gate's per-generation novelty, as the metrics step computed it (the report
    never recomputes a metric); without it the report shows none. NaN (or None) marks an unscored
    generation.
    """

    quality: ArrayLike
    originality: ArrayLike
    novelty: ArrayLike


class SuiteData(GenerationArrays, total=False):
    """One suite's arrays for the report: the candidate's, optionally a baseline's, and context.

    ``n`` is the n-gram order of ``originality`` and ``novelty``; ``info`` holds anything
    descriptive (model, judge, index, prompt count) and is copied into ``report.json`` as is.
    """

    n: int
    baseline: GenerationArrays
    info: Mapping[str, Any]



def as_vector(values: Any) -> np.ndarray:
    """A flat float array from nested lists or arrays; None becomes NaN."""
    if values is None:
        return np.empty(0)
    array = np.asarray(values, dtype=object)
    flat = [math.nan if v is None else float(v) for v in array.ravel()]
    return np.asarray(flat, dtype=float)


def novelty_of(arrays: Mapping[str, Any]) -> np.ndarray:
    """Per-generation novelty as given by the metrics step; all NaN (none shown) when not given."""
    if arrays.get("novelty") is not None:
        return as_vector(arrays["novelty"])
    return np.full(as_vector(arrays.get("quality")).size, np.nan)
