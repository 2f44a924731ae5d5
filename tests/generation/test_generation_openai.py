"""``--model openai:NAME``: generation through an OpenAI-compatible endpoint.

Against a real ``transformers serve`` on 127.0.0.1 serving the tiny checkpoint (the completions
endpoint, and the whole gate through pytest), and against the fake chat server of
``tests/servers`` for what a healthy local server never does (errors, rate limits, keys).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_novelty.generation import Batch, generate
from pytest_novelty.generation.backends import open_generator
from pytest_novelty.generation.openai import OpenAIGenerator
from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.suites.schema import GenerationSettings
from tests.generation.conftest import Served, start_server, stop_server, write_story_suite
from tests.generation.tiny_models import build_family_checkpoint
from tests.servers.openai_api import FakeOpenAI

SETTINGS = GenerationSettings(samples=3, temperature=0.7, top_p=0.9, max_new_tokens=8, seed=5, stop=("\n",))
SECRET = "sk-test-0123456789abcdef"
CHAT = [[{"role": "user", "content": f"Write about {thing}."}] for thing in ("cats", "boats", "kites")]


# -- a real server -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_greedy_completions_equal_the_local_checkpoint(served: Served, tiny_checkpoint: Path) -> None:
    texts = ["Lily and Tom went to the park.", "Mia saw a big dog"]
    settings = GenerationSettings(samples=1, temperature=0.0, max_new_tokens=10)
    before = served.requests("/v1/completions")
    remote, stats = generate(open_generator(f"openai:{served.model}", base_url=served.url), texts, settings)
    local, _ = generate(open_generator(str(tiny_checkpoint), device="cpu"), texts, settings)
    assert served.requests("/v1/completions") - before == 2 and stats.rows == 2
    assert remote == local and all(a[0] for a in remote)


@pytest.mark.slow
def test_the_preflight_finds_the_name_a_real_server_lists(served: Served) -> None:
    """``transformers serve`` lists the checkpoint it serves under the path it was given."""
    OpenAIGenerator(f"openai:{served.model}", base_url=served.url).check()
    with pytest.raises(ConfigError) as caught:
        OpenAIGenerator("openai:tiny", base_url=served.url).check()
    assert f"does not serve 'tiny'; it lists {served.model!r}" in str(caught.value)


@pytest.mark.slow
def test_pytest_gates_a_served_model(
    pytester: pytest.Pytester, served: Served, tiny_index: Path, tmp_path: Path
) -> None:
    suites = write_story_suite(tmp_path / "suites")
    args = [
        f"--model=openai:{served.model}",
        f"--model-base-url={served.url}",
        f"--originality=infini-gram:{tiny_index}",
        f"--novelty-suites={suites}",
        f"--novelty-cache={tmp_path / 'cache'}",
        "-p",
        "no:cacheprovider",
    ]
    before = served.requests("/v1/completions")
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=2)
    assert served.requests("/v1/completions") - before == 4 * 2  # one request per (prompt, sample)
    result.stdout.fnmatch_lines(["*novelty gate*", "suite story*", "*originality@4*>= 0*pass*", "*quality*pass*"])
    err = result.stdout.str() + result.stderr.str()
    assert "no --model-revision pinned" in err and err.count("no --model-revision pinned") == 1
    assert f"generated in 1 batch on {served.url}" in err

    again = pytester.runpytest_subprocess(*args, "--model-revision=r1")  # another revision: not the cached answers
    again.assert_outcomes(passed=2)
    assert served.requests("/v1/completions") - before == 2 * 4 * 2
    assert "no --model-revision pinned" not in again.stdout.str() + again.stderr.str()
    warm = pytester.runpytest_subprocess(*args, "--model-revision=r1")
    warm.assert_outcomes(passed=2)
    assert served.requests("/v1/completions") - before == 2 * 4 * 2  # all from the cache
    assert "0 samples generated in 0 batches (8 from cache)" in warm.stdout.str()


@pytest.mark.slow
def test_chat_inputs_go_to_the_chat_endpoint_and_its_template(tmp_path: Path, tiny_corpus: list[str]) -> None:
    """A Llama-layout chat checkpoint served by ``transformers serve``: messages go to the chat
    endpoint, the server applies the chat template, and greedy answers equal the local ones."""
    folder = build_family_checkpoint(tmp_path / "llama-chat", "llama", tiny_corpus)
    proc, server = start_server(folder, tmp_path / "serve.log")
    try:
        remote = OpenAIGenerator(f"openai:{server.model}", base_url=server.url)
        settings = GenerationSettings(samples=1, temperature=0.0, max_new_tokens=10)
        answers, _ = generate(remote, [remote.render(m) for m in CHAT], settings)
        assert server.requests("/v1/chat/completions") == 3 and server.requests("/v1/completions") == 0
    finally:
        stop_server(proc)
    local = open_generator(str(folder), device="cpu")
    expected, _ = generate(local, [local.render(m) for m in CHAT], settings)
    assert answers == expected and any(a[0] for a in answers)


@pytest.mark.slow
def test_a_served_model_needs_originality(pytester: pytest.Pytester, tmp_path: Path) -> None:
    suites = write_story_suite(tmp_path / "suites")
    result = pytester.runpytest(
        "--model=openai:some-model", "--model-base-url=http://127.0.0.1:9/v1", f"--novelty-suites={suites}",
        f"--novelty-cache={tmp_path / 'cache'}", "-p", "no:cacheprovider",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert lines == [
        "ERROR: --originality: a served model has no checkpoint folder to find novelty-index/ in; pass "
        "--originality infini-gram:DIR (an index of its training corpus)"
    ]


# -- the protocol, against the fake chat server ---------------------------------------------------------


def test_each_row_is_a_seeded_request_with_the_suite_settings() -> None:
    with FakeOpenAI(latency=0.05) as server:
        gen = OpenAIGenerator("openai:judge-model", base_url=server.url, concurrency=8)
        texts = [gen.render(m) for m in CHAT]
        answers, stats = generate(gen, texts, SETTINGS)
        bodies = list(server.requests)
        # The seeds are the rows' own: a rerun sends the same ones.
        generate(OpenAIGenerator("openai:judge-model", base_url=server.url), texts, SETTINGS)
        again = server.requests[len(bodies) :]
    assert stats.rows == 9 and [len(a) for a in answers] == [3, 3, 3]
    assert len(bodies) == 9 and server.max_in_flight > 1  # many requests in flight
    assert {b["temperature"] for b in bodies} == {0.7} and {b["top_p"] for b in bodies} == {0.9}
    assert {b["max_tokens"] for b in bodies} == {8} and all(b["stop"] == ["\n"] for b in bodies)
    assert all("top_k" not in b for b in bodies)  # OpenAI itself does not know top_k: sent only when set
    assert len({b["seed"] for b in bodies}) == 9  # one seed per row
    asked = sorted(b["messages"][0]["content"] for b in bodies)
    assert asked == sorted(m[0]["content"] for m in CHAT for _ in range(3))
    assert sorted(b["seed"] for b in again) == sorted(b["seed"] for b in bodies)


def test_rate_limits_and_server_errors_are_retried() -> None:
    with FakeOpenAI() as server:
        server.inject("status", status=429, retry_after="0", times=2, match="cats")
        server.inject("status", status=503, times=1, match="boats")
        server.inject("drop", times=1, match="kites")
        gen = OpenAIGenerator("openai:judge-model", base_url=server.url, backoff=0.01)
        answers = gen.sample(Batch([gen.render(m) for m in CHAT], [1, 2, 3], SETTINGS))
    assert all(answers) and len(server.requests) == 3 + 4 and gen.requests_sent == 7


def test_a_row_that_keeps_failing_stops_the_run_in_one_line() -> None:
    with FakeOpenAI() as server:
        server.inject("status", status=500, times=-1, match="boats", message="engine overloaded")
        gen = OpenAIGenerator("openai:judge-model", base_url=server.url, backoff=0.01, max_attempts=3)
        with pytest.raises(HarnessError) as info:
            gen.sample(Batch([gen.render(m) for m in CHAT], [1, 2, 3], SETTINGS))
    assert str(info.value) == (
        f"openai:judge-model: no answer from {server.url}/chat/completions after 3 attempts "
        "(HTTP 500: engine overloaded)"
    )


def test_the_key_is_sent_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("NOVELTY_MODEL_API_KEY", SECRET)
    with FakeOpenAI(api_key=SECRET) as server:
        gen = OpenAIGenerator("openai:judge-model", base_url=server.url)
        assert gen.sample(Batch([gen.render(CHAT[0])], [1], SETTINGS))[0]
        assert server.authorized == [True]
        monkeypatch.setenv("NOVELTY_MODEL_API_KEY", "sk-wrong-0123456789")
        wrong = OpenAIGenerator("openai:judge-model", base_url=server.url)
        with pytest.raises(HarnessError, match="refused the key") as info:
            wrong.sample(Batch([wrong.render(CHAT[0])], [1], SETTINGS))
    assert "sk-wrong" not in str(info.value) and SECRET not in repr(gen) + repr(vars(gen))


def test_an_unknown_model_is_one_line() -> None:
    with FakeOpenAI(models=("other",)) as server:
        gen = OpenAIGenerator("openai:judge-model", base_url=server.url)
        with pytest.raises(HarnessError, match=r"not found \(HTTP 404: The model 'judge-model' does not exist"):
            gen.sample(Batch([gen.render(CHAT[0])], [1], SETTINGS))


def test_cache_key_covers_url_name_and_revision_but_not_credentials(tmp_path: Path) -> None:
    def identity_id(url: str, name: str = "openai:m", revision: str | None = None) -> str:
        return OpenAIGenerator(name, base_url=url, revision=revision).identity_id

    base = identity_id("http://gpu:8000/v1")
    assert identity_id("http://user:pw@gpu:8000/v1/") == base
    assert len({base, identity_id("http://gpu:8001/v1"), identity_id("http://gpu:8000/v1", "openai:n"),
                identity_id("http://gpu:8000/v1", revision="r2")}) == 4  # fmt: skip
    with FakeOpenAI() as server:
        texts = [OpenAIGenerator("openai:judge-model", base_url=server.url).render(CHAT[0])]
        generate(OpenAIGenerator("openai:judge-model", base_url=server.url), texts, SETTINGS, cache_dir=tmp_path)
        _, warm = generate(OpenAIGenerator("openai:judge-model", base_url=server.url), texts, SETTINGS,
                           cache_dir=tmp_path)  # fmt: skip
        _, pinned = generate(OpenAIGenerator("openai:judge-model", base_url=server.url, revision="r1"), texts,
                             SETTINGS, cache_dir=tmp_path)  # fmt: skip
    assert (warm.rows, warm.cached_rows, pinned.rows) == (0, 3, 3)


def test_unpinned_revision_is_said_once(notices: list[str]) -> None:
    lines = notices
    OpenAIGenerator("openai:m", base_url="http://gpu:8000/v1")
    OpenAIGenerator("openai:m", base_url="http://gpu:8000/v1", revision="abc")
    assert len(lines) == 1 and "no --model-revision pinned" in lines[0] and "http://gpu:8000/v1" in lines[0]


@pytest.mark.parametrize(
    ("model", "url", "message"),
    [
        ("openai:m", None, "--model-base-url: openai:m is served: pass its endpoint with --model-base-url"),
        ("openai:m", "gpu:8000", "is not an http(s) URL"),
        ("openai:", "http://gpu/v1", "a served model is openai:NAME"),
    ],
)
def test_bad_served_model_options_are_one_line(model: str, url: str | None, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        open_generator(model, base_url=url)


def test_top_k_is_sent_when_the_suite_sets_it() -> None:
    gen = OpenAIGenerator("openai:m", base_url="http://gpu:8000/v1")
    path, body = gen.body("Once upon a time", 2**62 + 5, replace(SETTINGS, top_k=40))
    assert path == "/completions" and body["prompt"] == "Once upon a time" and body["top_k"] == 40
    assert 0 <= body["seed"] < 2**31
