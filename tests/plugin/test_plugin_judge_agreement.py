"""``[scoring] calibration`` and ``[gate] min_judge_agreement`` through pytester on the tiny checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.warm_cache import cache_of, copy_warm

pytestmark = pytest.mark.slow

GOOD = "Lily and Tom went to the park. Lily saw a ball. They played all day and were very happy together."


def graded(agrees: bool) -> str:
    """Six graded stories the rules judge tells apart: full stories and empty answers. People grade
    them the way the judge does (``agrees``) or the opposite way."""
    rows = []
    for i in range(6):
        good = i % 2 == 0
        human = 3 if good == agrees else 1
        rows.append({"id": f"g{i}", "prompt": "Lily and Tom went to the park.", "response": GOOD if good else "",
                     "human": human, "meta": {"characters": ["Lily", "Tom"]}})
    return "".join(json.dumps(row) + "\n" for row in rows)


@pytest.mark.parametrize("agrees", [True, False])
def test_quality_cases_need_the_judge_to_agree_with_people(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path, agrees: bool, warm_story: Path
) -> None:
    copy_warm(warm_story, cache_of(novelty_args))  # the answers are there; the graded stories are judged anew
    (suite_dir / "graded.jsonl").write_text(graded(agrees))
    suite = suite_dir / "story.toml"
    text = suite.read_text().replace('judge_samples = 1\n', 'judge_samples = 1\ncalibration = "graded.jsonl"\n')
    suite.write_text(text + "\n[gate]\nmin_judge_agreement = 0.3\n")
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(*novelty_args, "-v", "--novelty-report", str(report))
    data = json.loads((report / "report.json").read_text())
    agreement = data["suites"]["story"]["info"]["judge_agreement"]
    assert agreement["n"] == 6 and agreement["file"].endswith("graded.jsonl")
    assert (agreement["spearman"] > 0.3) is agrees
    result.stdout.fnmatch_lines(["*judge agreement: Spearman rho*n = 6 (graded.jsonl)*"])
    assert "judge agreement: Spearman rho" in (report / "report.md").read_text()
    if agrees:
        result.assert_outcomes(passed=2)
    else:
        # The originality case does not depend on the judge; the quality case no longer counts.
        result.assert_outcomes(passed=1, failed=1)
        result.stdout.fnmatch_lines(["*quality>=0 does not count*Spearman rho -*below gate.min_judge_agreement = 0.3*"])


def test_min_agreement_without_a_calibration_file_is_a_usage_error(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    suite = suite_dir / "story.toml"
    suite.write_text(suite.read_text() + "\n[gate]\nmin_judge_agreement = 0.3\n")
    result = pytester.runpytest_subprocess(*novelty_args)
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*story.toml: gate.min_judge_agreement: needs a calibration file*"])


@pytest.mark.parametrize("agrees", [True, False])
def test_cli_run_applies_the_minimum_too(
    suite_dir: Path, tiny_checkpoint: Path, tiny_index: Path, tmp_path: Path, agrees: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pytest_novelty.cli import main

    (suite_dir / "graded.jsonl").write_text(graded(agrees))
    suite = suite_dir / "story.toml"
    text = suite.read_text().replace('judge_samples = 1\n', 'judge_samples = 1\ncalibration = "graded.jsonl"\n')
    suite.write_text(text + "\n[gate]\nmin_judge_agreement = 0.3\n")
    args = ["run", "--model", str(tiny_checkpoint), "--suites", str(suite_dir), "--cache", str(tmp_path / "cache"),
            "--originality", f"infini-gram:{tiny_index}"]
    assert main(args) == (0 if agrees else 1)
    out = capsys.readouterr().out
    assert ("FAIL" in out) is not agrees
