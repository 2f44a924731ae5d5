"""The openai: judge against a real HTTP server on 127.0.0.1 that injects faults."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import HarnessError
from pytest_novelty.scoring.judges import JudgeItem, OpenAIJudge, open_judge, parse_score
from pytest_novelty.scoring.judges.cache import NAMESPACE
from pytest_novelty.scoring.judges.rubrics import rubric_for
from tests.scoring.judges.judge_helpers import SECRET
from tests.servers.openai_api import FakeOpenAI, default_reply

Build = Callable[..., OpenAIJudge]


def items(count: int, prefix: str = "item") -> list[JudgeItem]:
    """Distinct story items; each prompt starts with the marker ``<prefix>-<i>:``."""
    return [
        JudgeItem("story", f"{prefix}-{i}: Once upon a time, Lily found a kite.", f"Lily flew it {i} times.")
        for i in range(count)
    ]


def expected_scores(item: JudgeItem, samples: int = 5) -> tuple[float, ...]:
    """What the fake server's default reply scores each sample of ``item``."""
    user = rubric_for(item.task).messages(item)[1]["content"]
    return tuple(parse_score(default_reply(user, i)) for i in range(samples))


def requests_for(server: FakeOpenAI, marker: str) -> int:
    return sum(marker in body["messages"][-1]["content"] for body in server.requests)


def test_one_request_per_item_with_n(server: FakeOpenAI, make_judge: Build) -> None:
    batch = items(6)
    results = make_judge().score(batch)
    assert server.request_count == 6
    assert all(body["n"] == 5 and body["temperature"] == 0.7 for body in server.requests)
    assert all(body["model"] == "judge-model" for body in server.requests)
    for item, result in zip(batch, results, strict=True):
        scores = expected_scores(item)
        assert result.scores == scores
        assert result.quality == pytest.approx(sum(scores) / len(scores) / 5)
        assert result.judge == "openai:judge-model" and result.error is None


def test_rerun_makes_no_requests(server: FakeOpenAI, make_judge: Build) -> None:
    batch = items(5)
    first = make_judge().score(batch)
    sent = server.request_count
    again = make_judge().score(batch)  # a new judge, the same cache folder
    assert server.request_count == sent
    assert again == first


def test_every_fault_ends_scored_or_unscored_with_bounded_requests(server: FakeOpenAI, make_judge: Build) -> None:
    server.inject("status", status=429, retry_after=1, match="item-0:")
    server.inject("status", status=500, times=3, match="item-1:")
    server.inject("hang", seconds=5, match="item-2:")
    server.inject("no_score", times=-1, match="item-3:")
    server.inject("out_of_range", times=-1, match="item-4:")
    server.inject("status", status=503, times=-1, match="item-5:")
    server.inject("drop", match="item-6:")
    server.inject("no_score", match="item-7:")
    judge = make_judge(timeout=0.5, max_attempts=4, max_reasks=2)
    batch = items(9)
    start = time.monotonic()
    results = judge.score(batch)
    assert time.monotonic() - start >= 1.0  # item-0 waited for Retry-After

    unscored = {i for i, r in enumerate(results) if r.quality is None}
    assert unscored == {3, 4, 5}
    for i in (0, 1, 2, 6, 7, 8):
        assert results[i].scores == expected_scores(batch[i]), i
    assert "no 'Score: N' line" in (results[3].error or "")
    assert "outside 0-5" in (results[4].error or "")
    assert "gave up after 4 attempts" in (results[5].error or "") and "503" in (results[5].error or "")
    assert all(r.scores == () for r in (results[3], results[4], results[5]))

    per_item = [requests_for(server, f"item-{i}:") for i in range(9)]
    assert per_item == [2, 4, 2, 3, 3, 4, 2, 2, 1]

    # Transport failures are not cached: the rerun retries item-5 only; then nothing is left to ask.
    server.clear_faults()
    sent = server.request_count
    rerun = judge.score(batch)
    assert server.request_count == sent + 1
    assert rerun[5].scores == expected_scores(batch[5])
    assert [r.quality is None for r in rerun] == [i in (3, 4) for i in range(9)]
    judge.score(batch)
    assert server.request_count == sent + 1


def test_retry_after_is_honoured(server: FakeOpenAI, make_judge: Build) -> None:
    server.inject("status", status=429, retry_after=1)
    [result] = make_judge().score(items(1))
    assert result.quality is not None
    assert server.request_count == 2
    assert server.arrivals[1] - server.arrivals[0] >= 0.95


def test_budget_caps_requests_and_a_rerun_resumes(server: FakeOpenAI, make_judge: Build) -> None:
    batch = items(10)
    judge = make_judge(budget=4, concurrency=1)
    assert judge.planned_calls(batch) == 4
    results = judge.score(batch)
    assert server.request_count == 4
    assert sum(r.quality is not None for r in results) == 4
    assert {r.error for r in results if r.quality is None} == {"call budget of 4 exhausted"}

    resumed = make_judge()
    assert resumed.planned_calls(batch) == 6
    results = resumed.score(batch)
    assert server.request_count == 10
    assert all(r.quality is not None for r in results)
    assert resumed.planned_calls(batch) == 0


