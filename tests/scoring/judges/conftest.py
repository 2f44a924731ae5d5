"""Fixtures for the judge tests: a fake OpenAI-compatible server and a judge pointed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.scoring.judges import OpenAIJudge
from tests.scoring.judges.judge_helpers import SECRET
from tests.servers.openai_api import FakeOpenAI


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    """A fresh fake endpoint that requires the test key."""
    with FakeOpenAI(api_key=SECRET) as fake:
        yield fake


@pytest.fixture
def make_judge(server: FakeOpenAI, tmp_path: Path) -> Callable[..., OpenAIJudge]:
    """Build an ``openai:`` judge against ``server`` with fast retry settings; overrides by keyword."""

    def build(**overrides: Any) -> OpenAIJudge:
        settings: dict[str, Any] = {
            "base_url": server.url,
            "api_key": SECRET,
            "cache_dir": tmp_path / "cache",
            "timeout": 2.0,
            "backoff": 0.01,
            "max_backoff": 0.05,
            "concurrency": 8,
        }
        settings.update(overrides)
        return OpenAIJudge("judge-model", **settings)

    return build
