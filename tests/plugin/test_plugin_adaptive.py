"""``--novelty-adaptive SAMPLES``: rounds only for the cases the first pass cannot decide, through the one
case loop of both front ends, kept in report.json and report.md and reused by a rerun; the futility
stop, reported with what the budget left could detect; regressions judged by the paired rule, with
rounds of both sides against a live baseline and of the candidate alone against a snapshot.

The tiny checkpoint writes four tokens an answer here, so that its answers vary within a prompt:
whether one holds a 4-gram (coverage@4) and what the judge makes of it (quality) are noisy, as a
real checkpoint's are.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.cli import main
from pytest_novelty.gate.record import CaseRecord
from pytest_novelty.report.json_report import read_records
from tests.cli_in_process import run_cli
from tests.suite_text import suite_toml

pytestmark = pytest.mark.slow

SAMPLES_A_ROUND = 6 * 2  # the suite's prompts x samples


def _suite(suite_dir: Path, thresholds: list[tuple[str, float]]) -> None:
    (suite_dir / "story.toml").write_text(suite_toml(max_new_tokens=4, ngrams=[4], thresholds=thresholds))


def _cases(report: Path) -> dict[str, CaseRecord]:
    return {c.metric: c for c in read_records(json.loads((report / "report.json").read_text()))}


@pytest.fixture(scope="module")
def other_checkpoint(tmp_path_factory: pytest.TempPathFactory, tiny_corpus: list[str]) -> Path:
    """Another tiny checkpoint (other initial weights): a candidate that differs from the first."""
    from tests.conftest import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("other") / "other-model", tiny_corpus, seed=1)


def _run(*args: str) -> tuple[str, dict[str, CaseRecord]]:
    """``pytest-novelty run ARGS --report DIR`` in this process (the last two arguments name the report)."""
    done = run_cli("run", *args)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout, _cases(Path(args[-1]))


@pytest.fixture
def suite_folder(tmp_path: Path) -> Path:
    """The story suite of six prompts (without pytester: the runs here are in this process, and the
    modules pytester's teardown drops would be imported a second time by the next one)."""
    from tests.plugin.conftest import PROMPTS
    from tests.suite_text import write_story_suite_folder

    text = suite_toml(max_new_tokens=4, ngrams=[4], thresholds=[("originality@4", 0.0), ("coverage@4", 0.0),
                                                                 ("quality", 0.0)])  # fmt: skip
    return write_story_suite_folder(tmp_path / "suites", PROMPTS, text)


def _common(suite_folder: Path, tmp_path: Path, tiny_index: Path) -> list[str]:
    return ["--suites", str(suite_folder), "--cache", str(tmp_path / "cache"), "--originality",
            f"infini-gram:{tiny_index}"]  # fmt: skip


def _rounds_line(text: str) -> int:
    found = re.search(r"adaptive rounds: (\d+) samples generated \((\d+) from cache\)", text)
    assert found, text
    return int(found.group(1)) + int(found.group(2))


def test_regressions_against_a_live_baseline_draw_rounds_of_both_checkpoints(
    suite_folder: Path, tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path, other_checkpoint: Path
) -> None:
    budget = 2 * 2 * SAMPLES_A_ROUND  # two rounds of both checkpoints
    args = ["--model", str(other_checkpoint), "--baseline-model", str(tiny_checkpoint), "--adaptive", str(budget)]
    text, cases = _run(*args, *_common(suite_folder, tmp_path, tiny_index), "--report", str(tmp_path / "live"))
    candidate = baseline = 0
    for case in cases.values():
        paired: Any = case.regression_adaptive
        assert case.compared is not None and case.compared.against == "baseline"
        assert paired is not None and paired.allowed == 3  # a round costs both checkpoints' samples
        assert case.adaptive is not None and case.adaptive.allowed == 5  # the threshold's cost the candidate's
        if paired.decided:
            assert case.compared.message.endswith(f"(decided by the sequential rule after {len(paired.looks)} look"
                                                  + ("s)" if len(paired.looks) > 1 else ")"))  # fmt: skip
        else:
            assert paired.note("regression").lstrip("; ") in text
        candidate, baseline = max(candidate, paired.rounds, case.adaptive.rounds), max(baseline, paired.rounds)
    assert baseline >= 1
    assert _rounds_line(text) == (candidate + baseline) * SAMPLES_A_ROUND  # the baseline's rounds counted too


def test_regressions_against_a_snapshot_draw_rounds_of_the_candidate_alone(
    suite_folder: Path, tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path, other_checkpoint: Path
) -> None:
    snapshots = tmp_path / "snapshots"
    common = [*_common(suite_folder, tmp_path, tiny_index), "--snapshot-dir", str(snapshots)]
    _run("--model", str(tiny_checkpoint), *common, "--snapshot-update", "--report", str(tmp_path / "accepted"))
    stored = {p: p.read_bytes() for p in snapshots.rglob("*.jsonc")}
    assert len(stored) == 3
    budget = 4 * SAMPLES_A_ROUND
    text, cases = _run("--model", str(other_checkpoint), *common, "--snapshots", "--adaptive", str(budget), "--report",
                       str(tmp_path / "frozen"))  # fmt: skip
    drawn = 0
    for case in cases.values():
        paired: Any = case.regression_adaptive
        assert case.compared is not None and case.compared.against == "snapshot"
        assert paired is not None and paired.allowed == 5  # a round costs the candidate's samples only
        drawn = max(drawn, paired.rounds, case.adaptive.rounds if case.adaptive else 0)
        assert paired.decided or paired.note("regression").lstrip("; ") in text
    assert _rounds_line(text) == drawn * SAMPLES_A_ROUND
    assert {p: p.read_bytes() for p in snapshots.rglob("*.jsonc")} == stored  # read, never written


def test_cases_at_their_bound_draw_rounds_stop_for_futility_and_a_rerun_reuses_them(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path, tmp_path: Path
) -> None:
    _suite(suite_dir, [("originality@4", 0.0), ("coverage@4", 0.0), ("quality", 0.0)])
    first = tmp_path / "first"
    pytester.runpytest_subprocess(*novelty_args, f"--novelty-report={first}").assert_outcomes(passed=3)
    assert all(c.adaptive is None for c in _cases(first).values())  # no budget, no rounds
    values = {metric: case.value for metric, case in _cases(first).items()}
    # The bounds at the first pass's own values: the rule cannot tell them apart from their bounds;
    # originality at a bound of 0 is far from it and is decided at its first look.
    _suite(suite_dir, [("originality@4", 0.0), ("coverage@4", values["coverage@4"]), ("quality", values["quality"])])
    report = tmp_path / "adaptive"
    budget = 3 * SAMPLES_A_ROUND  # three more rounds
    result = pytester.runpytest_subprocess(*novelty_args, "--novelty-adaptive", str(budget),
                                           f"--novelty-report={report}")  # fmt: skip
    text = result.stdout.str()
    cases = _cases(report)
    far = cases["originality@4"]
    assert far.adaptive is not None and far.adaptive.decided and far.adaptive.rounds == 0
    drawn = 0
    for metric in ("coverage@4", "quality"):
        near = cases[metric].adaptive
        assert near is not None and not near.decided and near.allowed == 4
        # Stopped before the budget's last round: even the rounds left could not bring it across
        # (at the first look already where the value sits exactly on its bound).
        assert near.stopped == "futility" and 0 <= near.rounds < 3, near
        assert 0.0 < near.detectable < 1.0
        note = near.note()
        assert note.endswith(f"(stopped for futility; the budget left could detect {near.detectable:.4f})")
        assert note.lstrip("; ") in text  # the terminal table
        assert note.lstrip("; ") in (report / "report.md").read_text()
        # An undecided case is read by its mode (point: every round's estimate against the bound).
        assert "undecided (stopped for futility; the budget left could detect" in cases[metric].message
        assert "point mode reads the estimate of every round" in cases[metric].message
        drawn = max(drawn, near.rounds)
    assert drawn >= 1  # a round was drawn for at least one of them
    assert re.search(rf"adaptive rounds: {drawn * SAMPLES_A_ROUND} samples generated \(0 from cache\)", text), text
    raw = json.loads((report / "report.json").read_text())
    row = next(r for r in raw["rows"] if r["metric"] == "quality")["adaptive"]
    assert row["stopped"] == "futility" and row["detectable"] == pytest.approx(cases["quality"].adaptive.detectable)
    assert all(set(look) == {"estimate", "se", "z", "boundary"} for look in row["looks"])

    again = tmp_path / "again"  # the command line, on the same cache: the rounds are found, not generated
    args = ["run", "--model", novelty_args[1], "--suites", str(suite_dir), "--cache", str(tmp_path / "cache"),
            novelty_args[4], "--adaptive", str(budget), "--report", str(again)]  # fmt: skip
    status = main(args)
    assert status == (0 if all(c.passed for c in cases.values()) else 1)
    assert _cases(again) == cases  # the same records, decided by the same loop
