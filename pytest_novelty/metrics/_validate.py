"""Input checks shared by the metric modules.

Each turns input into a float64 array (or a number) or raises ``ValueError`` naming the argument,
so a bad input fails where it enters the metrics layer, not three calls later as a NaN.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray


def as_float_array(values: ArrayLike, name: str, *, allow_empty: bool = False) -> NDArray[np.float64]:
    """``values`` as a float64 array; non-numbers, infinities and (by default) emptiness refused, NaN
    (an unscored item) allowed."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be numbers, got {values!r:.80}") from error
    if np.isinf(array).any():
        raise ValueError(f"{name} must be finite or NaN, got an infinite value")
    if array.size == 0 and not allow_empty:
        raise ValueError(f"{name} is empty")
    return array


def as_vector(values: ArrayLike, name: str) -> NDArray[np.float64]:
    """Return ``values`` as a non-empty one-dimensional float64 array (NaN allowed)."""
    array = as_float_array(values, name)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    return array


def check_range(array: NDArray[np.float64], name: str, low: float, high: float) -> None:
    """Raise when a non-NaN value of ``array`` lies outside ``[low, high]``."""
    present = array[~np.isnan(array)]
    if present.size and (present.min() < low or present.max() > high):
        bad = present[(present < low) | (present > high)][0]
        raise ValueError(f"{name} must lie in [{low:g}, {high:g}], got {bad!r}")


def check_fraction(value: float, name: str) -> float:
    """Return ``value`` as a float after checking that it lies in (0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    number = float(value)
    if not 0.0 < number <= 1.0:
        raise ValueError(f"{name} must lie in (0, 1], got {value!r}")
    return number


def check_confidence(value: float, name: str = "confidence") -> float:
    """Return ``value`` as a float after checking that it lies in (0, 1): a confidence, α or a power."""
    level = check_fraction(value, name)
    if level == 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got 1")
    return level


def check_count(value: int, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an int after checking that it is a whole number of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be a whole number of at least {minimum}, got {value!r}")
    return int(value)


def json_fields(record: object) -> dict[str, object]:
    """A dataclass's fields as JSON-friendly values: a NaN becomes None (JSON has no NaN)."""
    fields = dataclasses.asdict(record)  # type: ignore[call-overload]
    return {key: None if isinstance(value, float) and math.isnan(value) else value for key, value in fields.items()}


def ceil_fraction(fraction: float, count: int) -> int:
    """ceil(fraction × count) on the decimal value written: 0.1 × 30 is 3.0000000000000004 in binary
    floating point, so ``fraction`` is read through its shortest ``repr`` and multiplied exactly."""
    return math.ceil(Fraction(repr(float(fraction))) * count)
