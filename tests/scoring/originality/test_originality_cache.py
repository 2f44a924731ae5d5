"""The web API answer cache survives damage: every entry garbled or edited, the next run asks again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_novelty.scoring.originality import open_backend, score_texts
from tests.scoring.originality.test_originality_api import FAST, INDEX, NS, World, check_tokens, world  # noqa: F401


def _garble(path: Path) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[:8] + os.urandom(max(16, len(raw) // 2)))


def _edit(path: Path) -> None:
    """Other valid JSON: a count of 0 (never seen) or 5 where the API said otherwise."""
    try:
        data = json.loads(path.read_text())
    except ValueError:
        return _garble(path)  # a database file: garble it
    if isinstance(data, dict) and "value" in data:
        data["value"] = 0 if data["value"] else 5
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("damage", [_garble, _edit], ids=["garbled", "edited"])
def test_damaged_answers_are_asked_again(world: World, tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    cache = tmp_path / "cache"
    with world.server() as server:
        settings = {**FAST, "url": server.url, "tokenizer": str(world.tokenizer)}
        first = score_texts(open_backend(f"infini-gram-api:{INDEX}", cache_dir=cache, **settings), world.texts, NS)
        asked = server.request_count
        files = [p for p in cache.rglob("*") if p.is_file()]
        assert files and asked > 0
        for path in files:
            damage(path)
        again = score_texts(open_backend(f"infini-gram-api:{INDEX}", cache_dir=cache, **settings), world.texts, NS)
        assert server.request_count > asked  # nothing damaged was trusted
    check_tokens(world, world.texts, again)
    assert [r.originality for r in again] == [r.originality for r in first]
