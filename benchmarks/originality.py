"""Benchmark of the originality engine: index build, and n-gram checks per second per backend.

Builds a generated corpus of ``--tokens`` words (default 30 million) with ``pytest-novelty``'s
``words`` tokenisation, indexes it with infini-gram, then scores ``--generations`` texts of about
150 words (half copied runs of the corpus, half new sentences from the same grammar) at n = 4, 5, 6:

- ``ngram-set``: the in-memory exact n-gram set (its one-off build time is reported apart);
- ``infini-gram``: the index, batched lookups in its suffix array (the backend's default method);
- ``infini-gram/creativity``: the index, one longest-match (``creativity``) engine call per text,
  on a thread pool;
- ``naive``: one ``count`` engine query per n-gram per n on the same index.

A check is one n-gram of one text at one n. The three methods must agree exactly; the script
fails otherwise. Run::

    python benchmarks/originality.py [--tokens 30000000] [--generations 2000] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from pytest_novelty.scoring.originality import build_index, open_backend, score_texts
from pytest_novelty.scoring.originality.local import InfiniGramBackend
from pytest_novelty.scoring.originality.ngramset import NgramSetBackend

NS = (4, 5, 6)
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + ["an", "el", "or", "us", "ix"]


class Grammar:
    """Sentences from a few templates over invented words, Zipf-distributed."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)

        def lexicon(size: int, syllables: int) -> list[str]:
            out: set[str] = set()
            while len(out) < size:
                out.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, syllables))))
            return sorted(out)

        self.slots = {
            "N": lexicon(3000, 3),
            "V": lexicon(800, 3),
            "A": lexicon(600, 3),
            "P": ["in", "on", "by", "near", "under", "with", "from", "to", "over", "behind"],
            "D": ["the", "a", "this", "that", "every", "some", "my", "our"],
            "C": ["and", "but", "so", "then", "because"],
            "Q": ["Name" + w.capitalize() for w in lexicon(400, 2)],
        }
        self.templates = [
            "D A N V D N P D N .",
            "Q V D A N .",
            "D N V , C D A N V P D N .",
            "Q C Q V P D A N !",
            "D N P D N V D A A N .",
            '" D A N V , " Q V .',
            "C D N V , Q V D N P D N .",
        ]
        self.rng = np.random.default_rng(seed)

    def sentences(self, count: int) -> Iterator[str]:
        picks = {slot: self._zipf(len(words), count * 4) for slot, words in self.slots.items()}
        cursor = dict.fromkeys(picks, 0)
        template_ids = self.rng.integers(0, len(self.templates), count)
        for t in template_ids:
            out = []
            for symbol in self.templates[t].split():
                words = self.slots.get(symbol)
                if words is None:
                    out.append(symbol)
                else:
                    out.append(words[picks[symbol][cursor[symbol] % len(picks[symbol])]])
                    cursor[symbol] += 1
            yield " ".join(out)

    def _zipf(self, size: int, count: int) -> np.ndarray:
        ranks = np.arange(1, size + 1, dtype=np.float64)
        weights = 1.0 / ranks**1.05
        return self.rng.choice(size, size=count, p=weights / weights.sum())


def corpus(grammar: Grammar, tokens: int, doc_words: int = 300) -> Iterator[str]:
    """Documents of about ``doc_words`` words until ``tokens`` words are produced."""
    made = 0
    doc: list[str] = []
    length = 0
    while made < tokens:
        for sentence in grammar.sentences(100_000):
            doc.append(sentence)
            words = sentence.count(" ") + 1
            length += words
            made += words
            if length >= doc_words:
                yield " ".join(doc)
                doc, length = [], 0
            if made >= tokens:
                break
    if doc:
        yield " ".join(doc)


def generations(grammar: Grammar, docs: list[str], count: int, seed: int) -> list[str]:
    """Texts of about 150 words: copied runs of the corpus and new sentences, half and half."""
    rng = random.Random(seed)
    fresh = iter(grammar.sentences(count * 20))
    out = []
    for _ in range(count):
        parts: list[str] = []
        size = 0
        while size < 150:
            if rng.random() < 0.5:
                words = rng.choice(docs).split()
                start = rng.randrange(len(words))
                piece = words[start : start + rng.randint(5, 40)]
            else:
                piece = next(fresh).split()
            parts.extend(piece)
            size += len(piece)
        out.append(" ".join(parts[:150]))
    return out


