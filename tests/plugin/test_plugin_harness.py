"""A broken harness is never a pass or a gate failure: pytest runs with an unreachable, key-refusing
or score-less judge (real servers on 127.0.0.1), broken checkpoints built in the test and a broken
prompt file end with one line per cause and the harness exit status (or a usage error), and no
key reaches the terminal, the report or the JUnit file."""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS
from tests.conftest import copy_demo
from tests.servers.openai_api import FakeOpenAI
from tests.warm_cache import cache_of, copy_warm

pytestmark = pytest.mark.slow

URL_KEY = "qk-7d1e0b5a9c2f"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def all_output(result: pytest.RunResult) -> str:
    return result.stdout.str() + "\n" + result.stderr.str()


@pytest.fixture
def no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def judge_server(no_env_key: None) -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def test_an_unreachable_judge_ends_the_demo_run_within_seconds_with_one_line(
    pytester: pytest.Pytester, tmp_path: Path, no_env_key: None, demo_assets: Path
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    cache = copy_demo(demo_assets, tmp_path / "demo-cache")
    start = time.monotonic()
    result = pytester.runpytest_subprocess(
        "--model", "demo", "--judge", "openai:M", "--judge-base-url", url, f"--novelty-cache={cache}",
        "-p", "no:cacheprovider", timeout=120,
    )  # fmt: skip
    assert time.monotonic() - start < 30
    assert result.ret == HARNESS_EXIT_STATUS
    lines = [line for line in all_output(result).splitlines() if url in line]
    assert len(lines) == 1 and "cannot reach the judge openai:M" in lines[0] and "connection refused" in lines[0]
    assert "Traceback" not in all_output(result)


@pytest.mark.parametrize("answer", ["refuse", "no_score", "accept"])
def test_a_key_in_the_judge_url_appears_in_no_output_report_or_junit(
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path, no_env_key: None, answer: str,
    warm_story: Path,
) -> None:
    copy_warm(warm_story, cache_of(novelty_args))  # the answers are there; the judge is asked for its scores
    with FakeOpenAI(api_key="the-right-key" if answer == "refuse" else None) as server:
        if answer == "no_score":
            server.inject("no_score", times=-1)
        junit, report = tmp_path / "junit.xml", tmp_path / "report"
        result = pytester.runpytest_subprocess(
            *novelty_args, "--judge", "openai:judge-model", "--judge-base-url", f"{server.url}?api_key={URL_KEY}",
            f"--junitxml={junit}", f"--novelty-report={report}", "-v", "--tb=long", timeout=300,
        )  # fmt: skip
    expected = {"refuse": HARNESS_EXIT_STATUS, "no_score": HARNESS_EXIT_STATUS, "accept": pytest.ExitCode.OK}
    assert result.ret == expected[answer], all_output(result)
    written = [p.read_text(errors="replace") for p in [junit, *report.rglob("*")] if p.is_file()]
    for text in [all_output(result), *written]:
        assert URL_KEY not in text
    if answer == "refuse":
        result.stdout.fnmatch_lines(["*refused the API key (HTTP 401: Incorrect API key provided*"])


def test_each_harness_cause_is_printed_once_without_chained_tracebacks(
    pytester: pytest.Pytester, novelty_args: list[str], judge_server: FakeOpenAI, suite_dir: Path, warm_story: Path
) -> None:
    copy_warm(warm_story, cache_of(novelty_args))  # the answers are there; the judge is asked for its scores
    judge_server.inject("no_score", times=-1)
    result = pytester.runpytest_subprocess(
        *novelty_args, "--judge", "openai:judge-model", "--judge-base-url", judge_server.url, "-rE", timeout=300
    )
    assert result.ret == HARNESS_EXIT_STATUS  # not 1: the gate did not fail, the judge did
    output = all_output(result)
    cause = "left 12 of 12 answers unscored (100%, above scoring.max_unscored = 0.05): no score in reply (12)"
    # Once in the report of the case that met it; the other case points to it. pytest's short summary
    # (-rE) repeats each error's first line, untruncated under CI: at most once more, there.
    body, _, summary = output.partition("short test summary info")
    assert body.count(cause) == 1 and summary.count(cause) <= 1, output
    assert "During handling of the above exception" not in output and "Traceback" not in output
    result.assert_outcomes(errors=2)


def test_a_broken_prompt_file_is_reported_once_per_run(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    with (suite_dir / "prompts.jsonl").open("a") as fh:
        fh.write('{"id": "p9", "text": \n')
    result = pytester.runpytest_subprocess(*novelty_args, timeout=300)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert all_output(result).count("line 7: broken JSON") == 1, all_output(result)


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("config", "*config.json: n_layer: expected a whole number, got 'four'*"),
        ("truncated", "*model.safetensors: --model: truncated: its header needs * bytes, the file has * (still being "
                      "written, or cut off); wait for the save to finish, or copy it again*"),
        ("missing", "*--model: no weights (model.safetensors or pytorch_model.bin)*"),
    ],
)
def test_a_broken_checkpoint_is_one_line(
    pytester: pytest.Pytester, novelty_args: list[str], tiny_checkpoint: Path, tmp_path: Path,
    damage: str, expected: str,
) -> None:  # fmt: skip
    broken = tmp_path / f"broken-{damage}"
    shutil.copytree(tiny_checkpoint, broken)
    weights = broken / "model.safetensors"
    if damage == "config":
        config = (broken / "config.json").read_text()
        (broken / "config.json").write_text(config.replace('"n_layer": 2', '"n_layer": "four"'))
    elif damage == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    else:
        weights.unlink()
    args = list(novelty_args)
    args[1] = str(broken)
    result = pytester.runpytest_subprocess(*args, timeout=300)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])
    assert len(result.stderr.str().strip().splitlines()) <= 2 and "Traceback" not in all_output(result)
