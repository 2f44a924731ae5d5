"""The file system's faults are one line: a cache, report or demo folder that cannot be written
(read-only, full, no permission) is a harness error (exit 8), or bad input (exit 4) for a folder the
user named that can never be written, from pytest and the command line alike, found before any
model loads where it can be; nothing half-written is read back.

The folders are real: tmpfs mounts made read-only or filled to their last pages, and a folder
without write permission for an unprivileged user (see ``tests/file_systems.py``).

The tests that need a cache every answer of the suite is in start from a copy of one the module
fills once (``warm_story``), not from a run of their own; the command line runs in this process
where its process is not the point (``run_cli``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.file_systems import Mounts, fill, mounts, unprivileged, world_readable_folder
from tests.warm_cache import copy_warm

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def mount() -> Iterator[Mounts]:
    with mounts() as made:
        yield made


@pytest.fixture
def read_only_home(mount: Mounts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester) -> Path:
    """HOME on a read-only file system, and no cache folder named anywhere: the default cache
    (``~/.cache/pytest-novelty``) cannot be created. (Set after pytester's own HOME.)"""
    home = mount.tmpfs(tmp_path / "home", size="1m", read_only=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("PYTEST_NOVELTY_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    return home


def without_cache(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("--novelty-cache")]


def output(result: pytest.RunResult) -> str:
    return result.stdout.str() + "\n" + result.stderr.str()


def one_line(text: str, needle: str) -> str:
    """The one line of ``text`` that holds ``needle`` (it must be there once, with no traceback)."""
    lines = [line for line in text.splitlines() if needle in line]
    assert len(lines) == 1, text
    assert "Traceback" not in text and "INTERNALERROR" not in text and "OSError" not in text, text
    return lines[0]


def cli(*args: str, env: dict[str, str] | None = None, user: bool = False) -> subprocess.CompletedProcess[str]:
    """``pytest-novelty ARGS`` in a process of its own (as an unprivileged user with ``user``)."""
    command = [sys.executable, "-m", "pytest_novelty.cli", *args]
    environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(unprivileged(command) if user else command, capture_output=True, text=True,
                          env=environment, timeout=600, check=False, cwd="/tmp" if user else None)


@dataclass(frozen=True)
class Ran:
    """A command line run in this process: its exit status and what it printed."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> Ran:
    """``pytest-novelty ARGS`` in this process (``pytest_novelty.cli.main``), its output read from ``capsys``."""
    from pytest_novelty.cli import main

    capsys.readouterr()
    status = main(list(args))
    out, err = capsys.readouterr()
    return Ran(status, out, err)


# -- a read-only HOME: the default cache folder cannot be created --------------------------------


@pytest.mark.parametrize("model", ["demo", "local"])
def test_pytest_with_a_read_only_home(
    pytester: pytest.Pytester, novelty_args: list[str], read_only_home: Path, model: str
) -> None:
    args = without_cache(novelty_args)
    if model == "demo":
        args = ["--model", "demo", "-p", "no:cacheprovider"]
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == 8
    line = one_line(output(result), "cannot be written")
    assert line == (f"novelty: harness error before any case ran: {read_only_home}/.cache/pytest-novelty: the cache "
                    f"folder cannot be written: a read-only file system at {read_only_home}/.cache; make it "
                    "writable, or give another folder with --novelty-cache DIR (or PYTEST_NOVELTY_CACHE)")
    assert "originality index" not in output(result)  # the old code blamed the index for a local checkpoint


@pytest.mark.parametrize("command", [["run", "--model", "demo"], ["demo", "build"], ["run", "--model", "local"]])
def test_the_command_line_with_a_read_only_home(
    read_only_home: Path, command: list[str], suite_dir: Path, tiny_checkpoint: Path, tiny_index: Path
) -> None:
    if command[-1] == "local":
        command = ["run", "--model", str(tiny_checkpoint), "--suites", str(suite_dir),
                   "--originality", f"infini-gram:{tiny_index}"]
    done = cli(*command)
    assert done.returncode == 8, done.stderr
    line = one_line(done.stderr, "cannot be written")
    assert line.startswith(f"pytest-novelty: error: {read_only_home}/.cache/pytest-novelty: the cache folder cannot "
                           f"be written: a read-only file system at {read_only_home}/.cache")
    assert "--cache DIR" in line and done.stdout == ""


# -- a cache folder the user named that can never be written: bad input -------------------------


def test_a_named_read_only_cache_is_bad_input(
    pytester: pytest.Pytester, novelty_args: list[str], mount: Mounts, tmp_path: Path, suite_dir: Path,
    tiny_checkpoint: Path, tiny_index: Path,
) -> None:  # fmt: skip
    frozen = mount.tmpfs(tmp_path / "frozen", read_only=True)
    result = pytester.runpytest_subprocess(*without_cache(novelty_args), f"--novelty-cache={frozen}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert one_line(output(result), "cannot be written") == (
        f"ERROR: {frozen}: --novelty-cache: the cache folder cannot be written: a read-only file system; "
        "give a writable folder")
    pytester.makeini(f"[pytest]\nnovelty_cache = {frozen}\n")  # named by the ini setting
    result = pytester.runpytest_subprocess(*without_cache(novelty_args))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {frozen}: novelty_cache: the cache folder" in one_line(output(result), "cannot be written")
    done = cli("run", "--model", str(tiny_checkpoint), "--suites", str(suite_dir), "--cache", str(frozen),
               "--originality", f"infini-gram:{tiny_index}")
    assert done.returncode == 4
    assert one_line(done.stderr, "cannot be written").startswith(f"pytest-novelty: error: {frozen}: --cache: ")


def test_a_read_only_warm_cache_is_refused_by_name(
    mount: Mounts, tmp_path: Path, suite_dir: Path, tiny_checkpoint: Path, tiny_index: Path, warm_story: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Decided: refused, not read. Every run writes to its cache even when every answer is there (the
    checksum memo of what it reads, the demo's lock): a read-only one is named before anything loads."""
    cache = copy_warm(warm_story, mount.tmpfs(tmp_path / "cache", size="8m"))
    args = ["run", "--model", str(tiny_checkpoint), "--suites", str(suite_dir), "--cache", str(cache),
            "--originality", f"infini-gram:{tiny_index}"]
    assert run_cli(capsys, *args).returncode == 0  # every answer is there
    mount.remount_read_only(cache)
    done = run_cli(capsys, *args)
    assert done.returncode == 4
    assert one_line(done.stderr, "cannot be written") == (
        f"pytest-novelty: error: {cache}: --cache: the cache folder cannot be written: a read-only file system; "
        "give a writable folder")


def test_a_cache_folder_without_permission_is_bad_input() -> None:
    base = world_readable_folder()
    try:
        locked = base / "cache"
        locked.mkdir()
        locked.chmod(0o555)
        env = {"HOME": str(base)}
        for command in (["run", "--model", "demo", "--cache", str(locked)], ["demo", "build", "--cache", str(locked)]):
            done = cli(*command, env=env, user=True)
            assert done.returncode == 4, done.stderr
            assert one_line(done.stderr, "cannot be written") == (
                f"pytest-novelty: error: {locked}: --cache: the cache folder cannot be written: no permission to "
                "write there; give a writable folder")
        pytest_run = subprocess.run(
            unprivileged([sys.executable, "-m", "pytest", "--model", "demo", f"--novelty-cache={locked}",
                          "-p", "no:cacheprovider", f"--rootdir={base}"]),
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO), **env}, cwd=base,
            timeout=600, check=False,
        )  # fmt: skip
        assert pytest_run.returncode == 4
        assert f"ERROR: {locked}: --novelty-cache: the cache folder cannot be written: no permission" in one_line(
            pytest_run.stdout + pytest_run.stderr, "cannot be written")
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- a full disk --------------------------------------------------------------------------------


def test_a_cache_on_a_full_disk_is_found_before_any_model_loads(
    pytester: pytest.Pytester, novelty_args: list[str], mount: Mounts, tmp_path: Path
) -> None:
    cache = mount.full(tmp_path / "cache")
    result = pytester.runpytest_subprocess(*without_cache(novelty_args), f"--novelty-cache={cache}")
    assert result.ret == 8
    assert one_line(output(result), "cannot be written") == (
        f"novelty: harness error before any case ran: {cache}: --novelty-cache: the cache folder cannot be written: no "
        "space left on the device; free some space, or give another folder with --novelty-cache DIR (or "
        "PYTEST_NOVELTY_CACHE)")
    assert "[novelty] loading" not in output(result)


def test_a_cache_that_fills_up_during_the_run_is_one_line_and_nothing_torn_is_read_back(
    pytester: pytest.Pytester, novelty_args: list[str], mount: Mounts, tmp_path: Path, warm_story: Path
) -> None:
    cache = copy_warm(warm_story, mount.tmpfs(tmp_path / "cache", size="4m"))  # every memo of the checkpoint and index
    args = [*without_cache(novelty_args), f"--novelty-cache={cache}"]
    for kind in ("generations", "originality-scores"):
        shutil.rmtree(cache / kind)  # the answers and their scores go: the next run must store them again
    filler = fill(cache, free_pages=2)  # room for the folder check, not for the answers
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == 8
    result.assert_outcomes(errors=2)
    cause = (f"harness error (not a gate failure): {cache}: the cache folder cannot be written: no space left on "
             "the device; free some space, or give another folder")
    assert one_line(output(result), cause).strip() == cause
    assert not list(cache.rglob("*.tmp"))  # no temporary file left behind
    filler.unlink()  # space again: what was stored before the disk filled is whole, and is reused
    again = pytester.runpytest_subprocess(*args)
    again.assert_outcomes(passed=2)
    assert "damaged cache entries" not in output(again)


def test_the_command_line_with_a_cache_that_fills_up(
    mount: Mounts, tmp_path: Path, suite_dir: Path, tiny_checkpoint: Path, tiny_index: Path, warm_story: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    cache = copy_warm(warm_story, mount.tmpfs(tmp_path / "cache", size="4m"))
    args = ["run", "--model", str(tiny_checkpoint), "--suites", str(suite_dir), "--cache", str(cache),
            "--originality", f"infini-gram:{tiny_index}"]
    for kind in ("generations", "originality-scores"):
        shutil.rmtree(cache / kind)
    fill(cache, free_pages=2)
    done = run_cli(capsys, *args)
    assert done.returncode == 8
    assert one_line(done.stderr, "cannot be written") == (
        f"pytest-novelty: harness error in suite story: {cache}: the cache folder cannot be written: no space left "
        "on the device; free some space, or give another folder")


def _report(folder: Path) -> dict:  # type: ignore[type-arg]
    return dict(json.loads((folder / "report.json").read_text()))


def test_a_report_folder_on_a_full_disk(
    pytester: pytest.Pytester, novelty_args: list[str], mount: Mounts, tmp_path: Path, warm_story: Path
) -> None:
    copy_warm(warm_story, tmp_path / "cache")  # the run's answers: what is tried here is its report
    full = mount.full(tmp_path / "full")
    result = pytester.runpytest_subprocess(*novelty_args, f"--novelty-report={full / 'report'}")
    assert result.ret == 8  # found before any case: nothing ran
    assert one_line(output(result), "cannot be written") == (
        f"novelty: harness error before any case ran: {full / 'report'}: --novelty-report: the report folder cannot be "
        "written: no space left on the device; free some space, or give another folder")

    roomy = mount.full(tmp_path / "roomy", free_pages=4)  # room for the placeholder, not for the report's plots
    report = roomy / "report"
    result = pytester.runpytest_subprocess(*novelty_args, f"--novelty-report={report}")
    assert result.ret == 8  # every case passed, but the report the run was asked for is not there
    result.assert_outcomes(passed=2)
    assert one_line(output(result), "cannot be written") == (
        f"novelty: harness error: {report}: the report folder cannot be written: no space left on the device; "
        "free some space, or give another folder")
    assert _report(report)["summary"]["complete"] is False  # no verdict is left to be taken for this run's
    assert "no verdict" in (report / "report.md").read_text()


def test_the_command_line_report_on_a_full_disk(
    mount: Mounts, tmp_path: Path, suite_dir: Path, tiny_checkpoint: Path, tiny_index: Path, warm_story: Path
) -> None:
    roomy = mount.full(tmp_path / "roomy", free_pages=4)
    report = roomy / "report"
    cache = copy_warm(warm_story, tmp_path / "c")
    done = cli("run", "--model", str(tiny_checkpoint), "--suites", str(suite_dir), "--cache", str(cache),
               "--originality", f"infini-gram:{tiny_index}", "--report", str(report))
    assert done.returncode == 8, done.stderr
    assert "FAIL" not in done.stdout and " pass" in done.stdout  # the gate passed; its report could not be written
    assert one_line(done.stderr, "cannot be written") == (
        f"pytest-novelty: error: {report}: the report folder cannot be written: no space left on the device; "
        "free some space, or give another folder")
    assert _report(report)["summary"]["complete"] is False


# -- --snapshot-update into a snapshot folder that cannot be written ------------------------------


def test_snapshot_update_into_a_snapshot_folder_that_cannot_be_written_stops_before_any_case(
    pytester: pytest.Pytester, novelty_args: list[str], mount: Mounts, tmp_path: Path, suite_dir: Path,
    warm_story: Path, capsys: pytest.CaptureFixture[str], tiny_checkpoint: Path, tiny_index: Path,
) -> None:  # fmt: skip
    """A full disk is a harness error (8), read-only bad input (4), as for the cache and the report:
    one line and an exit status before any case runs, not syrupy's failed writes after them."""
    copy_warm(warm_story, tmp_path / "cache")
    full = mount.full(tmp_path / "full")
    result = pytester.runpytest_subprocess(*novelty_args, f"--novelty-snapshot-dir={full}", "--snapshot-update")
    assert result.ret == 8
    assert one_line(output(result), "cannot be written") == (
        f"novelty: harness error before any case ran: {full}: --novelty-snapshot-dir: the snapshot folder cannot be "
        "written: no space left on the device; free some space, or give another folder")
    assert "test_metric" not in output(result)  # no case ran
    done = run_cli(capsys, "run", "--model", str(tiny_checkpoint), "--suites", str(suite_dir), "--cache",
                   str(tmp_path / "cache"), "--originality", f"infini-gram:{tiny_index}", "--snapshot-dir", str(full),
                   "--snapshot-update")  # fmt: skip
    assert done.returncode == 8 and done.stdout == ""
    assert one_line(done.stderr, "cannot be written").startswith(f"pytest-novelty: error: {full}: --snapshot-dir: ")

    frozen = mount.tmpfs(tmp_path / "frozen", read_only=True)
    result = pytester.runpytest_subprocess(*novelty_args, f"--novelty-snapshot-dir={frozen}", "--snapshot-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert one_line(output(result), "cannot be written") == (
        f"ERROR: {frozen}: --novelty-snapshot-dir: the snapshot folder cannot be written: a read-only file system; "
        "give a writable folder")

    # The default snapshot folder, beside suite files on a read-only file system.
    suites = mount.tmpfs(tmp_path / "suites", size="1m")
    for name in ("story.toml", "prompts.jsonl"):
        shutil.copy(suite_dir / name, suites / name)
    mount.remount_read_only(suites)
    args = [f"--novelty-suites={suites}" if a.startswith("--novelty-suites") else a for a in novelty_args]
    result = pytester.runpytest_subprocess(*args, "--snapshot-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert one_line(output(result), "cannot be written") == (
        f"ERROR: {suites / '__novelty_snapshots__'}: --novelty-suites: the snapshot folder cannot be written: a "
        "read-only file system; give a writable folder")
    assert pytester.runpytest_subprocess(*args, "--novelty-snapshots").ret == 1  # comparing only reads: it runs
