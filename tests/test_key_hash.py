"""One key hash (``infra.storage.key_digest``) under every key of the package, with the values the
caches already hold: a generation's key and seed, a judge answer's key and a cache entry's name are
what the three hashes that came before it computed, so no cache written earlier is lost."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pytest_novelty.generation import prompt_key, row_seed
from pytest_novelty.infra.cache import Cache, entry_digest
from pytest_novelty.infra.storage import key_digest, stable_hash
from pytest_novelty.scoring.judges.cache import answer_key, judge_key
from pytest_novelty.suites.schema import GenerationSettings

PARTS = [
    ("fingerprint", "Once upon a time", {"temperature": 0.7, "top_p": 1.0, "stop": ["\n\n"]}),
    ("naïve café ✓", [1, 2.5, None, True], {"b": {"z": 1, "a": [3]}}),
    ("", 0),
    (Path("/tmp/index"), ["x"]),  # a value JSON cannot hold: written by its str
]


def _written_before(parts: tuple[object, ...]) -> dict[str, str]:
    """The three hashes as the package computed them before they became one (its own code, kept here)."""
    spaced = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()
    out = {"stable_hash": hashlib.sha256(spaced).hexdigest()[:24]}
    try:
        compact = json.dumps(parts, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    except TypeError:
        return out
    out["answer_key"] = hashlib.sha256(compact.encode()).hexdigest()
    out["entry_digest"] = hashlib.sha256(compact.encode()).hexdigest()[:40]
    return out


@pytest.mark.parametrize("parts", PARTS)
def test_every_key_keeps_its_value(parts: tuple[object, ...]) -> None:
    before = _written_before(parts)
    assert stable_hash(*parts) == before["stable_hash"]
    if "answer_key" in before:
        assert answer_key(*parts) == before["answer_key"]
        assert entry_digest(list(parts)) == before["entry_digest"]


def test_a_string_key_is_named_by_its_own_text() -> None:
    key = "0123abcd/3"
    assert entry_digest(key) == hashlib.sha256(key.encode()).hexdigest()[:40]
    assert key_digest(key, length=40) == entry_digest(key)


def test_keys_of_the_layers_go_through_the_one_hash(tmp_path: Path) -> None:
    settings = GenerationSettings(temperature=0.7, samples=3)
    key = prompt_key("fp", "Once", settings)
    assert len(key) == 24 and int(key, 16) >= 0
    assert row_seed(key, 2) == int(stable_hash(key, 2)[:15], 16)
    judged = judge_key(kind="openai", model="m", prompt="p", response="r")
    assert len(judged) == 64
    store = Cache(tmp_path).namespace("answers")
    assert store.path(judged).name == f"{key_digest(judged, length=40)}.json"


def test_a_changed_part_changes_the_key() -> None:
    base = ("fp", "Once", {"temperature": 0.7})
    assert stable_hash(*base) != stable_hash("fp", "Once", {"temperature": 0.8})
    assert key_digest(list(base)) != key_digest(["fp", "Once", {"temperature": 0.8}])
    assert key_digest("a") != key_digest(["a"])  # a string is its own text, a list its JSON
