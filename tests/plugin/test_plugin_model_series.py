"""``--model-series``: every checkpoint of a run folder scored, the newest gated, the series reported.

One single-process series run over three checkpoints (``series_run``) is made once for the module;
the tests that change the run folder take a copy of it (``run_dir``), and a test that runs more work
starts from a private copy of that run's warm cache (``warm_cache``), so that what it adds (a new
checkpoint, a suite, a selection, workers) is all it computes. The spread over the workers and the
suite added under xdist still generate in an empty cache.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.child_pytest import copy_cache, run_pytest
from tests.plugin.conftest import PROMPTS, SUITE
from tests.suite_text import suite_toml, write_story_suite_folder

pytestmark = pytest.mark.slow


def reseeded(source: Path, dest: Path, seed: int) -> Path:
    """A copy of the tiny checkpoint with freshly initialised weights (so its outputs differ)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    shutil.copytree(source, dest)
    torch.manual_seed(seed)
    GPT2LMHeadModel(GPT2Config.from_pretrained(dest)).save_pretrained(dest)
    return dest


def mute(dest: Path) -> Path:
    """Rewire a checkpoint so that it ends every answer at once: the final layer norm outputs a
    constant vector that only the end-of-text embedding aligns with."""
    import torch
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(dest)
    eos = model.config.eos_token_id
    with torch.no_grad():
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.zero_()
        model.transformer.ln_f.bias[0] = 10.0
        model.transformer.wte.weight[eos, 0] = 10.0
    model.save_pretrained(dest)
    return dest


def series_args(novelty_args: list[str], run: Path | str) -> list[str]:
    args = list(novelty_args)
    at = args.index("--model")
    del args[at : at + 2]
    return [*args, f"--model-series={run}"]


@dataclass(frozen=True)
class SeriesRun:
    """The module's series run: its run folder (which no test changes), cache, report and result."""

    run_dir: Path
    cache: Path
    report: Path
    result: pytest.RunResult


@pytest.fixture(scope="module")
def series_run(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path, tiny_index: Path) -> SeriesRun:
    """``--model-series`` over three checkpoints in one process, in an empty cache, with the plugin
    tests' six-prompt story suite (a folder laid out as a test's, ``gate-suites`` beside the run)."""
    folder = tmp_path_factory.mktemp("series")
    run = folder / "run"
    run.mkdir()
    for seed, step in enumerate((200, 60, 400)):  # created out of order: steps, not names or times, order them
        reseeded(tiny_checkpoint, run / f"checkpoint-{step}", seed)
    (run / "runs").mkdir()  # the trainer's log folder is not a checkpoint
    suites = write_story_suite_folder(folder / "gate-suites", PROMPTS, SUITE)
    cache, report = folder / "cache", folder / "report"
    args = ["--model", str(tiny_checkpoint), f"--novelty-suites={suites}", f"--novelty-cache={cache}",
            f"--originality=infini-gram:{tiny_index}", "-p", "no:cacheprovider"]
    result = run_pytest(folder, *series_args(args, run), "--novelty-report", str(report))
    return SeriesRun(run, cache, report, result)


@pytest.fixture
def run_dir(tmp_path: Path, series_run: SeriesRun) -> Path:
    """A copy of the module's run folder, for a test that adds, renames or replaces checkpoints."""
    return Path(shutil.copytree(series_run.run_dir, tmp_path / "run"))


@pytest.fixture
def warm_cache(series_run: SeriesRun, novelty_args: list[str]) -> Path:
    """A private copy of the series run's cache as this test's ``--novelty-cache``: every answer and
    score of the three checkpoints on the story suite is there already."""
    cache = next(a.split("=", 1)[1] for a in novelty_args if a.startswith("--novelty-cache="))
    return copy_cache(series_run.cache, Path(cache))


