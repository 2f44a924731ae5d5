"""Matching statistics: the longest corpus match at every unit position, with few searches.

For unit position ``i`` of a text, ``L_i`` is the length of the longest run of units starting at
``i`` that occurs verbatim in the corpus (its *matching statistic*). Two facts tie neighbours
together: a match at ``i`` minus its first unit is a match at ``i + 1`` (``L_{i+1} >= L_i - 1``),
and a match at ``i`` is at most one unit longer than the match at ``i + 1`` (``L_i <= L_{i+1} +
1``). Both say the same thing about the *end* of the match, ``e_i = i + L_i``: it never moves
left as ``i`` moves right. So a search that finds ``e_a`` and one that finds ``e_b`` with
``e_a == e_b`` settle every position between ``a`` and ``b`` at once (``L_i = e_a - i``) without
a question; inside a copied passage every position but a few is settled this way.

:func:`matching_statistics` searches in rounds, for the whole batch at once. The first round
searches every 16th position. After that, between two settled positions ``a < b`` whose ends
differ, the next search reuses the match at ``a``: it looks at ``e_a - 1``, the last position
that match covers, and if that position's match also ends at ``e_a``, every position between is
settled (in a copied passage, two searches settle it whole). When the match at ``a`` is a single
unit or none it looks at ``a + 1``, and when it reaches past ``b``, at the middle. Each search
asks only up to ``e_b`` (a match before ``b`` ends by ``e_b``), so later rounds ask short queries.
Units the corpus never contains (a word outside the index's vocabulary) are settled before any
search (``L_i = 0``). On generated texts this searches about 0.4 (texts that copy long runs) to
0.9 (novel texts) of the positions, in at most about 20 rounds.

The Creativity Index needs no more than ``min(L_i, c)`` for its longest length ``c`` (a span of
more than ``c`` units is covered by its overlapping spans of ``c`` units). The search still finds
whole matches: a capped end ``i + min(L_i, c)`` moves at every position of a passage longer than
``c``, while the whole end stays put along it, and that is what lets the neighbours settle it.

:func:`clipped_lengths` turns the bounds a count-only backend (the web APIs) settles for every
length of a range into the same values, for the lengths of that range; :func:`match_lengths` asks
a backend the cheapest way it can answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pytest_novelty.infra.errors import HarnessError
from pytest_novelty.scoring.originality.backend import MatchBounds, MatchingStatistics, OriginalityBackend
from pytest_novelty.scoring.originality.tokenization import Encoding

__all__ = ["clipped_lengths", "match_lengths", "matching_statistics"]

Search = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``search(slots, stops)``: per slot, the units of the longest corpus match from it that ends by
``stops`` (at most ``stops - slots``)."""

_SEED_EVERY = 16  # the first round searches every 16th slot: it bounds the rounds that follow


def matching_statistics(limit: np.ndarray, unmatched: np.ndarray, search: Search) -> tuple[np.ndarray, int]:
    """Match lengths at every slot of a batch, and the number of slots searched.

    Slots are the units of every text laid end to end, with one gap slot after each text (its
    ``limit`` is itself). ``limit[s]`` is the furthest end a match from slot ``s`` may have (its
    text's end); ``unmatched[s]`` marks slots known to match nothing (gap slots,
    units the corpus never holds). Ends never decrease along the layout: within a text by the
    facts in the module docstring, and across texts because a gap slot ends where it starts.
    """
    size = len(limit)
    # Index 0 is a settled sentinel before the first slot; slot s lives at index s + 1.
    ends = np.full(size + 1, -1, dtype=np.int64)
    slots = np.arange(-1, size, dtype=np.int64)
    stops = np.concatenate([[-1], np.asarray(limit, dtype=np.int64)])
    settled = np.concatenate([[True], np.asarray(unmatched, dtype=bool)])
    ends[settled] = slots[settled]
    probes = np.flatnonzero(~settled & (slots % _SEED_EVERY == 0))
    bound = stops[probes]
    searched = 0
    while True:
        if len(probes):
            at = slots[probes]
            found = np.asarray(search(at, np.minimum(stops[probes], bound)), dtype=np.int64)
            ends[probes] = at + found
            settled[probes] = True
            searched += len(probes)
        anchors = np.flatnonzero(settled)
        a, b = anchors[:-1], anchors[1:]
        keep = b - a > 1
        a, b = a[keep], b[keep]
        if not len(a):
            break
        same = ends[a] == ends[b]
        _fill(ends, settled, a[same], b[same])
        a, b = a[~same], b[~same]
        # The last slot the match at a covers, as an index; a + 1 after a match of one unit or
        # none, the middle when the match reaches past b.
        last = ends[a]  # slot e_a - 1 lives at index e_a
        probes = np.where(last <= a, a + 1, np.where(last < b, last, (a + b) // 2))
        bound = ends[b]
    moved = np.diff(ends[1:])
    if len(moved) and moved.min() < 0:
        raise HarnessError("matching statistics moved a match end backwards (an originality backend bug)")
    return ends[1:] - slots[1:], searched


def _fill(ends: np.ndarray, settled: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Give every slot strictly between each ``a`` and ``b`` the end they share."""
    counts = b - a - 1
    total = int(counts.sum())
    if not total:
        return
    at = np.repeat(a + 1, counts) + np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    ends[at] = np.repeat(ends[a], counts)
    settled[at] = True


def clipped_lengths(bounds: Sequence[MatchBounds], shortest: int, longest: int) -> list[np.ndarray]:
    """Match lengths for the lengths ``shortest .. longest`` from bounds that settle each of them.

    ``bounds`` must settle every length of the range at every position (``lower >= n`` or
    ``upper < n``), as :meth:`~.backend.OriginalityBackend.match_bounds` does for the orders it is
    given. The result ``v`` then has ``v_i = min(L_i, longest)`` wherever ``L_i >= shortest``,
    and some value below ``shortest`` elsewhere: for every ``L`` of the range, ``v_i >= L`` exactly
    when ``L_i >= L``, which is all the range's uniqueness needs.
    """
    out = []
    for bound in bounds:
        lower, upper = np.asarray(bound.lower, dtype=np.int64), np.asarray(bound.upper, dtype=np.int64)
        room = len(lower) - np.arange(len(lower))
        for n in range(shortest, longest + 1):
            open_ = (lower < n) & (upper >= n) & (room >= n)
            if open_.any():
                raise HarnessError(f"originality backend left {int(open_.sum())} {n}-grams undecided (a backend bug)")
        out.append(np.where(lower >= shortest, np.minimum(lower, longest), np.minimum(lower, shortest - 1)))
    return out


def match_lengths(
    backend: OriginalityBackend, encodings: Sequence[Encoding], lengths: Sequence[int], *, progress: bool = False
) -> list[np.ndarray]:
    """Per encoding, match lengths that give the uniqueness at every L of ``lengths`` exactly.

    A backend with the :class:`~.backend.MatchingStatistics` ability answers ``min(L_i, max L)``
    itself (the local index, the n-gram set); any other (the web APIs) settles every length of
    the range with its count questions (:meth:`~.backend.OriginalityBackend.match_bounds`), and
    :func:`clipped_lengths` reads the values from those bounds.
    """
    shortest, longest = min(lengths), max(lengths)
    if isinstance(backend, MatchingStatistics):
        return backend.matching_statistics(encodings, cap=longest, progress=progress)
    bounds = backend.match_bounds(encodings, list(range(shortest, longest + 1)), progress=progress)
    return clipped_lengths(bounds, shortest, longest)
