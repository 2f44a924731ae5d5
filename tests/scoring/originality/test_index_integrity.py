"""An index is checked against the checksums recorded at build: damage stops the run, a rerun reads nothing."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import HarnessError
from pytest_novelty.scoring.originality import INFO_FILE, open_backend, read_index
from tests.file_opens import opened_under


@pytest.fixture
def index(tiny_index: Path, tmp_path: Path) -> Path:
    """A private copy of a real index, free to damage."""
    return Path(shutil.copytree(tiny_index, tmp_path / "idx"))


def _overwrite_middle(file: Path, data: bytes) -> None:
    """Write ``data`` over the middle of ``file`` in place (the size stays the same)."""
    size = file.stat().st_size
    assert size > 2 * len(data)
    with file.open("r+b") as fh:
        fh.seek(size // 2)
        fh.write(data)


def _block(file: Path) -> int:
    """1 MiB, or 4 KiB for a small index."""
    return (1 << 20) if file.stat().st_size > (3 << 20) else 4096


def test_build_records_size_and_sha256_of_every_file(index: Path) -> None:
    meta = json.loads((index / INFO_FILE).read_text())
    written = {p.name for p in index.iterdir() if p.is_file() and p.name != INFO_FILE}
    assert set(meta["checksums"]) == written and {"tokenized.0", "table.0", "offset.0"} <= written
    for name, entry in meta["checksums"].items():
        data = (index / name).read_bytes()
        assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_zeros_in_the_suffix_array_stop_the_run(index: Path, tmp_path: Path) -> None:
    table = index / "table.0"
    _overwrite_middle(table, b"\0" * _block(table))
    with pytest.raises(HarnessError, match=r"table\.0 is damaged.*rebuild the index"):
        open_backend(f"infini-gram:{index}", cache_dir=tmp_path / "cache")


def test_random_bytes_in_the_tokens_stop_the_run(index: Path, tmp_path: Path) -> None:
    tokens = index / "tokenized.0"
    _overwrite_middle(tokens, os.urandom(_block(tokens)))
    with pytest.raises(HarnessError, match=r"tokenized\.0 is damaged.*rebuild the index"):
        open_backend(f"ngram-set:{index}", cache_dir=tmp_path / "cache")


def test_reopening_an_unchanged_index_reads_none_of_its_files(index: Path, tmp_path: Path) -> None:
    from pytest_novelty.infra.hashing import memo_at

    memo = memo_at(tmp_path / "memo")
    big = {str((index / n).resolve()) for n in ("tokenized.0", "table.0", "offset.0")}
    with opened_under(index) as opened:
        read_index(index, memo=memo)
    assert big <= set(opened)
    with opened_under(index) as opened:
        read_index(index, memo=memo)
    assert [Path(p).name for p in opened] == [INFO_FILE]
    # The memo never hides later damage: a write changes the file's stat, so it is read again.
    _overwrite_middle(index / "offset.0", b"\xff" * 64)
    with pytest.raises(HarnessError, match=r"offset\.0 is damaged"):
        read_index(index, memo=memo)


def test_open_backend_remembers_verified_files_in_its_cache(index: Path, tmp_path: Path) -> None:
    from pytest_novelty.infra.hashing import memo_at, stat_key

    open_backend(f"infini-gram:{index}", cache_dir=tmp_path / "cache")
    recorded = json.loads((index / INFO_FILE).read_text())["checksums"]
    memo = memo_at(tmp_path / "cache" / "index-checksums")
    for name in ("tokenized.0", "table.0", "offset.0"):
        assert memo.get(stat_key(index / name)) == recorded[name]["sha256"]


def test_an_index_without_checksums_is_used_with_one_note(
    index: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    info = index / INFO_FILE
    meta = json.loads(info.read_text())
    del meta["checksums"]
    info.write_text(json.dumps(meta))
    backend = open_backend(f"infini-gram:{index}", cache_dir=tmp_path / "cache")
    assert backend is not None
    notes = [line for line in capsys.readouterr().err.splitlines() if "checksums" in line]
    assert len(notes) == 1 and str(index.resolve()) in notes[0]
    # Its own metadata is still checked: a shortened token file is refused.
    tokens = index / "tokenized.0"
    with tokens.open("r+b") as fh:
        fh.truncate(tokens.stat().st_size - 2)
    with pytest.raises(HarnessError, match="shard 0 is damaged"):
        read_index(index)


def test_a_run_against_a_damaged_index_stops_with_the_file_named(
    index: Path, tiny_checkpoint: Path, tmp_path: Path
) -> None:
    from pytest_novelty.pipeline.runner import RunConfig, Runner
    from pytest_novelty.suites.suite_file import load_suite

    (tmp_path / "prompts.jsonl").write_text(json.dumps({"id": "p0", "text": "Lily went to the park."}) + "\n")
    suite_file = tmp_path / "story.toml"
    suite_file.write_text(
        'task = "story"\n[prompts]\nsource = "jsonl:prompts.jsonl"\n[generation]\nsamples = 1\n'
        'max_new_tokens = 4\n[scoring]\njudge = "rules"\njudge_samples = 1\n'
        '[[thresholds]]\nmetric = "novelty@4"\nmin = 0.0\n'
    )
    table = index / "table.0"
    _overwrite_middle(table, b"\0" * _block(table))
    config = RunConfig(
        model=str(tiny_checkpoint), cache_dir=tmp_path / "cache", device="cpu", originality=f"infini-gram:{index}"
    )
    with pytest.raises(HarnessError, match=r"table\.0 is damaged"):
        Runner(config).run(load_suite(suite_file))
