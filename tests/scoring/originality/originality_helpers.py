"""Brute-force references and random corpora for the originality tests."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_novelty.scoring.text import words

Unit = str | int
WORDS = ["ka", "lo", "Mi", "ne", "su", "ta", "Ka", "ño", "x1", "ｆｏｏ", "foo", "_b"]
PUNCT = [".", ",", "!", "«", "—"]
UNKNOWN = ["zzq", "Ünseen", "99"]


def random_corpus(seed: int, docs: int = 40, vocab: int = 6, max_words: int = 30) -> list[str]:
    """Short documents over a small vocabulary, some sharing long runs (so matches get long)."""
    rng = random.Random(seed)
    pool = WORDS[:vocab] + PUNCT[: max(1, vocab // 3)]
    out: list[str] = []
    for _ in range(docs):
        if out and rng.random() < 0.3:
            base = words(rng.choice(out))
            start = rng.randrange(len(base) + 1)
            piece = base[start : start + rng.randint(3, 15)]
            extra = [rng.choice(pool) for _ in range(rng.randint(0, 5))]
            out.append(" ".join(extra + piece + extra[::-1]))
        else:
            out.append(" ".join(rng.choice(pool) for _ in range(rng.randint(0, max_words))))
    return out


class Reference:
    """Every run of units of every document, for exact longest-match answers."""

    def __init__(self, docs: Sequence[Sequence[Unit]]) -> None:
        self.docs = [list(d) for d in docs]
        self.runs: set[tuple[Unit, ...]] = set()
        for doc in self.docs:
            for i in range(len(doc)):
                for j in range(i + 1, len(doc) + 1):
                    self.runs.add(tuple(doc[i:j]))

    def longest(self, units: Sequence[Unit], i: int) -> int:
        length = 0
        while i + length < len(units) and tuple(units[i : i + length + 1]) in self.runs:
            length += 1
        return length

    def originality(self, units: Sequence[Unit], n: int) -> tuple[float | None, int]:
        count = len(units) - n + 1
        if count <= 0:
            return None, 0
        unseen = sum(tuple(units[i : i + n]) not in self.runs for i in range(count))
        return unseen / count, count

    def longest_span(self, units: Sequence[Unit]) -> int:
        return max((self.longest(units, i) for i in range(len(units))), default=0)

    def doc_contains(self, doc: int, run: Sequence[Unit]) -> bool:
        d, r = self.docs[doc], list(run)
        return any(d[i : i + len(r)] == r for i in range(len(d) - len(r) + 1))


def splice_text(rng: random.Random, corpus: Sequence[str], pieces: int) -> str:
    """A text made of runs copied from the corpus and random or unknown words."""
    parts: list[str] = []
    for _ in range(pieces):
        roll = rng.random()
        if roll < 0.5 and corpus:
            base = words(rng.choice(corpus))
            start = rng.randrange(len(base) + 1)
            parts.extend(base[start : start + rng.randint(1, 12)])
        elif roll < 0.9:
            parts.extend(rng.choice(WORDS + PUNCT) for _ in range(rng.randint(1, 4)))
        else:
            parts.append(rng.choice(UNKNOWN))
    return " ".join(parts)


def train_tokenizer(docs: Sequence[str], folder: Path, vocab_size: int = 48) -> Path:
    """A tiny BPE tokenizer trained on ``docs``, saved as ``folder/tokenizer.json``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(list(docs), trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["[UNK]"]))
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder


def hf_units(folder: Path) -> Callable[[str], list[int]]:
    """Token ids of a text with the saved tokenizer (no special tokens)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    return lambda text: list(tok.encode(text, add_special_tokens=False).ids)


def brute_match_lengths(docs: Sequence[Sequence[Unit]], texts: Sequence[Sequence[Unit]]) -> list[list[int]]:
    """The longest match at every position of every text, found by comparing every span of every
    text with the corpus at every position that holds its first unit (no index, no sorting of
    suffixes), vectorised over all texts at once.

    Level ``k`` holds the pairs (class of equal k-unit query prefixes, corpus position where that
    prefix occurs inside one document); a query position's match is the last level at which its
    prefix still has a pair. Every span is compared with every corpus place that could hold it.
    """
    import numpy as np

    flat_docs = list(itertools.chain.from_iterable(docs))
    flat_texts = list(itertools.chain.from_iterable(texts))
    codes = {u: i for i, u in enumerate(dict.fromkeys(flat_docs + flat_texts))}
    units = np.fromiter(map(codes.__getitem__, flat_docs), dtype=np.int64, count=len(flat_docs))
    doc_sizes = np.array([len(d) for d in docs], dtype=np.int64)
    # -1 after every document (and once more at the end): a boundary no match runs over.
    stream = np.insert(units, np.cumsum(doc_sizes), -1) if len(docs) else np.zeros(0, dtype=np.int64)
    stream = np.concatenate([stream, [-1]])
    sizes = np.array([len(t) for t in texts], dtype=np.int64)
    query = np.fromiter(map(codes.__getitem__, flat_texts), dtype=np.int64, count=len(flat_texts))
    ends = np.repeat(np.cumsum(sizes), sizes)
    start = np.arange(len(query))
    found = np.zeros(len(query), dtype=np.int64)
    width = len(codes) + 2
    # Level 1: one class per distinct first unit; its pairs are every corpus position of that unit.
    classes, row_class = np.unique(query, return_inverse=True)
    order = np.argsort(stream, kind="stable")
    lo = np.searchsorted(stream[order], classes, "left")
    hi = np.searchsorted(stream[order], classes, "right")
    pair_class = np.repeat(np.arange(len(classes)), hi - lo)
    pair_at = order[np.concatenate([np.arange(a, b) for a, b in zip(lo, hi, strict=True)] or [np.zeros(0, int)])]
    row_class = row_class.astype(np.int64)
    count, level = len(classes), 1
    while len(query):
        present = np.zeros(count, dtype=bool)
        present[pair_class] = True
        hit = (row_class >= 0) & present[np.maximum(row_class, 0)]
        found[hit] = level
        going = np.flatnonzero(hit & (start + level < ends))
        if not len(going) or not len(pair_class):
            break
        child, inverse = np.unique(row_class[going] * width + query[going + level], return_inverse=True)
        row_class = np.full(len(query), -1, dtype=np.int64)
        row_class[going] = inverse
        following = stream[np.minimum(pair_at + level, len(stream) - 1)]
        key = pair_class * width + following
        slot = np.minimum(np.searchsorted(child, key), len(child) - 1)
        keep = (child[slot] == key) & (following >= 0)
        pair_class, pair_at, count, level = slot[keep], pair_at[keep], len(child), level + 1
    bounds = np.cumsum(sizes)
    return [found[b - n : b].tolist() for b, n in zip(bounds, sizes, strict=True)]


def covered_reference(lengths: Sequence[int], length: int) -> list[bool]:
    """Which units some found span of at least ``length`` units covers, marked span by span (the
    longest span from each start: every shorter one from there lies inside it)."""
    marks = [False] * len(lengths)
    for i, longest in enumerate(lengths):
        if longest >= length:
            for j in range(i, i + longest):
                marks[j] = True
    return marks
