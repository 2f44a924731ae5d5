"""The retry policy every HTTP client shares, and the clients that follow it against real loopback servers."""

from __future__ import annotations

import asyncio
import email.utils
import socket
import time
from typing import Any

import pytest

from pytest_novelty.generation import Batch
from pytest_novelty.generation.openai import OpenAIGenerator
from pytest_novelty.infra.concurrency import fan_out, run_coroutine
from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.infra.http import Connection, Reply, Traffic, post_json
from pytest_novelty.infra.redact import Secret, echo, scrub
from pytest_novelty.infra.retry import MAX_RETRY_AFTER, RetryPolicy, is_retryable, retry_after
from pytest_novelty.scoring.originality.client import JsonClient
from pytest_novelty.suites.schema import GenerationSettings
from tests.servers.infinigram_api import FakeInfiniGram
from tests.servers.openai_api import FakeOpenAI

KEY = "sk-test-0123456789abcdefghijkl"
QUERY = {"index": "v2_fake", "query_type": "count", "query": "the cat"}


def test_retry_after_forms() -> None:
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"Retry-After": "2.5"}) == 2.5
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after({"retry-after": "-4"}) == 0.0
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None and retry_after(None) is None
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (retry_after({"retry-after": later}) or 0) <= 31


def test_statuses_worth_another_attempt() -> None:
    assert [s for s in (200, 400, 401, 404, 408, 409, 425, 429, 500, 503) if is_retryable(s)] == [
        408, 409, 425, 429, 500, 503,
    ]  # fmt: skip


def test_backoff_grows_is_capped_and_jittered() -> None:
    policy = RetryPolicy(max_attempts=10, backoff=1.0, max_backoff=5.0)
    for attempt, full in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)]:
        waits = [policy.delay(attempt) for _ in range(200)]
        assert all(full / 2 <= w <= full for w in waits)
        assert max(waits) - min(waits) > full / 10  # jittered, not one fixed value
    told = [policy.delay(1, server_wait=3.0) for _ in range(200)]
    assert all(3.0 <= w <= 3.3 for w in told)
    assert MAX_RETRY_AFTER <= policy.delay(1, server_wait=10_000) <= MAX_RETRY_AFTER * 1.1


def test_attempts_end_at_the_count_or_the_time_bound() -> None:
    attempts = RetryPolicy(max_attempts=3, backoff=0.0, max_retry_time=60).start()
    waits = []
    while True:
        attempts.begin()
        wait = attempts.next_wait()
        if wait is None:
            break
        waits.append(wait)
    assert attempts.number == 3 and waits == [0.0, 0.0]
    bounded = RetryPolicy(max_attempts=10, max_retry_time=5.0).start()
    bounded.begin()
    assert bounded.next_wait(server_wait=1.0) is not None
    assert bounded.next_wait(server_wait=30.0) is None  # would pass the bound: give up now
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)


def test_secrets_stay_hidden() -> None:
    secret = Secret(KEY)
    assert repr(secret) == "***" and KEY not in repr(vars(type(secret))) and secret.reveal() == KEY
    assert scrub(f"bad key {KEY} at http://h/v1?api_key=abc", secret) == "bad key *** at http://h/v1?api_key=***"


#: What a broken proxy or server sends: a NUL, bytes that are not UTF-8, a terminal escape that
#: clears the screen, an encoded U+FFFD, a new line and a tab.
GARBAGE = "\x00oops \udcff\udcfe <b>\x1b[2J\ufffd</b>\r\n\tbye"
GARBAGE_SHOWN = "\\x00oops \\xff\\xfe <b>\\x1b[2J\\ufffd</b> bye"


def test_a_reply_is_quoted_printable_on_one_line_short_and_scrubbed() -> None:
    raw = GARBAGE.encode("utf-8", "surrogateescape")
    assert echo(raw) == GARBAGE_SHOWN and echo(raw).isprintable()
    assert echo(raw.decode("utf-8", "replace")).isprintable()  # text a client already decoded
    assert echo("x" * 500) == "x" * 197 + "..." and len(echo("x" * 500, limit=20)) == 20
    cut = echo("a" * 190 + " " + KEY)  # the key is masked before the cut, so no part of it survives
    assert "sk-" not in cut and cut == "a" * 190 + " ***"
    assert "sk-" not in echo("a" * 195 + " " + KEY)
    assert echo(f"bad key {KEY}", Secret("hunter2")) == "bad key ***" and echo("hunter2!", "hunter2") == "***!"


