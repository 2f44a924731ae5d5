"""Batched exact lookups in an infini-gram index's own suffix array, vectorised with numpy.

An index shard is ``tokenized.S`` (the token stream) and ``table.S`` (the suffix array: one
``ratio``-byte little-endian byte offset into the stream per token, sorted by the bytes that
follow it; ``ratio = ceil(log2(stream bytes) / 8)``). Suffixes are ordered byte by byte, so tokens
are compared through their byte-swapped value (the first stored byte is the most significant one);
a suffix that ends sooner sorts first.

For a batch of queries, one lock-step binary search (about log2(tokens) steps, each a gather of
one pointer and a few tokens per query) finds every query's insertion point; the longest prefix of
the query that occurs in the shard is then the longer common prefix with the two suffixes around
that point. This replaces one engine call per query, which the engine serves by starting an OS
thread each time, with a few dozen numpy operations for the whole batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pytest_novelty.scoring.originality.index import IndexInfo

__all__ = ["SuffixArrayShard", "longest_prefixes", "open_shards"]

_CELLS = 1 << 21  # query tokens per lock-step block (bounds the temporary arrays to a few MB each)


class SuffixArrayShard:
    """Memory-mapped token stream and suffix array of one shard."""

    def __init__(self, tokens: Path, table: Path, width: int, first_doc: int) -> None:
        self.width = width
        # plain ndarray views of the memory maps: indexing a memmap subclass is much slower
        self.stream = np.asarray(np.memmap(tokens, dtype="<u2" if width == 2 else "<u4", mode="r"))
        self.size = len(self.stream)
        self.ratio = max(1, math.ceil(math.log2(max(self.size * width, 2)) / 8))
        raw = np.asarray(np.memmap(table, dtype=np.uint8, mode="r"))
        self._raw = raw
        self._view = raw.view(f"<u{self.ratio}") if self.ratio in (1, 2, 4, 8) else None
        self.first_doc = first_doc
        offsets = np.fromfile(tokens.with_name(tokens.name.replace("tokenized", "offset")), dtype="<u8")
        self.doc_starts = (offsets // width).astype(np.int64)
        self.steps = max(1, math.ceil(math.log2(self.size + 1)))

    def position(self, rank: np.ndarray) -> np.ndarray:
        """Token position of the suffixes at these ranks."""
        if self._view is not None:
            return self._view[rank].astype(np.int64) // self.width
        at = rank.astype(np.int64) * self.ratio
        value = np.zeros(len(rank), dtype=np.int64)
        for k in range(self.ratio):
            value |= self._raw[at + k].astype(np.int64) << (8 * k)
        return value // self.width

    def keys(self, rank: np.ndarray, columns: int) -> np.ndarray:
        """Byte-order keys of the first ``columns`` tokens of the suffixes at ``rank`` (-1 past the end)."""
        start = self.position(rank)
        pos = start[:, None] + np.arange(columns)[None, :]
        inside = pos < self.size
        values = self.stream[np.minimum(pos, self.size - 1)].byteswap().astype(np.int64)
        return np.where(inside, values, -1)

    def search(self, queries: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per query: the rank where it would be inserted and the longest prefix found in the shard.

        ``queries`` holds byte-order keys (see :func:`byte_keys`), one query per row, padded; only
        the first ``lengths[i]`` columns of row ``i`` count.
        """
        count, columns = queries.shape
        valid = np.arange(columns)[None, :] < lengths[:, None]
        rows = np.arange(count)
        lo = np.zeros(count, dtype=np.int64)
        hi = np.full(count, self.size, dtype=np.int64)
        for _ in range(self.steps):
            mid = (lo + hi) // 2
            have = self.keys(np.minimum(mid, self.size - 1), columns)
            differ = (have != queries) & valid
            first = differ.argmax(axis=1)
            less = differ[rows, first] & (have[rows, first] < queries[rows, first])
            moving = lo < hi
            lo = np.where(moving & less, mid + 1, lo)
            hi = np.where(moving & ~less, mid, hi)

        def common(rank: np.ndarray, usable: np.ndarray) -> np.ndarray:
            have = self.keys(np.clip(rank, 0, self.size - 1), columns)
            same = (have == queries) | ~valid
            length = np.where(same.all(axis=1), columns, (~same).argmax(axis=1))
            return np.where(usable, np.minimum(length, lengths), 0)

        found = np.maximum(common(lo, lo < self.size), common(lo - 1, lo > 0))
        return lo, found

    def first_token(self) -> int | None:
        """The first token of the shard's smallest suffix (where the engine's bug strikes)."""
        if self.size == 0:
            return None
        return int(self.stream[int(self.position(np.array([0]))[0])])

    def document(self, rank: int) -> int:
        """Global number of the document holding the suffix at ``rank``."""
        position = int(self.position(np.array([rank]))[0])
        return self.first_doc + int(np.searchsorted(self.doc_starts, position, side="right")) - 1


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


def byte_keys(tokens: np.ndarray, width: int) -> np.ndarray:
    """Byte-order comparison keys of token ids (see the module docstring)."""
    return np.asarray(tokens, dtype="<u2" if width == 2 else "<u4").byteswap().astype(np.int64)


def longest_prefixes(
    shards: Sequence[SuffixArrayShard], queries: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Longest prefix of each query found in any shard, with the shard and rank of one such match.

    ``queries`` are byte-order keys, one padded row per query. Returns ``(length, shard, rank)``;
    ``rank`` is the insertion point of the full query in that shard, which is a match whenever
    ``length`` is the query's whole length.
    """
    count = len(queries)
    best = np.zeros(count, dtype=np.int64)
    where = np.zeros(count, dtype=np.int64)
    ranks = np.zeros(count, dtype=np.int64)
    step = max(256, _CELLS // max(queries.shape[1], 1))
    for lo in range(0, count, step):
        block = slice(lo, lo + step)
        for s, shard in enumerate(shards):
            if shard.size == 0:
                continue
            rank, found = shard.search(queries[block], lengths[block])
            better = found > best[block]
            best[block] = np.where(better, found, best[block])
            where[block] = np.where(better, s, where[block])
            ranks[block] = np.where(better, rank, ranks[block])
    return best, where, ranks
