"""The remote parts of a run (a served model, an infini-gram web index) are preflighted and their
faults are harness errors, through the runner and through pytest.

Real HTTP on 127.0.0.1 throughout: the fake OpenAI server (served model), the fake infini-gram
mini server (originality by the web API), and a port where nothing listens. No checkpoint is
loaded: a served model is only an endpoint, and mini needs no tokenizer.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS, ConfigError, PreflightError
from pytest_novelty.pipeline.preflight import preflight
from pytest_novelty.pipeline.runner import RunConfig, Runner
from pytest_novelty.suites.schema import Suite
from pytest_novelty.suites.suite_file import load_suite
from tests.servers.infinigram_api import FakeInfiniGram
from tests.servers.openai_api import FakeOpenAI
from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder

MINI = "v2_stories"
PROMPTS = story_prompts(3)
CORPUS = [f"{p['text']} They played with a ball and were happy all day." for p in PROMPTS]


def closed_url(path: str = "/v1") -> str:
    with socket.socket() as sock:  # free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}{path}"


@pytest.fixture
def suites(tmp_path: Path) -> Path:
    thresholds = [("originality@2", 0.1), ("quality", 0.1)]  # empty answers would fail them: exit 1
    suite = suite_toml(samples=2, max_new_tokens=8, ngrams=[2], thresholds=thresholds)
    return write_story_suite_folder(tmp_path / "suites", PROMPTS, suite)


@pytest.fixture
def suite(suites: Path) -> Suite:
    return load_suite(suites / "story.toml")


@pytest.fixture
def mini() -> Iterator[FakeInfiniGram]:
    with FakeInfiniGram(text_indexes={MINI: CORPUS}) as server:
        yield server


@pytest.fixture
def model_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("NOVELTY_MODEL_API_KEY", raising=False)
    with FakeOpenAI() as server:
        yield server


def runner(tmp_path: Path, base_url: str, originality: str) -> Runner:
    config = RunConfig(
        model="openai:judge-model", model_base_url=base_url, originality=originality, cache_dir=tmp_path / "cache",
    )  # fmt: skip
    return Runner(config)


def mini_spec(url: str, index: str = MINI) -> str:
    return f"infini-gram-mini:{index}?url={url}"


# -- the preflight, through the runner --------------------------------------------------------------


def test_preflight_stops_a_run_whose_served_model_is_unreachable(tmp_path: Path, suite: Suite, mini) -> None:
    url = closed_url()
    with pytest.raises(PreflightError) as caught:
        preflight(runner(tmp_path, url, mini_spec(mini.url)), [suite])
    assert str(caught.value) == (
        f"cannot reach openai:judge-model at {url} (connection refused); is the server running and "
        "--model-base-url right?"
    )


def test_preflight_names_a_served_model_the_server_does_not_list(
    tmp_path: Path, suite: Suite, mini, model_server: FakeOpenAI
) -> None:
    model_server.models = ("llama-3-8b",)
    with pytest.raises(ConfigError, match=r"--model: .* does not serve 'judge-model'; it lists 'llama-3-8b'"):
        preflight(runner(tmp_path, model_server.url, mini_spec(mini.url)), [suite])
    assert model_server.requests == []  # nothing was generated


def test_preflight_stops_a_run_whose_web_index_is_unreachable(
    tmp_path: Path, suite: Suite, model_server: FakeOpenAI
) -> None:
    url = closed_url("/")
    with pytest.raises(PreflightError) as caught:
        preflight(runner(tmp_path, model_server.url, mini_spec(url)), [suite])
    assert str(caught.value) == (
        f"cannot reach the infini-gram-mini API at {url} (connection refused); check the address (option url= "
        "or $PYTEST_NOVELTY_INFINIGRAM_MINI_URL) and the network"
    )


def test_preflight_names_an_index_the_web_api_does_not_know(
    tmp_path: Path, suite: Suite, mini: FakeInfiniGram, model_server: FakeOpenAI
) -> None:
    with pytest.raises(PreflightError) as caught:
        preflight(runner(tmp_path, model_server.url, mini_spec(mini.url, "v2_nope")), [suite])
    assert "answered a test query, but the answer reports an error: Invalid index: 'v2_nope'" in str(caught.value)


def test_preflight_passes_healthy_remote_parts_with_one_query_each(
    tmp_path: Path, suite: Suite, mini: FakeInfiniGram, model_server: FakeOpenAI
) -> None:
    preflight(runner(tmp_path, model_server.url, mini_spec(mini.url)), [suite, suite])
    assert len(mini.requests) == 1 and model_server.requests == []  # GET /models is not a generation


# -- through pytest ---------------------------------------------------------------------------------


def gate(pytester: pytest.Pytester, suites: Path, tmp_path: Path, model: str, base_url: str, mini_url: str):
    return pytester.runpytest(
        f"--model={model}", f"--model-base-url={base_url}", "--model-revision=r1", f"--novelty-suites={suites}",
        f"--originality={mini_spec(mini_url)}", f"--novelty-cache={tmp_path / 'cache'}", "-p", "no:cacheprovider",
    )  # fmt: skip


def test_a_served_model_answering_null_text_is_a_harness_error_and_nothing_is_cached(
    pytester: pytest.Pytester, suites: Path, tmp_path: Path, mini: FakeInfiniGram, model_server: FakeOpenAI
) -> None:
    model_server.inject("null_text", times=-1)
    model = "openai:judge-model?backoff=0.01&max_attempts=2"
    broken = gate(pytester, suites, tmp_path, model, model_server.url, mini.url)
    assert broken.ret == HARNESS_EXIT_STATUS, broken.stdout.str()  # not 1: the served model did not fail
    cause = f"no usable answer from {model_server.url}/completions after 2 attempts (the reply's text is null)"
    assert cause in broken.stdout.str()
    model_server.clear_faults()  # the server is fixed: the rerun generates, it does not read empty answers
    fixed = gate(pytester, suites, tmp_path, model, model_server.url, mini.url)
    assert fixed.ret == pytest.ExitCode.OK, fixed.stdout.str()
    assert "6 samples generated in 2 batches (0 from cache)" in fixed.stdout.str()


def test_a_served_model_that_never_answers_is_a_harness_error_after_its_timeouts(
    pytester: pytest.Pytester, suites: Path, tmp_path: Path, mini: FakeInfiniGram, model_server: FakeOpenAI
) -> None:
    model_server.inject("hang", times=-1, seconds=20)  # GET /models answers; every completion hangs
    model = "openai:judge-model?timeout=0.5&max_retry_time=0.4&backoff=0.01"
    result = gate(pytester, suites, tmp_path, model, model_server.url, mini.url)
    assert result.ret == HARNESS_EXIT_STATUS, result.stdout.str()
    assert "after 1 attempt (timed out after 0.5 s each)" in result.stdout.str()


def test_a_warm_rerun_of_a_served_model_asks_its_server_nothing_but_still_checks_the_web_index(
    tmp_path: Path, suite: Suite, mini: FakeInfiniGram, model_server: FakeOpenAI
) -> None:
    cold = runner(tmp_path, model_server.url, mini_spec(mini.url))
    preflight(cold, [suite])
    first = cold.run(suite)
    assert model_server.model_lists == 1 and len(model_server.requests) == 6  # 3 prompts x 2 samples
    lists, completions, index_queries = model_server.model_lists, len(model_server.requests), len(mini.requests)
    warm = runner(tmp_path, model_server.url, mini_spec(mini.url))  # a new run over the same cache
    preflight(warm, [suite])
    again = warm.run(suite)
    assert model_server.model_lists == lists and len(model_server.requests) == completions  # no GET /models
    assert len(mini.requests) == index_queries + 1  # the web index still answers its one test query
    assert again.answers == first.answers and again.generated.work.cached_rows == 6


def test_a_served_model_whose_answers_are_all_cached_is_gated_while_its_server_is_down(
    tmp_path: Path, suite: Suite, mini: FakeInfiniGram, model_server: FakeOpenAI
) -> None:
    first = runner(tmp_path, model_server.url, mini_spec(mini.url)).run(suite)
    model_server.stop()  # the endpoint the answers were cached under no longer answers at all
    warm = runner(tmp_path, model_server.url, mini_spec(mini.url))
    preflight(warm, [suite])  # nothing to generate: no GET /models, so no "cannot reach"
    assert warm.run(suite).answers == first.answers
