"""The findings of trying the newest surfaces as a new user would, each as the user typed it.

The fault matrix (:mod:`tests.faults.test_fault_matrix`) holds every option to the classes of bad
input; these are the very commands the findings named, with the one line each now gets.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_in_process import run_cli


def _one_error(result: pytest.RunResult) -> str:
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "Traceback" not in text and "INTERNALERROR" not in text
    (line,) = [line for line in result.errlines if line.startswith("ERROR:")]
    return line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--novelty-adaptive", "99999999999999999999"],
         "ERROR: --novelty-adaptive: 99999999999999999999 is out of range: give a whole number from 1 to 10,000,000"),
        (["--novelty-adaptive", "100", "--novelty-adaptive-minutes", "-1"],
         "ERROR: --novelty-adaptive-minutes: -1 is out of range: give a number from 0.1 to 10,080"),
        (["--novelty-adaptive", "100", "--novelty-adaptive-minutes", "0"],
         "ERROR: --novelty-adaptive-minutes: 0 is out of range: give a number from 0.1 to 10,080"),
        (["--novelty-adaptive-minutes", "5"],
         "ERROR: --novelty-adaptive-minutes: bounds the time of the adaptive rounds, so it applies with "
         "--novelty-adaptive SAMPLES; give both, or drop it"),
    ],
    ids=["huge-budget", "negative-minutes", "zero-minutes", "minutes-alone"],
)
def test_the_adaptive_options_say_their_range_and_what_they_need(
    pytester: pytest.Pytester, demo_run_cache: Path, args: list[str], expected: str
) -> None:
    """A budget that planned one look per sample hung (about 5x10^17 boundaries); -1 minutes was taken
    as 0 and 0 accepted, and minutes without a budget were ignored, all in silence."""
    result = pytester.runpytest_inprocess("--model=demo", f"--novelty-cache={demo_run_cache}", *args)
    assert _one_error(result) == expected


def test_tail_build_out_into_a_folder_that_does_not_exist_creates_nothing(tmp_path: Path) -> None:
    """It created every missing parent, up to the file system's root."""
    out = tmp_path / "no" / "such" / "tail.json"
    done = run_cli("tail", "build", "suites/story.toml", "--pool", "demo", "--alpha", "0.1", "--out", str(out))
    assert done.returncode == 4
    assert done.stderr == (f"pytest-novelty: error: {out}: --out: its folder {out.parent} does not exist; create it "
                           "first, or give a file in an existing folder\n")
    assert not (tmp_path / "no").exists()