def test_a_servers_garbage_reaches_the_user_printable() -> None:
    """A served model answering raw garbage, and an index service whose error holds control
    characters: each harness error quotes the reply printable (the old messages carried the NUL,
    the screen-clearing escape and U+FFFD to the terminal as they came)."""
    with FakeOpenAI() as server:
        server.inject("garbage", times=-1, message=GARBAGE)
        gen = OpenAIGenerator("openai:judge-model", base_url=server.url, max_attempts=1)
        with pytest.raises(HarnessError) as caught:
            gen.sample(Batch(["Lily and Tom"], [1], GenerationSettings(samples=1, max_new_tokens=4, seed=1)))
    message = str(caught.value)
    assert message.isprintable() and GARBAGE_SHOWN[:30] in message, message
    with FakeInfiniGram(text_indexes={"v2_fake": ["the cat sat"]}) as index:
        index.inject("error", times=-1, message=GARBAGE)
        client = JsonClient(index.url, name="the fake API", connection=Connection.of({"max_attempts": 1}))
        with pytest.raises(HarnessError) as caught:
            client.post(QUERY)
    message = str(caught.value)
    assert message.isprintable() and "reports an error: \\x00oops" in message, message


# -- the clients follow it ----------------------------------------------------------------------


def test_infinigram_client_gives_up_when_retry_after_passes_the_time_bound() -> None:
    with FakeInfiniGram(text_indexes={"v2_fake": ["the cat sat"]}) as server:
        server.inject("status", status=503, retry_after=30, times=-1)
        bounded = Connection.of({"max_backoff": 60, "max_retry_time": 2})
        client = JsonClient(server.url, name="the fake API", connection=bounded)
        start = time.monotonic()
        with pytest.raises(HarnessError, match=r"gave no usable answer after 1 attempts \(last: HTTP 503\)"):
            client.post(QUERY)
        assert time.monotonic() - start < 2 and server.request_count == 1
        server.clear_faults()
        server.inject("status", status=429, retry_after=0, times=2)
        assert client.post(QUERY)["count"] == 1 and client.traffic.retries == 2


def test_fan_out_starts_nothing_after_the_first_failure() -> None:
    started: list[int] = []

    async def work(i: int) -> int:
        started.append(i)
        if i == 0:
            await asyncio.sleep(0.05)
            raise ValueError("item 0 is bad")
        await asyncio.sleep(0 if i > 2 else 5)
        return i

    with pytest.raises(ValueError, match="item 0 is bad"):
        run_coroutine(fan_out(10, work, concurrency=3))
    assert started == [0, 1, 2]  # the slot item 0 left is never refilled
    assert run_coroutine(fan_out(5, lambda i: asyncio.sleep(0, result=i * i), concurrency=2)) == [0, 1, 4, 9, 16]
    assert run_coroutine(fan_out(0, work, concurrency=3)) == []


class _Refused(Exception):
    pass


def test_fan_out_collects_the_failures_it_is_told_to_and_stops_at_any_other() -> None:
    """The collect-failures mode: a collected failure takes its item's place and every other item
    still runs (in order, bounded); an error of another kind stops the batch as before."""
    running: list[int] = []
    most = [0]

    async def work(i: int) -> int:
        running.append(i)
        most[0] = max(most[0], len(running))
        await asyncio.sleep(0.01)
        running.remove(i)
        if i % 3 == 1:
            raise _Refused(f"item {i}")
        return i

    out = run_coroutine(fan_out(7, work, concurrency=2, collect=(_Refused,)))
    assert [o if isinstance(o, int) else str(o) for o in out] == [0, "item 1", 2, 3, "item 4", 5, 6]
    assert most[0] == 2

    async def harsh(i: int) -> int:
        if i == 2:
            raise ValueError("not collected")
        await asyncio.sleep(0 if i < 2 else 5)
        return i

    with pytest.raises(ValueError, match="not collected"):
        run_coroutine(fan_out(6, harsh, concurrency=None, collect=(_Refused,)))


def test_fan_out_without_a_bound_starts_every_item_at_once() -> None:
    started: list[int] = []
    gate = asyncio.Event()

    async def work(i: int) -> int:
        started.append(i)
        if len(started) == 5:
            gate.set()
        await gate.wait()  # every item must be under way before any can end
        return -i

    assert run_coroutine(fan_out(5, work, concurrency=None)) == [0, -1, -2, -3, -4]