def test_reasoning_model_without_temperature(make_judge: Build) -> None:
    with FakeOpenAI(reject_temperature=True) as server:
        judge = make_judge(base_url=server.url, concurrency=1)
        results = judge.score(items(3))
        assert all(r.quality is not None for r in results)
        assert judge.send_temperature is False
        assert server.request_count == 4  # one rejected request, then one per item
        assert [("temperature" in body) for body in server.requests] == [True, False, False, False]


@pytest.mark.parametrize("n_mode", ["ignore", "reject"])
def test_server_without_n_gets_one_request_per_sample(make_judge: Build, n_mode: str) -> None:
    with FakeOpenAI(n_mode=n_mode) as server:
        judge = make_judge(base_url=server.url, concurrency=1)
        batch = items(2)
        results = judge.score(batch)
        # single-choice replies are all "choice 0" of the fake server
        assert [r.scores for r in results] == [expected_scores(item)[:1] * 5 for item in batch]
        assert judge.send_n is False
        # ignore: the first request returns one choice and four follow; reject: a 400 and five follow
        assert server.request_count == (10 if n_mode == "ignore" else 11)
        assert judge.planned_calls(items(1, prefix="new")) == 5


def test_concurrency_is_limited(make_judge: Build) -> None:
    with FakeOpenAI(latency=0.05) as server:
        make_judge(base_url=server.url, concurrency=3).score(items(12))
        assert server.max_in_flight == 3


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_endpoint_is_a_harness_error(tmp_path: Path) -> None:
    judge = OpenAIJudge(
        "judge-model",
        base_url=f"http://127.0.0.1:{_closed_port()}/v1",
        api_key=SECRET,
        max_attempts=2,
        backoff=0.01,
        cache_dir=tmp_path,
    )
    with pytest.raises(HarnessError, match="cannot reach the judge") as info:
        judge.score(items(3))
    assert SECRET not in str(info.value)


def test_rejected_key_and_unknown_model_are_harness_errors(make_judge: Build) -> None:
    with pytest.raises(HarnessError, match="refused the API key") as info:
        make_judge(api_key="sk-wrong-key-0123456789").score(items(1))
    assert "sk-wrong" not in str(info.value)
    with FakeOpenAI(models=("judge-model",)) as server:
        judge = OpenAIJudge("no-such-model", base_url=server.url, api_key="x")
        with pytest.raises(HarnessError, match="no model 'no-such-model'"):
            judge.score(items(1))


def test_the_key_never_leaks(server: FakeOpenAI, make_judge: Build, tmp_path: Path) -> None:
    server.inject("status", status=400, times=-1, match="item-1:", message=f"bad request from key {SECRET}")
    judge = make_judge()
    results = judge.score(items(2))
    assert all(server.authorized) and server.request_count == 2
    assert results[0].quality is not None
    assert results[1].quality is None and "400" in (results[1].error or "")
    assert SECRET not in repr(judge) and SECRET not in str(vars(judge))
    assert all(SECRET not in repr(r) for r in results)
    for file in (tmp_path / "cache").rglob("*"):
        assert file.is_dir() or SECRET.encode() not in file.read_bytes(), file
    assert (tmp_path / "cache" / NAMESPACE).exists()


def test_settings_from_the_environment(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    judge = open_judge("openai:judge-model", samples=3, temperature=0.2)
    results = judge.score(items(2))
    assert all(len(r.scores) == 3 for r in results)
    assert [body["temperature"] for body in server.requests] == [0.2, 0.2]


def test_score_works_inside_a_running_event_loop(server: FakeOpenAI, make_judge: Build) -> None:
    async def main() -> list[float | None]:
        return [r.quality for r in make_judge().score(items(2))]

    assert all(q is not None for q in asyncio.run(main()))


def test_identical_items_are_judged_once(server: FakeOpenAI, make_judge: Build) -> None:
    batch = items(3)
    results = make_judge().score([batch[0], batch[1], batch[0], batch[2], batch[1]])
    assert server.request_count == 3
    assert results[0] == results[2] and results[1] == results[4]
    assert make_judge().score([]) == []


def test_a_request_told_to_wait_lets_the_next_one_go(make_judge: Build) -> None:
    """With one request in flight allowed, a 429 with Retry-After gives up the place while it
    waits: the second item is sent during the first one's wait, not after it."""
    with FakeOpenAI() as server:
        server.inject("status", status=429, retry_after=0.5, match="item-0:", message="slow down")
        results = make_judge(base_url=server.url, concurrency=1).score(items(2))
        order = ["item-0" if "item-0:" in body["messages"][-1]["content"] else "item-1" for body in server.requests]
    assert all(r.quality is not None for r in results)
    assert order == ["item-0", "item-1", "item-0"]
    assert server.max_in_flight == 1


def test_a_reply_that_is_not_json_is_a_counted_failure(make_judge: Build) -> None:
    """A 200 whose body is not JSON (a proxy's error page) is tried again; one that stays so leaves
    the item unscored with the reason, and the others are scored."""
    with FakeOpenAI() as server:
        server.inject("garbage", match="item-1:", times=1)
        server.inject("garbage", match="item-0:", times=-1)
        [broken, fine] = make_judge(base_url=server.url, max_attempts=3).score(items(2))
        assert (requests_for(server, "item-0:"), requests_for(server, "item-1:")) == (3, 2)
    assert broken.quality is None and "the reply is not JSON" in (broken.error or "")
    assert fine.quality is not None
