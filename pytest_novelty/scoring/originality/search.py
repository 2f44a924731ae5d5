"""Deciding every asked n-gram with as few membership questions as possible.

For backends that can only answer "does this n-gram occur?" (the web APIs), each text keeps bounds
``lower[i] <= L_i <= upper[i]`` on the longest corpus match at each position, and questions are
asked in rounds for the whole batch at once (so they can run concurrently and each distinct
question is asked once):

- first the smallest undecided n at each position (in novel text that one "no" settles every
  larger n), then the middle of the n's still undecided there;
- after each round the bounds are propagated with two facts: a match at ``i`` minus its first
  unit is a match at ``i + 1`` (``L_{i+1} >= L_i - 1``), and a match at ``i`` is at most one unit
  longer than the match at ``i + 1`` (``L_i <= L_{i+1} + 1``); an unseen n-gram thus settles the
  longer n-grams that contain it without a question.

It stops when every n-gram of every asked order is decided. ``lower`` is then a true lower bound
on ``L_i``; the two are equal where the answers pin the length down.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

import numpy as np

from pytest_novelty.scoring.originality.backend import MatchBounds, check_ns
from pytest_novelty.scoring.originality.tokenization import Encoding

__all__ = ["decide_thresholds"]

Question = tuple[int, int, int]  # (text, position, n)
K = TypeVar("K", bound=Hashable)


def _propagate(lower: np.ndarray, upper: np.ndarray) -> None:
    if not len(lower):
        return
    positions = np.arange(len(lower))
    np.maximum(lower, np.maximum.accumulate(lower + positions) - positions, out=lower)
    shifted = (upper + positions)[::-1]
    np.minimum(upper, np.minimum.accumulate(shifted)[::-1] - positions, out=upper)


def decide_thresholds(
    encodings: Sequence[Encoding],
    ns: Sequence[int],
    key: Callable[[int, int, int], K],
    ask: Callable[[list[K]], dict[K, bool]],
) -> list[MatchBounds]:
    """Bounds that decide every n-gram of every order in ``ns``.

    ``key(t, i, n)`` names the question "does the n-gram at unit ``i`` of text ``t`` occur?";
    equal keys are asked once. ``ask(keys)`` answers a round of distinct questions.
    """
    orders = np.array(check_ns(ns), dtype=np.int64)
    lowers = [np.zeros(len(enc), dtype=np.int64) for enc in encodings]
    uppers = [len(enc) - np.arange(len(enc), dtype=np.int64) for enc in encodings]
    asked = [np.zeros(len(enc), dtype=bool) for enc in encodings]
    while True:
        round_: dict[K, list[Question]] = {}
        for t, (lower, upper) in enumerate(zip(lowers, uppers, strict=True)):
            # undecided[i, j]: order j is still open at position i
            undecided = (lower[:, None] < orders[None, :]) & (upper[:, None] >= orders[None, :])
            open_rows = np.flatnonzero(undecided.any(axis=1))
            for i in open_rows.tolist():
                choices = orders[undecided[i]]
                n = int(choices[0] if not asked[t][i] else choices[len(choices) // 2])
                round_.setdefault(key(t, i, n), []).append((t, i, n))
        if not round_:
            break
        answers = ask(list(round_))
        for question_key, questions in round_.items():
            occurs = answers[question_key]
            for t, i, n in questions:
                asked[t][i] = True
                if occurs:
                    lowers[t][i] = max(lowers[t][i], n)
                else:
                    uppers[t][i] = min(uppers[t][i], n - 1)
        for lower, upper in zip(lowers, uppers, strict=True):
            _propagate(lower, upper)
    return [MatchBounds(lower, upper) for lower, upper in zip(lowers, uppers, strict=True)]
