"""`--novelty-report` and suite sweeps through pytester: one set of cases per value, a curve in the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_sweep_cases_and_report(pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path) -> None:
    suite = suite_dir / "story.toml"
    suite.write_text(suite.read_text() + "\n[sweep]\nparameter = 'generation.temperature'\nvalues = [0.5, 1.5]\n")
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(*novelty_args, "-v", "--novelty-report", str(report), "--junitxml=j.xml")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines_random(
        [
            "*test_metric?story?temperature=0.5?-quality>=0? PASSED*",
            "*test_metric?story?temperature=1.5?-quality>=0? PASSED*",
        ]
    )
    data = json.loads((report / "report.json").read_text())
    assert {row["suite"] for row in data["rows"]} == {"story[temperature=0.5]", "story[temperature=1.5]"}
    assert (report / "report.md").read_text().count("story[temperature=") >= 2
    sweep_png = report / "story-sweep.png"
    assert sweep_png.is_file()
    from matplotlib.image import imread

    pixels = imread(sweep_png)
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100
    assert float(pixels.std()) > 0.01
    # Every case carries its numbers as JUnit properties.
    assert (pytester.path / "j.xml").read_text().count('name="novelty"') == 4
