"""Under pytest-xdist the suite runs on one worker and the controller prints the merged table."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_two_workers_merge_one_table(pytester: pytest.Pytester, novelty_args: list[str]) -> None:
    result = pytester.runpytest_subprocess(*novelty_args, "-n", "2", "--dist", "loadscope")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert out.count("novelty gate") == 1
    result.stdout.fnmatch_lines(["suite story*", "*originality@4*pass*", "*quality*pass*"])
