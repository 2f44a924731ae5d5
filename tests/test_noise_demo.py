"""Verdicts that know their noise, on real runs of the demo: an interval on every case, threshold
modes that read it, the suite's detectable effects, and seed stability on request."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def demo_cache(demo_run_cache: Path) -> Path:
    """The shared cache of the demo's runs (see tests/conftest.py)."""
    return demo_run_cache


def run(pytester: pytest.Pytester, cache: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("--model", "demo", f"--novelty-cache={cache}", "-p", "no:cacheprovider",
                                         *args)  # fmt: skip


def test_every_case_has_an_interval_that_holds_its_value(pytester: pytest.Pytester, demo_cache: Path) -> None:
    report = pytester.path / "report"
    result = run(pytester, demo_cache, f"--novelty-suites={REPO / 'suites'}", f"--novelty-report={report}")
    assert result.ret == 0
    data = json.loads((report / "report.json").read_text())
    assert len(data["rows"]) == 18
    for row in data["rows"]:
        low, high = row["ci"]
        assert low <= row["value"] <= high, row
        assert isinstance(row["within_noise"], bool) and row["within_noise"] == (low <= row["threshold"] <= high)
    for name, suite in data["suites"].items():
        assert set(suite["detectable"]) == {r["metric"] for r in data["rows"] if r["suite"] == name}
        assert all(d["alpha"] == pytest.approx(0.05) and d["power"] == 0.8 for d in suite["detectable"].values())
    result.stdout.fnmatch_lines(["*95% CI*", "*novelty@5*[[]0.*, 0.*[]]*>= 0.3*pass (within noise)*",
                                 "story: detects a drop of *novelty@5*"])


def test_a_bound_at_the_suites_own_value_is_read_by_each_mode(
    pytester: pytest.Pytester, demo_cache: Path, tmp_path: Path
) -> None:
    suites = tmp_path / "suites"
    shutil.copytree(REPO / "suites", suites)
    for other in ("poetry", "tool", "open"):
        (suites / f"{other}.toml").unlink()
    report = tmp_path / "first"
    assert run(pytester, demo_cache, f"--novelty-suites={suites}", f"--novelty-report={report}").ret == 0
    value = next(r["value"] for r in json.loads((report / "report.json").read_text())["rows"]
                 if r["metric"] == "novelty@5")  # fmt: skip
    head = (suites / "story.toml").read_text().split("[[thresholds]]")[0]
    bound = round(value + 0.00005, 4)  # just above the value: point fails, by a hair
    only = f'[[thresholds]]\nmetric = "novelty@5"\nmin = {bound}\n'
    (suites / "story.toml").write_text(head + only)
    case: tuple[str, ...] = ()
    point = run(pytester, demo_cache, f"--novelty-suites={suites}", *case)
    assert point.ret == 1
    point.stdout.fnmatch_lines([f"*novelty@5 = {value:.4f} is below the minimum {bound:g} (point mode; 95% CI*"])
    lenient = run(pytester, demo_cache, f"--novelty-suites={suites}", *case, "--novelty-threshold-mode", "lenient")
    assert lenient.ret == 0
    lenient.stdout.fnmatch_lines(["*pass (within noise)*"])
    strict = run(pytester, demo_cache, f"--novelty-suites={suites}", *case, "--novelty-threshold-mode", "strict")
    assert strict.ret == 1
    strict.stdout.fnmatch_lines(["*is below the minimum * (strict mode; 95% CI*"])
    # The suite file can ask for a mode too; the command line wins over it.
    (suites / "story.toml").write_text(head.replace("[gate]\n", '[gate]\nthreshold_mode = "lenient"\n') + only)
    assert run(pytester, demo_cache, f"--novelty-suites={suites}", *case).ret == 0
    assert run(pytester, demo_cache, f"--novelty-suites={suites}", *case, "--novelty-threshold-mode", "point").ret == 1


def test_repeats_give_a_pass_rate_and_reuse_the_first_runs_answers(
    pytester: pytest.Pytester, demo_cache: Path, tmp_path: Path
) -> None:
    suites = tmp_path / "suites"
    suites.mkdir()
    shutil.copytree(REPO / "suites" / "data", suites / "data")
    shutil.copy(REPO / "suites" / "poetry.toml", suites)
    report = tmp_path / "report"
    assert run(pytester, demo_cache, f"--novelty-suites={suites}").ret == 0  # repeat 0 cached
    result = run(pytester, demo_cache, f"--novelty-suites={suites}", "--novelty-repeat", "3",
                 f"--novelty-report={report}")  # fmt: skip
    assert result.ret == 0
    text = result.stdout.str()
    assert re.search(r"novelty work done: 0 samples generated in 0 batches \(200 from cache\).*; repeats: 400 "
                     r"samples generated \(0 from cache\)", text), text
    assert len(re.findall(r"\d of 3 repeats pass \(", text)) == 4
    for row in json.loads((report / "report.json").read_text())["rows"]:
        repeats = row["repeats"]
        assert len(repeats["values"]) == 3 and repeats["values"][0] == row["value"]
        assert repeats["pass_rate"] == sum(repeats["passed"]) / 3
        assert repeats["spread"][0] <= repeats["spread"][1] <= repeats["spread"][2]
    assert len({tuple(r["repeats"]["values"]) for r in json.loads((report / "report.json").read_text())["rows"]
                if r["metric"] == "quality"}) == 1  # fmt: skip
