"""The backend Protocol: "how long a run of these units occurs in the corpus, from each position?"

Every backend answers with :class:`MatchBounds`: for each unit position ``i`` of a text, bounds on
``L_i``, the length of the longest prefix of ``units[i:]`` that occurs somewhere in the corpus.
The n-gram starting at ``i`` occurs exactly when ``L_i >= n`` (every prefix of an occurring run
occurs too), so one number per position answers every n at once. A backend must settle each asked
n: for every ``n`` in ``ns`` and every ``i`` with ``i + n <= len``, either ``lower[i] >= n`` or
``upper[i] < n``. Beyond that it may be as exact as it cheaply can (the suffix-array index gives
``L_i`` itself; the n-gram set ``L_i`` capped at its largest n; the web APIs only the asked
thresholds), and scoring reports whether the longest copied span is exact.

Backends that find ``L_i`` itself, with a search per position rather than a question per length,
also have the :class:`MatchingStatistics` ability (the local index and the n-gram set); the web
APIs only answer whether given n-grams occur, and give match lengths through :meth:`match_bounds`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.infra.registry import Registry
from pytest_novelty.scoring.originality.tokenization import Encoding, Tokenizer

__all__ = [
    "BACKENDS",
    "AnnouncesQueries",
    "MatchBounds",
    "MatchingStatistics",
    "OriginalityBackend",
    "Span",
    "check_cap",
    "check_ns",
]

Span = tuple[Encoding, int, int]
"""A run of units of a text: ``(encoding, start, length)``."""


@dataclass(frozen=True)
class MatchBounds:
    """``lower[i] <= L_i <= upper[i]`` for each unit position ``i`` (int64 arrays)."""

    lower: np.ndarray
    upper: np.ndarray

    @staticmethod
    def exact(lengths: np.ndarray) -> MatchBounds:
        lengths = np.asarray(lengths, dtype=np.int64)
        return MatchBounds(lengths, lengths)

    def ngrams(self, n: int) -> tuple[int, int]:
        """``(ngrams, unseen)`` at order ``n``; a ``HarnessError`` when the bounds leave an n-gram undecided."""
        count = len(self.lower) - n + 1
        if count <= 0:
            return 0, 0
        seen = self.lower[:count] >= n
        unsettled = ~seen & (self.upper[:count] >= n)
        if unsettled.any():
            raise HarnessError(f"originality backend left {int(unsettled.sum())} {n}-grams undecided (a backend bug)")
        return count, int(count - seen.sum())


class OriginalityBackend(Protocol):
    """Answers which n-grams of tokenised texts occur in a corpus (see the module docstring)."""

    spec: str
    tokenizer: Tokenizer

    def match_bounds(
        self, encodings: Sequence[Encoding], ns: Sequence[int], *, progress: bool = False
    ) -> list[MatchBounds]:
        """Bounds on the longest corpus match at every unit position of every encoding."""
        ...

    def locate(self, spans: Sequence[Span]) -> list[int | None]:
        """For each ``(encoding, start, length)``: the number of one corpus document containing
        units ``start .. start + length - 1``; ``None`` when the backend cannot tell (the web
        APIs) or the run does not occur."""
        ...

    def close(self) -> None:
        """Release files, threads and connections."""
        ...


@runtime_checkable
class AnnouncesQueries(Protocol):
    """A backend whose lookups cost requests to a service (the web APIs): before the first, it can
    say how many it will send and how long that takes at its rate."""

    def announce(self, texts: Sequence[str], ns: Sequence[int]) -> object:
        """Say, in one :func:`~pytest_novelty.infra.progress.notice`, what scoring ``texts`` at ``ns``
        will ask the service."""
        ...


@runtime_checkable
class MatchingStatistics(Protocol):
    """A backend that finds the longest corpus match at every unit position itself (the *matching
    statistics* of a text), not only whether given n-grams occur: ``infini-gram:DIR`` (any length,
    exact) and ``ngram-set:DIR`` (capped at a length, the largest n-gram it holds).

    With ``cap`` the answer is ``min(L_i, cap)``, and with ``floor`` a position whose match is
    shorter than ``floor`` may be answered with any length below ``floor``: the uniqueness at the
    lengths ``floor .. cap`` needs no more, and it can cost fewer searches. A backend that cannot
    tell ``L_i`` past some length refuses a larger ``cap`` (or none) with a
    :class:`~pytest_novelty.infra.errors.ConfigError`.
    """

    def matching_statistics(
        self, encodings: Sequence[Encoding], *, cap: int | None = None, floor: int = 1, progress: bool = False
    ) -> list[np.ndarray]:
        """Per encoding, ``L_i`` (``min(L_i, cap)``) for each of its unit positions (int64)."""
        ...


def check_cap(cap: object, name: str = "cap") -> int | None:
    """``cap`` (or the ``floor``, as ``name`` says) as an int of at least 1, or None (none given)."""
    if cap is None:
        return None
    if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 1:
        raise ConfigError(f"a match-length {name} is an integer of at least 1, got {cap!r}", field=name)
    return int(cap)


def check_ns(ns: Sequence[int]) -> list[int]:
    """The distinct n-gram orders of ``ns``, sorted; each must be an integer of at least 1."""
    values = list(ns)
    if not values:
        raise ConfigError("give at least one n-gram order", field="ns")
    for n in values:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ConfigError(f"n-gram orders are integers of at least 1, got {n!r}", field="ns")
    return sorted({int(n) for n in values})


BACKENDS: Registry[OriginalityBackend] = Registry(
    "originality backend",
    field="originality",
    builtins=(
        "pytest_novelty.scoring.originality.local",
        "pytest_novelty.scoring.originality.ngramset",
        "pytest_novelty.scoring.originality.api",
    ),
    settings=("cache_dir",),
)
"""Originality backends by spec prefix; a backend module registers itself with
``@BACKENDS.register("NAME", argument=..., options=...)``; its factory is called as
``factory(argument, cache_dir=..., **options)``."""
