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
search (``L_i = 0``).

The Creativity Index needs ``L_i`` only where it lies in its range of lengths ``f .. c``, and
then no more than ``min(L_i, c)`` (a span of more than ``c`` units is covered by its overlapping
spans of ``c`` units). Given that range, a position is also settled when the settled ends around
it bound its match below ``f`` (the end after it comes too soon) or at ``c`` or more (the end
before it reaches far enough). The search still finds whole matches: a capped end
``i + min(L_i, c)`` moves at every position of a passage longer than ``c``, while the whole end
stays put along it, and that is what lets the neighbours settle it.

When no more than about a thousand slots are left open, they are searched in one last round:
a round costs about a millisecond whatever its size. On the generated texts of
``benchmarks/creativity.py`` (half runs copied from the corpus, half new sentences) this
searches about 36 % of the positions for the range 5 to 12, in about ten rounds; on the demo
checkpoint's own stories, which copy little, 83 % for exact lengths and 53 % for the range.

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
_TAIL = 1024  # when no more slots than this are open, they are searched in one last round
_FAR = np.iinfo(np.int64).max // 4


def matching_statistics(
    limit: np.ndarray, unmatched: np.ndarray, search: Search, *, shortest: int = 1, longest: int | None = None
) -> tuple[np.ndarray, int]:
    """Match lengths at every slot of a batch, and the number of slots searched.

    Slots are the units of every text laid end to end, with one gap slot after each text (its
    ``limit`` is itself). ``limit[s]`` is the furthest end a match from slot ``s`` may have (its
    text's end); ``unmatched[s]`` marks slots known to match nothing (gap slots, units the corpus
    never holds). Ends never decrease along the layout: within a text by the facts in the module
    docstring, and across texts because a gap slot ends where it starts.

    The lengths are exact. With ``shortest`` and ``longest`` (a range of L) they need only be
    right for that range: a slot whose neighbours bound its match below ``shortest`` (reported as
    some length below it) or at ``longest`` or more (reported as at least ``longest``) is not
    searched.

    The work of a round is over the gaps still open, not over the whole batch: between two
    settled slots ``a < b`` the slots whose match the range leaves open form one interval, those
    after ``e_a - longest`` and up to ``e_b - shortest``.
    """
    slots = _Slots(limit, unmatched, search)
    if len(slots.known) and not slots.known[-1]:
        raise HarnessError("matching statistics need the gap slot after the last text (a backend bug)")
    seeds = np.flatnonzero(~slots.known & (np.arange(len(slots.known)) % _SEED_EVERY == 0))
    slots.ask(seeds, slots.limit[seeds])
    closed = _search_gaps(slots, shortest, _FAR if longest is None else int(longest))
    return slots.lengths(*closed), slots.searched


