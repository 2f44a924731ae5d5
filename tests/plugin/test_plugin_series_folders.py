"""A run folder is read exactly: every ``checkpoint-<step>`` entry of ``--model-series`` is gated or
refused by name (exit 4), under pytest and the command line alike; none is left out without a word."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.pipeline.series import find_checkpoints


def copy_checkpoint(tiny: Path, dest: Path) -> Path:
    shutil.copytree(tiny, dest)
    return dest


def truncate(file: Path, keep: float = 0.5) -> None:
    """Cut a file as a save writing it in place leaves it midway (safetensors writes its header first)."""
    data = file.read_bytes()
    file.write_bytes(data[: int(len(data) * keep)])


# Each fault, as (entry it names, what the message says, how to make it in a run folder).
def dangling_newest(run: Path, tiny: Path) -> None:
    os.symlink(run.parent / "gone" / "checkpoint-400", run / "checkpoint-400")


def dangling_middle(run: Path, tiny: Path) -> None:
    copy_checkpoint(tiny, run / "checkpoint-400")
    os.symlink(run.parent / "gone" / "checkpoint-200", run / "checkpoint-200")


def file_entry(run: Path, tiny: Path) -> None:
    copy_checkpoint(tiny, run / "checkpoint-400")
    (run / "checkpoint-300").write_text("not a checkpoint")


def empty_folder(run: Path, tiny: Path) -> None:
    copy_checkpoint(tiny, run / "checkpoint-400")
    (run / "checkpoint-300").mkdir()


def weights_being_written(run: Path, tiny: Path) -> None:
    truncate(copy_checkpoint(tiny, run / "checkpoint-400") / "model.safetensors")


FAULTS: dict[str, tuple[str, str, Callable[[Path, Path], None]]] = {
    "dangling newest": ("checkpoint-400", "a dangling symbolic link", dangling_newest),
    "dangling middle": ("checkpoint-200", "a dangling symbolic link", dangling_middle),
    "a file": ("checkpoint-300", "not a folder", file_entry),
    "an empty folder": ("checkpoint-300", "an empty folder", empty_folder),
    "weights being written": ("checkpoint-400/model.safetensors", "truncated", weights_being_written),
}


@pytest.fixture
def faulty_run(request: pytest.FixtureRequest, tmp_path: Path, tiny_checkpoint: Path) -> tuple[Path, str, str]:
    """A run folder with two whole checkpoints (steps 100 and 200 unless the fault replaces one)
    and the fault of the test's parameter; returns the folder, the entry named and the cause."""
    entry, cause, make = FAULTS[request.param]
    run = tmp_path / "run"
    run.mkdir()
    copy_checkpoint(tiny_checkpoint, run / "checkpoint-100")
    if request.param != "dangling middle":
        copy_checkpoint(tiny_checkpoint, run / "checkpoint-200")
    make(run, tiny_checkpoint)
    return run, entry, cause