def test_a_client_batch_sends_no_request_after_one_fails_for_good() -> None:
    """One query is refused at once while the others are slow: the batch stops with exactly the
    requests that were in flight, however the event loop orders the wake-ups."""
    with FakeInfiniGram(text_indexes={"v2_fake": ["the cat sat"]}) as server:
        server.inject("status", status=400, times=-1, match="refused")
        server.inject("slow", seconds=3, times=-1)
        client = JsonClient(server.url, name="the fake API", connection=Connection.of({"concurrency": 2}))
        payloads = [{**QUERY, "query": "refused"}] + [{**QUERY, "query": f"slow {i}"} for i in range(5)]
        with pytest.raises(HarnessError, match="refused a query with HTTP 400"):
            client.post_all(payloads, lambda i, answer: None)
    assert client.traffic.requests == 2


def test_infinigram_client_redacts_what_the_server_says() -> None:
    with FakeInfiniGram(text_indexes={"v2_fake": ["the cat sat"]}) as server:
        server.inject("error", times=-1, message=f"invalid key {KEY} for {server.url}?api_key=hunter2")
        twice = Connection.of({"max_attempts": 2, "backoff": 0.01})
        client = JsonClient(f"{server.url}?api_key=hunter2", name="the fake API", connection=twice)
        with pytest.raises(HarnessError) as caught:
            client.post(QUERY)
    message = str(caught.value)
    assert "reports an error: invalid key" in message
    assert KEY not in message and "hunter2" not in message


def test_served_generator_gives_up_when_retry_after_passes_the_time_bound() -> None:
    with FakeOpenAI() as server:
        server.inject("status", status=503, retry_after=30, times=-1)
        generator = OpenAIGenerator("openai:judge-model", base_url=server.url, max_retry_time=2)
        settings = GenerationSettings(samples=1, max_new_tokens=8)
        start = time.monotonic()
        with pytest.raises(HarnessError, match=r"no answer from .* after 1 attempt \(HTTP 503"):
            generator.sample(Batch([generator.render([{"role": "user", "content": "Tell a story"}])], [7], settings))
        assert time.monotonic() - start < 2


# -- the one client: every remote call goes through Connection.client's retrying transport -------------------


def _post_once(connection: Connection, url: str, traffic: Traffic, **client: Any) -> Reply:
    async def go() -> Reply:
        async with connection.client(url, traffic, **client) as http:
            return await post_json(http, url, QUERY)

    return run_coroutine(go())


def test_the_transport_waits_as_told_and_counts() -> None:
    waits: list[tuple[str, int, float]] = []
    with FakeInfiniGram(text_indexes={"v2_fake": ["the cat sat"]}) as server:
        server.inject("status", status=429, retry_after=0.2, times=1)
        server.inject("status", status=503, times=1)
        traffic = Traffic()
        fast = Connection.of({"backoff": 0.01, "max_backoff": 0.02})
        start = time.monotonic()
        reply = _post_once(fast, server.url, traffic, on_wait=lambda *wait: waits.append(wait))
    assert reply.status == 200 and reply.problem == "" and reply.attempts == 3
    assert (traffic.requests, traffic.retries) == (3, 2) and server.request_count == 3
    assert [(problem, attempt) for problem, attempt, _ in waits] == [("HTTP 429", 1), ("HTTP 503", 2)]
    assert 0.2 <= waits[0][2] <= 0.22 and waits[1][2] <= 0.02  # Retry-After, then the backoff
    assert time.monotonic() - start >= 0.2


def test_the_transport_retries_answers_the_client_rejects_and_returns_the_last() -> None:
    def no_error(response: Any) -> str | None:
        return "an error field" if "error" in response.json() else None

    with FakeInfiniGram(text_indexes={"v2_fake": ["the cat sat"]}) as server:
        server.inject("error", times=1)
        reply = _post_once(Connection.of({"backoff": 0.0}), server.url, Traffic(), accept=no_error)
        assert reply.status == 200 and reply.attempts == 2 and reply.response.json()["count"] == 1  # type: ignore[union-attr]
        server.inject("error", times=-1)
        worn = _post_once(Connection.of({"backoff": 0.0, "max_attempts": 3}), server.url, Traffic(), accept=no_error)
    assert worn.status == 200 and worn.attempts == 3 and "error" in worn.response.json()  # type: ignore[union-attr]


