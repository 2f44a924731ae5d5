"""The tail file a suite's ``[gate] tail`` names: both shapes, the version, the peak guard, the write."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_novelty.gate.tail import choose_tail
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.suites.tail_file import TAIL_FORMAT, has_entry, read_provenance, read_tail_ids, write_tail_file


def test_a_written_file_reads_back_and_old_readers_read_it_too(tmp_path: Path) -> None:
    path = tmp_path / "tail.json"
    write_tail_file(path, {"q_at_tail@0.1": ["b", "a"], "novelty_at_peak@0.1": ["z"]}, {"n": 4, "pool": ["demo"]})
    assert read_tail_ids(path, "q_at_tail@0.1") == ["b", "a"]  # ranking order kept
    assert read_tail_ids(path, "novelty_at_peak@0.1") == ["z"]
    assert choose_tail("q_at_tail@0.1", tail_file=path).ids == ["b", "a"]  # the gate reads the same
    assert read_provenance(path) == {"n": 4, "pool": ["demo"]}
    data = json.loads(path.read_text())
    assert data["format"] == TAIL_FORMAT
    # What the object shape always was: a metric maps to its list, so an older reader finds its entry.
    assert data["q_at_tail@0.1"] == ["b", "a"]
    assert not list(tmp_path.glob(".tail.json.*"))  # written through a temporary file, moved into place


def test_a_hand_written_list_is_a_tail_never_a_peak(tmp_path: Path) -> None:
    path = tmp_path / "tail.json"
    path.write_text('["p1", "p2"]')
    assert read_tail_ids(path, "q_at_tail@0.3") == ["p1", "p2"]
    assert has_entry(path, "q_at_tail@0.3") and not has_entry(path, "novelty_at_peak@0.3")
    assert read_provenance(path) is None
    with pytest.raises(ConfigError) as info:
        read_tail_ids(path, "novelty_at_peak@0.3")
    message = str(info.value)
    assert str(path) in message and "not a peak" in message and "tail build" in message and "\n" not in message


@pytest.mark.parametrize(
    ("content", "words"),
    [('{"format": 9, "q_at_tail@0.1": ["a"]}', "format 9, newer than"), ('{"format": "1"}', "whole number"),
     ('{"q_at_tail@0.1": ["a"]}', 'no "novelty_at_peak@0.1" entry')],
)  # fmt: skip
def test_a_file_it_cannot_use_is_one_line(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "tail.json"
    path.write_text(content)
    metric = "novelty_at_peak@0.1" if "entry" in words else "q_at_tail@0.1"
    with pytest.raises(ConfigError) as info:
        read_tail_ids(path, metric)
    assert words in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)


def test_writing_refuses_what_is_not_a_tail_or_a_peak(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="quality"):
        write_tail_file(tmp_path / "t.json", {"quality": ["a"]}, {})
    with pytest.raises(ValueError, match=r"q_at_tail@0\.1"):
        write_tail_file(tmp_path / "t.json", {"q_at_tail@0.1": []}, {})
    assert not (tmp_path / "t.json").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a full file system needs root")
def test_a_full_disk_keeps_the_old_file(tmp_path: Path) -> None:
    import subprocess

    folder = tmp_path / "full"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], check=True)
    try:
        path = folder / "tail.json"
        write_tail_file(path, {"q_at_tail@0.1": ["a"]}, {})
        with pytest.raises(OSError):
            write_tail_file(path, {"q_at_tail@0.1": ["a"]}, {"scores": "x" * 200_000})
        assert read_tail_ids(path, "q_at_tail@0.1") == ["a"]
        assert [p.name for p in folder.iterdir()] == ["tail.json"]  # no torn temporary file left
    finally:
        subprocess.run(["umount", str(folder)], check=True)
