"""Verdicts that know their noise, on real runs of the demo: an interval on every case, threshold
modes that read it, the suite's detectable effects, and seed stability on request.

One run of every demo suite with a report (:func:`every_suite`) is read by several tests: the
intervals of its cases, the value a bound is then set at, and the answers a repeated run reuses.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.child_pytest import run_pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def demo_cache(demo_run_cache: Path) -> Path:
    """The shared cache of the demo's runs (see tests/conftest.py)."""
    return demo_run_cache


def run(pytester: pytest.Pytester, cache: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("--model", "demo", f"--novelty-cache={cache}", "-p", "no:cacheprovider",
                                         *args)  # fmt: skip


@pytest.fixture(scope="module")
def every_suite(tmp_path_factory: pytest.TempPathFactory, demo_run_cache: Path) -> tuple[pytest.RunResult, Any]:
    """``pytest --model demo`` over every demo suite with a report, in the shared demo cache: the
    run's result and its ``report.json``; every suite's answers are cached after it."""
    folder = tmp_path_factory.mktemp("every-suite")
    report = folder / "report"
    result = run_pytest(folder, "--model", "demo", f"--novelty-cache={demo_run_cache}", "-p", "no:cacheprovider",
                        f"--novelty-suites={REPO / 'suites'}", f"--novelty-report={report}")  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-3000:]
    return result, json.loads((report / "report.json").read_text())


def test_every_case_has_an_interval_that_holds_its_value(every_suite: tuple[pytest.RunResult, Any]) -> None:
    result, data = every_suite
    assert len(data["rows"]) == 19
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
    pytester: pytest.Pytester, demo_cache: Path, tmp_path: Path, every_suite: tuple[pytest.RunResult, Any]
) -> None:
    suites = tmp_path / "suites"
    shutil.copytree(REPO / "suites", suites)
    for other in ("poetry", "tool", "open"):
        (suites / f"{other}.toml").unlink()
    # The value story's novelty@5 has on these answers (the run of every suite measured it).
    value = next(r["value"] for r in every_suite[1]["rows"] if r["suite"] == "story" and r["metric"] == "novelty@5")
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
    pytester: pytest.Pytester, demo_cache: Path, tmp_path: Path, every_suite: tuple[pytest.RunResult, Any]
) -> None:
    suites = tmp_path / "suites"
    suites.mkdir()
    shutil.copytree(REPO / "suites" / "data", suites / "data")
    shutil.copy(REPO / "suites" / "poetry.toml", suites)
    report = tmp_path / "report"
    assert every_suite[0].ret == 0  # the first run's answers (repeat 0) are cached: it ran poetry too
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
