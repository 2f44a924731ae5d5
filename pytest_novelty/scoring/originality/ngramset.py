"""``ngram-set:DIR``: every n-gram of the corpus in memory, exact, vectorised over a whole batch.

Built from the token files of an index folder. Level ``k`` numbers the distinct k-grams: the k-gram
at ``i`` is the pair (number of the (k-1)-gram at ``i``, unit at ``i + k - 1``) packed into a 64-bit
key, passed through a bijective mixer, so nothing is approximate. Each level keeps its distinct mixed
keys sorted (a key's position is the k-gram's number), a bucket table on their top bits for O(1)
lookups, and where each k-gram first occurs (for document numbers).

A query walks the same chain, level k looking up only the positions whose (k-1)-gram was found, so
novel text drops out after a level or two. ``L_i`` is known up to the largest n built; levels are
added when a larger n is asked.

For the Creativity Index (:meth:`NgramSetBackend.matching_statistics`) it answers ``min(L_i, c)``,
which settles uniqueness at every length up to ``c``, but not ``L_i`` itself (a copied span of 40
words reads as "at least c"): an uncapped request is refused, and so is a cap beyond ``max_n`` when
it was opened with one (its memory budget: about 12 bytes per corpus unit per level).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.progress import notice
from pytest_novelty.scoring.originality.backend import MatchBounds, Span, check_cap, check_ns
from pytest_novelty.scoring.originality.index import IndexInfo, register_local
from pytest_novelty.scoring.originality.local import check_same_tokenizer
from pytest_novelty.scoring.originality.tokenization import Encoding, WordCodec

__all__ = ["NgramSetBackend"]

_SEP = np.uint32(0xFFFFFFFF)
_QUIET_UNITS = 5_000_000  # report build progress on stderr above this corpus size
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xD6E8FEB86659FD93)
_S32 = np.uint64(32)


def _mix(keys: np.ndarray) -> np.ndarray:
    """A bijection of uint64 (odd multiplications and xor-shifts), modifying ``keys`` in place."""
    keys *= _M1
    keys ^= keys >> _S32
    keys *= _M2
    keys ^= keys >> _S32
    return keys


def _pair_keys(numbers: np.ndarray, units: np.ndarray) -> np.ndarray:
    """The unmixed keys of k-grams: the number of each one's (k-1)-gram above the unit that ends it
    (for 1-grams, numbers of 0: the unit alone)."""
    keys = numbers.astype(np.uint64)
    keys <<= _S32
    keys |= units.astype(np.uint64)
    return keys


@dataclass
class _Level:
    """The distinct k-grams of one level: sorted mixed keys, bucket starts, first positions."""

    table: np.ndarray
    buckets: np.ndarray
    shift: np.uint64
    first: np.ndarray

    @staticmethod
    def build(mixed: np.ndarray) -> tuple[_Level, np.ndarray]:
        """The level of these keys (one per corpus position) and each position's k-gram number."""
        if not len(mixed):
            empty = np.zeros(0, dtype=np.uint64)
            return _Level(empty, np.zeros(3, dtype=np.uint32), np.uint64(63), empty), np.zeros(0, np.uint32)
        order = np.argsort(mixed)
        ranked = mixed[order]
        new = np.empty(len(ranked), dtype=bool)
        new[:1] = True
        np.not_equal(ranked[1:], ranked[:-1], out=new[1:])
        starts = np.flatnonzero(new)
        table = ranked[starts]
        del ranked
        first = np.minimum.reduceat(order, starts).astype(np.uint32 if len(order) < 2**32 else np.uint64)
        numbers = np.empty(len(order), dtype=np.uint32)
        numbers[order] = np.cumsum(new, dtype=np.uint32) - np.uint32(1)
        return _Level.from_table(table, first), numbers

    @staticmethod
    def build_unigrams(units: np.ndarray) -> tuple[_Level, np.ndarray]:
        """Level 1 by counting (units are small integers, the separator aside), not by sorting."""
        dense = units.astype(np.int64)
        top = int(dense[units != _SEP].max(initial=-1)) + 1
        dense[units == _SEP] = top
        present = np.zeros(top + 1, dtype=bool)
        present[dense] = True
        values = np.flatnonzero(present)
        mixed = _mix(np.where(values == top, np.int64(_SEP), values).astype(np.uint64))
        order = np.argsort(mixed)
        slot = np.full(top + 1, -1, dtype=np.int64)
        slot[values[order]] = np.arange(len(values))
        numbers = slot[dense].astype(np.uint32)
        where = np.zeros(len(values), dtype=np.uint32 if len(units) < 2**32 else np.uint64)
        where[numbers[::-1]] = np.arange(len(units) - 1, -1, -1)  # one occurrence of each
        level = _Level.from_table(mixed[order], where)
        return level, numbers

    @staticmethod
    def from_table(table: np.ndarray, first: np.ndarray) -> _Level:
        """A level over sorted distinct mixed keys, with the bucket table on their top bits."""
        bits = max(1, len(table).bit_length() - 1)
        shift = np.uint64(64 - bits)
        counts = np.bincount((table >> shift).astype(np.intp), minlength=1 << bits)
        buckets = np.zeros((1 << bits) + 1, dtype=np.uint32 if len(table) < 2**32 else np.uint64)
        np.cumsum(counts, out=buckets[1:])
        return _Level(table, buckets, shift, first)

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The k-gram number of each key (``keys`` are unmixed and consumed), -1 when absent."""
        mixed = _mix(keys)
        bucket = (mixed >> self.shift).astype(np.intp)
        lo = self.buckets[bucket].astype(np.int64)
        hi = self.buckets[bucket + 1].astype(np.int64)
        out = np.full(len(mixed), -1, dtype=np.int64)
        todo = np.flatnonzero(lo < hi)
        pos, end, want = lo[todo], hi[todo], mixed[todo]
        while len(todo):
            have = self.table[pos]
            hit = have == want
            out[todo[hit]] = pos[hit]
            go = (have < want) & (pos + 1 < end)
            todo, pos, end, want = todo[go], pos[go] + 1, end[go], want[go]
        return out

    @property
    def nbytes(self) -> int:
        return int(self.table.nbytes + self.buckets.nbytes + self.first.nbytes)


def _corpus_units(infos: Sequence[IndexInfo]) -> np.ndarray:
    """The units of every shard, in order, with 0xFFFFFFFF at each document start."""
    parts = []
    for info in infos:
        for shard in range(info.shards):
            tokens = np.fromfile(info.token_file(shard), dtype="<u2" if info.dtype == "u16" else "<u4")
            if info.tokenizer_spec == "words":
                words = info.meta["words"]
                parts.append(WordCodec.for_vocab(words["vocab_size"], words["single"]).decode_tokens(tokens))
            else:
                units = tokens.astype(np.uint32)
                units[tokens == (0xFFFF if info.dtype == "u16" else 0xFFFFFFFF)] = _SEP
                parts.append(units)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32)


@register_local("ngram-set", options={"tokenizer": str, "max_n": int, "progress": bool},
                summary="an index folder's corpus as an in-memory n-gram set")
class NgramSetBackend:
    """Exact in-memory n-gram membership, ``L_i`` capped at the largest n built."""

    def __init__(
        self,
        infos: Sequence[IndexInfo],
        *,
        spec: str,
        tokenizer: str | None = None,
        max_n: int | None = None,
        progress: bool | None = None,
    ) -> None:
        self.spec = spec
        self.infos = list(infos)
        self.tokenizer = check_same_tokenizer(self.infos, tokenizer)
        self._units = _corpus_units(self.infos)
        self._doc_starts = np.flatnonzero(self._units == _SEP)
        self._levels: list[_Level] = []
        self._numbers: np.ndarray | None = None
        self.progress = len(self._units) > _QUIET_UNITS if progress is None else progress
        self._lock = threading.Lock()
        self.budget = int(max_n) if max_n else None
        """The largest n the matching statistics may ask for (the ``max_n`` option), or None."""
        if max_n:
            self.ensure(int(max_n))

    @property
    def max_n(self) -> int:
        """The largest n built so far."""
        return len(self._levels)

    @property
    def nbytes(self) -> int:
        """Memory held by the tables (and the corpus units)."""
        extra = self._numbers.nbytes if self._numbers is not None else 0
        return sum(level.nbytes for level in self._levels) + int(self._units.nbytes) + int(extra)

    def ensure(self, n: int) -> None:
        """Build the levels up to ``n`` (about 10-20 s per level for 30 million units)."""
        units = self._units
        with self._lock:
            while len(self._levels) < n:
                k = len(self._levels) + 1
                start = time.perf_counter()
                size = len(units) - k + 1
                if k == 1 and size > 0:
                    level, self._numbers = _Level.build_unigrams(units)
                else:
                    keys = np.zeros(0, dtype=np.uint64)
                    if size > 0:
                        assert self._numbers is not None
                        keys = _pair_keys(self._numbers[:size], units[k - 1 :])
                    level, self._numbers = _Level.build(_mix(keys))
                    del keys
                self._levels.append(level)
                if self.progress:
                    notice(f"[novelty] n-gram set: {len(level.table):,} distinct {k}-grams "
                           f"({time.perf_counter() - start:.1f}s)")

    def match_bounds(
        self, encodings: Sequence[Encoding], ns: Sequence[int], *, progress: bool = False
    ) -> list[MatchBounds]:
        """Walk the levels for the whole batch at once."""
        cap = check_ns(ns)[-1]
        self.ensure(cap)
        sizes = np.array([len(enc) for enc in encodings], dtype=np.int64)
        if not len(encodings) or not sizes.sum():
            return [MatchBounds.exact(np.zeros(int(k), dtype=np.int64)) for k in sizes]
        query = np.concatenate([np.asarray(enc.units, dtype=np.int64) for enc in encodings])
        ends = np.repeat(np.cumsum(sizes), sizes)
        remaining = ends - np.arange(len(query))
        lengths = np.zeros(len(query), dtype=np.int64)
        active = np.flatnonzero(query >= 0)
        numbers = np.zeros(len(active), dtype=np.int64)
        for k in range(1, cap + 1):
            keep = remaining[active] >= k
            active, numbers = active[keep], numbers[keep]
            unit = query[active + k - 1]
            known = unit >= 0
            active, numbers, unit = active[known], numbers[known], unit[known]
            found = self._levels[k - 1].find(_pair_keys(numbers, unit))
            hit = found >= 0
            active, numbers = active[hit], found[hit]
            lengths[active] = k
            if not len(active):
                break
        upper = np.where(lengths >= cap, remaining, lengths)
        ends = np.cumsum(sizes)
        return [MatchBounds(lengths[lo:hi], upper[lo:hi]) for lo, hi in zip(ends - sizes, ends, strict=True)]

    def matching_statistics(
        self, encodings: Sequence[Encoding], *, cap: int | None = None, floor: int = 1, progress: bool = False
    ) -> list[np.ndarray]:
        """``min(L_i, cap)`` at every unit position, exact whatever the ``floor`` (module docstring)."""
        limit = check_cap(cap)
        if limit is None:
            raise ConfigError(
                f"{self.spec} holds n-grams up to the largest n it builds, so it cannot tell how far a longer "
                "match runs: ask for match lengths capped at the longest span length you need (the largest L "
                "of the creativity range), or use infini-gram:DIR, whose suffix array has no such limit",
                field="originality",
            )
        if self.budget is not None and limit > self.budget:
            raise ConfigError(
                f"{self.spec} was opened with max_n={self.budget}, so it holds no n-gram longer than "
                f"{self.budget} units; uniqueness at L up to {limit} needs every n-gram up to {limit}: open it "
                f"with max_n={limit} (about {12 * len(self._units) * (limit - self.budget) / 1e6:,.0f} MB more) "
                "or use infini-gram:DIR",
                field="originality",
            )
        return [np.minimum(bounds.lower, limit) for bounds in self.match_bounds(encodings, [limit])]

    def locate(self, spans: Sequence[Span]) -> list[int | None]:
        """A corpus document containing each run (found level by level, all runs at once)."""
        out: list[int | None] = [None] * len(spans)
        lengths = np.array([length for _, _, length in spans], dtype=np.int64)
        usable = np.flatnonzero((lengths > 0) & (lengths <= len(self._levels)))
        numbers = np.zeros(len(usable), dtype=np.int64)
        for k in range(1, int(lengths[usable].max(initial=0)) + 1):
            keep = lengths[usable] >= k
            usable, numbers = usable[keep], numbers[keep]
            units = np.array([spans[i][0].units[spans[i][1] + k - 1] for i in usable.tolist()], dtype=np.int64)
            known = units >= 0
            usable, numbers, units = usable[known], numbers[known], units[known]
            numbers = self._levels[k - 1].find(_pair_keys(numbers, units))
            hit = numbers >= 0
            usable, numbers = usable[hit], numbers[hit]
            done = lengths[usable] == k
            positions = self._levels[k - 1].first[numbers[done]].astype(np.int64)
            docs = np.searchsorted(self._doc_starts, positions, side="right") - 1
            for i, doc in zip(usable[done].tolist(), docs.tolist(), strict=True):
                out[i] = doc
        return out

    def close(self) -> None:
        """Free the tables."""
        self._levels = []
        self._numbers = None

    def __repr__(self) -> str:
        return f"NgramSetBackend({self.spec!r}, max_n={self.max_n})"