@pytest.mark.parametrize("faulty_run", list(FAULTS), indirect=True)
def test_pytest_refuses_the_entry_by_name(
    pytester: pytest.Pytester, novelty_args: list[str], faulty_run: tuple[Path, str, str]
) -> None:
    run, entry, cause = faulty_run
    args = list(novelty_args)
    at = args.index("--model")
    del args[at : at + 2]
    result = pytester.runpytest_subprocess(*args, f"--model-series={run}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and f"{run / entry}: --model-series: {cause}" in errors[0], result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert "passed" not in result.stdout.str()  # no checkpoint was gated in its place


@pytest.mark.parametrize("faulty_run", list(FAULTS), indirect=True)
def test_the_command_line_refuses_the_entry_by_name(
    suite_dir: Path, tiny_index: Path, tmp_path: Path, faulty_run: tuple[Path, str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pytest_novelty.cli import main

    run, entry, cause = faulty_run
    status = main(["run", "--model-series", str(run), "--suites", str(suite_dir), "--cache", str(tmp_path / "cache"),
                   "--originality", f"infini-gram:{tiny_index}"])
    captured = capsys.readouterr()
    assert status == 4
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"pytest-novelty: error: {run / entry}: --model-series: {cause}")
    assert captured.out == ""  # nothing was generated or gated


# -- what counts as a checkpoint of a run, entry by entry (no model is loaded) ------------------


def check_series(checkpoints: list) -> None:  # type: ignore[type-arg]
    from pytest_novelty.pipeline.series import check_series as check

    check(checkpoints)


def test_every_matching_entry_is_a_checkpoint_and_others_are_not(tmp_path: Path, tiny_checkpoint: Path) -> None:
    run = tmp_path / "run"
    for step in (60, 200):
        copy_checkpoint(tiny_checkpoint, run / f"checkpoint-{step}")
    (run / "runs").mkdir()  # the trainer's log folder
    (run / "checkpoint-5.txt").write_text("notes")  # not named checkpoint-<step>
    os.symlink(run / "checkpoint-200", run / "checkpoint-400")  # a link to a folder is that folder
    found = find_checkpoints(str(run))
    assert [c.step for c in found] == [60, 200, 400]
    check_series(found)


def test_a_glob_match_that_is_no_folder_is_refused(tmp_path: Path, tiny_checkpoint: Path) -> None:
    copy_checkpoint(tiny_checkpoint, tmp_path / "step_10")
    (tmp_path / "step_20").write_text("a file the pattern matches")
    with pytest.raises(ConfigError, match="step_20: --model-series: not a folder; the pattern matches it"):
        find_checkpoints(str(tmp_path / "step_*"))


def test_a_link_that_leads_back_to_itself_is_refused(tmp_path: Path) -> None:
    os.symlink("checkpoint-9", tmp_path / "checkpoint-9")
    with pytest.raises(ConfigError, match="checkpoint-9: --model-series: a symbolic link that leads back to itself"):
        find_checkpoints(str(tmp_path))


def test_a_link_to_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "weights.bin").write_bytes(b"x")
    os.symlink(tmp_path / "weights.bin", tmp_path / "checkpoint-7")
    with pytest.raises(ConfigError, match="checkpoint-7: --model-series: a symbolic link to a file, not a folder"):
        find_checkpoints(str(tmp_path))


def shards_without_index(folder: Path) -> None:
    """A sharded save stopped between its last shard and its index (save_pretrained writes the index last)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder)
    (folder / "model.safetensors").unlink()
    model.save_pretrained(folder, max_shard_size="40KB")
    shards = sorted(folder.glob("model-*-of-*.safetensors"))
    assert len(shards) > 1
    (folder / "model.safetensors.index.json").unlink()


def trainer_save_unfinished(folder: Path) -> None:
    """The Trainer has written the weights and its arguments, not yet its state (written last)."""
    (folder / "training_args.bin").write_bytes(b"PK")
    (folder / "optimizer.pt").write_bytes(b"PK")


def rsync_copy_under_way(folder: Path) -> None:
    weights = folder / "model.safetensors"
    weights.rename(folder / ".model.safetensors.Xy12Ab")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (shards_without_index, "weight shards (model-00001-of-0000"),
        (trainer_save_unfinished, "the Trainer's save has not finished: it holds training_args.bin but no "
                                  "trainer_state.json"),
        (rsync_copy_under_way, ".model.safetensors.Xy12Ab is still being written"),
        (lambda folder: truncate(folder / "model.safetensors", 0.9), "truncated"),
    ],
    ids=["shards without their index", "trainer save unfinished", "rsync copy under way", "cut short"],
)
def test_weights_still_being_written_are_refused_by_name(
    tmp_path: Path, tiny_checkpoint: Path, damage: Callable[[Path], None], message: str
) -> None:
    run = tmp_path / "run"
    copy_checkpoint(tiny_checkpoint, run / "checkpoint-100")
    damage(copy_checkpoint(tiny_checkpoint, run / "checkpoint-200"))
    with pytest.raises(ConfigError) as caught:
        check_series(find_checkpoints(str(run)))
    assert str(run / "checkpoint-200") in str(caught.value) and message in str(caught.value)
    assert "--model-series" in str(caught.value)


def test_a_finished_trainer_save_is_a_checkpoint(tmp_path: Path, tiny_checkpoint: Path) -> None:
    folder = copy_checkpoint(tiny_checkpoint, tmp_path / "run" / "checkpoint-100")
    trainer_save_unfinished(folder)
    (folder / "trainer_state.json").write_text("{}")
    check_series(find_checkpoints(str(tmp_path / "run")))


def test_an_entry_its_user_cannot_read_is_refused_by_name(tiny_checkpoint: Path) -> None:
    """A checkpoint folder without read permission (for a user that chmod binds: root reads anything)."""
    import subprocess
    import sys

    from tests.file_systems import unprivileged, world_readable_folder

    base = world_readable_folder()
    try:
        run = base / "run"
        for step in (100, 200):
            copy_checkpoint(tiny_checkpoint, run / f"checkpoint-{step}")
        for path in [base, *base.rglob("*")]:
            path.chmod(0o777 if path.is_dir() else 0o644)
        (run / "checkpoint-200").chmod(0)
        done = subprocess.run(
            unprivileged([sys.executable, "-m", "pytest_novelty.cli", "run", "--model-series", str(run),
                          "--cache", str(base / "cache")]),
            capture_output=True, text=True, timeout=300, check=False, cwd=base,
            env={**os.environ, "HOME": str(base), "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )  # fmt: skip
        assert done.returncode == 4, done.stderr
        assert done.stderr.strip() == (f"pytest-novelty: error: {run / 'checkpoint-200'}: --model-series: cannot read "
                                       "the folder (Permission denied)")
    finally:
        (base / "run" / "checkpoint-200").chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)
