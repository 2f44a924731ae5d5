"""Local backends (infini-gram index, n-gram set) against a brute-force count, property-based.

A few small random corpora are indexed once per module (words mode, words mode with two-token
rare words, a tiny BPE tokenizer, and that tokenizer over two shards); hypothesis then varies the
texts and the n-gram orders. Tiny alphabets make the engine's ``creativity`` bug (a match length of
0 for a suffix that sorts first) frequent, so the guard is exercised too.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_novelty.scoring.originality import build_index, open_backend, score_texts
from pytest_novelty.scoring.originality.local import InfiniGramBackend
from pytest_novelty.scoring.originality.ngramset import NgramSetBackend
from pytest_novelty.scoring.text import words
from tests.scoring.originality.originality_helpers import (
    Reference,
    hf_units,
    random_corpus,
    splice_text,
    train_tokenizer,
)

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class Case:
    name: str
    corpus: list[str]
    spec: str
    units: Callable[[str], list]
    reference: Reference


def _case(tmp: Path, name: str, corpus: list[str], units: Callable[[str], list], **build: object) -> Case:
    out = tmp / name
    build_index(corpus, out, progress=False, **build)  # type: ignore[arg-type]
    return Case(name, corpus, str(out), units, Reference([units(doc) for doc in corpus]))


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    tmp = tmp_path_factory.mktemp("orig-local")
    plain = random_corpus(1, vocab=5)
    rare = random_corpus(2, vocab=12)
    sub = random_corpus(3, vocab=9, docs=50)
    tok = train_tokenizer(sub, tmp / "bpe-tokenizer")
    units = hf_units(tok)
    out = {
        "words": _case(tmp, "words", plain, words),
        "words-pairs": _case(tmp, "pairs", rare, words, single_token_words=3),
        "bpe": _case(tmp, "bpe", sub, units, tokenizer=str(tok)),
    }
    build_index(sub[:20], tmp / "shard-a", tokenizer=str(tok), progress=False)
    build_index(sub[20:], tmp / "shard-b", tokenizer=str(tok), progress=False)
    out["bpe-shards"] = Case(
        "bpe-shards", sub, f"{tmp / 'shard-a'},{tmp / 'shard-b'}", units, Reference([units(d) for d in sub])
    )
    return out


Backends = tuple[InfiniGramBackend, InfiniGramBackend, NgramSetBackend]


@pytest.fixture(scope="module")
def backends(cases: dict[str, Case]) -> dict[str, Backends]:
    """Per corpus: the index by suffix-array lookups, the index by creativity calls, the n-gram set."""
    out = {}
    for name, case in cases.items():
        lookups = open_backend(f"infini-gram:{case.spec}")
        engine = open_backend(f"infini-gram:{case.spec}", method="creativity")
        memory = open_backend(f"ngram-set:{case.spec}")
        assert isinstance(lookups, InfiniGramBackend) and lookups.method == "suffix-array"
        assert isinstance(engine, InfiniGramBackend) and isinstance(memory, NgramSetBackend)
        out[name] = (lookups, engine, memory)
    return out


def check_against_reference(case: Case, backend: object, texts: list[str], ns: list[int]) -> None:
    results = score_texts(backend, texts, ns)  # type: ignore[arg-type]
    cap = max(ns)
    exact = isinstance(backend, InfiniGramBackend)
    for text, result in zip(texts, results, strict=True):
        units = case.units(text)
        assert result.tokens == len(units)
        for n in ns:
            expected, count = case.reference.originality(units, n)
            assert result.ngrams[n] == count, (case.name, text, n)
            assert result.originality[n] == expected, (case.name, text, n)
        longest = case.reference.longest_span(units)
        if exact:
            assert result.longest_span == longest and result.longest_span_exact
        else:
            assert result.longest_span == min(longest, cap)
            if result.longest_span_exact:
                assert result.longest_span == longest
        if result.longest_span:
            run = units[result.longest_span_start : result.longest_span_start + result.longest_span]
            assert case.reference.longest(units, result.longest_span_start) >= result.longest_span
            assert result.longest_span_doc is not None
            assert case.reference.doc_contains(result.longest_span_doc, run)
        else:
            assert result.longest_span_doc is None


texts_and_orders = st.tuples(
    st.integers(0, 2**32 - 1),
    st.integers(1, 4),
    st.lists(st.integers(1, 8), min_size=1, max_size=4),
)


@pytest.mark.parametrize("name", ["words", "words-pairs", "bpe", "bpe-shards"])
@SETTINGS
@given(params=texts_and_orders)
def test_backends_match_brute_force(
    name: str,
    params: tuple[int, int, list[int]],
    cases: dict[str, Case],
    backends: dict[str, Backends],
) -> None:
    seed, count, ns = params
    rng = random.Random(seed)
    case = cases[name]
    texts = [splice_text(rng, case.corpus, rng.randint(0, 6)) for _ in range(count)]
    for backend in backends[name]:
        check_against_reference(case, backend, texts, ns)


def test_whole_documents_and_duplicates(cases: dict[str, Case], backends: dict[str, Backends]) -> None:
    case = cases["words"]
    texts = [*case.corpus[:10], case.corpus[0], case.corpus[0] + " zzq", ""]
    for backend in backends["words"]:
        check_against_reference(case, backend, texts, [1, 2, 3, 4, 5, 6, 7, 8])


@pytest.mark.parametrize(
    ("method", "seed", "pieces", "count", "ns", "repairs", "uses_engine"),
    [
        # On a tiny alphabet the raw engine misses matches: the guard rechecks them.
        pytest.param("creativity", 7, 8, 200, [1, 2, 4, 8], "rechecked", True, id="guard-repairs-the-engine"),
        # Runs of capped matches made of overlapping corpus pieces are resolved position by position,
        # and the suffix-array method never needs the engine.
        pytest.param("suffix-array", 11, 10, 100, [2], "split_runs", False, id="runs-that-are-not-one-passage"),
    ],
)
def test_hard_texts_take_the_repair_path_and_stay_exact(
    cases: dict[str, Case],
    backends: dict[str, Backends],
    method: str,
    seed: int,
    pieces: int,
    count: int,
    ns: list[int],
    repairs: str,
    uses_engine: bool,
) -> None:
    """Texts spliced from many corpus pieces make the method's repair path run (its counter grows);
    the backend's answers stay exact."""
    case = cases["words"]
    backend = backends["words"][0 if method == "suffix-array" else 1]
    assert backend.method == method
    rng = random.Random(seed)
    texts = [splice_text(rng, case.corpus, pieces) for _ in range(count)]
    before = getattr(backend, repairs)
    check_against_reference(case, backend, texts, ns)
    assert getattr(backend, repairs) > before, f"expected {repairs} to grow on this corpus"
    assert (backend.engine_calls > 0) is uses_engine


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    corpus=st.lists(
        st.lists(st.sampled_from(["a", "b", "c", "B", ".", "dé"]), max_size=25).map(" ".join),
        min_size=1,
        max_size=12,
    ).filter(lambda docs: any(words(d) for d in docs)),
    queries=st.lists(st.lists(st.sampled_from(["a", "b", "c", "B", ".", "dé", "zz"]), max_size=20), max_size=4),
    ns=st.lists(st.integers(1, 8), min_size=1, max_size=3),
)
def test_random_corpora(corpus: list[str], queries: list[list[str]], ns: list[int]) -> None:
    """Hypothesis draws the corpus too: each example builds its own index."""
    with tempfile.TemporaryDirectory(prefix="orig-prop-") as tmp:
        out = Path(tmp) / "idx"
        build_index(corpus, out, progress=False)
        case = Case("random", corpus, str(out), words, Reference([words(d) for d in corpus]))
        texts = [" ".join(q) for q in queries] + corpus[:1]
        for spec in (f"infini-gram:{out}", f"infini-gram:{out}?method=creativity", f"ngram-set:{out}"):
            backend = open_backend(spec)
            check_against_reference(case, backend, texts, ns)
            backend.close()


def test_ngram_set_grows_levels_on_demand(cases: dict[str, Case]) -> None:
    case = cases["words"]
    backend = open_backend(f"ngram-set:{case.spec}", max_n=2)
    assert isinstance(backend, NgramSetBackend) and backend.max_n == 2
    check_against_reference(case, backend, case.corpus[:5], [2])
    check_against_reference(case, backend, case.corpus[:5], [3, 7])
    assert backend.max_n == 7


def test_suffix_array_pointers_of_any_width(cases: dict[str, Case], backends: dict[str, Backends]) -> None:
    """Pointers of 3, 5, 6 or 7 bytes (large corpora) are assembled byte by byte: same answers."""
    case = cases["bpe-shards"]
    lookups = backends["bpe-shards"][0]
    rng = random.Random(5)
    texts = [splice_text(rng, case.corpus, 8) for _ in range(30)]
    expected = score_texts(lookups, texts, [1, 3, 8])
    views = [shard._view for shard in lookups._shards]
    try:
        for shard in lookups._shards:
            shard._view = None
        assert score_texts(lookups, texts, [1, 3, 8]) == expected
    finally:
        for shard, view in zip(lookups._shards, views, strict=True):
            shard._view = view
