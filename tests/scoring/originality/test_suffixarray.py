"""The suffix-array search against brute force, on shards written here byte for byte.

The shards are laid out as infini-gram lays them out (``tokenized.0``, ``table.0`` with
``ceil(log2(bytes) / 8)``-byte little-endian pointers, ``offset.0``); the table written here is
checked against the one the real indexer builds. What the search must get right is where 8-byte
words meet the data: token ids with zero and 0xFF bytes, queries and suffixes that end inside a
word (a shorter suffix sorts first), queries longer than one level, shards shorter than one word,
both token widths and pointers of 1, 2 and 3 bytes.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pytest_novelty.scoring.originality import build_index
from pytest_novelty.scoring.originality.index import read_index
from pytest_novelty.scoring.originality.suffixarray import SuffixArrayShard, longest_prefixes, open_shards

# Ids whose bytes are 0x00 or 0xFF in either place, beside ordinary ones.
AWKWARD_U16 = [0, 1, 0x00FF, 0xFF00, 0x0100, 0xFFFE, 0x7F80, 2]
AWKWARD_U32 = [0, 1, 0xFF, 0xFF000000, 0x00FFFF00, 0xFFFFFFFE, 0x01000000, 7]


def suffix_order(stream: np.ndarray, width: int) -> np.ndarray:
    """Token positions sorted as infini-gram sorts them: by the bytes from each position, a
    suffix that ends sooner first (prefix doubling over big-endian token keys)."""
    n = len(stream)
    keys = np.asarray(stream, dtype="<u2" if width == 2 else "<u4").byteswap().astype(np.int64)
    rank = np.unique(keys, return_inverse=True)[1].astype(np.int64)
    k = 1
    while True:
        second = np.full(n, -1, dtype=np.int64)
        if k < n:
            second[: n - k] = rank[k:]
        order = np.lexsort((second, rank))
        pairs = np.stack([rank[order], second[order]], axis=1)
        new = np.concatenate([[0], np.cumsum((pairs[1:] != pairs[:-1]).any(axis=1))])
        rank = np.empty(n, dtype=np.int64)
        rank[order] = new
        if new[-1] == n - 1 or k >= n:
            return order
        k *= 2


def write_shard(folder: Path, stream: np.ndarray, width: int) -> SuffixArrayShard:
    """A shard of ``stream`` (token ids) as infini-gram writes one; documents start at each separator."""
    folder.mkdir(parents=True, exist_ok=True)
    dtype = "<u2" if width == 2 else "<u4"
    tokens = np.asarray(stream, dtype=dtype)
    (folder / "tokenized.0").write_bytes(tokens.tobytes())
    ratio = max(1, math.ceil(math.log2(max(len(tokens) * width, 2)) / 8))
    pointers = suffix_order(tokens, width).astype(np.uint64) * width
    table = np.zeros((len(tokens), 8), dtype=np.uint8)
    for b in range(8):
        table[:, b] = (pointers >> np.uint64(8 * b)) & np.uint64(0xFF)
    (folder / "table.0").write_bytes(table[:, :ratio].tobytes())
    separator = 0xFFFF if width == 2 else 0xFFFFFFFF
    starts = np.flatnonzero(tokens == separator).astype("<u8") * width
    (folder / "offset.0").write_bytes(starts.tobytes())
    return SuffixArrayShard(folder / "tokenized.0", folder / "table.0", width, 0)


def brute_longest(stream: np.ndarray, query: np.ndarray) -> int:
    """The longest prefix of ``query`` that occurs anywhere in ``stream``."""
    alive = np.ones(len(stream), dtype=bool)
    for k, token in enumerate(query.tolist()):
        shifted = np.zeros(len(stream), dtype=bool)
        shifted[: len(stream) - k] = stream[k:] == token
        alive &= shifted
        if not alive.any():
            return k
    return len(query)


def queries_for(stream: np.ndarray, alphabet: list[int], rng: np.random.Generator, count: int) -> list[np.ndarray]:
    """Copied runs (also ending at the stream's end), copies with a changed token, random runs."""
    n = len(stream)
    out = [np.zeros(0, dtype=np.int64)]
    for _ in range(count):
        length = int(rng.integers(1, 20))
        start = int(rng.integers(0, n))
        kind = rng.integers(0, 4)
        if kind == 0:
            run = stream[start : start + length].astype(np.int64)
        elif kind == 1:
            run = stream[max(0, n - length) :].astype(np.int64)  # runs to the very end: suffixes cut inside a word
            run = np.concatenate([run, rng.choice(alphabet, size=int(rng.integers(0, 3)))])
        elif kind == 2:
            run = stream[start : start + length].astype(np.int64).copy()
            if len(run):
                run[int(rng.integers(0, len(run)))] = rng.choice(alphabet)
        else:
            run = rng.choice(alphabet, size=length).astype(np.int64)
        out.append(run)
    return out


def check(shard: SuffixArrayShard, stream: np.ndarray, runs: list[np.ndarray], workers: int = 2) -> None:
    lengths = np.array([len(r) for r in runs], dtype=np.int64)
    tokens = np.zeros((len(runs), max(1, int(lengths.max()))), dtype=np.int64)
    for i, run in enumerate(runs):
        tokens[i, : len(run)] = run
    found, _, ranks = longest_prefixes([shard], tokens, lengths, workers=workers)
    expected = [brute_longest(stream, run) for run in runs]
    assert found.tolist() == expected
    for run, got, rank in zip(runs, found.tolist(), ranks.tolist(), strict=True):
        if got == len(run) and len(run):  # the rank of a whole match is one of its occurrences
            at = int(shard.position(np.array([rank]))[0])
            assert stream[at : at + len(run)].tolist() == run.tolist()


@pytest.mark.parametrize(("width", "alphabet"), [(2, AWKWARD_U16), (4, AWKWARD_U32)])
@pytest.mark.parametrize("size", [1, 2, 3, 5, 9, 120, 3000])
def test_search_matches_brute_force(tmp_path: Path, width: int, alphabet: list[int], size: int) -> None:
    rng = np.random.default_rng(size * width)
    separator = 0xFFFF if width == 2 else 0xFFFFFFFF
    stream = rng.choice(alphabet[: 3 if size > 100 else len(alphabet)], size=size).astype(np.int64)
    if size > 10:  # documents, and repeated passages so that matches get long
        stream[:: max(2, size // 7)] = separator
        piece = stream[5:40].copy()
        stream[size // 2 : size // 2 + len(piece)] = piece[: size - size // 2]
    shard = write_shard(tmp_path / "shard", stream, width)
    assert shard.size == size
    check(shard, stream, queries_for(stream, alphabet, rng, 150))


def test_three_byte_pointers(tmp_path: Path) -> None:
    """A stream over 64 KB has 3-byte pointers, read eight bytes at a time but for the last ranks."""
    rng = np.random.default_rng(3)
    stream = rng.choice(AWKWARD_U16[:4], size=40_000).astype(np.int64)
    shard = write_shard(tmp_path / "shard", stream, 2)
    assert shard.ratio == 3
    ranks = np.arange(shard.size)
    assert sorted((shard.position(ranks)).tolist()) == list(range(shard.size))
    assert (shard.position(ranks[-5:]) == shard._assemble(ranks[-5:]) // 2).all()
    check(shard, stream, queries_for(stream, AWKWARD_U16[:4], rng, 200))


def test_the_table_written_here_is_the_indexers(tmp_path: Path) -> None:
    """The shards above are laid out exactly as infini-gram's own indexer lays them out."""
    rng = np.random.default_rng(5)
    vocab = ["ka", "lo", "mi", "ne", "su"]
    docs = [" ".join(rng.choice(vocab, size=int(rng.integers(0, 40)))) for _ in range(60)]
    build_index(docs, tmp_path / "idx", progress=False)
    info = read_index(tmp_path / "idx")
    stream = np.fromfile(info.token_file(0), dtype="<u2").astype(np.int64)
    ours = write_shard(tmp_path / "ours", stream, 2)
    theirs = open_shards([info])[0]
    ranks = np.arange(len(stream))
    assert (theirs.position(ranks) == ours.position(ranks)).all()
    check(theirs, stream, queries_for(stream, list(range(1, 7)), rng, 100))


def test_queries_over_several_shards_and_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The best shard wins; many blocks on several threads give what one thread gives."""
    from pytest_novelty.scoring.originality import suffixarray

    rng = np.random.default_rng(9)
    a = rng.choice(AWKWARD_U16, size=700).astype(np.int64)
    b = rng.choice(AWKWARD_U16, size=500).astype(np.int64)
    shards = [write_shard(tmp_path / "a", a, 2), write_shard(tmp_path / "b", b, 2)]
    runs = queries_for(a, AWKWARD_U16, rng, 200) + queries_for(b, AWKWARD_U16, rng, 200)
    lengths = np.array([len(r) for r in runs], dtype=np.int64)
    tokens = np.zeros((len(runs), int(lengths.max())), dtype=np.int64)
    for i, run in enumerate(runs):
        tokens[i, : len(run)] = run
    expected = [max(brute_longest(a, r), brute_longest(b, r)) for r in runs]
    one = longest_prefixes(shards, tokens, lengths, workers=1)
    monkeypatch.setattr(suffixarray, "_BLOCK", 16)
    many = longest_prefixes(shards, tokens, lengths, workers=3)
    assert one[0].tolist() == expected == many[0].tolist()
    assert (one[1] == many[1]).all() and (one[2] == many[2]).all()