def test_the_transport_gives_up_on_a_dead_port_and_says_why() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    traffic = Traffic()
    reply = _post_once(Connection.of({"backoff": 0.0, "max_attempts": 4}), url, traffic)
    assert reply.response is None and reply.status is None
    assert (reply.attempts, reply.problem, traffic.requests) == (4, "connection refused", 4)


def test_the_transport_honours_the_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeInfiniGram(text_indexes={"v2_fake": ["the cat sat"]}) as server:
        monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # nothing listens there
        monkeypatch.setenv("no_proxy", "")
        proxied = _post_once(Connection.of({"backoff": 0.0, "max_attempts": 1}), server.url, Traffic())
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        direct = _post_once(Connection.of({"max_attempts": 1}), server.url, Traffic())
    assert proxied.problem == "connection refused" and server.request_count == 1
    assert direct.status == 200


def test_connection_options_are_checked_by_name() -> None:
    assert Connection.of({}, concurrency=4, timeout=9.0) == Connection(9.0, 4, RetryPolicy())
    assert Connection.of({"max_attempts": 2}).retry.max_attempts == 2
    assert Connection.of({"rate": 5}).rate == 5.0 and Connection.of({}).rate == 0.0  # 0: no limit
    bad_options = [({"concurrency": 0}, "concurrency"), ({"timeout": 0}, "timeout"), ({"backoff": -1}, "backoff")]
    for bad, field in [*bad_options, ({"rate": -2}, "rate")]:
        with pytest.raises(ConfigError, match=field) as caught:
            Connection.of(bad)  # type: ignore[arg-type]
        assert caught.value.field == field


def test_every_remote_backend_takes_a_rate() -> None:
    from pytest_novelty.scoring.concepts import open_concept_extractor
    from pytest_novelty.scoring.judges import open_judge

    assert open_judge("openai:judge-model?rate=3", base_url="http://127.0.0.1:9/v1").connection.rate == 3.0  # type: ignore[attr-defined]
    extractor = open_concept_extractor("openai:judge-model?rate=0.5", base_url="http://127.0.0.1:9/v1")
    assert extractor.connection.rate == 0.5  # type: ignore[attr-defined]


def test_judges_and_served_models_send_through_the_one_transport() -> None:
    """The openai package's client and the served generator both retry in RetryTransport (their
    own retries off): a 503 then an answer is one retry on the component's traffic."""
    from pytest_novelty.scoring.judges import JudgeItem, open_judge

    with FakeOpenAI() as server:
        server.inject("status", status=503, times=1)
        judge = open_judge("openai:judge-model", base_url=server.url, samples=1, temperature=0.0, backoff=0.0)
        [result] = judge.score([JudgeItem(task="story", prompt="Once", response="there was a cat")])
        assert result.quality is not None
        assert (judge.traffic.requests, judge.traffic.retries) == (2, 1)  # type: ignore[attr-defined]
        server.inject("status", status=503, times=1)
        generator = OpenAIGenerator("openai:judge-model", base_url=server.url, backoff=0.0)
        chat = generator.render([{"role": "user", "content": "Tell a story"}])
        generator.sample(Batch([chat], [3], GenerationSettings(max_new_tokens=4)))
        assert (generator.traffic.requests, generator.traffic.retries) == (2, 1)


def test_compressed_answers_are_decoded_once_and_connections_are_reused() -> None:
    """Answers go through one-connection lanes read whole: a gzip body (as OpenAI sends) reaches
    the caller decoded, and many requests share the ``concurrency`` kept-alive connections."""
    import gzip
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    peers: set[int] = set()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            peers.add(self.client_address[1])
            data = gzip.compress(json.dumps({"echo": body, "pad": "x" * 2000}).encode())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:

        async def go() -> list[Any]:
            async with Connection.of({"concurrency": 3}).client(url, Traffic()) as http:
                replies = await asyncio.gather(*(post_json(http, url, {"n": i}) for i in range(30)))
            return [reply.response.json() for reply in replies if reply.response is not None]

        answers = run_coroutine(go())
    finally:
        server.shutdown()
        server.server_close()
    assert [a["echo"]["n"] for a in answers] == list(range(30)) and answers[0]["pad"] == "x" * 2000
    assert 1 <= len(peers) <= 3
