"""Matching statistics and the Creativity Index against brute force, on the demo corpus and on a
corpus generated here.

The reference (:func:`brute_match_lengths`) compares every span of every text with the corpus
documents' words, read from their raw text, at every position that holds the span's first unit;
uniqueness is recomputed from the spans it finds, span by span. Every generation's match lengths
and Creativity Index must be equal: 1,250 generations on the demo's own index and 800 on the
generated corpus (words, words of two tokens, a tiny BPE tokenizer), including texts shorter than
every L, empty ones, repeated words, punctuation only and non-ASCII text. The other backends
(the engine's creativity query, the n-gram set, a count-only web API) are checked on the
generated corpus.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.metrics.creativity import DEFAULT_LENGTHS, creativity_index, uniqueness_table
from pytest_novelty.scoring.originality import build_index, open_backend, score_texts
from pytest_novelty.scoring.originality.backend import MatchingStatistics
from pytest_novelty.scoring.originality.local import InfiniGramBackend
from pytest_novelty.scoring.originality.matching import match_lengths, matching_statistics
from pytest_novelty.scoring.originality.ngramset import NgramSetBackend
from pytest_novelty.scoring.text import words
from tests.scoring.originality.originality_helpers import (
    PUNCT,
    UNKNOWN,
    brute_match_lengths,
    covered_reference,
    hf_units,
    random_corpus,
    splice_text,
    train_tokenizer,
)
from tests.servers.infinigram_api import FakeInfiniGram

EDGE_TEXTS = [
    "",
    "   ",
    "the",
    "Once upon a",  # shorter than every L
    "! ? . , ;",
    "« … » — !!",  # punctuation only
    "the the the the the the the the the the the the the the",  # repeated words
    "and and and . and and and . and and and . and and and .",
    "Évà ñandú 東京 Straße ｆｏｏ ﬁsh — «ça» 😀 said the girl .",  # non-ASCII
    "ño ño ño ño ño ño ño ño",
]


def demo_texts(rng: random.Random, docs: list[str], vocab: list[str], count: int) -> list[str]:
    """Texts like a model's: runs copied from the corpus (whole documents too), words of its
    vocabulary in new orders, words it never saw, punctuation; and the edge cases."""
    out = list(EDGE_TEXTS)
    while len(out) < count:
        roll = rng.random()
        if roll < 0.05:
            out.append(rng.choice(docs))
            continue
        parts: list[str] = []
        for _ in range(rng.randint(1, 8)):
            kind = rng.random()
            if kind < 0.5:
                base = words(rng.choice(docs))
                start = rng.randrange(len(base) + 1)
                parts.extend(base[start : start + rng.randint(1, 30)])
            elif kind < 0.85:
                parts.extend(rng.choice(vocab) for _ in range(rng.randint(1, 5)))
            elif kind < 0.95:
                parts.append(rng.choice(PUNCT))
            else:
                parts.append(rng.choice(UNKNOWN))
        out.append(" ".join(parts))
    return out


def reference_table(lengths: list[list[int]]) -> np.ndarray:
    """uniqueness@L from the reference spans, unit by unit (NaN when the text is shorter than L)."""
    table = np.full((len(lengths), len(DEFAULT_LENGTHS)), np.nan)
    for t, found in enumerate(lengths):
        for k, length in enumerate(DEFAULT_LENGTHS):
            if len(found) >= length:
                marks = covered_reference(found, length)
                table[t, k] = marks.count(False) / len(found)
    return table


def check_range(got: list[np.ndarray], reference: list[list[int]]) -> None:
    """Lengths for the range 5..12: exactly min(L_i, 12) wherever L_i reaches 5, below 5 elsewhere."""
    for values, truth in zip(got, reference, strict=True):
        truth_ = np.asarray(truth, dtype=np.int64)
        reaches = truth_ >= 5
        assert np.array_equal(values[reaches], np.minimum(truth_[reaches], 12))
        assert (values[~reaches] < 5).all()
    assert np.array_equal(uniqueness_table(got), reference_table(reference), equal_nan=True)


def check_exact(got: list[np.ndarray], reference: list[list[int]], texts: list[str]) -> None:
    wrong = [t for t, (a, b) in enumerate(zip(got, reference, strict=True)) if a.tolist() != b]
    assert not wrong, [(texts[t], got[t].tolist(), reference[t]) for t in wrong[:3]]
    table = uniqueness_table(got)
    expected = reference_table(reference)
    assert np.array_equal(table, expected, equal_nan=True)
    assert np.array_equal(creativity_index(table), np.nansum(expected, axis=1))


@dataclass
class Demo:
    backend: InfiniGramBackend
    texts: list[str]
    reference: list[list[int]]


@pytest.fixture(scope="module")
def demo(demo_assets: Path) -> Demo:
    docs = [json.loads(line)["text"] for line in (demo_assets / "corpus.jsonl").open(encoding="utf-8")]
    backend = open_backend(f"infini-gram:{demo_assets / 'index'}")
    assert isinstance(backend, InfiniGramBackend)
    texts = demo_texts(random.Random(35), docs, backend.tokenizer.vocab, 1250)  # type: ignore[attr-defined]
    reference = brute_match_lengths([words(d) for d in docs], [words(t) for t in texts])
    return Demo(backend, texts, reference)


def test_demo_generations_match_brute_force(demo: Demo) -> None:
    encodings = demo.backend.tokenizer.encode(demo.texts)
    demo.backend.searched = 0
    got = demo.backend.matching_statistics(encodings)
    check_exact(got, demo.reference, demo.texts)
    positions = sum(len(enc) for enc in encodings)
    # The neighbours settle part of the positions without a search (copied runs above all).
    assert 0 < demo.backend.searched < 0.8 * positions
    exact = demo.backend.searched
    capped = demo.backend.matching_statistics(encodings, cap=max(DEFAULT_LENGTHS))
    assert all(np.array_equal(c, np.minimum(g, 12)) for c, g in zip(capped, got, strict=True))
    demo.backend.searched = 0
    check_range(match_lengths(demo.backend, encodings, DEFAULT_LENGTHS), demo.reference)
    assert demo.backend.searched < 0.9 * exact  # the range leaves out positions it does not need


@dataclass
class Generated:
    specs: dict[str, str]
    texts: list[str]
    reference: dict[str, list[list[int]]]
    token_docs: list[list[int]]
    tokenizer: Path


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Generated:
    tmp = tmp_path_factory.mktemp("matching")
    corpus = random_corpus(35, docs=120, vocab=9, max_words=40)
    rng = random.Random(36)
    texts = list(EDGE_TEXTS) + [splice_text(rng, corpus, rng.randint(1, 9)) for _ in range(800 - len(EDGE_TEXTS))]
    tokenizer = train_tokenizer(corpus, tmp / "bpe")
    units = hf_units(tokenizer)
    build_index(corpus, tmp / "words", progress=False)
    build_index(corpus, tmp / "pairs", single_token_words=3, progress=False)
    build_index(corpus, tmp / "bpe-index", tokenizer=str(tokenizer), progress=False)
    by_words = brute_match_lengths([words(d) for d in corpus], [words(t) for t in texts])
    by_tokens = brute_match_lengths([units(d) for d in corpus], [units(t) for t in texts])
    return Generated(
        specs={"words": str(tmp / "words"), "pairs": str(tmp / "pairs"), "bpe": str(tmp / "bpe-index")},
        texts=texts,
        reference={"words": by_words, "pairs": by_words, "bpe": by_tokens},
        token_docs=[units(d) for d in corpus],
        tokenizer=tokenizer,
    )


@pytest.mark.parametrize("kind", ["words", "pairs", "bpe"])
def test_generated_corpus_matches_brute_force(generated: Generated, kind: str) -> None:
    backend = open_backend(f"infini-gram:{generated.specs[kind]}")
    assert isinstance(backend, MatchingStatistics)
    encodings = backend.tokenizer.encode(generated.texts)
    check_exact(backend.matching_statistics(encodings), generated.reference[kind], generated.texts)
    reference = generated.reference[kind]
    check_range(match_lengths(backend, encodings, DEFAULT_LENGTHS), reference)
    capped = open_backend(f"ngram-set:{generated.specs[kind]}").matching_statistics(encodings, cap=12)  # type: ignore[attr-defined]
    assert [c.tolist() for c in capped] == [np.minimum(r, 12).tolist() for r in reference]
    # The engine's own longest-match query, with its guard, on a part of the texts.
    engine = open_backend(f"infini-gram:{generated.specs[kind]}", method="creativity", workers=1)
    assert isinstance(engine, InfiniGramBackend)
    sample = encodings[::8]
    assert [g.tolist() for g in engine.matching_statistics(sample)] == reference[::8]


@pytest.mark.parametrize("spec", ["infini-gram", "ngram-set"])
def test_scoring_keeps_the_match_lengths_and_the_copied_passages(generated: Generated, spec: str) -> None:
    """What the scores step caches per text for a range of L: the range's match lengths, and each
    run of units that spans of at least min L cover, with the longest match in it."""
    backend = open_backend(f"{spec}:{generated.specs['words']}")
    texts, reference = generated.texts[:200], generated.reference["words"][:200]
    results = score_texts(backend, texts, [4], lengths=range(4, 8))
    plain = score_texts(backend, texts[:3], [4])
    assert plain[0].match_lengths == () and plain[0].copied == ()
    for text, truth, result in zip(texts, reference, results, strict=True):
        assert [min(v, 7) for v in result.match_lengths if v >= 4] == [min(v, 7) for v in truth if v >= 4]
        marks, units = covered_reference(truth, 4), words(text)
        runs = [list(g) for k, g in itertools.groupby(range(len(marks)), key=lambda j: marks[j]) if k]
        assert [(words(p[0]), p[1], p[2]) for p in result.copied] == [
            (units[r[0] : r[-1] + 1], len(r), min(7, max(truth[r[0] : r[-1] + 1]))) for r in runs
        ]
    assert sum(len(r.copied) for r in results) > 50  # the texts copy runs, and some end a text


def test_a_count_only_api_gives_the_same_uniqueness(generated: Generated) -> None:
    """The web APIs have no longest-match query: their count questions settle every L of the
    range, and the clipped lengths give the same uniqueness as the exact ones."""
    # A few texts (the fake server counts by brute force, about 7 ms a question): among them
    # matches of every L and texts shorter than some L.
    picked = [13, 18, 20, 23, 27, 28]
    texts = [generated.texts[t] for t in picked]
    reference = [generated.reference["bpe"][t] for t in picked]
    assert max(map(max, reference)) >= 12 and min(map(len, reference)) < 5
    with FakeInfiniGram(token_indexes={"v4_fake_llama": generated.token_docs}) as server:
        api = open_backend(
            "infini-gram-api:v4_fake_llama", url=server.url, tokenizer=str(generated.tokenizer), backoff=0.001
        )
        assert not isinstance(api, MatchingStatistics)
        got = match_lengths(api, api.tokenizer.encode(texts), DEFAULT_LENGTHS)
        api.close()
    expected = reference_table(reference)
    assert np.array_equal(uniqueness_table(got), expected, equal_nan=True)


def test_the_ngram_set_refuses_what_it_cannot_answer(generated: Generated) -> None:
    unbounded = open_backend(f"ngram-set:{generated.specs['words']}")
    encodings = unbounded.tokenizer.encode(generated.texts[:20])
    with pytest.raises(ConfigError, match="cannot tell how far a longer match runs"):
        unbounded.matching_statistics(encodings)  # type: ignore[attr-defined]
    budget = open_backend(f"ngram-set:{generated.specs['words']}", max_n=6)
    assert isinstance(budget, NgramSetBackend)
    with pytest.raises(ConfigError, match="max_n=12") as refused:
        budget.matching_statistics(encodings, cap=12)
    assert "opened with max_n=6" in str(refused.value)
    assert budget.max_n == 6  # nothing was built past its budget
    assert [r.tolist() for r in budget.matching_statistics(encodings, cap=6)] == [
        np.minimum(r, 6).tolist() for r in generated.reference["words"][:20]
    ]


def test_the_search_settles_runs_from_their_neighbours() -> None:
    """The rounds on their own, with a search that reads known answers: every length comes out
    exact, and a text that is one long copied run is settled by a few searches."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        size = int(rng.integers(0, 60))
        ends = np.maximum.accumulate(np.arange(size) + rng.integers(0, 8, size))
        ends = np.minimum(np.maximum(ends, np.arange(size)), size)
        truth = np.concatenate([ends - np.arange(size), [0]])  # the gap slot after the text
        limit = np.concatenate([np.full(size, size), [size]])
        unmatched = truth == 0
        asked: list[int] = []

        def search(slots: np.ndarray, stops: np.ndarray, truth: np.ndarray = truth, asked: list = asked) -> np.ndarray:
            asked.extend(slots.tolist())
            assert (stops - slots >= truth[slots]).all()  # a stop never cuts the true match
            return truth[slots]

        found, searched = matching_statistics(limit, unmatched, search)
        assert found.tolist() == truth.tolist()
        assert searched == len(asked) == len(set(asked))
        ranged, _ = matching_statistics(limit, unmatched, search, shortest=3, longest=5)
        reaches = truth >= 3
        assert np.array_equal(np.minimum(ranged[reaches], 5), np.minimum(truth[reaches], 5))
        assert (ranged[~reaches] < 3).all()
    copied = np.concatenate([np.arange(200, 0, -1), [0]])
    found, searched = matching_statistics(np.full(201, 200), copied == 0, lambda s, e: copied[s])
    assert found.tolist() == copied.tolist()
    assert searched <= 200 // 16 + 2


def test_a_cap_or_floor_below_one_is_refused(generated: Generated) -> None:
    backend = open_backend(f"infini-gram:{generated.specs['words']}")
    encodings = backend.tokenizer.encode(generated.texts[:3])
    for options, name in (({"cap": 0}, "cap"), ({"floor": 0}, "floor"), ({"cap": True}, "cap")):
        with pytest.raises(ConfigError, match=f"a match-length {name} is an integer of at least 1"):
            backend.matching_statistics(encodings, **options)  # type: ignore[attr-defined]
    assert backend.matching_statistics([]) == []  # type: ignore[attr-defined]