def test_series_scores_every_checkpoint_and_gates_the_newest(
    pytester: pytest.Pytester, novelty_args: list[str], series_run: SeriesRun, run_dir: Path, warm_cache: Path,
    tiny_checkpoint: Path,
) -> None:
    report, result = series_run.report, series_run.result
    result.assert_outcomes(passed=4)  # 2 cases, and the 2 earlier checkpoints as units of work
    result.stdout.fnmatch_lines(["*Series of suite story*", "| step | originality@4 | quality | checkpoint |"])
    data = json.loads((report / "report.json").read_text())
    assert data["versions"]["model"] == str(series_run.run_dir / "checkpoint-400")
    series = data["series"]
    assert [entry["step"] for entry in series] == [60, 200, 400]
    assert [Path(entry["model"]).name for entry in series] == ["checkpoint-60", "checkpoint-200", "checkpoint-400"]
    story = [entry["suites"]["story"] for entry in series]
    assert story[0]["change"] is None and all(s["generated_rows"] > 0 for s in story)
    change = story[2]["change"]["quality"]
    assert change["delta"] == pytest.approx(story[2]["metrics"]["quality"] - story[1]["metrics"]["quality"], abs=1e-6)
    assert len({s["metrics"]["quality"] for s in story}) > 1  # the checkpoints really differ
    for later in story[1:]:  # every change has its paired CI, not only the drops
        low, high = later["change"]["quality"]["delta_ci"]
        assert low <= high and later["change"]["quality"]["n_pairs"] == 6
    assert data["plots"]["story"]["series"] == "story-series.png"
    from matplotlib.image import imread

    pixels = imread(report / "story-series.png")
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100 and float(pixels.std()) > 0.01
    assert "Series of suite story" in (report / "report.md").read_text()

    # A nightly run after one more checkpoint: only the new one is generated, and it is the candidate
    # (in a copy of the run folder and of the run's cache, laid out as before).
    reseeded(tiny_checkpoint, run_dir / "checkpoint-600", 7)
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(*series_args(novelty_args, run_dir), "--novelty-report", str(report))
    result.assert_outcomes(passed=5)
    data = json.loads((report / "report.json").read_text())
    assert data["versions"]["model"] == str(run_dir / "checkpoint-600")
    generated = {entry["step"]: entry["suites"]["story"]["generated_rows"] for entry in data["series"]}
    assert generated[60] == generated[200] == generated[400] == 0 and generated[600] > 0
    result.stdout.fnmatch_lines(["novelty work done: 12 samples generated*; earlier checkpoints: 0 samples "
                                 "generated (36 from cache)"])


def test_quoted_glob_selects_the_folders(
    pytester: pytest.Pytester, novelty_args: list[str], run_dir: Path, warm_cache: Path
) -> None:
    for path in run_dir.iterdir():
        if path.name.startswith("checkpoint-"):
            path.rename(run_dir / path.name.replace("checkpoint-", "step_"))
    report = pytester.path / "report"
    args = series_args(novelty_args, f"{run_dir}/step_*")
    result = pytester.runpytest_subprocess(*args, "--novelty-report", str(report))
    result.assert_outcomes(passed=4)
    assert [e["step"] for e in json.loads((report / "report.json").read_text())["series"]] == [60, 200, 400]


SERIES_BEST = suite_toml(gate='against = "series-best"\ntolerance_abs = 0.05')


@pytest.mark.parametrize("candidate", ["mute", "same as the best"])
def test_series_best_fails_only_a_candidate_significantly_worse(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path, run_dir: Path, warm_cache: Path,
    candidate: str,
) -> None:
    (suite_dir / "story.toml").write_text(SERIES_BEST)
    newest = run_dir / "checkpoint-800"
    if candidate == "mute":
        mute(reseeded(run_dir / "checkpoint-60", newest, 0))
    else:
        shutil.copytree(run_dir / "checkpoint-200", newest)
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(*series_args(novelty_args, run_dir), "--novelty-report", str(report))
    data = json.loads((report / "report.json").read_text())
    quality = {e["step"]: e["suites"]["story"]["metrics"]["quality"] for e in data["series"]}
    (row,) = data["rows"]
    best = f"checkpoint-{max(quality, key=lambda s: (s != 800, quality[s]))}"
    assert row["comparison"]["against"] == best
    if candidate == "mute":
        assert quality[800] == 0.0 and max(quality.values()) > 0.1
        result.assert_outcomes(failed=1)
        against = f"against the best earlier checkpoint of the series, {run_dir / best}:"
        result.stdout.fnmatch_lines([against, "story quality: regression"])
    else:
        result.assert_outcomes(passed=1)
        assert row["comparison"]["status"] in ("same", "improved", "within_tolerance", "not_significant")


