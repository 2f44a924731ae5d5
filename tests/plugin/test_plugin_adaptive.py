"""``--novelty-adaptive SAMPLES``: rounds only for the cases the first pass cannot decide, through the one
case loop of both front ends, kept in report.json and reused by a rerun."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.cli import main
from pytest_novelty.report.json_report import read_records
from tests.suite_text import suite_toml

pytestmark = pytest.mark.slow


def _cases(report: Path) -> dict[str, Any]:
    return {c.metric: c for c in read_records(json.loads((report / "report.json").read_text()))}


def test_only_a_case_at_its_bound_draws_rounds_and_a_rerun_reuses_them(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path, tmp_path: Path
) -> None:
    first = tmp_path / "first"
    pytester.runpytest_subprocess(*novelty_args, f"--novelty-report={first}").assert_outcomes(passed=2)
    assert all(c.adaptive is None for c in _cases(first).values())  # no budget, no rounds
    quality = _cases(first)["quality"].value
    # The bound at the first pass's own value: the rule cannot tell it apart from its bound; originality
    # at a bound of 0 is far from it and is decided at its first look.
    (suite_dir / "story.toml").write_text(suite_toml(thresholds=[("originality@4", 0.0), ("quality", quality)]))
    report = tmp_path / "adaptive"
    budget = 3 * 6 * 2  # three more rounds of 6 prompts x 2 samples
    result = pytester.runpytest_subprocess(*novelty_args, "--novelty-adaptive", str(budget),
                                           f"--novelty-report={report}")  # fmt: skip
    text = result.stdout.str()
    cases = _cases(report)
    far, near = cases["originality@4"], cases["quality"]
    assert far.adaptive is not None and far.adaptive.decided and far.adaptive.rounds == 0
    assert near.adaptive is not None and near.adaptive.rounds == 3 and not near.adaptive.decided
    assert near.adaptive.stopped == "budget" and len(near.adaptive.looks) == near.adaptive.allowed == 4
    # An undecided case is read by its mode (point: every round's estimate against the bound).
    assert "undecided within the budget: point mode reads the estimate of every round" in near.message
    assert re.search(rf"adaptive rounds: {budget} samples generated \(0 from cache\)", text), text
    assert "undecided after 3 extra rounds (budget spent)" in text
    raw = json.loads((report / "report.json").read_text())
    looks = next(r for r in raw["rows"] if r["metric"] == "quality")["adaptive"]["looks"]
    assert len(looks) == 4 and all(set(look) == {"estimate", "se", "z", "boundary"} for look in looks)

    again = tmp_path / "again"  # the command line, on the same cache: the rounds are found, not generated
    args = ["run", "--model", novelty_args[1], "--suites", str(suite_dir), "--cache", str(tmp_path / "cache"),
            novelty_args[4], "--adaptive", str(budget),
            "--report", str(again)]  # fmt: skip
    status = main(args)
    assert status == (0 if near.passed else 1)
    assert _cases(again) == cases  # the same records, decided by the same loop

