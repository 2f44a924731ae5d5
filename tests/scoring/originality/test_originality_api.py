"""The web API backends against a fake infini-gram server on 127.0.0.1, faults included."""

from __future__ import annotations

import random
import re
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.infra.errors import ConfigError, HarnessError, PreflightError
from pytest_novelty.scoring.originality import open_backend, score_texts
from pytest_novelty.scoring.originality.api import InfiniGramApiBackend, InfiniGramMiniBackend, default_api_tokenizer
from pytest_novelty.scoring.text import word_spans
from tests.scoring.originality.originality_helpers import (
    Reference,
    hf_units,
    random_corpus,
    splice_text,
    train_tokenizer,
)
from tests.servers.base import SilentServer
from tests.servers.infinigram_api import FakeInfiniGram

INDEX = "v4_fake_llama"
MINI = "v2_fake"
NS = [1, 2, 3, 4, 5, 6]
FAST = {"backoff": 0.001, "max_backoff": 0.01, "timeout": 2.0, "max_attempts": 6}


class World:
    def __init__(self, tmp: Path) -> None:
        self.corpus = random_corpus(11, docs=30, vocab=7)
        self.tokenizer = train_tokenizer(self.corpus, tmp / "tok")
        self.units = hf_units(self.tokenizer)
        self.token_docs = [self.units(d) for d in self.corpus]
        self.reference = Reference(self.token_docs)
        rng = random.Random(3)
        self.texts = [splice_text(rng, self.corpus, rng.randint(1, 5)) for _ in range(8)]

    def server(self, **options: Any) -> FakeInfiniGram:
        return FakeInfiniGram(token_indexes={INDEX: self.token_docs}, text_indexes={MINI: self.corpus}, **options)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World(tmp_path_factory.mktemp("orig-api"))


@pytest.fixture
def api(world: World, tmp_path: Path) -> Callable[..., InfiniGramApiBackend]:
    def make(server: FakeInfiniGram, cache: Path | None = tmp_path / "cache", **options: Any) -> InfiniGramApiBackend:
        settings = {**FAST, "url": server.url, "tokenizer": str(world.tokenizer), **options}
        backend = open_backend(f"infini-gram-api:{INDEX}", cache_dir=cache, **settings)
        assert isinstance(backend, InfiniGramApiBackend)
        return backend

    return make


def check_tokens(world: World, texts: list[str], results: list[Any]) -> None:
    for text, result in zip(texts, results, strict=True):
        units = world.units(text)
        for n in NS:
            assert (result.originality[n], result.ngrams[n]) == world.reference.originality(units, n), (text, n)
        assert result.longest_span <= world.reference.longest_span(units)
        assert result.longest_span_doc is None
        if result.longest_span_exact:
            assert result.longest_span == world.reference.longest_span(units)


def mini_reference(docs: list[str], text: str, n: int) -> tuple[float | None, int]:
    normalized, spans = word_spans(text)
    count = len(spans) - n + 1
    if count <= 0:
        return None, 0
    unseen = 0
    for i in range(count):
        query = " ".join(normalized[spans[i][0] : spans[i + n - 1][1]].split())
        query = (" " if re.match(r"\w", query[0]) else "") + query + (" " if re.match(r"\w", query[-1]) else "")
        unseen += not any(query in doc for doc in docs)
    return unseen / count, count


def test_exact_under_random_faults(world: World, api: Callable[..., InfiniGramApiBackend]) -> None:
    with world.server(fail_rate=0.3, seed=1) as server:
        backend = api(server, concurrency=4)
        results = score_texts(backend, world.texts, NS)
    check_tokens(world, world.texts, results)
    assert server.faulted > 0
    assert server.request_count == backend.requests
    assert backend.client.traffic.retries == server.faulted  # one retry per fault, none wasted
    assert backend.client.traffic.retries <= backend.questions * (FAST["max_attempts"] - 1)


@pytest.mark.parametrize(
    "fault",
    [
        {"kind": "slow", "seconds": 0.6},
        {"kind": "status", "status": 429, "retry_after": 0},
        {"kind": "status", "status": 500},
        {"kind": "status", "status": 503},
        {"kind": "error"},
        {"kind": "drop"},
        {"kind": "garbage"},
    ],
    ids=["slow", "429", "500", "503", "error-body", "drop", "not-json"],
)
def test_each_fault_is_retried(world: World, api: Callable[..., InfiniGramApiBackend], fault: dict) -> None:
    with world.server() as server:
        server.inject(times=2, **fault)
        backend = api(server, timeout=0.3, concurrency=2)
        results = score_texts(backend, world.texts[:3], NS)
    check_tokens(world, world.texts[:3], results)
    assert server.faulted == 2
    assert server.request_count == backend.questions + 2


