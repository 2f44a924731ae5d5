"""A whole run over a damaged cache: every kind of cache file garbled or edited, the rerun recomputes.

The run is real: the tiny checkpoint generates, the tiny infini-gram index scores originality, and
an ``openai:`` judge on a local fake endpoint grades, so every kind of cache entry is written.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.infra.progress import notices_to
from pytest_novelty.pipeline.runner import RunConfig, Runner
from pytest_novelty.suites.suite_file import load_suite
from tests.servers.openai_api import FakeOpenAI
from tests.suite_text import suite_toml

pytestmark = pytest.mark.slow

SUITE = suite_toml(
    max_new_tokens=10, batch_size=8, ngrams=[4, 5], judge="openai:judge-model", judge_samples=2,
    thresholds=[("novelty@5", 0.0)],
)
PROMPTS = ["Lily went to the park with her red ball.", "Tom and Mia saw a bird.", "Ben had a cake.", "Sue sang."]


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def config(tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path, server: FakeOpenAI) -> RunConfig:
    lines = [json.dumps({"id": f"p{i}", "text": t}) + "\n" for i, t in enumerate(PROMPTS)]
    (tmp_path / "prompts.jsonl").write_text("".join(lines))
    (tmp_path / "story.toml").write_text(SUITE)
    return RunConfig(
        model=str(tiny_checkpoint),
        cache_dir=tmp_path / "cache",
        device="cpu",
        originality=f"infini-gram:{tiny_index}",
        judge_base_url=server.url,
    )


def _garble(path: Path) -> None:
    """Keep the first bytes (a file's magic), replace the rest with noise."""
    raw = path.read_bytes()
    path.write_bytes(raw[:8] + os.urandom(max(16, len(raw) // 2)))


def _tamper(value: Any) -> Any:
    """Other valid JSON of the same shape: texts and numbers changed."""
    if isinstance(value, str):
        return "tampered " + value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return value + 1 if isinstance(value, int) else value / 2 + 0.25
    if isinstance(value, list):
        return [_tamper(v) for v in value]
    return {k: _tamper(v) for k, v in value.items()}


def _edit(path: Path) -> None:
    """Edit a JSON entry by hand into other valid JSON (an entry's payload only, where it has one)."""
    try:
        data = json.loads(path.read_text())
    except ValueError:
        return _garble(path)  # not JSON (a database file): garble it instead
    if isinstance(data, dict) and "value" in data:
        data["value"] = _tamper(data["value"])
    else:
        data = _tamper(data)
    path.write_text(json.dumps(data))


def _same(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k]) or (math.isnan(a[k]) and math.isnan(b[k])) for k in a)


@pytest.mark.parametrize("damage", [_garble, _edit], ids=["garbled", "edited"])
def test_every_cache_file_damaged_the_rerun_recomputes_the_same_numbers(
    config: RunConfig, server: FakeOpenAI, tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    suite = load_suite(tmp_path / "story.toml")
    first = Runner(config).run(suite)
    assert first.scores.judge_requests > 0
    files = [p for p in config.cache_dir.rglob("*") if p.is_file()]
    kinds = {p.relative_to(config.cache_dir).parts[0] for p in files}
    assert {"generations", "originality-scores", "judge"} <= kinds
    for path in files:
        damage(path)
    requests = server.request_count

    lines: list[str] = []
    with notices_to(lines.append):
        again = Runner(config).run(suite)  # no exception: damage is never raised

    assert again.answers == first.answers
    assert _same(again.metrics, first.metrics)
    assert again.generated.work.rows == len(PROMPTS) * 2  # nothing damaged was trusted
    assert again.scores.lookups > 0 and server.request_count > requests
    assert again.cache_repaired == len(files)
    assert any(f"warning: {len(files)} damaged cache entries dropped and recomputed" in line for line in lines)

    third = Runner(config).run(suite)  # the repaired cache serves the next run whole
    assert (third.generated.work.rows, third.cache_repaired) == (0, 0)
    assert third.answers == first.answers and _same(third.metrics, first.metrics)


def test_an_originality_chunk_with_a_wrong_layout_is_scored_again(config: RunConfig, tmp_path: Path) -> None:
    suite = load_suite(tmp_path / "story.toml")
    first = Runner(config).run(suite)
    for path in (config.cache_dir / "originality-scores").rglob("*.json"):
        data = json.loads(path.read_text())
        rows = data["value"] if isinstance(data, dict) else data
        wrong = [{"scores": r} for r in rows]  # valid JSON, other layout
        if isinstance(data, dict):
            data["value"] = wrong
        else:
            data = wrong
        path.write_text(json.dumps(data))
    again = Runner(config).run(suite)
    assert _same(again.metrics, first.metrics) and again.scores.lookups > 0
