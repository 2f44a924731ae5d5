"""Reading the per-generation arrays a report is drawn from (no metric is computed here)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["as_vector"]


def as_vector(values: Any) -> np.ndarray:
    """A flat float array from nested lists or arrays; None becomes NaN."""
    if values is None:
        return np.empty(0)
    array = np.asarray(values, dtype=object)
    flat = [math.nan if v is None else float(v) for v in array.ravel()]
    return np.asarray(flat, dtype=float)