class _Slots:
    """The slots of one batch as the rounds settle them: the match end of each slot searched or
    known to match nothing (``ends``, where ``known``), and how many slots were searched."""

    def __init__(self, limit: np.ndarray, unmatched: np.ndarray, search: Search) -> None:
        self.limit = np.asarray(limit, dtype=np.int64)
        self.known = np.asarray(unmatched, dtype=bool).copy()
        self.ends = np.full(len(self.limit), -1, dtype=np.int64)
        self.ends[self.known] = np.flatnonzero(self.known)
        self.search = search
        self.searched = 0

    def ask(self, slots: np.ndarray, stops: np.ndarray) -> None:
        """Search ``slots`` (up to ``stops``) and record their ends."""
        if len(slots):
            self.ends[slots] = slots + np.asarray(self.search(slots, stops), dtype=np.int64)
            self.known[slots] = True
            self.searched += len(slots)

    def end_of(self, a: np.ndarray) -> np.ndarray:
        """The match end of each settled slot ``a``; -1 for the start before every slot (``a == -1``)."""
        return np.where(a >= 0, self.ends[np.maximum(a, 0)], -1)

    def lengths(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Every slot's match length, once every gap ``(a, b)`` is closed."""
        exact = np.flatnonzero(self.known)
        if len(exact) > 1 and np.diff(self.ends[exact]).min() < 0:
            raise HarnessError("matching statistics moved a match end backwards (an originality backend bug)")
        # A slot left unsearched lies in a closed gap: its match ends no sooner than e_a (exactly
        # there when the gap's ends agree; else the range leaves its length out, and that bound will
        # do). The last round's gaps hold searched slots too; they keep what the search found.
        counts = b - a - 1
        inside = _spread(a + 1, counts)
        unsearched = ~self.known[inside]
        after = np.repeat(self.end_of(a), counts)[unsearched]
        self.ends[inside[unsearched]] = np.maximum(after, inside[unsearched])
        return self.ends - np.arange(len(self.ends))


def _search_gaps(slots: _Slots, shortest: int, top: int) -> tuple[np.ndarray, np.ndarray]:
    """Search in rounds until every gap between settled slots is closed (its ends agree, or the
    range leaves none of its slots open); the closed gaps ``(a, b)``."""
    # Gaps between consecutive settled slots; -1 stands for the start, before every slot.
    anchors = np.concatenate([[-1], np.flatnonzero(slots.known)])
    a, b = anchors[:-1], anchors[1:]
    a, b = a[b - a > 1], b[b - a > 1]
    closed_a, closed_b = [], []
    while len(a):
        end_a, end_b = slots.end_of(a), slots.ends[b]
        first = np.maximum(a + 1, end_a - top + 1)  # from here the match may fall short of longest
        last = np.minimum(b - 1, end_b - shortest)  # up to here it may reach shortest
        open_ = (end_a != end_b) & (first <= last)
        closed_a.append(a[~open_])
        closed_b.append(b[~open_])
        a, b, end_a, first, last = a[open_], b[open_], end_a[open_], first[open_], last[open_]
        if not len(a):
            break
        counts = last - first + 1
        if counts.sum() <= _TAIL:
            # The last few open slots in one search, rather than rounds of a few queries each (a
            # round costs about a millisecond, as much as a thousand queries, whatever its size).
            tail = _spread(first, counts)
            slots.ask(tail, np.minimum(slots.limit[tail], np.repeat(slots.ends[b], counts)))
            closed_a.append(a)
            closed_b.append(b)
            break
        # The last slot the match at a covers (e_a - 1); a + 1 after a match of one unit or none;
        # the middle when the match reaches past b; then into the open interval.
        probe = np.where(end_a - 1 <= a, a + 1, np.where(end_a - 1 < b, end_a - 1, (a + b) // 2))
        probe = np.clip(probe, first, last)
        slots.ask(probe, np.minimum(slots.limit[probe], slots.ends[b]))
        a, b = np.concatenate([a, probe]), np.concatenate([probe, b])
        keep = b - a > 1
        a, b = a[keep], b[keep]
    return np.concatenate(closed_a or [a]), np.concatenate(closed_b or [b])


def _spread(first: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``first[k], first[k] + 1, ..., first[k] + counts[k] - 1`` for every k, end to end."""
    total = int(counts.sum())
    return np.repeat(first, counts) + np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)


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
        for n in range(shortest, longest + 1):
            bound.ngrams(n)  # refuses bounds that leave an n-gram of the range undecided
        lower = np.asarray(bound.lower, dtype=np.int64)
        out.append(np.where(lower >= shortest, np.minimum(lower, longest), np.minimum(lower, shortest - 1)))
    return out


def match_lengths(
    backend: OriginalityBackend, encodings: Sequence[Encoding], lengths: Sequence[int], *, progress: bool = False
) -> list[np.ndarray]:
    """Per encoding, match lengths that give the uniqueness at every L of ``lengths`` exactly.

    A backend with the :class:`~.backend.MatchingStatistics` ability answers ``min(L_i, max L)``
    itself, where ``L_i >= min L`` (the local index, the n-gram set); any other (the web APIs) settles every length of
    the range with its count questions (:meth:`~.backend.OriginalityBackend.match_bounds`), and
    :func:`clipped_lengths` reads the values from those bounds.
    """
    shortest, longest = min(lengths), max(lengths)
    if isinstance(backend, MatchingStatistics):
        return backend.matching_statistics(encodings, cap=longest, floor=shortest, progress=progress)
    bounds = backend.match_bounds(encodings, list(range(shortest, longest + 1)), progress=progress)
    return clipped_lengths(bounds, shortest, longest)
