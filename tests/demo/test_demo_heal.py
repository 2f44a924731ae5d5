"""The prepared demo heals itself: damaged files are found on use and prepared again, with one line.

Every test damages a private copy of the real prepared demo (``copy_demo``), never the shared one,
and compares what it repaired with the shared copy.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_novelty.infra.hashing import file_digest
from pytest_novelty.infra.progress import notices_to
from pytest_novelty.pipeline import demo
from tests.conftest import copy_demo
from tests.file_opens import opened_under


@pytest.fixture
def cache(demo_assets: Path, tmp_path: Path) -> Path:
    """A private cache holding a copy of the prepared demo, its checksums recorded."""
    folder = copy_demo(demo_assets, tmp_path / "cache")
    demo.ensure_demo(folder, progress=False)  # a demo of an older version gets them here
    check = demo.check_demo(folder)
    assert check.ok and not check.legacy
    every = [p for p in demo.demo_dir(folder).rglob("*") if p.is_file() and not p.name.startswith(".")]
    assert check.files == len(every) - 1  # all but BUILD.json, which holds the checksums
    return folder


def _garble(file: Path) -> None:
    """Random bytes over the middle of ``file``, its size kept."""
    size = file.stat().st_size
    with file.open("r+b") as fh:
        fh.seek(size // 3)
        fh.write(os.urandom(max(1, min(4096, size // 3))))


def _truncate(file: Path) -> None:
    """Half of ``file`` lost, as an interrupted write leaves it."""
    with file.open("r+b") as fh:
        fh.truncate(file.stat().st_size // 2)


def _heal(cache: Path) -> list[str]:
    lines: list[str] = []
    with notices_to(lines.append):
        assert demo.ensure_demo(cache, progress=False) == demo.demo_dir(cache)
    return lines


def _damage_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if "damaged" in line]


@pytest.mark.parametrize(
    ("name", "damage"),
    [("index/novelty-index.json", _garble), ("index/table.0", _garble), ("index/offset.0", _truncate)],
    ids=["metadata-garbled", "table-garbled", "offsets-truncated"],
)
def test_a_damaged_index_is_rebuilt_with_one_line(cache: Path, demo_assets: Path, name: str, damage) -> None:
    folder = demo.demo_dir(cache)
    damage(folder / name)
    lines = _heal(cache)
    why = "bytes, 160000 recorded)" if damage is _truncate else "differs from its checksum)"
    assert len(lines) == 1 and lines[0].startswith(f"[novelty] the demo in {folder} is damaged ({name} ")
    assert why in lines[0]
    assert lines[0].endswith("; rebuilding its index (seconds)")
    assert demo.check_demo(cache).ok
    for file in ("table.0", "tokenized.0", "offset.0"):
        assert (folder / "index" / file).read_bytes() == (demo_assets / "index" / file).read_bytes(), file
    rebuilt, shared = (json.loads((f / "index" / "novelty-index.json").read_text()) for f in (folder, demo_assets))
    assert rebuilt["checksums"] == shared["checksums"] and rebuilt["words"] == shared["words"]
    from pytest_novelty.scoring.originality import read_index

    read_index(folder / "index")  # the index checks out against its own records too
    assert _heal(cache) == []  # repaired once, then quiet


@pytest.mark.slow
def test_damaged_weights_a_torn_tokenizer_and_a_lost_config_prepare_the_demo_again(
    cache: Path, demo_assets: Path
) -> None:
    folder = demo.demo_dir(cache)
    _garble(folder / "demo" / "model.safetensors")
    _truncate(folder / "demo-early" / "tokenizer.json")
    (folder / "demo-early" / "config.json").unlink()
    lines = _heal(cache)
    damaged = _damage_lines(lines)
    assert len(damaged) == 1, lines
    for name in ("demo/model.safetensors", "demo-early/tokenizer.json", "demo-early/config.json is missing"):
        assert name in damaged[0]
    assert "preparing it again: shipped weights of both checkpoints, corpus and index rebuilt here" in damaged[0]
    manifest = demo.read_manifest()
    assert manifest is not None
    for model in demo.DEMO_MODELS:
        assert file_digest(folder / model / "model.safetensors") == manifest["weights"][model]["sha256"]
        for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
            assert (folder / model / name).read_bytes() == (demo_assets / model / name).read_bytes(), (model, name)
    assert demo.check_demo(cache).ok and not list(cache.glob(".*damaged*")) and not list(cache.glob(".*staging"))


def test_a_warm_check_reads_none_of_the_demo_files(cache: Path) -> None:
    folder = demo.demo_dir(cache)
    with opened_under(folder) as opened:
        assert _heal(cache) == []
    assert [Path(p).relative_to(folder.resolve()).as_posix() for p in opened] == [demo.BUILD_FILE]
    # A file written again with the same bytes has a new stat: it is read again, and found intact.
    weights = folder / "demo" / "model.safetensors"
    weights.write_bytes(weights.read_bytes())
    with opened_under(folder) as opened:
        assert _heal(cache) == []
    assert str(weights.resolve()) in opened


def test_a_demo_prepared_without_checksums_is_checked_then_gets_them(cache: Path) -> None:
    folder = demo.demo_dir(cache)
    build = folder / demo.BUILD_FILE
    facts = json.loads(build.read_text())
    recorded = facts.pop(demo.CHECKSUMS)
    build.write_text(json.dumps(facts))
    assert demo.check_demo(cache).legacy
    lines = _heal(cache)
    assert len(lines) == 1 and "prepared by an older version without checksums" in lines[0]
    assert json.loads(build.read_text())[demo.CHECKSUMS] == recorded

    # Damage in such a demo is found through the records it has: here the index's own checksums.
    build.write_text(json.dumps(facts))
    _garble(folder / "index" / "table.0")
    check = demo.check_demo(cache)
    assert check.legacy and check.index_only and "table.0" in check.summary
    lines = _heal(cache)
    assert len(lines) == 1 and "rebuilding its index" in lines[0]
    after = demo.check_demo(cache)
    assert after.ok and not after.legacy

    # And a torn JSON file (configs, tokenizer) because it no longer parses.
    build.write_text(json.dumps(facts))
    _truncate(folder / "demo" / "tokenizer.json")
    assert demo.check_demo(cache).damaged == ("demo/tokenizer.json cannot be read",)


def test_demo_build_repairs_and_checks_before_it_reports_success(
    cache: Path, demo_assets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_novelty.cli import main

    folder = demo.demo_dir(cache)
    _garble(folder / "index" / "novelty-index.json")
    assert main(["demo", "build", "--cache", str(cache)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(folder)
    assert "index/novelty-index.json differs from its checksum" in err and "rebuilding its index" in err
    files = demo.check_demo(cache).files
    assert f"[novelty] demo checked: its {files} files match the checksums recorded when it was prepared" in err
    assert demo.check_demo(cache).ok
    assert (folder / "index" / "table.0").read_bytes() == (demo_assets / "index" / "table.0").read_bytes()


def test_a_pytest_run_on_a_damaged_demo_repairs_it_before_anything_runs(
    cache: Path, demo_assets: Path, pytester: pytest.Pytester
) -> None:
    folder = demo.demo_dir(cache)
    _garble(folder / "index" / "table.0")
    result = pytester.runpytest_subprocess("--model", "demo", f"--novelty-cache={cache}", "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    repaired = [line for line in result.stderr.lines if "damaged" in line]
    assert repaired == [
        f"[novelty] the demo in {folder} is damaged (index/table.0 differs from its checksum); "
        "rebuilding its index (seconds)"
    ]
    assert (folder / "index" / "table.0").read_bytes() == (demo_assets / "index" / "table.0").read_bytes()
