"""Benchmark of the matching statistics behind the Creativity Index: searches against questions.

Generates one corpus with the originality benchmark's grammar (``benchmarks/originality.py``) and
indexes its first 1 MB, 10 MB and 100 MB of text (``--sizes``; each corpus holds the smaller
ones), then takes ``--generations`` texts of 150 words from the smallest (half runs copied from
it, half new sentences of the same grammar, as in the originality benchmark: the same texts for
every size). On each index it times, over every word position of every text:

- ``matching statistics``: the longest corpus match at every position, searching only the
  positions whose neighbours do not settle it (``InfiniGramBackend.matching_statistics``): exact
  lengths, and lengths for the Creativity Index's range L = 5..12 (``cap=12, floor=5``);
- ``one search per (position, L)``: whether the span of L words at each position occurs, one
  query for every L of the range, through the same suffix-array search, all queries in one batch;
- ``one count per (position, L)``: the same questions as infini-gram ``count`` calls, one per
  query, as ``benchmarks/originality.py``'s naive method asks them, on the first
  ``--count-texts`` texts (it is slow).

All must give the same uniqueness at every L and the same Creativity Index for every text they
score (the script fails otherwise). It prints positions per second of each, the ratios, and the
cost per position of the matching statistics against the corpus size; then where the matching
statistics' time goes (the suffix-array searches, and the bookkeeping of the rounds around them),
the cost of one of its searches against one query of the search per (position, L), and the ratio
it would reach if its searches cost no more than those queries (its ceiling at today's count of
searches). Times are CPU times, the
least of ``--repeats`` runs after a warm-up run (the index pages in the page cache), on
``--workers`` threads (default one, which makes CPU time the method's own: on a shared machine the
time other work takes is not counted). Run::

    python benchmarks/creativity.py [--sizes 1,10,100] [--generations 2000] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest_novelty.scoring.originality.local as local_backend
from benchmarks.originality import Grammar, corpus, generations
from pytest_novelty.metrics.creativity import DEFAULT_LENGTHS, creativity_index, uniqueness_table
from pytest_novelty.scoring.originality import build_index, open_backend
from pytest_novelty.scoring.originality.local import InfiniGramBackend
from pytest_novelty.scoring.originality.suffixarray import longest_prefixes
from pytest_novelty.scoring.originality.tokenization import Encoding

MB = 1_000_000


def write_corpora(grammar: Grammar, sizes: list[int], work: Path) -> list[Path]:
    """One JSON Lines file per size: the first ``size`` MB of text of one generated corpus."""
    files = [work / f"corpus-{size}MB.jsonl" for size in sizes]
    handles = [file.open("w", encoding="utf-8") for file in files]
    written = 0
    try:
        for doc in corpus(grammar, sizes[-1] * MB):  # a word is more than a byte: enough words
            line = json.dumps({"text": doc}) + "\n"
            written += len(doc.encode("utf-8")) + 1
            for size, handle in zip(sizes, handles, strict=True):
                if written <= size * MB:
                    handle.write(line)
            if written >= sizes[-1] * MB:
                break
    finally:
        for handle in handles:
            handle.close()
    return files


def first_documents(file: Path) -> Iterator[str]:
    with file.open(encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)["text"]


def one_search_per_length(
    backend: InfiniGramBackend, encodings: list[Encoding], lengths: tuple[int, ...]
) -> list[np.ndarray]:
    """Per text, the largest L of the range whose span from each position occurs (0 when none),
    from one suffix-array query per (position, L), all in one batch.

    These corpora have one token per word. The values are what the Creativity Index reads:
    ``min(L_i, max L)`` where ``L_i`` reaches the range, 0 below it."""
    sizes = np.array([len(enc.ids) for enc in encodings], dtype=np.int64)
    ids = np.concatenate([np.asarray(enc.ids, dtype=np.int64) for enc in encodings] + [np.zeros(max(lengths), int)])
    left = np.repeat(np.cumsum(sizes), sizes) - np.arange(int(sizes.sum()))  # words from each position on
    windows = np.lib.stride_tricks.sliding_window_view(ids, max(lengths))[: len(left)]
    best = np.zeros(len(left), dtype=np.int64)
    for length in lengths:
        at = np.flatnonzero(left >= length)
        found = longest_prefixes(backend._shards, windows[at], np.full(len(at), length), workers=backend.workers)[0]
        best[at[found == length]] = length
    return np.split(best, np.cumsum(sizes)[:-1])


def one_count_per_length(
    backend: InfiniGramBackend, encodings: list[Encoding], lengths: tuple[int, ...]
) -> list[np.ndarray]:
    """The same values from one infini-gram ``count`` call per (position, L)."""
    engine = backend.engine
    owners: list[tuple[int, int]] = []
    widths: list[int] = []
    sizes = []
    for t, enc in enumerate(encodings):
        ids = [int(u) for u in enc.ids]
        for length in lengths:
            for i in range(len(ids) - length + 1):
                if engine.count(input_ids=ids[i : i + length])["count"]:
                    owners.append((t, i))
                    widths.append(length)
        sizes.append(len(ids))
    out = [np.zeros(size, dtype=np.int64) for size in sizes]
    for (t, i), length in zip(owners, widths, strict=True):
        out[t][i] = max(out[t][i], length)
    return out


def search_share(run: Callable[[], object], repeats: int) -> tuple[float, int]:
    """The least CPU time the suffix-array searches of ``run`` take (:func:`longest_packed` as the
    local backend calls it), over ``repeats`` runs, and how many queries one run asks."""
    spent, asked, real = [0.0], [0], local_backend.longest_packed

    def timed(*args: Any, **kwargs: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        start = time.process_time()
        found = real(*args, **kwargs)
        spent[0] += time.process_time() - start
        asked[0] += len(found[0])
        return found

    local_backend.longest_packed = timed
    try:
        least = []
        for _ in range(repeats):
            spent[0], asked[0] = 0.0, 0
            run()
            least.append(spent[0])
    finally:
        local_backend.longest_packed = real
    return min(least), asked[0]


def fewest_searches(exact: list[np.ndarray], shortest: int) -> int:
    """A lower bound on the searches that settle every position whose match falls short of
    ``shortest``, for any method that settles a position from the ends of searched ones (as the
    matching statistics do): a search at ``q`` finding the end ``e_q`` settles at most the
    positions after ``e_q - shortest`` up to ``q``, and searching from the right the rightmost
    unsettled such position, knowing every length beforehand, is the fewest (an interval cover)."""
    needed = 0
    for lengths in exact:
        q = len(lengths) - 1
        while q >= 0:
            if lengths[q] >= shortest:
                q -= 1
                continue
            needed += 1
            q = min(q - 1, q + int(lengths[q]) - shortest)
    return needed


def best_of(run: Callable[[], object], repeats: int) -> tuple[float, object]:
    """The least CPU time of ``repeats`` runs after one warm-up run, and the last result.

    CPU time of this process on one thread: the time other work on a shared machine takes from
    it is not counted, so the best of a few runs is the method's own cost."""
    result = run()
    seconds = []
    for _ in range(repeats):
        start = time.process_time()
        result = run()
        seconds.append(time.process_time() - start)
    return min(seconds), result


