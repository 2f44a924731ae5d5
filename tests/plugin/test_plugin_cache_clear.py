"""``--novelty-cache-clear`` in runs that share one cache folder at the same time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_two_concurrent_runs_that_clear_the_cache_both_pass(
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = pytester.runpytest_subprocess(*novelty_args)  # fills the cache
    first.assert_outcomes(passed=2)
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
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path
) -> None:
    first = pytester.runpytest_subprocess(*novelty_args)
    first.assert_outcomes(passed=2)
    table = [line for line in first.outlines if "originality@4" in line]
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert files
    for path in files:
        path.write_bytes(b"\x00garbled\xff" * 3)
    again = pytester.runpytest_subprocess(*novelty_args)
    again.assert_outcomes(passed=2)
    assert [line for line in again.outlines if "originality@4" in line] == table  # the same numbers
    summary = [line for line in again.outlines if line.startswith("novelty work done")]
    assert len(summary) == 1 and f"warning: {len(files)} damaged cache entries dropped and recomputed" in summary[0]
    assert "Traceback" not in again.stdout.str() + again.stderr.str()
