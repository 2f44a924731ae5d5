"""Rate limits of the web APIs: a setting every remote backend takes, the public hosts' default,
and the plan a run announces before its first request; against a loopback server that answers
429 above its rate, as the public services do."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import HarnessError
from pytest_novelty.infra.progress import notices_to
from pytest_novelty.scoring.originality import open_backend, score_texts
from pytest_novelty.scoring.originality.api import PUBLIC_RATE, InfiniGramApiBackend, QueryPlan
from tests.scoring.originality.test_originality_api import FAST, INDEX, MINI, NS, World
from tests.servers.infinigram_api import FakeInfiniGram

RATE = 20.0  # requests a second: the test takes a few seconds


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World(tmp_path_factory.mktemp("orig-rate"))


def backend(world: World, server: FakeInfiniGram, cache: Path | None, **options: object) -> InfiniGramApiBackend:
    settings = {**FAST, "url": server.url, "tokenizer": str(world.tokenizer), **options}
    made = open_backend(f"infini-gram-api:{INDEX}", cache_dir=cache, **settings)
    assert isinstance(made, InfiniGramApiBackend)
    return made


def test_the_client_keeps_the_rate_the_server_allows(world: World) -> None:
    """The server refuses what comes above 20 a second (burst 3); at rate=20 the client sends
    every query within it and finishes with exact answers, across the search's rounds."""
    texts = world.texts
    with world.server(rate=RATE, burst=3) as server:
        paced = backend(world, server, None, rate=RATE, concurrency=8)
        results = score_texts(paced, texts, NS)
        assert server.limited == 0 and server.request_count == paced.questions > RATE  # over a second's worth
    with world.server() as plain:
        expected = score_texts(backend(world, plain, None), texts, NS)
    assert [r.originality for r in results] == [r.originality for r in expected]
    # Without the setting the same client runs into the limit at once.
    with world.server(rate=RATE, burst=3) as server:
        with pytest.raises(HarnessError, match="HTTP 429"):
            score_texts(backend(world, server, None, concurrency=8, max_attempts=1), texts, NS)
        assert server.limited > 0


def test_public_hosts_default_to_their_documented_rate(world: World) -> None:
    tokenizer = str(world.tokenizer)
    public = open_backend(f"infini-gram-api:{INDEX}", tokenizer=tokenizer)
    assert public.client.connection.rate == PUBLIC_RATE  # type: ignore[attr-defined]
    assert open_backend(f"infini-gram-mini:{MINI}").client.connection.rate == PUBLIC_RATE  # type: ignore[attr-defined]
    slower = open_backend(f"infini-gram-api:{INDEX}?rate=2", tokenizer=tokenizer)
    assert slower.client.connection.rate == 2.0  # type: ignore[attr-defined]
    unlimited = open_backend(f"infini-gram-api:{INDEX}?rate=0", tokenizer=tokenizer)
    assert unlimited.client.connection.rate == 0.0  # type: ignore[attr-defined]
    local = open_backend(f"infini-gram-api:{INDEX}?url=http://127.0.0.1:9/", tokenizer=tokenizer)
    assert local.client.connection.rate == 0.0  # type: ignore[attr-defined]


def test_the_plan_bounds_the_queries_and_counts_cached_answers(world: World, tmp_path: Path) -> None:
    lines: list[tuple[str, int]] = []
    with world.server() as server:
        api = backend(world, server, tmp_path, rate=1000.0)
        with notices_to(lambda line: lines.append((line, server.request_count))):
            plan = api.announce(world.texts, NS)
        assert lines == [(plan.line(), 0)]  # said before any request
        score_texts(api, world.texts, NS)
        sent = server.request_count
    assert 0 < plan.fewest <= sent <= plan.most and plan.reused == 0
    assert re.fullmatch(
        rf"\[novelty\] infini-gram-api: {plan.fewest:,} to {plan.most:,} count queries for 8 texts "
        r"\(~\d+ s at 1000/s\); 0 cached answers reused",
        plan.line(),
    )
    with world.server() as again:
        api = backend(world, again, tmp_path)
        rerun = api.plan(world.texts, NS)
        score_texts(api, world.texts, NS)
        assert again.request_count == 0
    # Every first question is cached now; the bound on the rest stays loose (the cached answers
    # settle them, but only the search knows which).
    assert (rerun.fewest, rerun.reused) == (0, sent) and rerun.most == plan.most - sent


def test_plan_lines_read_as_durations() -> None:
    plan = QueryPlan("infini-gram-api", texts=512, fewest=42_000, most=90_001, reused=1_200, rate=5.0, concurrency=8)
    assert plan.line() == (
        "[novelty] infini-gram-api: 42,000 to 90,001 count queries for 512 texts (~2 h 20 min to ~5 h at 5/s); "
        "1,200 cached answers reused"
    )
    free = QueryPlan("infini-gram-mini", texts=3, fewest=40, most=40, reused=0, rate=0.0, concurrency=8)
    assert free.line() == (
        "[novelty] infini-gram-mini: 40 count queries for 3 texts (8 in flight, no rate limit); 0 cached answers reused"
    )


@pytest.mark.slow
def test_a_run_announces_its_queries_before_the_first(
    tiny_checkpoint: Path, tiny_corpus: list[str], tmp_path: Path
) -> None:
    """Through the pipeline: the run's log hears the plan while the server has had no request,
    and the run then sends between the fewest and the most it announced."""
    from tokenizers import Tokenizer

    from pytest_novelty.pipeline.runner import RunConfig, Runner
    from pytest_novelty.suites.suite_file import load_suite
    from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder

    tokenizer = Tokenizer.from_file(str(tiny_checkpoint / "tokenizer.json"))
    docs = [tokenizer.encode(doc, add_special_tokens=False).ids for doc in tiny_corpus[:300]]
    folder = write_story_suite_folder(tmp_path / "suite", story_prompts(3), suite_toml(ngrams=[4, 5]))
    heard: list[tuple[str, int]] = []
    with FakeInfiniGram(token_indexes={INDEX: docs}) as server:
        spec = f"infini-gram-api:{INDEX}?url={server.url}&tokenizer={tiny_checkpoint}&rate=500"
        config = RunConfig(model=str(tiny_checkpoint), cache_dir=tmp_path / "cache", device="cpu", originality=spec)
        with notices_to(lambda line: heard.append((line, server.request_count))):
            Runner(config).run(load_suite(folder / "story.toml"))
        sent = server.request_count
    # One plan per lookup (the answers, then the prompts), each heard before its own requests.
    plans = [(line, before) for line, before in heard if "count queries" in line]
    assert [re.search(r"for (\d+) texts", line)[1] for line, _ in plans] == ["6", "3"]  # type: ignore[index]
    bounds = [[int(x.replace(",", "")) for x in re.findall(r"([\d,]+)(?: to ([\d,]+))? count", line)[0] if x]
              for line, _ in plans]  # fmt: skip
    fewest, most = (bound[0] for bound in bounds), (bound[-1] for bound in bounds)
    first, then = plans[0][1], plans[1][1]
    assert first == 0 and bounds[0][0] <= then <= bounds[0][-1]
    assert 0 < sum(fewest) <= sent <= sum(most)