def same_index(a: list[np.ndarray], b: list[np.ndarray], lengths: tuple[int, ...]) -> bool:
    """Whether two sets of lengths give the same uniqueness at every L and the same index."""
    first, second = uniqueness_table(a, lengths), uniqueness_table(b, lengths)
    return bool(
        np.array_equal(first, second, equal_nan=True)
        and np.array_equal(creativity_index(first), creativity_index(second))
    )


@dataclass
class Row:
    size: int
    words: int
    positions: int
    searched: float
    exact: float
    ranged: float
    per_query: float
    per_count: float
    in_search: float  # CPU seconds of the ranged run's suffix-array searches
    ranged_seconds: float
    searches: int  # queries the ranged run asks
    query_seconds: float
    queries: int  # queries the search per (position, L) asks
    fewest: int  # searches any neighbour-settling method needs for the positions below the range


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100", help="corpus sizes in MB of text, ascending")
    parser.add_argument("--generations", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--count-texts", type=int, default=20, help="texts asked one count at a time")
    parser.add_argument("--workers", type=int, default=1, help="threads of the suffix-array searches")
    parser.add_argument("--workdir", help="where to build (default: a temporary folder, removed after)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    lengths = DEFAULT_LENGTHS

    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="novelty-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    grammar = Grammar(args.seed)
    try:
        start = time.perf_counter()
        files = write_corpora(grammar, sizes, work)
        print(f"corpora of {', '.join(f'{s} MB' for s in sizes)} written in {time.perf_counter() - start:.1f}s")
        texts = generations(grammar, list(first_documents(files[0])), args.generations, args.seed + 1)
        rows = [measure(size, file, work, texts, lengths, args) for size, file in zip(sizes, files, strict=True)]
        if any(row is None for row in rows):
            return 1
        report([row for row in rows if row is not None], len(texts), args.count_texts, lengths)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def measure(
    size: int, file: Path, work: Path, texts: list[str], lengths: tuple[int, ...], args: argparse.Namespace
) -> Row | None:
    """Index one corpus and time every method on it; None (after a message) when they disagree."""
    folder = work / f"idx-{size}"
    if not (folder / "novelty-index.json").exists():
        facts = build_index([file], folder, progress=False)
        print(f"index of {size} MB: {facts['tokens']:,} words, {facts['docs']:,} documents, {facts['seconds']:.1f}s")
    backend = open_backend(f"infini-gram:{folder}", workers=args.workers)
    assert isinstance(backend, InfiniGramBackend)
    encodings = backend.tokenizer.encode(texts)
    positions = sum(len(enc) for enc in encodings)
    shortest, longest = min(lengths), max(lengths)

    def exact() -> list[np.ndarray]:
        return backend.matching_statistics(encodings)

    def ranged() -> list[np.ndarray]:
        return backend.matching_statistics(encodings, cap=longest, floor=shortest)

    backend.searched = 0
    exact_seconds, by_exact = best_of(exact, args.repeats)
    backend.searched = 0
    ranged_seconds, by_range = best_of(ranged, args.repeats)
    searched = backend.searched / (args.repeats + 1) / positions
    in_search, searches = search_share(ranged, args.repeats)
    query_seconds, by_query = best_of(lambda: one_search_per_length(backend, encodings, lengths), args.repeats)
    sample = encodings[: args.count_texts]
    start = time.process_time()
    by_count = one_count_per_length(backend, sample, lengths)
    count_seconds = time.process_time() - start
    sampled = sum(len(enc) for enc in sample)
    results = [by_exact, by_range, by_query]
    agree = all(same_index(r, by_exact, lengths) for r in results) and same_index(  # type: ignore[arg-type]
        by_count, by_exact[: len(sample)], lengths  # type: ignore[index]
    )
    backend.close()
    if not agree:
        print(f"MISMATCH between the methods on the {size} MB index", file=sys.stderr)
        return None
    words = int(json.loads((folder / "novelty-index.json").read_text())["units"])
    return Row(
        size, words, positions, searched, positions / exact_seconds, positions / ranged_seconds,
        positions / query_seconds, sampled / count_seconds, in_search, ranged_seconds, searches, query_seconds,
        int(sum(max(0, len(enc.ids) - n + 1) for enc in encodings for n in lengths)),
        fewest_searches(by_exact, shortest),  # type: ignore[arg-type]
    )  # fmt: skip


def report(rows: list[Row], texts: int, count_texts: int, lengths: tuple[int, ...]) -> None:
    print(
        f"\n{texts:,} texts, {rows[0].positions:,} word positions (one count per (position, L) on the first "
        f"{count_texts}), L = {lengths[0]}..{lengths[-1]}; every method gives the same Creativity Index"
    )
    print("positions per CPU second (one thread):")
    print(
        f"{'corpus':>7} {'words':>11} {'searched':>9} {'exact':>10} {'for L':>10} {'1 search/(pos,L)':>17} "
        f"{'ratio':>6} {'1 count/(pos,L)':>16} {'ratio':>7} {'µs/position':>12}"
    )
    for row in rows:
        print(
            f"{row.size:>4} MB {row.words:>11,} {row.searched:>9.0%} {row.exact:>10,.0f} {row.ranged:>10,.0f} "
            f"{row.per_query:>17,.0f} {row.ranged / row.per_query:>5.1f}x {row.per_count:>16,.0f} "
            f"{row.ranged / row.per_count:>6.0f}x {1e6 / row.ranged:>12.2f}"
        )
    print(f"cost per position, {rows[-1].size} MB against {rows[0].size} MB: {rows[0].ranged / rows[-1].ranged:.2f}x")
    print("\nwhere the time of the matching statistics for L goes:")
    print(f"{'corpus':>7} {'searches':>9} {'bookkeeping':>12} {'µs/search':>10} {'µs/query':>9} {'queries/search':>15} "
          f"{'ceiling':>8} {'fewest':>7} {'its ceiling':>12}")
    for row in rows:
        per_search, per_query = row.in_search / row.searches, row.query_seconds / row.queries
        share = row.in_search / row.ranged_seconds
        print(
            f"{row.size:>4} MB {share:>9.0%} {1 - share:>12.0%} "
            f"{1e6 * per_search:>10.2f} {1e6 * per_query:>9.2f} {row.queries / row.searches:>15.1f} "
            f"{row.queries / row.searches:>7.1f}x {row.fewest / row.positions:>7.0%} "
            f"{row.queries / row.fewest * per_query / per_search * share:>11.1f}x"
        )
    print("ceiling: the ratio if each search cost what one query of the search per (position, L) costs and the "
          "rounds' bookkeeping were free")
    print(f"fewest: the searches (per position) that settle the positions below L = {lengths[0]} from their "
          "neighbours, knowing every length beforehand (a lower bound for any such method, the passages left out)")
    print("its ceiling: the ratio at that fewest count, each search and the bookkeeping costing what they cost here")


if __name__ == "__main__":
    sys.exit(main())
