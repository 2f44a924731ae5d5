"""Harness failures and bad input through the runner and the preflight, on a tiny real checkpoint, a
real index and a fake OpenAI server on 127.0.0.1: unscored answers are counted with their reasons
and bounded, an oversized prompt is named by file and line, a too-long ``max_new_tokens`` is
refused at load with the context length, and an unreachable judge stops the run within seconds."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import ConfigError, HarnessError, PreflightError
from pytest_novelty.pipeline.preflight import preflight
from pytest_novelty.pipeline.runner import RunConfig, Runner
from pytest_novelty.suites.suite_file import load_suite
from tests.servers.openai_api import FakeOpenAI
from tests.suite_text import suite_toml

pytestmark = pytest.mark.slow

TEXTS = ["Lily went to the park.", "Tom and Mia saw a bird.", "Ben had a cake.", "Sue sang a song."]


def write_suite(folder: Path, *, judge: str = "rules", max_new: int = 8, max_unscored: float = 0.05,
                texts: list[str] = TEXTS) -> Path:  # fmt: skip
    prompts = [{"id": f"p{i}", "text": text, "meta": {"characters": text.split()[:1]}} for i, text in enumerate(texts)]
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    path = folder / "story.toml"
    path.write_text(
        suite_toml(max_new_tokens=max_new, ngrams=[4], judge=judge, scoring=f"max_unscored = {max_unscored}")
    )
    return path


@pytest.fixture
def config(tiny_checkpoint: Path, tiny_index: Path, tmp_path: Path) -> RunConfig:
    return RunConfig(
        model=str(tiny_checkpoint), cache_dir=tmp_path / "cache", device="cpu", originality=f"infini-gram:{tiny_index}"
    )


@pytest.fixture
def judge_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAI() as server:
        yield server


def test_unscored_answers_above_max_unscored_are_a_harness_error_naming_the_reasons(
    config: RunConfig, judge_server: FakeOpenAI, tmp_path: Path
) -> None:
    judge_server.inject("no_score", times=-1)
    suite = load_suite(write_suite(tmp_path, judge="openai:judge-model"))
    runner = Runner(replace(config, judge_base_url=judge_server.url))
    with pytest.raises(HarnessError, match=r"left 8 of 8 answers unscored \(100%, above scoring.max_unscored = 0.05\): "
                                            r"no score in reply \(8\)"):  # fmt: skip
        runner.run(suite)


def test_unscored_answers_within_the_limit_are_counted_with_their_reasons(
    config: RunConfig, judge_server: FakeOpenAI, tmp_path: Path
) -> None:
    judge_server.inject("no_score", times=-1, match="Tom and Mia")
    judge_server.inject("status", status=422, times=-1, match="Ben had", message="context too long")
    suite = load_suite(write_suite(tmp_path, judge="openai:judge-model", max_unscored=0.5))
    result = Runner(replace(config, judge_base_url=judge_server.url)).run(suite)
    reasons = dict(map(tuple, result.scores.unscored_reasons))
    assert reasons == {"no score in reply": 2, "the request was rejected: HTTP 422: context too long": 2}
    assert int(sum(result.quality.ravel() != result.quality.ravel())) == 4  # NaN where unscored


def test_an_oversized_prompt_is_named_by_its_file_and_line(config: RunConfig, tmp_path: Path) -> None:
    long_text = "Lily " + "and Tom went to the park " * 40  # well beyond the tiny model's 128 tokens
    suite = load_suite(write_suite(tmp_path, texts=[TEXTS[0], long_text, TEXTS[2]]))
    with pytest.raises(ConfigError) as caught:
        Runner(config).run(suite)
    message = str(caught.value)
    assert f"{tmp_path / 'prompts.jsonl'} line 2: the model input is" in message
    assert "context of 128 tokens" in message and "prompts.source" in message
    assert "prompting.examples" not in message  # the suite uses no in-context examples


def test_max_new_tokens_beyond_the_context_is_refused_at_load(config: RunConfig, tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, max_new=100_000))
    with pytest.raises(ConfigError, match=r"story.toml: generation.max_new_tokens: 100000 new tokens do not fit the "
                                          r"model's context of 128 tokens"):  # fmt: skip
        preflight(Runner(config), [suite])
    with pytest.raises(ConfigError, match=r"generation.max_new_tokens: 100000 new tokens .* context of 128"):
        Runner(config).run(suite)  # without the preflight, refused when the model loads


def test_preflight_stops_an_unreachable_judge_within_seconds(config: RunConfig, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    suite = load_suite(write_suite(tmp_path, judge="openai:judge-model"))
    start = time.monotonic()
    with pytest.raises(PreflightError, match=rf"cannot reach the judge openai:judge-model at {url} "):
        preflight(Runner(replace(config, judge_base_url=url)), [suite])
    assert time.monotonic() - start < 5


def test_preflight_reports_a_broken_prompt_file_once(config: RunConfig, tmp_path: Path) -> None:
    path = write_suite(tmp_path)
    with (tmp_path / "prompts.jsonl").open("a") as fh:
        fh.write('{"id": "p9", "text": \n')
    with pytest.raises(ConfigError, match=r"prompts.jsonl: line 5: broken JSON"):
        preflight(Runner(config), [load_suite(path)])


def test_preflight_opens_each_index_once_and_names_a_broken_one(
    config: RunConfig, tiny_index: Path, tmp_path: Path
) -> None:
    import shutil

    suite = load_suite(write_suite(tmp_path))
    good = Runner(replace(config, originality=f"infini-gram:{tiny_index}"))
    preflight(good, [suite, suite])
    assert good.models.opened.count(f"originality infini-gram:{tiny_index}") == 1  # two suites, one open
    broken = tmp_path / "broken-idx"
    shutil.copytree(tiny_index, broken)
    for table in broken.glob("table.*"):
        table.unlink()
    runner = Runner(replace(config, originality=f"infini-gram:{broken}"))
    with pytest.raises((ConfigError, HarnessError), match=str(broken)):
        preflight(runner, [suite, suite])


def test_preflight_resolves_a_hub_id_before_anything_loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Offline, a hub id missing from the local hub cache stops the run at preflight in one line."""
    from pytest_novelty.infra.errors import NoveltyError
    from pytest_novelty.pipeline.preflight import check_checkpoint_identity

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(NoveltyError, match=r"huggingface-cli download org/model") as caught:
        check_checkpoint_identity("org/model")
    assert "\n" not in str(caught.value)
    check_checkpoint_identity("demo")  # not a hub id: nothing to resolve