def test_retries_are_bounded_and_the_error_is_clear(world: World, api: Callable[..., InfiniGramApiBackend]) -> None:
    with world.server() as server:
        server.inject("status", status=500, times=-1)
        backend = api(server, max_attempts=3, concurrency=3)
        with pytest.raises(HarnessError, match=r"gave no usable answer after 3 attempts \(last: HTTP 500\)"):
            score_texts(backend, world.texts, NS)
    assert 3 <= server.request_count <= 3 * 3


def test_an_error_body_is_reported(world: World, api: Callable[..., InfiniGramApiBackend]) -> None:
    with world.server() as server:
        server.inject("error", times=-1, message="Invalid index: v4_fake_llama")
        backend = api(server, max_attempts=2, concurrency=1)
        with pytest.raises(HarnessError, match="reports an error: Invalid index"):
            score_texts(backend, world.texts[:1], NS)
    assert server.request_count == 2


def test_dead_server_fails_fast(world: World, api: Callable[..., InfiniGramApiBackend]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens once closed
    server = FakeInfiniGram()
    server.start()
    server.stop()
    start = time.monotonic()
    backend = open_backend(
        f"infini-gram-api:{INDEX}", url=f"http://127.0.0.1:{port}/", tokenizer=str(world.tokenizer), **FAST
    )
    refused = rf"127\.0\.0\.1:{port}/ gave no usable answer after 6 attempts \(last: connection refused\)"
    with pytest.raises(HarnessError, match=refused):
        score_texts(backend, world.texts, NS)
    assert time.monotonic() - start < 10
    assert backend.requests <= 6 * backend.client.connection.concurrency  # type: ignore[attr-defined]


def test_rerun_asks_nothing(world: World, api: Callable[..., InfiniGramApiBackend], tmp_path: Path) -> None:
    with world.server() as first:
        results = score_texts(api(first), world.texts, NS)
    assert first.request_count > 0
    with world.server() as second:
        again = score_texts(api(second), world.texts, NS)
    assert second.request_count == 0
    assert [r.originality for r in again] == [r.originality for r in results]


def test_interrupted_run_resumes(world: World, api: Callable[..., InfiniGramApiBackend], tmp_path: Path) -> None:
    with world.server() as clean:
        score_texts(api(clean, cache=None), world.texts, NS)
    total = clean.request_count
    probe = world.units(world.texts[0])[0]
    with world.server() as failing:  # every unigram of a text is asked: this one always fails
        failing.inject("status", status=500, times=-1, match=f"[{probe}]")
        with pytest.raises(HarnessError):
            score_texts(api(failing, max_attempts=2), world.texts, NS)
    with world.server() as resumed:
        results = score_texts(api(resumed), world.texts, NS)
    check_tokens(world, world.texts, results)
    assert 0 < resumed.request_count < total


def test_duplicates_are_asked_once(world: World, api: Callable[..., InfiniGramApiBackend]) -> None:
    with world.server() as one:
        single = api(one, cache=None)
        score_texts(single, world.texts[:1], NS)
    with world.server() as many:
        repeated = api(many, cache=None)
        score_texts(repeated, world.texts[:1] * 5, NS)
    assert repeated.questions == single.questions == many.request_count == one.request_count
    naive = sum(max(0, len(world.units(world.texts[0])) - n + 1) for n in NS)
    assert single.questions < naive


def test_concurrency_is_limited(world: World, api: Callable[..., InfiniGramApiBackend]) -> None:
    with world.server(latency=0.01) as server:
        score_texts(api(server, cache=None, concurrency=3), world.texts, NS)
    assert 2 <= server.max_in_flight <= 3


def test_mini_exact_under_faults(world: World, tmp_path: Path) -> None:
    texts = [*world.texts, world.corpus[0], "ｋａ lo . lo"]
    with world.server(fail_rate=0.25, seed=5) as server:
        backend = open_backend(f"infini-gram-mini:{MINI}?url={server.url}", cache_dir=tmp_path, **FAST)
        assert isinstance(backend, InfiniGramMiniBackend)
        results = score_texts(backend, texts, NS)
        assert server.faulted > 0
        queries = [r["query"] for r in server.requests if "query" in r]
        assert all(q.startswith(" ") or not re.match(r"\w", q) for q in queries)
    for text, result in zip(texts, results, strict=True):
        for n in NS:
            assert (result.originality[n], result.ngrams[n]) == mini_reference(world.corpus, text, n), (text, n)


def test_api_settings(monkeypatch: pytest.MonkeyPatch, world: World) -> None:
    assert default_api_tokenizer("v4_piletrain_llama") == "meta-llama/Llama-2-7b-hf"
    assert default_api_tokenizer("v4_olmo-2-1124-13b-instruct_llama") == "meta-llama/Llama-2-7b-hf"
    assert default_api_tokenizer("v4_pileval_gpt2") == "gpt2"
    with pytest.raises(ConfigError, match="pass tokenizer=PATH_OR_ID"):
        default_api_tokenizer("v9_mystery")
    monkeypatch.setenv("PYTEST_NOVELTY_INFINIGRAM_MINI_URL", "http://127.0.0.1:9/mini")
    assert open_backend(f"infini-gram-mini:{MINI}").url == "http://127.0.0.1:9/mini"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="http:// or https://"):
        open_backend(f"infini-gram-mini:{MINI}", url="ftp://example.org")
    with pytest.raises(ConfigError, match="no option 'tokenizer'"):
        open_backend(f"infini-gram-mini:{MINI}", tokenizer=str(world.tokenizer))
    with pytest.raises(ConfigError, match="infini-gram-mini needs an index name"):
        open_backend("infini-gram-mini:")
    with pytest.raises(ConfigError, match="concurrency must be at least 1"):
        open_backend(f"infini-gram-mini:{MINI}?concurrency=0")


