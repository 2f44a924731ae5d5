"""The embedded demo end to end: `--model demo` passes its suites, `--model demo-early` fails one.

Builds the demo assets into the session's cache on first use (a couple of minutes on two cores),
as a user's first run does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_novelty.storage import default_cache_dir

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
# Read at import, before pytester points HOME at a temporary folder: the demo built once is shared.
CACHE = default_cache_dir()


def _args(model: str) -> list[str]:
    return [
        "--model",
        model,
        f"--novelty-suites={REPO / 'suites'}",
        f"--novelty-cache={CACHE}",
        "-p",
        "no:cacheprovider",
        "-v",
    ]


def test_demo_passes_every_suite_and_prints_the_table(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*_args("demo"), timeout=900)
    out = result.stdout.str()
    assert result.ret == 0, out[-4000:]
    result.stdout.fnmatch_lines(["*novelty gate*"])
    for suite in ("story", "poetry", "tool", "open"):
        assert f"suite {suite}" in out
    assert "FAIL" not in out.split("novelty gate", 1)[1]


def test_demo_early_fails_with_metric_value_and_threshold(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*_args("demo-early"), timeout=900)
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-4000:]
    result.stdout.fnmatch_lines(["*test_metric*FAILED*", "*: * = 0.* is below the minimum *"])
    assert "FAIL" in out.split("novelty gate", 1)[1]
