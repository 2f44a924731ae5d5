"""Judge outcomes are explicit: a dead, hanging or key-refusing endpoint is a harness error with its
reason, quickly; the preflight names a missing or refused key and an unreachable endpoint; waits
are shown; secrets in the base URL never reach a message. Real HTTP on 127.0.0.1 throughout."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import HarnessError, PreflightError
from pytest_novelty.scoring.judges import JudgeItem, OpenAIJudge
from tests.scoring.judges.judge_helpers import SECRET
from tests.servers.openai_api import FakeOpenAI

Build = Callable[..., OpenAIJudge]
URL_KEY = "urlkey-5f9a1c7e3b"


def items(count: int) -> list[JudgeItem]:
    return [JudgeItem("story", f"item-{i}: Lily found a kite.", f"Lily flew it {i} times.") for i in range(count)]


def closed_port() -> int:
    with socket.socket() as sock:  # free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_judge_that_never_answers_is_a_harness_error_within_its_retry_bound(
    server: FakeOpenAI, make_judge: Build, notices: list[str]
) -> None:
    server.inject("hang", times=-1, seconds=30)
    shown = notices
    judge = make_judge(timeout=0.5, max_attempts=10, max_retry_time=2.0, backoff=0.2, max_backoff=0.2)
    start = time.monotonic()
    with pytest.raises(HarnessError, match=r"failed every request: timed out after 0.5 s") as caught:
        judge.score(items(20))
    assert time.monotonic() - start < 10  # bounded by max_retry_time, not 20 items x 10 attempts
    assert server.url in str(caught.value)
    assert shown and "retrying" in shown[0] and "giving up after 2 s" in shown[0]


def test_a_judges_retry_line_names_its_bound_as_given(
    make_judge: Build, server: FakeOpenAI, notices: list[str]
) -> None:
    """A retry bound of half a second is said as 0.5 s (it was rounded to 0 s), as the served
    model says its own: the two share one endpoint and one wording of a retry."""
    server.inject("status", status=503, times=1)
    make_judge(max_retry_time=0.5, samples=1).score(items(1))
    assert [line for line in notices if "retrying" in line] == [
        f"[novelty] judge at {server.url}: HTTP 503; retrying (attempt 2 of 6, giving up after 0.5 s)"
    ]


def test_a_judges_requests_go_through_the_harness_client(server: FakeOpenAI, make_judge: Build) -> None:
    """One endpoint, one HTTP client: the ``openai`` package sends the judges' requests, but through
    the endpoint's client of the harness (it counts every attempt and does the retrying), with the
    key the endpoint holds and without the package's own retries."""
    server.inject("status", status=503, times=1, message="busy")  # the first attempt fails, the next answers
    judge = make_judge(samples=1)
    (result,) = judge.score(items(1))
    assert result.quality is not None, result
    assert judge.requests_sent == judge.traffic.requests == 2 and judge.traffic.retries == 1


def test_a_judge_that_fails_every_request_names_the_http_reason(server: FakeOpenAI, make_judge: Build) -> None:
    server.inject("status", status=500, times=-1, message="model is loading")
    with pytest.raises(HarnessError, match=r"failed every request: HTTP 500: model is loading \(3 attempts"):
        make_judge(max_attempts=3).score(items(5))


def test_unscored_items_carry_countable_reasons(server: FakeOpenAI, make_judge: Build) -> None:
    server.inject("no_score", times=-1, match="item-1:")
    server.inject("status", status=422, times=-1, match="item-2:", message="prompt too long")
    results = make_judge(max_reasks=1).score(items(3))
    assert results[0].quality is not None
    assert (results[1].error or "").startswith("no score in reply (")
    assert results[2].error == "the request was rejected: HTTP 422: prompt too long"


def test_preflight_names_an_unreachable_endpoint_within_seconds(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    judge = OpenAIJudge("m", base_url=url, api_key="x", cache_dir=tmp_path)
    start = time.monotonic()
    with pytest.raises(PreflightError, match=rf"cannot reach the judge openai:m at {url} \(connection refused\)"):
        judge.check()
    assert time.monotonic() - start < 5


def test_preflight_names_a_refused_key_and_a_missing_one(server: FakeOpenAI, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    wrong = OpenAIJudge("judge-model", base_url=server.url, api_key="wrong-key", cache_dir=tmp_path)
    with pytest.raises(PreflightError, match=r"refused the API key \(HTTP 401: .*\); check OPENAI_API_KEY"):
        wrong.check()
    missing = OpenAIJudge("judge-model", base_url=server.url, api_key="", cache_dir=tmp_path)
    with pytest.raises(PreflightError, match=r"refused the API key .*; OPENAI_API_KEY is not set"):
        missing.check()
    hosted = OpenAIJudge("gpt-x", api_key="", cache_dir=tmp_path)  # OpenAI's own endpoint: no request at all
    with pytest.raises(PreflightError, match=r"OPENAI_API_KEY is not set; the judge openai:gpt-x at https://api"):
        hosted.check()
    OpenAIJudge("judge-model", base_url=server.url, api_key=SECRET, cache_dir=tmp_path).check()  # passes


def test_preflight_does_not_wait_on_a_silent_endpoint(tmp_path: Path) -> None:
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        judge = OpenAIJudge("m", base_url=url, api_key="x", cache_dir=tmp_path)
        start = time.monotonic()
        with pytest.raises(PreflightError, match=r"did not answer GET /models within 1 s"):
            judge.check(timeout=1.0)
        assert time.monotonic() - start < 5


def test_a_key_in_the_base_url_is_sent_as_a_query_and_never_shown(tmp_path: Path) -> None:
    with FakeOpenAI(api_key="the-right-key") as server:  # refuses whatever the URL carries
        url = f"{server.url}?api_key={URL_KEY}"
        judge = OpenAIJudge("judge-model", base_url=url, api_key="", cache_dir=tmp_path, max_attempts=1)
        for action in (judge.check, lambda: judge.score(items(2))):
            with pytest.raises(HarnessError) as caught:
                action()
            assert URL_KEY not in str(caught.value) and "api_key=***" in str(caught.value)
        assert URL_KEY not in repr(judge)
    with FakeOpenAI() as open_server:  # accepts: the query reached the server as a query, not a path
        judge = OpenAIJudge("judge-model", base_url=f"{open_server.url}?api_key={URL_KEY}", cache_dir=tmp_path)
        results = judge.score(items(1))
        assert results[0].quality is not None
