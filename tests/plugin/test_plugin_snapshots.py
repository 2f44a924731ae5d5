"""`--novelty-snapshots`, `--snapshot-update`, `--novelty-seed` and `--baseline-model` through pytester.

The first acceptance of the checkpoint's snapshots (``--snapshot-update`` over an empty cache) is
made once for the module (``accepted``); a test that starts from accepted snapshots gets a private
copy of them and of the warm cache, as if it had made that run itself.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS
from tests.child_pytest import copy_cache, run_pytest
from tests.plugin.conftest import SUITE
from tests.suite_text import story_prompts, write_story_suite_folder

pytestmark = pytest.mark.slow


@pytest.fixture
def repetitive_checkpoint(tiny_checkpoint: Path, tmp_path: Path) -> Path:
    """The same weights, but its generation config bans every token except end-of-text.

    It answers nothing, so the judge scores it at the bottom: a clearly worse checkpoint.
    """
    worse = tmp_path / "worse-model"
    shutil.copytree(tiny_checkpoint, worse)
    config = json.loads((worse / "config.json").read_text())
    eos = config["eos_token_id"]
    generation = {"eos_token_id": eos, "bad_words_ids": [[i] for i in range(config["vocab_size"]) if i != eos]}
    (worse / "generation_config.json").write_text(json.dumps(generation))
    return worse


SNAPSHOTS = "__novelty_snapshots__"


@dataclass(frozen=True)
class Accepted:
    """The first ``--snapshot-update`` of the tiny checkpoint: its result, the suite folder that holds
    the snapshots it wrote, and the cache it filled."""

    result: pytest.RunResult
    suites: Path
    cache: Path


# Twelve prompts: six could give no p-value below 2/2⁶ = 0.031, above the α of a run's two comparisons,
# so no drop, however large, would be a regression (the sign-flip test's honest floor).
PROMPTS = story_prompts(12)


@pytest.fixture
def suite_dir(pytester: pytest.Pytester) -> Path:
    """The plugin tests' story suite, over twelve prompts."""
    return write_story_suite_folder(pytester.path / "gate-suites", PROMPTS, SUITE)


@pytest.fixture(scope="module")
def accepted(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path, tiny_index: Path) -> Accepted:
    """``--snapshot-update`` over an empty cache, made once for the module in a folder laid out as a
    test's (``gate-suites`` beside the run)."""
    folder = tmp_path_factory.mktemp("accepted")
    suites = write_story_suite_folder(folder / "gate-suites", PROMPTS, SUITE)
    cache = folder / "cache"
    result = run_pytest(
        folder, "--model", str(tiny_checkpoint), f"--novelty-suites={suites}", f"--novelty-cache={cache}",
        f"--originality=infini-gram:{tiny_index}", "-p", "no:cacheprovider", "--snapshot-update",
    )  # fmt: skip
    return Accepted(result, suites, cache)


def take_accepted(accepted: Accepted, suite_dir: Path, novelty_args: list[str]) -> None:
    """The module's accepted snapshots and warm cache, copied into this test's suite folder and its
    ``--novelty-cache``, as if the test had run ``--snapshot-update`` itself."""
    shutil.copytree(accepted.suites / SNAPSHOTS, suite_dir / SNAPSHOTS)
    cache = dict(arg.split("=", 1) for arg in novelty_args if "=" in arg)["--novelty-cache"]
    shutil.rmtree(cache, ignore_errors=True)
    copy_cache(accepted.cache, Path(cache))


