"""Judge answers are keyed by everything that changes them, and shared runs agree on one answer."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import HarnessError
from pytest_novelty.scoring.judges import JudgeItem, OpenAIJudge
from pytest_novelty.scoring.judges.cache import endpoint_identity, judge_key
from tests.servers.openai_api import FakeOpenAI

REPO = Path(__file__).resolve().parents[3]


def _items(count: int) -> list[JudgeItem]:
    return [JudgeItem("story", f"Tell a story about item {i}.", f"Once there was item {i}.") for i in range(count)]


ITEMS = _items(6)
FAST = {"timeout": 5.0, "backoff": 0.01, "max_backoff": 0.05, "max_attempts": 2}


def test_answers_from_one_endpoint_are_not_used_for_another(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with FakeOpenAI() as first:
        judged = OpenAIJudge("judge-model", base_url=first.url, cache_dir=cache, samples=2, **FAST).score(ITEMS)
        assert all(r.quality is not None for r in judged)
    with FakeOpenAI(api_key="the-right-key") as second:
        judge = OpenAIJudge(
            "judge-model", base_url=second.url, api_key="a-wrong-key", cache_dir=cache, samples=2, **FAST
        )
        with pytest.raises(HarnessError):
            judge.score(ITEMS)  # the refused key stops the run: nothing cached from the first endpoint
        assert second.request_count > 0


def test_the_same_endpoint_spelled_differently_shares_answers(tmp_path: Path) -> None:
    with FakeOpenAI() as server:
        OpenAIJudge("judge-model", base_url=server.url, cache_dir=tmp_path, samples=2, **FAST).score(ITEMS)
        sent = server.request_count
        spelled = server.url.replace("127.0.0.1", "127.0.0.1".upper()) + "/"
        OpenAIJudge("judge-model", base_url=spelled, cache_dir=tmp_path, samples=2, **FAST).score(ITEMS)
        assert server.request_count == sent


def test_endpoint_identity_keeps_where_and_drops_secrets() -> None:
    spelled = "HTTPS://user:sk-secret@Api.Example.com/v1/?key=sk-other"
    assert endpoint_identity(spelled) == "https://api.example.com:443/v1"
    assert endpoint_identity("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert endpoint_identity("http://127.0.0.1:8000/v1") != endpoint_identity("http://127.0.0.1:8001/v1")
    assert endpoint_identity("http://host/v1") != endpoint_identity("http://host/v2")


def test_every_setting_changes_the_key() -> None:
    base = {
        "kind": "openai", "model": "m", "endpoint": "http://h:80/v1", "rubric": "story/1",
        "sampling": {"temperature": 0.7}, "samples": 5, "task": "story", "prompt": "p", "response": "r", "sample": 0,
    }  # fmt: skip
    changed = {
        "kind": "hf", "model": "n", "endpoint": "http://h:81/v1", "rubric": "story/2",
        "sampling": {"temperature": 0.2}, "samples": 3, "task": "poetry", "prompt": "q", "response": "s", "sample": 1,
    }  # fmt: skip
    keys = {judge_key(**base)}  # type: ignore[arg-type]
    for field, value in changed.items():
        keys.add(judge_key(**{**base, field: value}))  # type: ignore[arg-type]
    assert len(keys) == len(changed) + 1


def test_sample_count_and_temperature_are_part_of_the_key(tmp_path: Path) -> None:
    with FakeOpenAI() as server:
        OpenAIJudge("judge-model", base_url=server.url, cache_dir=tmp_path, samples=3, **FAST).score(ITEMS[:1])
        sent = server.request_count
        OpenAIJudge("judge-model", base_url=server.url, cache_dir=tmp_path, samples=2, **FAST).score(ITEMS[:1])
        assert server.request_count > sent  # two of three samples are another question than two of two
        sent = server.request_count
        OpenAIJudge(
            "judge-model", base_url=server.url, cache_dir=tmp_path, samples=2, temperature=0.1, **FAST
        ).score(ITEMS[:1])
        assert server.request_count > sent


_JUDGE_RUN = """
import json, sys, time
from pathlib import Path
from pytest_novelty.scoring.judges import JudgeItem, OpenAIJudge
url, cache, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
items = [JudgeItem("story", f"Tell a story about item {i}.", f"Once there was item {i}.") for i in range(20)]
judge = OpenAIJudge("judge-model", base_url=url, cache_dir=Path(cache), samples=3, concurrency=4, timeout=30.0)
while time.time() < start:
    pass
print(json.dumps([list(r.scores) for r in judge.score(items)]))
"""


def test_two_concurrent_judge_runs_report_the_same_answers(tmp_path: Path) -> None:
    """The endpoint answers at random (as a sampled judge does); both runs still agree, and so does a third."""
    rng = random.Random(0)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "local"}
    def reply(prompt: str, choice: int) -> str:
        return f"Score: {rng.randint(0, 5)}"

    with FakeOpenAI(latency=0.02, n_mode="ignore", reply=reply) as server:
        start = time.time() + 3.0
        command = [sys.executable, "-c", _JUDGE_RUN, server.url, str(tmp_path), str(start)]
        runs = [
            subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        outputs = []
        for run in runs:
            out, err = run.communicate(timeout=180)
            assert run.returncode == 0, err
            outputs.append(json.loads(out))
        assert server.request_count > 60  # both runs asked (3 samples of 20 items each, one request per sample)
        sent = server.request_count
        third = OpenAIJudge("judge-model", base_url=server.url, cache_dir=tmp_path, samples=3, **FAST)
        results = third.score(_items(20))
        assert server.request_count == sent
    assert outputs[0] == outputs[1] == [list(r.scores) for r in results]