def test_unavailable_default_tokenizer_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match=r"cannot load the tokenizer 'meta-llama/Llama-2-7b-hf'.*local folder"):
        open_backend("infini-gram-api:v4_no_such_cache_llama")


# -- the preflight: one real query, in seconds ------------------------------------------------------


def test_preflight_asks_one_real_count(world: World, api: Callable[..., InfiniGramApiBackend], tmp_path: Path) -> None:
    with world.server() as server:
        api(server).check()
        (body,) = server.requests
    assert (body["index"], body["query_type"], len(body["query_ids"])) == (INDEX, "count", 1)
    with world.server() as server:
        open_backend(f"infini-gram-mini:{MINI}?url={server.url}", cache_dir=tmp_path).check()  # type: ignore[attr-defined]
        assert server.requests == [{"index": MINI, "query_type": "count", "query": " the "}]


def test_preflight_names_an_index_the_service_does_not_know(world: World, tmp_path: Path) -> None:
    with world.server() as server:
        backend = open_backend(f"infini-gram-mini:v2_nope?url={server.url}", cache_dir=tmp_path)
        with pytest.raises(PreflightError) as caught:
            backend.check()  # type: ignore[attr-defined]
    assert str(caught.value) == (
        f"the infini-gram-mini API at {server.url} answered a test query, but the answer reports an error: "
        "Invalid index: 'v2_nope'"
    )
    assert server.request_count == 2  # one quick retry: an error answer may be a passing overload


def test_preflight_rides_out_one_blip(world: World, api: Callable[..., InfiniGramApiBackend]) -> None:
    with world.server() as server:
        server.inject("status", status=503, times=1)
        api(server).check()
    assert server.request_count == 2


def test_preflight_names_a_refusing_service(world: World, api: Callable[..., InfiniGramApiBackend]) -> None:
    with world.server() as server:
        server.inject("status", status=403, times=-1, message="blocked for this address")
        with pytest.raises(PreflightError, match=r"answered a test query with HTTP 403: .*blocked for this address"):
            api(server).check()


def test_preflight_names_a_silent_service_within_its_timeout(world: World) -> None:
    with SilentServer() as silent:
        backend = open_backend(f"infini-gram-api:{INDEX}", url=silent.url, tokenizer=str(world.tokenizer))
        with pytest.raises(PreflightError) as caught:
            backend.check(timeout=0.3)  # type: ignore[attr-defined]
    assert str(caught.value).startswith(
        f"the infini-gram API at {silent.url} did not answer a test query within 0.3 s: it accepts connections"
    )
    assert silent.connections == 1  # no time was left for a second attempt
