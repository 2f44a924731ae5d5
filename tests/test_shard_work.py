"""What a shard leaves in its cache, and what a merge run finds there: answers and scores by content,
and the shards' records that name a missing part before anything is generated."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_novelty.infra.errors import HarnessError
from pytest_novelty.pipeline.config import RunConfig
from pytest_novelty.pipeline.models import SessionModels
from pytest_novelty.pipeline.scores import lookup
from pytest_novelty.pipeline.shard_records import ShardRecords, merge_check, run_identity
from pytest_novelty.pipeline.shards import Shard
from pytest_novelty.suites.prompts import Prompt


def test_a_text_scored_in_one_run_is_found_in_another_whatever_its_company(tmp_path: Path, tiny_index: Path) -> None:
    """A shard scores its own answers; the merge run asks for all of them at once and finds each one
    (before, the answers were cached by chunks of texts, and no chunk of the whole was ever scored)."""
    spec = f"infini-gram:{tiny_index}"
    models = SessionModels(RunConfig(model="m", cache_dir=tmp_path / "cache", device="cpu"))
    texts = ["Lily saw a ball near the tree.", "Tom and Mia went to the park.", "A purple comet hummed softly.",
             "They were happy and played all day."]
    part, _ = lookup(models, spec, texts[:2], [4, 5], "part one")
    other, _ = lookup(models, spec, texts[2:], [4, 5], "part two")
    whole, looked_up = lookup(models, spec, [texts[3], *texts, texts[0]], [4, 5], "the merge run")
    assert looked_up == 0
    assert whole == [other[1], *part, *other, part[0]]
    fresh, again = lookup(SessionModels(RunConfig(model="m", cache_dir=tmp_path / "other", device="cpu")), spec,
                          texts, [4, 5], "a single run")
    assert again == len(texts) and fresh == [*part, *other]  # the same answers as scored alone


def _prompts(n: int) -> list[Prompt]:
    return [Prompt(id=f"p{i}", task="story", text=f"prompt {i}") for i in range(n)]


def _config(tmp_path: Path, **settings: object) -> RunConfig:
    config = RunConfig(model="m", cache_dir=tmp_path / "cache", **settings)  # type: ignore[arg-type]
    return config


def _record(config: RunConfig, keys: list[str], parts: dict[int, list[str]], count: int) -> None:
    records = ShardRecords(config.cache_dir)
    for index, prompts in parts.items():
        records.note(run_identity(keys), Shard(index, count), "story", prompts)


def test_a_plain_run_is_never_stopped(tmp_path: Path) -> None:
    config = _config(tmp_path)
    keys = [f"key{i}" for i in range(6)]
    _record(config, ["other", "keys"], {1: ["p0"], 2: []}, 2)  # another run's records
    merge_check(config, "story", _prompts(6))(keys, [0, 1, 2])  # no record of this run: it generates


def test_a_missing_shard_is_named_before_generating(tmp_path: Path) -> None:
    config = _config(tmp_path)
    keys = [f"key{i}" for i in range(6)]
    _record(config, keys, {1: ["p0", "p3"], 3: ["p2", "p5"]}, 3)  # shard 2 (p1, p4) never merged
    with pytest.raises(HarnessError) as caught:
        merge_check(config, "story", _prompts(6), "demo @ 1234")(keys, [1, 4])
    message = str(caught.value)
    assert "holds no part of shard 2 of 3" in message and "no answers for 2 of 6 prompts of demo @ 1234" in message
    assert "pytest-novelty cache merge" in message and "--novelty-fill-missing-shards" in message
    assert "\n" not in message


def test_the_command_line_is_told_its_own_option(tmp_path: Path) -> None:
    config = _config(tmp_path, front="cli")
    keys = [f"key{i}" for i in range(4)]
    _record(config, keys, {1: ["p0", "p2"]}, 2)
    with pytest.raises(HarnessError, match="pass --fill-missing-shards to generate"):
        merge_check(config, "story", _prompts(4))(keys, [1, 3])


def test_answers_lost_after_every_shard_recorded_its_part(tmp_path: Path) -> None:
    config = _config(tmp_path)
    keys = [f"key{i}" for i in range(4)]
    _record(config, keys, {1: ["p0", "p2"], 2: ["p1", "p3"]}, 2)
    with pytest.raises(HarnessError, match="shard 2 of 2 recorded its part done") as caught:
        merge_check(config, "story", _prompts(4))(keys, [3])
    assert "left out as damaged" in str(caught.value)


def test_filling_missing_shards_says_so_and_goes_on(tmp_path: Path, notices: list[str]) -> None:
    config, lines = _config(tmp_path, fill_missing_shards=True), notices
    keys = [f"key{i}" for i in range(4)]
    _record(config, keys, {1: ["p0", "p2"]}, 2)
    merge_check(config, "story", _prompts(4))(keys, [1, 3])
    assert lines == ["[novelty] story: generating the answers of 2 prompts that shard 2 of 2 did not bring "
                     "(--novelty-fill-missing-shards)"]


def test_the_records_are_content_keyed(tmp_path: Path) -> None:
    """Two shards writing the same record (a shard run twice, or merged twice) leave one entry."""
    config = _config(tmp_path)
    keys = ["b", "a"]
    _record(config, keys, {1: ["p1", "p0"]}, 2)
    _record(config, list(reversed(keys)), {1: ["p0", "p1"]}, 2)  # the same run, its keys in another order
    splits = ShardRecords(config.cache_dir).splits(run_identity(keys))
    assert splits == {2: {1: frozenset({"p0", "p1"}), 2: None}}
    assert len(list((config.cache_dir / "shards").rglob("*.json"))) == 2  # the split's, and shard 1's