def test_snapshot_lifecycle(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path, repetitive_checkpoint: Path,
    accepted: Accepted,
) -> None:  # fmt: skip
    first = pytester.runpytest_subprocess(*novelty_args, "--novelty-snapshots")
    first.assert_outcomes(failed=2)
    first.stdout.fnmatch_lines(["*no snapshot for this case: run with --snapshot-update*"])

    accepted.result.assert_outcomes(passed=2)  # --snapshot-update, as this test would have run it now
    take_accepted(accepted, suite_dir, novelty_args)
    stored = sorted((suite_dir / SNAPSHOTS).rglob("*"))
    files = [p for p in stored if p.is_file()]
    assert len(files) == 2 and all(not p.name.endswith(".json") for p in files)
    # The comparison sign survives in the file name (syrupy's own names drop ">", leaving "=0").
    assert sorted(p.name for p in files) == [
        "test_metric[story-originality@4_ge_0].novelty.jsonc",
        "test_metric[story-quality_ge_0].novelty.jsonc",
    ]
    record = json.loads(files[0].read_text())
    assert record["suite"] == "story" and record["per_prompt"]

    again = pytester.runpytest_subprocess(*novelty_args, "--novelty-snapshots", "-n", "2")
    again.assert_outcomes(passed=2)
    again.stdout.fnmatch_lines(["*quality*unchanged*"])

    # Another seed of the same checkpoint is noise, not a regression.
    reseeded = pytester.runpytest_subprocess(*novelty_args, "--novelty-snapshots", "--novelty-seed", "99")
    reseeded.assert_outcomes(passed=2)

    worse_args = list(novelty_args)
    worse_args[1] = str(repetitive_checkpoint)
    worse = pytester.runpytest_subprocess(*worse_args, "--novelty-snapshots", "-n", "2")
    # Empty answers: quality drops to 0 (a significant regression) and originality is undefined.
    worse.assert_outcomes(failed=2)
    worse.stdout.fnmatch_lines(
        [
            "story quality: regression",
            "*snapshot value 0.*, new value 0.0000, delta -0.*",
            "*% CI ?-0.*over 12 paired prompts, p-value *",
        ]
    )


def test_a_damaged_snapshot_is_a_harness_error_and_update_says_what_it_replaces(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path, capsys: pytest.CaptureFixture[str],
    accepted: Accepted,
) -> None:  # fmt: skip
    accepted.result.assert_outcomes(passed=2)
    take_accepted(accepted, suite_dir, novelty_args)
    stored = sorted((suite_dir / SNAPSHOTS).rglob("*.novelty.jsonc"))
    damaged, intact = stored[0], stored[1]
    damaged.write_bytes(random.Random(5).randbytes(400))

    result = pytester.runpytest_subprocess(*novelty_args, "--novelty-snapshots")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == HARNESS_EXIT_STATUS, output
    assert f"{damaged}: damaged snapshot (not UTF-8 text" in output
    assert "no snapshot for this case" not in output and "--snapshot-update" not in output
    assert damaged.read_bytes() == random.Random(5).randbytes(400)  # left for the user to restore

    # The command line reads the same files and decides the same way.
    from pytest_novelty.cli import main

    option = dict(arg.split("=", 1) for arg in novelty_args if arg.startswith("--") and "=" in arg)
    cli = ["run", "--model", novelty_args[1], "--suites", option["--novelty-suites"], "--cache",
           option["--novelty-cache"], "--originality", option["--originality"], "--snapshots"]  # fmt: skip
    assert main(cli) == HARNESS_EXIT_STATUS
    err = capsys.readouterr().err
    assert f"{damaged}: damaged snapshot (not UTF-8 text" in err and "--snapshot-update" not in err

    update = pytester.runpytest_subprocess(*novelty_args, "--snapshot-update")
    update.assert_outcomes(passed=2)
    assert f"DamagedSnapshotWarning: {damaged}: replaced a damaged snapshot (not UTF-8 text" in update.stdout.str()
    assert json.loads(damaged.read_text())["suite"] == "story" and intact.is_file()
    pytester.runpytest_subprocess(*novelty_args, "--novelty-snapshots").assert_outcomes(passed=2)


def test_baseline_model_compares_paired(
    pytester: pytest.Pytester, novelty_args: list[str], tiny_checkpoint: Path, repetitive_checkpoint: Path
) -> None:
    args = list(novelty_args)
    args[1] = str(repetitive_checkpoint)
    result = pytester.runpytest_subprocess(*args, "--baseline-model", str(tiny_checkpoint), "-W", "ignore")
    result.assert_outcomes(failed=2)
    # what it was compared with is named as what it is: a baseline, not a "snapshot"
    result.stdout.fnmatch_lines(["story quality: regression", "*baseline value 0.*, new value 0.0000*"])
    assert "snapshot" not in result.stdout.str().split("novelty gate")[0]
    same = pytester.runpytest_subprocess(*novelty_args, "--baseline-model", str(tiny_checkpoint))
    same.assert_outcomes(passed=2)