def naive(backend: InfiniGramBackend, texts: list[str]) -> tuple[list[dict[int, float | None]], int]:
    """One ``count`` per n-gram per n (what the engine offers without a longest-match query)."""
    engine = backend.engine
    out = []
    checks = 0
    for enc in backend.tokenizer.encode(texts):
        ids = [int(t) for t in enc.ids]
        scores: dict[int, float | None] = {}
        for n in NS:
            total = len(ids) - n + 1
            if total <= 0:
                scores[n] = None
                continue
            unseen = sum(engine.count(input_ids=ids[i : i + n])["count"] == 0 for i in range(total))
            scores[n] = unseen / total
            checks += total
        out.append(scores)
    return out, checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=30_000_000)
    parser.add_argument("--generations", type=int, default=2000)
    parser.add_argument("--workdir", help="where to build (default: a temporary folder, removed after)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="novelty-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    grammar = Grammar(args.seed)
    try:
        start = time.perf_counter()
        docs = list(corpus(grammar, args.tokens))
        print(f"corpus: {len(docs):,} documents generated in {time.perf_counter() - start:.1f}s", flush=True)
        facts = build_index(docs, work / "idx", progress=False)
        print(
            f"index build: {facts['tokens']:,} tokens, {facts['docs']:,} documents, vocabulary "
            f"{facts['vocab_size']:,}: {facts['seconds']:.1f}s, {facts['index_bytes'] / 1e6:.0f} MB, "
            f"{facts['bytes_per_token']:.2f} bytes/token",
            flush=True,
        )
        texts = generations(grammar, docs, args.generations, args.seed + 1)
        del docs

        rows = []
        start = time.perf_counter()
        memory = open_backend(f"ngram-set:{work / 'idx'}", max_n=max(NS))
        assert isinstance(memory, NgramSetBackend)
        set_build = time.perf_counter() - start
        print(f"ngram-set build: {set_build:.1f}s, {memory.nbytes / 1e6:.0f} MB", flush=True)
        start = time.perf_counter()
        by_set = score_texts(memory, texts, NS)
        rows.append(("ngram-set", time.perf_counter() - start, by_set))
        memory.close()

        local = open_backend(f"infini-gram:{work / 'idx'}")
        assert isinstance(local, InfiniGramBackend)
        start = time.perf_counter()
        by_index = score_texts(local, texts, NS)
        rows.append(("infini-gram", time.perf_counter() - start, by_index))

        engine = open_backend(f"infini-gram:{work / 'idx'}", method="creativity")
        assert isinstance(engine, InfiniGramBackend)
        start = time.perf_counter()
        by_engine = score_texts(engine, texts, NS)
        rows.append(("infini-gram/creativity", time.perf_counter() - start, by_engine))

        start = time.perf_counter()
        by_naive, checks = naive(local, texts)
        naive_seconds = time.perf_counter() - start

        expected = [r.originality for r in by_index]
        if any([r.originality for r in by] != expected for _, _, by in rows) or by_naive != expected:
            print("MISMATCH between methods", file=sys.stderr)
            return 1
        if [(r.longest_span, r.longest_span_doc) for r in by_engine] != [
            (r.longest_span, r.longest_span_doc) for r in by_index
        ]:
            print("MISMATCH between the longest spans of the two index methods", file=sys.stderr)
            return 1
        print(f"\n{len(texts)} generations, n = {NS}: {checks:,} n-gram checks each; all methods agree")
        print(f"{'method':<24} {'seconds':>9} {'checks/s':>12} {'vs naive':>9}")
        naive_rate = checks / naive_seconds
        for name, seconds, _ in rows:
            rate = checks / seconds
            print(f"{name:<24} {seconds:>9.2f} {rate:>12,.0f} {rate / naive_rate:>8.1f}x")
        print(f"{'naive':<24} {naive_seconds:>9.2f} {naive_rate:>12,.0f} {1:>8.1f}x")
        values = {n: [np.nan if r.originality[n] is None else r.originality[n] for r in by_index] for n in NS}
        print("mean originality: " + ", ".join(f"@{n} {float(np.nanmean(v)):.3f}" for n, v in values.items()))
        spans = [r.longest_span for r in by_index]
        print(f"longest copied span: median {int(np.median(spans))}, max {max(spans)} words")
        print(
            f"creativity answers repaired by the bug guard: {engine.rechecked}; "
            f"runs of capped matches the suffix-array method resolved position by position: {local.split_runs}"
        )
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak memory: {peak:.0f} MB")
        local.close()
        engine.close()
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
