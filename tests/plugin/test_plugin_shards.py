"""``--novelty-shard`` with a baseline and a series: every checkpoint's units are split the same way,
by pytest (under pytest-xdist) and by the command line alike, and the merge run over the shards'
caches decides them all. The command line's runs are its ``main`` in the test process; pytest's
are child runs (under pytest-xdist for the split)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli_in_process import run_cli
from tests.plugin.test_plugin_model_series import reseeded
from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder

pytestmark = pytest.mark.slow

PROMPTS = story_prompts(6)


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path, tiny_index: Path) -> dict[str, str]:
    """A series of two checkpoints and a baseline checkpoint, all with weights of their own."""
    tmp_path = tmp_path_factory.mktemp("gate")
    run = tmp_path / "run"
    run.mkdir()
    for seed, step in enumerate((100, 200)):
        reseeded(tiny_checkpoint, run / f"checkpoint-{step}", seed + 1)
    suites = write_story_suite_folder(tmp_path / "suites", PROMPTS, suite_toml(max_new_tokens=8))
    baseline = reseeded(tiny_checkpoint, tmp_path / "baseline", 7)
    return {"run": str(run), "suites": str(suites), "baseline": str(baseline), "index": str(tiny_index)}


def _cli(gate: dict[str, str], cache: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = ["run", "--model-series", gate["run"], "--baseline-model", gate["baseline"], "--suites", gate["suites"],
            "--originality", f"infini-gram:{gate['index']}", "--cache", str(cache), *extra]
    return run_cli(*args)


def _rows(cache: Path) -> int:
    return len(list((cache / "generations").rglob("*.json")))


def test_a_series_and_a_baseline_are_split_alike_by_both_front_ends(
    pytester: pytest.Pytester, gate: dict[str, str], tmp_path: Path
) -> None:
    first, second = tmp_path / "shard1", tmp_path / "shard2"
    via_pytest = pytester.runpytest_subprocess(
        f"--model-series={gate['run']}", f"--baseline-model={gate['baseline']}", f"--novelty-suites={gate['suites']}",
        f"--originality=infini-gram:{gate['index']}", f"--novelty-cache={first}", "--novelty-shard=1/2",
        "-p", "no:cacheprovider", "-n", "2",  # two workers: each computes the same split, the controller hears both
    )  # fmt: skip
    assert via_pytest.ret == 0
    via_pytest.assert_outcomes(skipped=2)  # the suite's case, and the earlier checkpoint's item
    via_pytest.stdout.fnmatch_lines(["*shard 1/2: story @ checkpoint-100: 3 of 6 prompts, 6 samples*",
                                     "shard 1/2: its part is done; 1 case decided by the merge run*"])
    via_cli = _cli(gate, second, "--shard", "2/2")
    assert via_cli.returncode == 0, via_cli.stderr
    # Each shard did its three prompts for each of the three checkpoints (candidate, earlier, baseline).
    assert _rows(first) == _rows(second) == 3 * 2 * 3
    merged = tmp_path / "merged"
    done = run_cli("cache", "merge", str(first), str(second), "--into", str(merged))
    assert done.returncode == 0 and "0 conflicting" in done.stdout
    decided = _cli(gate, merged, "--output", str(tmp_path / "merged.json"))
    assert decided.returncode == 0, decided.stderr
    assert "novelty work done: 0 samples generated" in decided.stdout and "Series of suite story" in decided.stdout
    # The same as one process over the same answers (it scores and measures everything itself).
    alone = tmp_path / "alone"
    shutil.copytree(merged / "generations", alone / "generations")
    single = _cli(gate, alone, "--output", str(tmp_path / "alone.json"))
    assert single.returncode == 0
    assert json.loads((tmp_path / "merged.json").read_text()) == json.loads((tmp_path / "alone.json").read_text())
    skip = [line for line in decided.stdout.splitlines() if not line.startswith("novelty work done")]
    assert skip == [line for line in single.stdout.splitlines() if not line.startswith("novelty work done")]


def test_the_baselines_missing_shard_is_named(pytester: pytest.Pytester, gate: dict[str, str], tmp_path: Path) -> None:
    first = tmp_path / "shard1"
    assert _cli(gate, first, "--shard", "1/2").returncode == 0
    stopped = _cli(gate, first)  # shard 2 never ran: nothing of its part, for any checkpoint
    assert stopped.returncode == 8 and stopped.stdout == ""
    assert "holds no part of shard 2 of 2 of this gate" in stopped.stderr
    under_pytest = pytester.runpytest_subprocess(
        f"--model-series={gate['run']}", f"--baseline-model={gate['baseline']}", f"--novelty-suites={gate['suites']}",
        f"--originality=infini-gram:{gate['index']}", f"--novelty-cache={first}", "-p", "no:cacheprovider",
    )  # fmt: skip
    assert under_pytest.ret == 8  # before any case: one line, every case deselected
    under_pytest.stdout.fnmatch_lines(["novelty: harness error before any case ran: the cache * holds no part of "
                                       "shard 2 of 2 of this gate*--novelty-fill-missing-shards*"])
    assert "Traceback" not in under_pytest.stdout.str()
    filled = _cli(gate, first, "--fill-missing-shards")
    assert filled.returncode == 0, filled.stderr
    # Shard 2's 3 prompts x 2 samples, of the candidate, the baseline and the earlier checkpoint, each said.
    said = "story: generating the answers of 3 prompts that shard 2 of 2 did not bring (--fill-missing-shards)"
    assert filled.stderr.count(said) == 3
    assert "novelty work done: 6 samples generated in 2 batches (6 from cache)" in filled.stdout
    assert "earlier checkpoints: 6 samples generated (6 from cache)" in filled.stdout
