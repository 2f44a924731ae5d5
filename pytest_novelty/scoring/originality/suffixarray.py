"""Batched exact lookups in an infini-gram index's own suffix array, vectorised with numpy.

An index shard is ``tokenized.S`` (the token stream) and ``table.S`` (the suffix array: one
``ratio``-byte little-endian byte offset into the stream per token, sorted by the bytes that
follow it; ``ratio = ceil(log2(stream bytes) / 8)``). Suffixes are ordered byte by byte, and a
suffix that ends sooner sorts first.

**Words.** Eight bytes read as a big-endian integer compare as the bytes do, so suffixes are compared
sixteen bytes (eight 16-bit or four 32-bit tokens) at a time: one gather of an unaligned 16-byte item
per suffix and step, from a strided view of the memory-mapped stream (no copy: the page cache serves
corpora larger than memory). A query is packed the same way. A suffix that ends inside a window
reads as zero bytes past its end, with how many bytes it really has, so "shorter sorts first" stays
exact.

**Levels.** Window ``j`` (bytes ``16j .. 16j + 15``) of a query is looked up among the suffixes
sharing its first ``16j`` bytes: one lock-step binary search gives the first suffix not below it
(the *lower* bound); only when that suffix shares the whole window and the query goes on does a
second give the end of the equal run (the *upper* bound), the range for window ``j + 1``. The
longest prefix found is the longer common prefix (cut to whole tokens) with the two suffixes around
the lower bound. Settled rows drop out: a query of up to eight 16-bit tokens costs one search, a
long copied passage a step or two per window.

**Where the time goes.** A binary search's late steps read scattered suffixes, a cache miss each; its
early steps read the same few for every query. So the first word of every ``step``-th suffix (at most
:data:`_SAMPLES`, 8 MB) is kept once per shard and ``numpy.searchsorted`` on it replaces the early
steps; queries are sorted by their first word, so pages are read in order, and blocks of them run
on a thread pool (numpy releases the GIL in gathers and arithmetic).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

from pytest_novelty.scoring.originality.index import IndexInfo

__all__ = ["SuffixArrayShard", "longest_packed", "longest_prefixes", "open_shards", "pack_queries", "pack_windows"]

_LEVEL = 2  # words compared per step of a search: a 16-byte window of the suffix
_SAMPLES = 1 << 20  # at most this many suffixes' first words kept in memory per shard (8 MB)
_BLOCK = 1 << 16  # queries per block: the unit of work of one thread (a few MB of temporaries)
_SMALL = 1 << 12  # fewer queries than this per thread are searched on the calling thread
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
# _HIGH_BYTES[m]: a word mask that keeps its first m bytes (the most significant ones).
_HIGH_BYTES = np.array([0] + [((1 << 64) - 1) ^ ((1 << (8 * (8 - m))) - 1) for m in range(1, 9)], dtype=np.uint64)
# _BELOW[b]: 2^(64 - 8b), so that x < _BELOW[b] means "x starts with at least b zero bytes".
_BELOW = np.array([1 << (64 - 8 * b) for b in range(1, 8)], dtype=np.uint64)


def _leading_zero_bytes(x: np.ndarray) -> np.ndarray:
    """How many of the eight bytes of each word, from the most significant one, are zero."""
    return (x[:, None] < _BELOW[None, :]).sum(axis=1) + (x == 0)


class SuffixArrayShard:
    """Memory-mapped token stream and suffix array of one shard."""

    def __init__(self, tokens: Path, table: Path, width: int, first_doc: int) -> None:
        self.width = width
        raw_stream = np.memmap(tokens, dtype=np.uint8, mode="r")
        # plain ndarray views of the memory maps: indexing a memmap subclass is much slower
        self.stream = np.asarray(raw_stream).view("<u2" if width == 2 else "<u4")
        self.size = len(self.stream)
        self.per_word = 8 // width
        self.ratio = max(1, math.ceil(math.log2(max(self.size * width, 2)) / 8))
        raw = np.asarray(np.memmap(table, dtype=np.uint8, mode="r"))
        self._raw = raw
        self._view = raw.view(f"<u{self.ratio}") if self.ratio in (1, 2, 4, 8) else None
        # Other pointer sizes (3 bytes for streams of 64 KB to 16 MB, 5 up to 1 TB): read the eight
        # bytes at each pointer and keep the low ``ratio`` of them, for every rank with eight
        # bytes left in the table; the last few ranks are assembled byte by byte.
        self._wide_count = 0 if self._view is not None else max(0, (len(raw) - 8) // self.ratio + 1)
        self._wide = (
            np.ndarray((self._wide_count,), "<u8", buffer=raw, strides=(self.ratio,)) if self._wide_count else None
        )
        self._pointer_mask = np.uint64((1 << (8 * self.ratio)) - 1) if self.ratio < 8 else _ALL
        self.first_doc = first_doc
        offsets = np.fromfile(tokens.with_name(tokens.name.replace("tokenized", "offset")), dtype="<u8")
        self.doc_starts = (offsets // width).astype(np.int64)
        self._bytes = np.asarray(raw_stream)
        self._windows: dict[int, _Windows] = {}
        self._samples: tuple[int, np.ndarray] | None = None
        self._lazy = threading.Lock()  # threads of one search build the views above once

    def position(self, rank: np.ndarray) -> np.ndarray:
        """Token position of the suffixes at these ranks."""
        if self._view is not None:
            return self._view[rank].astype(np.int64) // self.width
        if self._wide is not None:
            value = (self._wide[np.minimum(rank, self._wide_count - 1)] & self._pointer_mask).astype(np.int64)
            late = rank >= self._wide_count
            if late.any():
                value[late] = self._assemble(rank[late])
            return value // self.width
        return self._assemble(rank) // self.width

    def _assemble(self, rank: np.ndarray) -> np.ndarray:
        """Byte offsets at these ranks, read byte by byte."""
        at = rank.astype(np.int64) * self.ratio
        value = np.zeros(len(rank), dtype=np.int64)
        for k in range(self.ratio):
            value |= self._raw[at + k].astype(np.int64) << (8 * k)
        return value

    def window(self, at: np.ndarray, span: int) -> tuple[np.ndarray, bool]:
        """The ``span`` words of the stream from each token position of ``at`` (one row each; zero
        bytes past the end), and whether any of them runs past the end."""
        if span not in self._windows:
            with self._lazy:
                if span not in self._windows:
                    self._windows[span] = _Windows(self._bytes, self.size, self.width, span)
        return self._windows[span](at)

    def first_token(self) -> int | None:
        """The first token of the shard's smallest suffix (where the engine's bug strikes)."""
        if self.size == 0:
            return None
        return int(self.stream[int(self.position(np.array([0]))[0])])

    def document(self, rank: int) -> int:
        """Global number of the document holding the suffix at ``rank``."""
        position = int(self.position(np.array([rank]))[0])
        return self.first_doc + int(np.searchsorted(self.doc_starts, position, side="right")) - 1

    # -- the search --------------------------------------------------------------------------

    def _bisect(
        self, lo: np.ndarray, hi: np.ndarray, beyond: Callable[[np.ndarray, np.ndarray], np.ndarray]
    ) -> np.ndarray:
        """Per row, the first rank in ``[lo, hi)`` where ``beyond(rows, ranks)`` holds (``hi`` if
        none); ``beyond`` is false then true along each row's range. Settled rows drop out."""
        lo, hi = lo.copy(), hi.copy()
        rows = np.flatnonzero(lo < hi)
        low, high = lo[rows], hi[rows]
        while len(rows):
            mid = (low + high) >> 1
            yes = beyond(rows, mid)
            low = np.where(yes, low, mid + 1)
            high = np.where(yes, mid, high)
            moving = low < high
            if not moving.all():
                lo[rows], hi[rows] = low, high
                rows, low, high = rows[moving], low[moving], high[moving]
        return lo

    def _level_words(self, rank: np.ndarray, shift: int, span: int) -> tuple[np.ndarray, np.ndarray | None]:
        """The ``span`` words from token ``shift`` of the suffixes at ``rank``, and how many of
        their bytes are real (None when all are: no suffix ends among them)."""
        start = self.position(rank) + shift
        have, short = self.window(start, span)
        return have, (np.clip((self.size - start) * self.width, 0, 8 * span) if short else None)

    def _narrow(self, first: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ranks ``[lo, hi)`` holding the lower bound of queries whose first word (masked) is ``first``,
        from the sampled first words: words never decrease along the suffix array, so the bound lies
        after the last sample below ``first`` and by the first above every word starting with it."""
        if self._samples is None:
            step = max(16, 1 << max(0, math.ceil(math.log2(max(self.size, 1) / _SAMPLES))))
            ranks = np.arange(0, self.size, step, dtype=np.int64)
            words = self.window(self.position(ranks), 1)[0][:, 0].copy()
            with self._lazy:
                self._samples = self._samples or (step, words)
        step, sample = self._samples
        left = np.searchsorted(sample, first, side="left")
        right = np.searchsorted(sample, first | ~mask, side="right")
        lo = np.maximum((left - 1) * step + 1, 0)
        hi = np.minimum(right * step, self.size)
        return lo, np.maximum(hi, lo)

    def search(self, words: np.ndarray, nbytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per packed query (:func:`pack_queries`; ``nbytes[i]`` bytes of row ``i`` count): the longest
        prefix found in the shard, in tokens, and a rank where it starts (the whole query's lower bound
        when it occurs)."""
        count, total_words = words.shape
        found = np.zeros(count, dtype=np.int64)
        ranks = np.zeros(count, dtype=np.int64)
        if self.size == 0 or count == 0:
            return found, ranks
        rows = np.flatnonzero(nbytes > 0)
        lo = hi = np.zeros(0, dtype=np.int64)
        for first in range(0, total_words, _LEVEL):
            if not len(rows):
                break
            span = min(_LEVEL, total_words - first)
            want = np.minimum(nbytes[rows] - 8 * first, 8 * span)  # bytes of the query in this level
            masks = [_HIGH_BYTES[np.clip(want - 8 * k, 0, 8)] for k in range(span)]
            query = [words[rows, first + k] & masks[k] for k in range(span)]
            shift = self.per_word * first
            if first == 0:
                lo, hi = self._narrow(query[0], masks[0])
            lower = self._bisect(lo, hi, partial(_not_below, self, shift, span, query, masks, want))
            # The longest common prefix with the suffixes around the lower bound, in this level.
            best = np.zeros(len(rows), dtype=np.int64)
            inside = (0, self.size) if first == 0 else (lo, hi)  # the sample's bounds are not a range
            for rank, usable in ((lower, lower < inside[1]), (lower - 1, lower > inside[0])):
                have, valid = self._level_words(np.clip(rank, 0, self.size - 1), shift, span)
                same = np.zeros(len(rows), dtype=np.int64)
                going = np.ones(len(rows), dtype=bool)
                for k in range(span):
                    agree = _leading_zero_bytes((have[:, k] & masks[k]) ^ query[k])
                    agree = np.minimum(agree, np.clip(want - 8 * k, 0, 8))
                    same += np.where(going, agree, 0)
                    going &= agree == 8
                if valid is not None:
                    same = np.minimum(same, valid)
                best = np.maximum(best, np.where(usable, same, 0))
            ranks[rows] = lower
            found[rows] = (8 * first + best) // self.width
            going = (best == want) & (nbytes[rows] > 8 * (first + span))
            if not going.any():
                break
            rows, lower, hi = rows[going], lower[going], hi[going]
            query = [q[going] for q in query]
            lo, hi = lower, self._bisect(lower, hi, partial(_above, self, shift, span, query))
        return found, ranks


def _not_below(
    shard: SuffixArrayShard, shift: int, span: int, query: list[np.ndarray], masks: list[np.ndarray], want: np.ndarray,
    rows: np.ndarray, rank: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """``beyond`` of the lower bound: the suffix is not below the query's words of one level
    (compared as bytes; a suffix that ends within them and equals them so far is below)."""
    have, valid = shard._level_words(rank, shift, span)
    less = np.zeros(len(rows), dtype=bool) if valid is None else valid < want[rows]
    for k in reversed(range(span)):
        word, wanted = have[:, k] & masks[k][rows], query[k][rows]
        less = (word < wanted) | ((word == wanted) & less)
    return ~less


def _above(
    shard: SuffixArrayShard, shift: int, span: int, query: list[np.ndarray], rows: np.ndarray, rank: np.ndarray
) -> np.ndarray:
    """``beyond`` of the upper bound: the suffix is above the query's (whole) words of one level."""
    have, _ = shard._level_words(rank, shift, span)  # zero past the end: exact here
    more = np.zeros(len(rows), dtype=bool)
    for k in reversed(range(span)):
        wanted = query[k][rows]
        more = (have[:, k] > wanted) | ((have[:, k] == wanted) & more)
    return more


class _Windows:
    """The ``8 * span`` stream bytes from each token position, as ``span`` big-endian words.

    One gather of a ``8 * span``-byte item per position, from a strided view of the memory map
    (much cheaper than one gather per word); the last positions, whose bytes run past the end of
    the stream, come from a small zero-padded table (its last row: a position past the end)."""

    def __init__(self, stream: np.ndarray, size: int, width: int, span: int) -> None:
        nbytes = 8 * span
        self.span = span
        self.full = max(0, size - nbytes // width + 1)  # positions with all their bytes in the stream
        self.view = np.ndarray((self.full,), f"V{nbytes}", buffer=stream, strides=(width,)) if self.full else None
        left = (size - self.full) * width
        rest = np.zeros(left + nbytes, dtype=np.uint8)
        rest[:left] = stream[self.full * width : size * width]
        self.tail = np.stack(
            [np.frombuffer(rest[k * width : k * width + nbytes].tobytes(), ">u8") for k in range(size - self.full + 1)]
        ).astype(np.uint64)

    def __call__(self, at: np.ndarray) -> tuple[np.ndarray, bool]:
        if self.view is None:
            return self.tail[np.minimum(at, len(self.tail) - 1)], True
        got = self.view[np.minimum(at, self.full - 1)].view(">u8").reshape(len(at), self.span).astype(np.uint64)
        over = at >= self.full
        if not over.any():
            return got, False
        got[over] = self.tail[np.minimum(at[over] - self.full, len(self.tail) - 1)]
        return got, True


def open_shards(infos: Sequence[IndexInfo]) -> list[SuffixArrayShard]:
    """Every shard of every folder, in the engine's order, with global document numbers."""
    shards = []
    first_doc = 0
    for info in infos:
        for s in range(info.shards):
            shard = SuffixArrayShard(info.token_file(s), info.path / f"table.{s}", info.token_width, first_doc)
            shards.append(shard)
            first_doc += len(shard.doc_starts)
    return shards


def pack_queries(tokens: np.ndarray, lengths: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Queries as the search reads them, ``(words, nbytes)``: each padded row of token ids
    (``lengths[i]`` count) as its little-endian bytes read as big-endian words, zero past its length."""
    count, columns = tokens.shape
    per_word = 8 // width
    padded = -(-max(columns, 1) // per_word) * per_word
    ids = np.zeros((count, padded), dtype="<u2" if width == 2 else "<u4")
    ids[:, :columns] = tokens
    ids[np.arange(padded)[None, :] >= lengths[:, None]] = 0
    words = np.ascontiguousarray(ids).view(">u8").astype(np.uint64).reshape(count, padded // per_word)
    return words, np.asarray(lengths, dtype=np.int64) * width


def pack_windows(ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Queries as :func:`pack_queries` gives them, cut from one token array (the ``lengths[i]``
    tokens from ``starts[i]``) with one gather per query, as :class:`_Windows` reads the corpus."""
    lengths = np.asarray(lengths, dtype=np.int64)
    per_word = 8 // width
    words = max(1, -(-int(lengths.max(initial=0)) // per_word))
    raw = np.zeros(len(ids) + words * per_word, dtype="<u2" if width == 2 else "<u4")
    raw[: len(ids)] = ids
    view = np.ndarray((len(ids),), f"V{8 * words}", buffer=raw, strides=(width,))
    packed = view[np.asarray(starts, dtype=np.int64)].view(">u8").reshape(len(starts), words).astype(np.uint64)
    nbytes = lengths * width
    for k in range(words):  # zero past each query's length, as pack_queries does
        packed[:, k] &= _HIGH_BYTES[np.clip(nbytes - 8 * k, 0, 8)]
    return packed, nbytes


def longest_prefixes(
    shards: Sequence[SuffixArrayShard], tokens: np.ndarray, lengths: np.ndarray, *, workers: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(length, shard, rank)``: the longest prefix of each padded query row (``lengths[i]`` count)
    found in any shard, and the lower bound of the whole query there (a match when ``length`` is
    whole). Blocks run on ``workers`` threads (default: one per core, at most 4), at least 4,096
    queries each.
    """
    if not len(tokens) or not shards:
        empty = np.zeros(len(tokens), dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    words, nbytes = pack_queries(np.asarray(tokens), np.asarray(lengths), shards[0].width)
    return longest_packed(shards, words, nbytes, workers=workers)


def longest_packed(
    shards: Sequence[SuffixArrayShard], words: np.ndarray, nbytes: np.ndarray, *, workers: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`longest_prefixes` of queries already packed (:func:`pack_queries`, :func:`pack_windows`)."""
    count = len(words)
    best = np.zeros(count, dtype=np.int64)
    where = np.zeros(count, dtype=np.int64)
    ranks = np.zeros(count, dtype=np.int64)
    if not count or not shards:
        return best, where, ranks
    # Starting threads costs about a millisecond each on some machines: a small batch (a late
    # round of the matching statistics) is searched on the calling thread.
    threads = max(1, min(workers if workers else min(4, os.cpu_count() or 1), count // _SMALL))
    # Sorted by their first word, neighbouring queries probe neighbouring suffixes: the sample's
    # search and the table's pages are read in order.
    order = np.argsort(words[:, 0])
    words, nbytes = words[order], nbytes[order]
    step = min(_BLOCK, -(-count // threads))

    def block(lo: int) -> None:
        part = slice(lo, lo + step)
        for s, shard in enumerate(shards):
            found, rank = shard.search(words[part], nbytes[part])
            better = found > best[part]
            best[part] = np.where(better, found, best[part])
            where[part] = np.where(better, s, where[part])
            ranks[part] = np.where(better, rank, ranks[part])

    starts = range(0, count, step)
    if threads == 1 or len(starts) == 1:
        for lo in starts:
            block(lo)
    else:
        with ThreadPoolExecutor(threads, thread_name_prefix="novelty-sa") as pool:
            list(pool.map(block, starts))
    out = np.empty((3, count), dtype=np.int64)
    out[:, order] = best, where, ranks
    return out[0], out[1], out[2]
