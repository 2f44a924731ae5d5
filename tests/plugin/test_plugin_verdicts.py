"""The report says what pytest decided, on every run; q@Tail's threshold and regression share one tail.

What these tests look at is the report and the gate, not the generation: each run starts from a
copy of one cache the checkpoint's gate filled (``warm_story``), as after a run of its own.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pytest_novelty.report.json_report import read_records
from tests.suite_text import suite_toml
from tests.warm_cache import cache_of, copy_warm

pytestmark = pytest.mark.slow


def test_a_harness_error_replaces_the_previous_report(
    pytester: pytest.Pytester, novelty_args: list[str], warm_story: Path
) -> None:
    copy_warm(warm_story, cache_of(novelty_args))
    report = pytester.path / "report"
    first = pytester.runpytest_subprocess(*novelty_args, f"--novelty-report={report}")
    first.assert_outcomes(passed=2)
    assert "**all 2 cases passed**" in (report / "report.md").read_text()

    broken = [a for a in novelty_args if not a.startswith("--originality=")]
    broken.append(f"--originality=infini-gram:{pytester.path / 'no-such-index'}")
    again = pytester.runpytest_subprocess(*broken, f"--novelty-report={report}")
    assert again.ret != 0
    text = (report / "report.md").read_text()
    data = json.loads((report / "report.json").read_text())
    assert "passed**" not in text, text
    assert data["summary"]["passed"] == 0
    # Either the run stopped before any case (the report says so) or every case is an error row.
    if data["summary"]["complete"]:
        assert data["summary"]["errors"] == data["summary"]["cases"] == 2
        assert all(row["outcome"] == "error" for row in data["rows"])
        assert "harness error" in text
    else:
        assert "no verdict" in text and "no-such-index" in text  # and why: the harness error's cause


Q_AT_TAIL_SUITE = suite_toml(thresholds=[("q_at_tail@0.5", 0.0)])


def test_q_at_tail_threshold_and_regression_use_the_snapshots_tail(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path, warm_story: Path
) -> None:
    copy_warm(warm_story, cache_of(novelty_args))
    (suite_dir / "story.toml").write_text(Q_AT_TAIL_SUITE)
    update = pytester.runpytest_subprocess(*novelty_args, "--snapshot-update")
    update.assert_outcomes(passed=1)
    (stored,) = [p for p in (suite_dir / "__novelty_snapshots__").rglob("*") if p.is_file()]
    record = json.loads(stored.read_text())
    own = set(record["tail_ids"])
    # A snapshot recorded from another checkpoint ranked the other half of the prompts as the tail.
    other = sorted(set(record["per_prompt"]) - own)
    record["tail_ids"] = other
    record["value"] = 0.9
    record["per_prompt"] = {k: 0.9 for k in record["per_prompt"]}
    stored.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")

    report = pytester.path / "report"
    pytester.runpytest_subprocess(*novelty_args, "--novelty-snapshots", f"--novelty-report={report}")
    (case,) = read_records(json.loads((report / "report.json").read_text()))
    # The value the threshold judged is the value compared: on the snapshot's tail, so it adds up.
    comparison = case.comparison
    assert case.value is not None and comparison is not None and comparison.accepted_value is not None
    assert math.isclose(case.value - comparison.accepted_value, comparison.delta, abs_tol=2e-6), case
    assert case.value == pytest.approx(comparison.candidate_value)
    assert case.tail is not None and case.tail.source == "snapshot" and "snapshot's tail" in case.tail.description
    assert "The plots show the candidate only" in (report / "report.md").read_text()
    # The comparison paired the prompts of the snapshot's tail, every one of which the candidate has.
    assert comparison.n_pairs == len(other) and case.tail.description == f"snapshot's tail, {len(other)} prompts"


CRASH = """
import os


def pytest_runtest_call(item):
    # A worker that dies in the middle of one case, as an out-of-memory kill would.
    if os.environ.get("PYTEST_XDIST_WORKER") and "quality" in item.nodeid:
        os._exit(3)
"""


def test_a_crashed_worker_is_an_error_in_the_report(
    pytester: pytest.Pytester, novelty_args: list[str], warm_story: Path
) -> None:
    copy_warm(warm_story, cache_of(novelty_args))
    pytester.makeconftest(CRASH)
    report = pytester.path / "report"
    # On the CPU: the worker and its replacement do not import torch to count GPUs and set threads.
    result = pytester.runpytest_subprocess(
        *novelty_args, "-n", "1", "--novelty-device=cpu", f"--novelty-report={report}"
    )
    assert result.ret != 0
    data = json.loads((report / "report.json").read_text())
    rows = {row["metric"]: row for row in data["rows"]}
    assert rows["quality"]["outcome"] == "error" and not rows["quality"]["passed"]
    assert "crashed" in rows["quality"]["message"]
    assert rows["originality@4"]["outcome"] == "passed"
    assert data["summary"]["errors"] == 1 and data["summary"]["passed"] == 1
    text = (report / "report.md").read_text()
    assert "all 2 cases passed" not in text and "harness error" in text


def test_q_at_tail_uses_the_suites_tail_file(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path, warm_story: Path
) -> None:
    copy_warm(warm_story, cache_of(novelty_args))
    (suite_dir / "tail.json").write_text('{"q_at_tail@0.5": ["p1", "p4", "not-a-prompt"]}')
    (suite_dir / "story.toml").write_text(Q_AT_TAIL_SUITE + '[gate]\ntail = "tail.json"\n')
    report = pytester.path / "report"
    pytester.runpytest_subprocess(*novelty_args, f"--novelty-report={report}").assert_outcomes(passed=1)
    data = json.loads((report / "report.json").read_text())
    (case,) = read_records(data)
    assert case.tail is not None and case.tail.description == "tail file tail.json, 2 of 3 prompts"
    quality = data["suites"]["story"]["candidate"]["quality"]
    expected = [sum(quality[i]) / len(quality[i]) for i in (1, 4)]  # p1 and p4, in prompt order
    assert case.value == pytest.approx(sum(expected) / 2, abs=1e-6)

    (suite_dir / "tail.json").write_text('["not-a-prompt"]')
    again = pytester.runpytest_subprocess(*novelty_args, f"--novelty-report={report}")
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(["*none of the 1 prompts of the tail file tail.json*"])