def test_bad_series_is_one_usage_error(pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty-run"
    empty.mkdir()
    result = pytester.runpytest_subprocess(*series_args(novelty_args, empty))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{empty}: --model-series: no checkpoint-<step> subfolders*"])
    both = pytester.runpytest_subprocess(*novelty_args, f"--model-series={empty}")
    assert both.ret == pytest.ExitCode.USAGE_ERROR


def test_cli_run_model_series(
    suite_dir: Path, run_dir: Path, warm_cache: Path, tiny_index: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pytest_novelty.cli import main

    (suite_dir / "story.toml").write_text(SERIES_BEST)
    out = tmp_path / "out.json"
    args = ["run", "--model-series", str(run_dir), "--suites", str(suite_dir), "--cache", str(warm_cache),
            "--originality", f"infini-gram:{tiny_index}", "--output", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Series of suite story" in text and "| 400 |" in text
    series = json.loads(out.read_text())["story"]["series"]
    assert [entry["step"] for entry in series] == [60, 200, 400]
    mute(reseeded(run_dir / "checkpoint-60", run_dir / "checkpoint-800", 0))
    assert main(args) == 1  # the mute newest checkpoint regresses against the series' best
    assert "FAIL" in capsys.readouterr().out


def test_series_under_xdist_reaches_the_controller_report(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path, series_run: SeriesRun, warm_cache: Path
) -> None:
    """The added suite ``tale`` is generated by the workers; ``story``'s answers are in the cache."""
    run_dir = series_run.run_dir
    story = (suite_dir / "story.toml").read_text()
    (suite_dir / "tale.toml").write_text(story.replace("max_new_tokens = 16", "max_new_tokens = 12"))
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(*series_args(novelty_args, run_dir), "-n", "2",
                                           "--novelty-report", str(report))
    result.assert_outcomes(passed=8)  # 4 cases, and 2 earlier checkpoints × 2 suites
    series = json.loads((report / "report.json").read_text())["series"]
    assert [e["step"] for e in series] == [60, 200, 400]
    assert all(set(e["suites"]) == {"story", "tale"} for e in series)
    assert (report / "story-series.png").is_file() and (report / "tale-series.png").is_file()


def _series(report: Path) -> list[dict[str, object]]:
    return list(json.loads((report / "report.json").read_text())["series"])


def test_a_series_is_spread_over_the_workers_and_merged_as_one_process_would(
    pytester: pytest.Pytester, novelty_args: list[str], series_run: SeriesRun, tmp_path: Path
) -> None:
    """Under ``-n 2`` each earlier checkpoint is a unit of work of its own: both workers score
    checkpoints, and the series the controller puts together is the one a single process makes
    (the module's run, in an empty cache of its own as this one is)."""
    args = series_args(novelty_args, series_run.run_dir)
    one, two = series_run.report, pytester.path / "two"
    single = series_run.result
    single.assert_outcomes(passed=4)
    spread = pytester.runpytest_subprocess(*args, f"--novelty-cache={tmp_path / 'c2'}", f"--novelty-report={two}",
                                           "-n", "2", "-v")  # fmt: skip
    spread.assert_outcomes(passed=4)
    ran = re.findall(r"\[(gw\d)\] \[\s*\d+%\] PASSED \S+::test_checkpoint\[story@(\d+)\]", spread.stdout.str())
    assert sorted(step for _, step in ran) == ["200", "60"]
    assert {worker for worker, _ in ran} == {"gw0", "gw1"}  # both workers did series work
    assert _series(two) == _series(one)
    work = re.findall(r"\[novelty (gw\d)\] story @ checkpoint-(\d+):", spread.stdout.str())
    assert sorted(work) == sorted(ran)  # each worker's work line names the checkpoint it scored
    spread.stdout.fnmatch_lines(["*Series of suite story*"])


CHECKPOINT_CRASH = """
import os


def pytest_runtest_call(item):
    # A worker that dies while it scores one checkpoint of the series, as an out-of-memory kill would.
    if os.environ.get("PYTEST_XDIST_WORKER") and "test_checkpoint[story@200]" in item.nodeid:
        os._exit(3)
"""


def test_a_checkpoint_that_crashes_its_worker_is_a_harness_error(
    pytester: pytest.Pytester, novelty_args: list[str], series_run: SeriesRun, warm_cache: Path
) -> None:
    run_dir = series_run.run_dir
    pytester.makeconftest(CHECKPOINT_CRASH)
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(*series_args(novelty_args, run_dir), "-n", "2",
                                           f"--novelty-report={report}")  # fmt: skip
    assert result.ret == 8, result.stdout.str()  # not a pass of the candidate's cases, and not a gate failure
    data = json.loads((report / "report.json").read_text())
    assert data["versions"]["exit status"] == 8
    assert not data.get("series")  # no series with a hole in it
    result.stdout.fnmatch_lines(["no series for suite story: no result for step 200* (harness error)"])


def test_a_selection_without_the_checkpoints_says_why_there_is_no_series(
    pytester: pytest.Pytester, novelty_args: list[str], series_run: SeriesRun, warm_cache: Path
) -> None:
    """``-k`` that keeps a case and drops the checkpoints' items is no harness error: the cases
    decide as usual and the summary says the series was not selected."""
    run_dir = series_run.run_dir
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(*series_args(novelty_args, run_dir), "-k", "quality",
                                           f"--novelty-report={report}")  # fmt: skip
    result.assert_outcomes(passed=1, deselected=3)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["no series for suite story: no result for step 60, 200 (not selected: *)"])
    assert not json.loads((report / "report.json").read_text()).get("series")


def test_series_best_under_xdist_scores_its_checkpoints_with_its_cases(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path, series_run: SeriesRun, warm_cache: Path
) -> None:
    """A suite gated against the series' best has no ``test_checkpoint`` items (its cases need every
    checkpoint first); its series still reaches the controller from the worker that ran its cases."""
    run_dir = series_run.run_dir
    (suite_dir / "story.toml").write_text(SERIES_BEST)
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(*series_args(novelty_args, run_dir), "-n", "2", "-v",
                                           f"--novelty-report={report}")  # fmt: skip
    result.assert_outcomes(passed=1)
    assert "test_checkpoint" not in result.stdout.str()
    data = json.loads((report / "report.json").read_text())
    assert [e["step"] for e in data["series"]] == [60, 200, 400]
    (row,) = data["rows"]
    assert row["comparison"]["against"] in {"checkpoint-60", "checkpoint-200"}
