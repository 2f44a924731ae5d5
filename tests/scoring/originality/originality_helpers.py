"""Brute-force references and random corpora for the originality tests."""

from __future__ import annotations

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
