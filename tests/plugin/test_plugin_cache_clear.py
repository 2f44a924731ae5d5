"""``--novelty-cache-clear`` in runs that share one cache folder at the same time.

The checkpoint's first run, which fills a cache, is made once for the module (``filled``); each test
starts from a private copy of that warm cache, as if it had made the run itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_pytest import CachedRun, copy_cache, run_pytest
from tests.plugin.conftest import PROMPTS, SUITE
from tests.suite_text import write_story_suite_folder

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path, tiny_index: Path) -> CachedRun:
    """The gate of the tiny checkpoint over an empty cache, made once for the module in a folder laid
    out as a test's (``gate-suites`` beside the run)."""
    folder = tmp_path_factory.mktemp("filled")
    suites = write_story_suite_folder(folder / "gate-suites", PROMPTS, SUITE)
    cache = folder / "cache"
    result = run_pytest(
        folder, "--model", str(tiny_checkpoint), f"--novelty-suites={suites}", f"--novelty-cache={cache}",
        f"--originality=infini-gram:{tiny_index}", "-p", "no:cacheprovider",
    )  # fmt: skip
    result.assert_outcomes(passed=2)
    return CachedRun(result, cache)


def test_two_concurrent_runs_that_clear_the_cache_both_pass(
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path, filled: CachedRun
) -> None:
    cache = copy_cache(filled.cache, tmp_path / "cache")  # the cache the first run filled
    for i in range(3000):  # a cache in use for a while holds many entries
        folder = cache / "originality-scores" / f"{i % 97:02x}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"old-{i}.json").write_text("{}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "pytest", *novelty_args, "--novelty-cache-clear"]
    runs = [
        subprocess.Popen(
            command, cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(2)
    ]
    for run in runs:
        out, _ = run.communicate(timeout=300)
        assert run.returncode == 0, out
        assert "INTERNALERROR" not in out and "Traceback" not in out
        assert "2 passed" in out
    assert not list((cache / "originality-scores").rglob("old-*.json"))


def test_a_garbled_cache_is_recomputed_and_reported_once_in_the_summary(
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path, filled: CachedRun
) -> None:
    table = [line for line in filled.result.outlines if "originality@4" in line]
    assert table
    files = [p for p in copy_cache(filled.cache, tmp_path / "cache").rglob("*") if p.is_file()]
    assert files
    for path in files:
        path.write_bytes(b"\x00garbled\xff" * 3)
    again = pytester.runpytest_subprocess(*novelty_args)
    again.assert_outcomes(passed=2)
    assert [line for line in again.outlines if "originality@4" in line] == table  # the same numbers
    summary = [line for line in again.outlines if line.startswith("novelty work done")]
    assert len(summary) == 1 and f"warning: {len(files)} damaged cache entries dropped and recomputed" in summary[0]
    assert "Traceback" not in again.stdout.str() + again.stderr.str()
