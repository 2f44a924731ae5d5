"""A served model that answers badly or not at all is a harness fault, never an answer.

Against the fake OpenAI server of ``tests/servers`` (real HTTP on 127.0.0.1): replies without
text are retried and then a harness error naming the endpoint, and never reach the cache (a rerun
after the server is fixed generates again); a legitimately empty answer is kept; a server that
accepts the connection and never answers is a harness error after the bounded attempts, with a
waiting line while it waits; the preflight names an unreachable, silent or key-refusing server
and a model it does not list. The timeouts here are small options; the defaults are checked as
numbers (:func:`silent_server_bound`), not waited for.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_novelty.generation import Batch, generate
from pytest_novelty.generation.backends import open_generator
from pytest_novelty.generation.openai import (
    MAX_RETRY_TIME,
    TIMEOUT,
    BadReply,
    OpenAIGenerator,
    read_reply,
    silent_server_bound,
)
from pytest_novelty.infra.errors import ConfigError, HarnessError, PreflightError
from pytest_novelty.infra.http import Connection
from pytest_novelty.infra.progress import notices_to
from pytest_novelty.infra.retry import RetryPolicy
from pytest_novelty.suites.schema import GenerationSettings
from tests.servers.base import SilentServer
from tests.servers.openai_api import FakeOpenAI

SETTINGS = GenerationSettings(samples=2, temperature=0.7, max_new_tokens=8, seed=5)
TEXTS = ["Lily and Tom went to the park.", "Mia saw a big dog.", "Ben had a red kite."]
CHAT = [{"role": "user", "content": "Write about cats."}]
FAST = {"backoff": 0.01, "max_backoff": 0.01}
SECRET = "sk-served-0123456789abcdef"


def served(server: FakeOpenAI | SilentServer, **options: object) -> OpenAIGenerator:
    return OpenAIGenerator("openai:judge-model", base_url=server.url, **{**FAST, **options})  # type: ignore[arg-type]


# -- replies without an answer ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "chat", "problem"),
    [
        ("null_text", False, "the reply's text is null"),
        ("no_text", False, "the reply has no text"),
        ("no_choices", False, "the reply has an empty choices list"),
        ("error_finish", False, 'the reply ends with finish_reason "error"'),
        ("empty_no_finish", False, "the reply's text is empty and it gives no finish_reason"),
        ("null_text", True, "the reply's message content is null"),
        ("no_choices", True, "the reply has an empty choices list"),
    ],
)
def test_a_reply_without_text_is_retried_then_a_harness_error_naming_the_endpoint(
    fault: str, chat: bool, problem: str
) -> None:
    with FakeOpenAI() as server:
        server.inject(fault, times=-1)
        gen = served(server, max_attempts=3)
        text = gen.render(CHAT) if chat else TEXTS[0]
        kept: list[tuple[int, str]] = []
        with pytest.raises(HarnessError) as caught:
            gen.sample(Batch([text], [1], SETTINGS, on_row=lambda i, t: kept.append((i, t))))
    url = server.url + ("/chat/completions" if chat else "/completions")
    assert str(caught.value) == f"openai:judge-model: no usable answer from {url} after 3 attempts ({problem})"
    assert len(server.requests) == 3  # retried like a 5xx
    assert kept == []  # nothing handed on to be cached


def test_an_error_finish_reason_names_the_servers_word() -> None:
    with FakeOpenAI() as server:
        server.inject("error_finish", times=-1, message="abort")
        gen = served(server, max_attempts=2)
        with pytest.raises(HarnessError, match=r'after 2 attempts \(the reply ends with finish_reason "abort"\)'):
            gen.sample(Batch([TEXTS[0]], [1], SETTINGS))


def test_a_reply_fixed_on_retry_is_the_answer_and_the_retry_is_announced(notices: list[str]) -> None:
    lines = notices
    with FakeOpenAI() as server:
        server.inject("null_text", times=2, match="Mia")
        gen = served(server, revision="r1")
        answers = gen.sample(Batch(TEXTS, [1, 2, 3], SETTINGS))
    assert all(answers) and len(server.requests) == 3 + 2
    assert lines == [
        f"[novelty] openai:judge-model at {server.url}: the reply's text is null; retrying (attempt 2 of 6, "
        "giving up after 120 s)"
    ]  # the second retry comes within notify_every of the first: not repeated


def test_a_legitimately_empty_answer_is_kept() -> None:
    """``""`` that ends with ``finish_reason: "stop"``: the model emitted end-of-sequence at once."""
    with FakeOpenAI() as server:
        server.inject("empty_stop", times=-1, match="Mia")
        gen = served(server)
        answers = gen.sample(Batch(TEXTS, [1, 2, 3], SETTINGS))
    assert answers[1] == "" and answers[0] and answers[2] and len(server.requests) == 3  # not retried


def test_null_answers_are_never_cached_and_a_rerun_after_the_fix_generates_again(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with FakeOpenAI() as server:
        server.inject("null_text", times=-1)
        with pytest.raises(HarnessError, match="no usable answer"):
            generate(served(server, max_attempts=2), TEXTS, SETTINGS, cache_dir=cache)
        server.clear_faults()  # the server is fixed
        answers, stats = generate(served(server), TEXTS, SETTINGS, cache_dir=cache)
    assert (stats.rows, stats.cached_rows) == (6, 0)  # generated, not "6 from cache"
    assert all(a for row in answers for a in row)


def test_rows_answered_before_a_bad_reply_stay_cached(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with FakeOpenAI() as server:
        server.inject("no_choices", times=-1, match="Ben")
        with pytest.raises(HarnessError, match="empty choices list"):
            generate(served(server, max_attempts=2, concurrency=1), TEXTS, SETTINGS, cache_dir=cache)
        server.clear_faults()
        _, stats = generate(served(server), TEXTS, SETTINGS, cache_dir=cache)
    assert stats.rows + stats.cached_rows == 6 and 0 < stats.cached_rows < 6 and stats.rows >= 2


@pytest.mark.parametrize(
    ("data", "chat", "answer"),
    [
        ({"choices": [{"text": "", "finish_reason": "stop"}]}, False, ("", None)),
        ({"choices": [{"text": "", "finish_reason": "length"}], "usage": {"completion_tokens": 3}}, False, ("", 3)),
        ({"choices": [{"text": "Once", "finish_reason": None}]}, False, ("Once", None)),
        ({"choices": [{"message": {"content": "Hi"}, "finish_reason": "content_filter"}]}, True, ("Hi", None)),
    ],
)
def test_replies_that_are_answers(data: dict[str, object], chat: bool, answer: tuple[str, int | None]) -> None:
    assert read_reply(data, chat=chat) == answer


@pytest.mark.parametrize(
    ("data", "chat", "problem"),
    [
        ([], False, "not a JSON object"),
        ({"error": {"message": "engine died"}}, False, "no choices (it reports an error: engine died)"),
        ({"choices": ["x"]}, False, "choice is not an object"),
        ({"choices": [{"text": 3, "finish_reason": "stop"}]}, False, "text is not a string"),
        ({"choices": [{"text": "x", "finish_reason": {"type": "abort", "message": "oom"}}]}, False, '"abort": oom'),
        ({"choices": [{"text": "x"}]}, True, "choice has no message"),
        ({"choices": [{"message": {"content": None, "refusal": "no"}, "finish_reason": "stop"}]}, True, "refusal: no"),
    ],
)
def test_replies_that_are_not_answers(data: object, chat: bool, problem: str) -> None:
    with pytest.raises(BadReply, match=problem.replace("(", r"\(").replace(")", r"\)")):
        read_reply(data, chat=chat)


def test_answers_cached_before_replies_were_checked_are_not_reused() -> None:
    """The identity_id of the unchecked generator (URL, name, revision) keyed possibly empty replies."""
    from pytest_novelty.infra.storage import stable_hash

    gen = OpenAIGenerator("openai:m", base_url="http://gpu:8000/v1")
    assert gen.identity_id != "served:" + stable_hash("http://gpu:8000/v1", "m", "")[:16]


# -- a server that never answers ------------------------------------------------------------------


def test_the_default_timeouts_make_a_silent_server_fail_within_about_two_minutes() -> None:
    gen = OpenAIGenerator("openai:m", base_url="http://gpu:8000/v1")
    assert (gen.connection.timeout, gen.connection.retry.max_retry_time) == (TIMEOUT, MAX_RETRY_TIME) == (60, 120)
    attempts, seconds = silent_server_bound(gen.connection)
    assert attempts == 2 and 110 <= seconds <= 130
    # the bound follows the options
    assert silent_server_bound(Connection(timeout=1.0, retry=RetryPolicy(max_retry_time=0.0))) == (1, 1.0)
    assert silent_server_bound(Connection(timeout=1.0, retry=RetryPolicy(max_attempts=3, backoff=0.0))) == (3, 3.0)


def test_a_server_that_accepts_and_never_answers_is_a_harness_error_after_the_bounded_attempts(
    notices: list[str],
) -> None:
    lines = notices
    with SilentServer("/v1") as server:
        gen = served(server, timeout=0.4, max_retry_time=1.0, notify_every=0.2)
        attempts, _ = silent_server_bound(gen.connection)
        with pytest.raises(HarnessError) as caught:
            gen.sample(Batch(TEXTS, [1, 2, 3], SETTINGS))
    assert attempts == 3
    assert str(caught.value).startswith(
        f"openai:judge-model: no answer from {server.url}/completions after 3 attempts (timed out after 0.4 s each)"
    )
    waits = [line for line in lines if "waiting for" in line]
    assert waits and "waiting for 3 answers" in waits[0] and "a request times out after 0.4 s" in waits[0]
    assert "stops the run after 3 attempts, at most 1 s" in waits[0]
    assert any("timed out; retrying (attempt 2 of 6, giving up after 1 s)" in line for line in lines)


def test_waiting_lines_are_spaced_by_notify_every() -> None:
    slow_lines: list[str] = []
    quick_lines: list[str] = []
    with FakeOpenAI() as server:
        server.inject("delay", seconds=1.2, times=1)
        slow = served(server, notify_every=0.5, revision="r1")
        with notices_to(slow_lines.append):
            assert slow.sample(Batch([TEXTS[0]], [1], SETTINGS))[0]
        quick = served(server, notify_every=0.5, revision="r1")
        with notices_to(quick_lines.append):
            assert quick.sample(Batch([TEXTS[1]], [2], SETTINGS))[0]
    assert slow_lines and all("waiting for 1 answer, the oldest for" in line for line in slow_lines)
    assert len(slow_lines) <= 3  # one per 0.5 s at most, though the watch looks every 0.1 s
    assert quick_lines == []  # an answer that comes at once is not waited for


# -- the preflight --------------------------------------------------------------------------------


def test_preflight_passes_a_listed_model_with_one_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("NOVELTY_MODEL_API_KEY", SECRET)
    with FakeOpenAI(api_key=SECRET, models=("judge-model", "other")) as server:
        gen = served(server)
        gen.check()
    assert gen.requests_sent == 0  # the preflight's request is not the run's traffic


def test_preflight_names_a_model_the_server_does_not_list() -> None:
    with FakeOpenAI(models=("judge-model-7b", "other")) as server:
        gen = OpenAIGenerator("openai:judge-model-7", base_url=server.url)
        with pytest.raises(ConfigError) as caught:
            gen.check()
    assert str(caught.value) == (
        f"--model: openai:judge-model-7 at {server.url} does not serve 'judge-model-7' (did you mean "
        "'judge-model-7b'?); it lists 'judge-model-7b', 'other' (pass the name it lists, as openai:NAME)"
    )


def test_preflight_names_a_missing_and_a_refused_key_and_the_variable_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("NOVELTY_MODEL_API_KEY", raising=False)
    with FakeOpenAI(api_key=SECRET) as server:
        with pytest.raises(PreflightError) as missing:
            served(server).check()
        monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-0123456789abcd")
        with pytest.raises(PreflightError) as refused:
            served(server).check()
    assert "needs a key and none is set (HTTP 401" in str(missing.value)
    assert str(missing.value).endswith("set NOVELTY_MODEL_API_KEY (or OPENAI_API_KEY)")
    assert "refused the key from OPENAI_API_KEY (HTTP 401" in str(refused.value)
    assert str(refused.value).endswith("set NOVELTY_MODEL_API_KEY to a key it accepts")
    assert "sk-wrong" not in str(refused.value)


def test_preflight_names_an_unreachable_and_a_silent_server() -> None:
    with SilentServer("/v1") as silent, pytest.raises(PreflightError) as quiet:
        served(silent).check(timeout=0.3)
    assert str(quiet.value).startswith(f"openai:judge-model at {silent.url} did not answer GET /models within 0.3 s")
    assert silent.connections == 1  # one attempt, no retries
    with pytest.raises(PreflightError) as down:
        served(silent).check()  # stopped: nothing listens there now
    assert str(down.value).startswith(f"cannot reach openai:judge-model at {silent.url} (connection refused)")


def test_preflight_names_a_wrong_base_url() -> None:
    with FakeOpenAI() as server:
        gen = OpenAIGenerator("openai:judge-model", base_url=server.url.removesuffix("/v1"))
        with pytest.raises(PreflightError, match=r"GET /models found nothing \(HTTP 404.*check --model-base-url"):
            gen.check()


def test_a_key_in_the_base_url_goes_as_a_query_to_every_route_and_is_never_shown(
    notices: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--model-base-url 'http://host/v1?api_key=KEY'``: the preflight and every row reach their
    routes with the query kept a query (it was glued before the route, so the server saw /v1), and
    no line or error shows the key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("NOVELTY_MODEL_API_KEY", raising=False)
    with FakeOpenAI(models=("judge-model",)) as server:
        gen = OpenAIGenerator("openai:judge-model", base_url=f"{server.url}?api_key={SECRET}", revision="r1", **FAST)
        gen.check()
        server.inject("status", status=503, times=1, match="Mia")
        answers = gen.sample(Batch(TEXTS, [1, 2, 3], SETTINGS))
        assert all(answers) and len(server.requests) == 3 + 1
        server.inject("status", status=403, times=1, message=f"key {SECRET} is not allowed here")
        with pytest.raises(HarnessError) as caught:
            gen.sample(Batch(TEXTS[:1], [4], SETTINGS))
    assert gen.base_url == server.url and SECRET not in repr(gen)
    assert notices and all(SECRET not in line for line in notices)
    assert "(HTTP 403: key *** is not allowed here)" in str(caught.value) and SECRET not in str(caught.value)


def test_connection_options_come_from_the_model_spec() -> None:
    gen = open_generator("openai:m?timeout=5&max_retry_time=7&concurrency=2", base_url="http://gpu:8000/v1")
    assert isinstance(gen, OpenAIGenerator) and gen.name == "openai:m"
    assert (gen.connection.timeout, gen.connection.retry.max_retry_time, gen.connection.concurrency) == (5, 7, 2)
    assert gen.identity_id == OpenAIGenerator("openai:m", base_url="http://gpu:8000/v1").identity_id
    with pytest.raises(ConfigError, match=r"--model: model source openai has no option 'timout' \(did you mean"):
        open_generator("openai:m?timout=5", base_url="http://gpu:8000/v1")
