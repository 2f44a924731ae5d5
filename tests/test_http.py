"""The retry policy every HTTP client shares, and the clients that follow it against real loopback servers."""

from __future__ import annotations

import email.utils
import time

import pytest

from pytest_novelty.errors import HarnessError
from pytest_novelty.generation import Batch
from pytest_novelty.generation.openai import OpenAIGenerator
from pytest_novelty.http import MAX_RETRY_AFTER, Connection, RetryPolicy, Secret, is_retryable, retry_after, scrub
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
    bounded.forget()
    assert bounded.number == 0
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)


def test_secrets_stay_hidden() -> None:
    secret = Secret(KEY)
    assert repr(secret) == "***" and KEY not in repr(vars(type(secret))) and secret.reveal() == KEY
    assert scrub(f"bad key {KEY} at http://h/v1?api_key=abc", secret) == "bad key *** at http://h/v1?api_key=***"


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
        with pytest.raises(HarnessError, match=r"no answer from .* after 1 attempts \(HTTP 503"):
            generator.sample(Batch([generator.render([{"role": "user", "content": "Tell a story"}])], [7], settings))
        assert time.monotonic() - start < 2