def test_a_judge_inconsistent_with_itself_is_a_warning_in_the_table(
    config: RunConfig, tmp_path: Path, judge_server: FakeOpenAI
) -> None:
    """The fake judge scores each of an answer's 5 samples one point higher than the last (mod 6), so
    every answer's samples span four or more points: the table warns, naming the bound."""
    from pytest_novelty.gate.record import CaseRecord
    from pytest_novelty.pipeline.export import suite_data
    from pytest_novelty.report.terminal import gate_summary

    write_suite(tmp_path)
    text = suite_toml(max_new_tokens=8, ngrams=[4], judge="openai:judge-model", judge_samples=5,
                      scoring="max_judge_spread = 0.5")  # fmt: skip
    (tmp_path / "story.toml").write_text(text)
    result = Runner(replace(config, judge_base_url=judge_server.url)).run(load_suite(tmp_path / "story.toml"))
    consistency = result.measured.judge_consistency
    assert consistency is not None and consistency.answers == 8 and consistency.wide_share == 1.0
    assert consistency.mean_sd > 1.0
    record = CaseRecord("story", "quality", ">=", 0.0, 0.5, "passed")
    (warning,) = [line for line in gate_summary([record], {"story": suite_data(result, None)}) if "consistency" in line]
    assert warning.startswith("warning: story: judge consistency: mean sd")
    assert "100% of 8 answers span 2+ points, above scoring.max_judge_spread = 0.5" in warning
