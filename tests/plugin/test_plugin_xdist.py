"""Under pytest-xdist the suite runs on one worker and the controller prints the merged table.

The tests that read the same cold run of the one story suite on two workers (its table, its
notices) read one run made for the module (``two_workers``).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.child_pytest import CachedRun, run_pytest
from tests.plugin.conftest import PROMPTS, SUITE
from tests.suite_text import write_story_suite_folder

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path, tiny_index: Path) -> CachedRun:
    """The story suite gated on two workers from a cold cache (``-v``, so each case names its
    worker), made once for the module in a folder laid out as a test's."""
    folder = tmp_path_factory.mktemp("two-workers")
    suites = write_story_suite_folder(folder / "gate-suites", PROMPTS, SUITE)
    cache = folder / "cache"
    args = ["--model", str(tiny_checkpoint), f"--novelty-suites={suites}", f"--novelty-cache={cache}",
            f"--originality=infini-gram:{tiny_index}", "-p", "no:cacheprovider"]  # fmt: skip
    return CachedRun(run_pytest(folder, *args, "-n", "2", "-v"), cache)


def test_two_workers_merge_one_table(two_workers: CachedRun) -> None:
    """Without --dist, the plugin keeps a suite's cases on one worker (xdist's own default would
    spread them): both cases of the one suite run on the same worker, which generated once."""
    result = two_workers.result
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    workers = set(re.findall(r"\[(gw\d)\] \[ *\d+%\] PASSED .*test_metric", out))
    assert len(workers) == 1, out
    assert len(re.findall(r"\[novelty gw\d\] story: ", out)) == 1, out
    assert out.count("novelty gate") == 1
    result.stdout.fnmatch_lines(["suite story*", "*originality@4*pass*", "*quality*pass*"])


def test_each_suite_generated_once_on_one_worker(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    # A second suite with other settings (same ones would find the first suite's answers in the cache).
    story = (suite_dir / "story.toml").read_text()
    (suite_dir / "tale.toml").write_text(story.replace("max_new_tokens = 16", "max_new_tokens = 12"))
    result = pytester.runpytest_subprocess(*novelty_args, "-n", "2")
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    lines = re.findall(r"\[novelty (gw\d)\] (\w+): 6 prompts x 2 samples; (\d+) generated in (\d+) batch", out)
    # One line per suite, from the worker that ran it: 6 prompts x 2 samples, generated there once.
    assert sorted(name for _, name, _, _ in lines) == ["story", "tale"], out
    assert all(rows == "12" and int(batches) >= 1 for _, _, rows, batches in lines)
    assert out.count("novelty gate") == 1
    result.stdout.fnmatch_lines(["novelty work done: 24 samples generated in * batches (0 from cache)*"])

    # On the CPU: the workers import no torch at start (to count GPUs and set threads) for a warm rerun.
    warm = pytester.runpytest_subprocess(*novelty_args, "-n", "2", "--novelty-device=cpu")
    warm.assert_outcomes(passed=4)
    cached = r"\[novelty gw\d\] (\w+): 6 prompts x 2 samples; 0 generated in 0 batches on cache .* 12 from cache"
    warm_lines = re.findall(cached, warm.stdout.str())
    assert sorted(warm_lines) == ["story", "tale"]
    warm.stdout.fnmatch_lines(["novelty work done: 0 samples generated in 0 batches (24 from cache), 0 originality*"])


def test_a_workers_notices_reach_the_controllers_terminal_once(two_workers: CachedRun) -> None:
    """The layers' notices on an xdist worker (the model loads, generation a quarter done) travel
    with its test reports to the controller, which prints each once; the work line stays one line."""
    result = two_workers.result
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert out.count("[novelty] loading ") == 1, out
    assert out.count("story: generated 12/12 samples") == 1, out  # the last quarter of 6 prompts x 2 samples
    assert len(re.findall(r"\[novelty gw\d\] story: ", out)) == 1, out
    assert "[novelty] loading" not in result.stderr.str()


def test_a_notice_the_controller_and_a_worker_both_say_is_shown_once(
    pytester: pytest.Pytester, novelty_args: list[str], tiny_index: Path, two_workers: CachedRun, tmp_path: Path
) -> None:
    """An index without checksums is noted by the controller's preflight and again by the worker
    that scores with it: one line, not two (nor none, as before the plugin sent notices at
    configure time and a worker's on to the controller). The answers come from the module's run's
    cache (not its scores): the worker scores every answer with this index, and loads no model."""
    import json

    from pytest_novelty.scoring.originality.index import INFO_FILE

    shutil.copytree(two_workers.cache, tmp_path / "cache", ignore=shutil.ignore_patterns("originality-scores"))

    index = pytester.path / "old-index"
    shutil.copytree(tiny_index, index)
    meta = json.loads((index / INFO_FILE).read_text())
    del meta["checksums"]
    (index / INFO_FILE).write_text(json.dumps(meta))
    args = [a if not a.startswith("--originality=") else f"--originality=infini-gram:{index}" for a in novelty_args]
    result = pytester.runpytest_subprocess(*args, "-n", "2", "--novelty-device=cpu")  # no torch at a worker's start
    result.assert_outcomes(passed=2)
    both = result.stdout.lines + result.stderr.lines
    notes = [line for line in both if "records no checksums" in line]
    assert len(notes) == 1 and notes[0].startswith("[novelty] note: "), both
    assert re.search(r"novelty work done: 0 samples generated .* [1-9]\d* originality lookups", result.stdout.str())
