"""The embedded demo end to end: `--model demo` passes its suites, `--model demo-early` fails one.

The `demo` run starts from an empty cache, as a user's first run does: it must say at once what it
prepares, place the shipped trained weights instead of training, and print nothing from third-party
libraries. The `demo-early` run uses the demo prepared once for the whole test run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import DEMO_CACHE

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
# Lines that only third-party libraries print (transformers' logger and warnings, tqdm bars, torch).
THIRD_PARTY = re.compile(r"Warning|warn\(|\[transformers\]|loss_type|Writing model shards|it/s\]|torch_dtype")


def _args(model: str, cache: Path) -> list[str]:
    return [
        "--model",
        model,
        f"--novelty-suites={REPO / 'suites'}",
        f"--novelty-cache={cache}",
        "-p",
        "no:cacheprovider",
        "-v",
    ]


def test_a_first_demo_run_prepares_the_demo_at_once_passes_every_suite_and_prints_the_table(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    result = pytester.runpytest_subprocess(*_args("demo", tmp_path / "fresh-cache"), timeout=900)
    out, err = result.stdout.str(), result.stderr.str()
    assert result.ret == 0, out[-4000:] + err[-2000:]
    first = err.splitlines()[0]
    assert first.startswith("[novelty] preparing the demo") and "shipped weights" in first, err[:2000]
    assert "demo: step" not in err  # nothing was trained
    result.stdout.fnmatch_lines(["*novelty gate*"])
    for suite in ("story", "poetry", "tool", "open"):
        assert f"suite {suite}" in out
    assert "FAIL" not in out.split("novelty gate", 1)[1]
    noisy = [line for line in (out + err).splitlines() if THIRD_PARTY.search(line)]
    assert not noisy, noisy


def test_demo_early_fails_with_metric_value_and_threshold(pytester: pytest.Pytester, demo_assets: Path) -> None:
    result = pytester.runpytest_subprocess(*_args("demo-early", DEMO_CACHE), timeout=900)
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-4000:]
    result.stdout.fnmatch_lines(["*test_metric*FAILED*", "*: * = 0.* is below the minimum *"])
    assert "FAIL" in out.split("novelty gate", 1)[1]
    noisy = [line for line in (out + result.stderr.str()).splitlines() if THIRD_PARTY.search(line)]
    assert not noisy, noisy
