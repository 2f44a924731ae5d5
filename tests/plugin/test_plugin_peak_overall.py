"""Novelty Overall and Novelty at Peak gated under pytest: rows with intervals, the frozen peak, snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.suite_text import suite_toml

SUITE = suite_toml(ngrams=[4], thresholds=[("q_at_tail@0.5", 0.0), ("novelty_overall", 0.0),
                                           ("novelty_at_peak@0.5", 0.0)])  # fmt: skip
TAIL = {"format": 1, "q_at_tail@0.5": ["p0", "p2", "p4"], "novelty_at_peak@0.5": ["p5", "p3", "p1"]}


def _per_prompt_novelty(data: dict) -> dict[str, float]:
    """Each prompt's mean output originality at n = 4 as the gate counts it (too short: 0)."""
    suite = data["suites"]["story"]
    rows = suite["candidate"]["originality"]
    return {f"p{i}": sum(v or 0.0 for v in row) / len(row) for i, row in enumerate(rows)}


def test_both_are_rows_with_intervals_and_the_peak_is_the_tail_files(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    (suite_dir / "tail.json").write_text(json.dumps(TAIL))
    (suite_dir / "story.toml").write_text(SUITE + '[gate]\ntail = "tail.json"\n')
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(*novelty_args, f"--novelty-report={report}")
    result.assert_outcomes(passed=3)
    data = json.loads((report / "report.json").read_text())
    rows = {row["metric"]: row for row in data["rows"]}
    assert data["suites"]["story"]["n"] == 4
    novelty = _per_prompt_novelty(data)
    assert rows["novelty_at_peak@0.5"]["value"] == pytest.approx(sum(novelty[i] for i in ("p5", "p3", "p1")) / 3,
                                                                 abs=1e-6)  # fmt: skip
    assert rows["novelty_overall"]["value"] == pytest.approx(sum(novelty.values()) / 6, abs=1e-6)
    for name in ("novelty_overall", "novelty_at_peak@0.5"):
        low, high = rows[name]["ci"]
        assert low <= rows[name]["value"] <= high, rows[name]
    result.stdout.fnmatch_lines(["*novelty_at_peak@0.5 *", "*novelty_overall *"])


def test_a_snapshot_keeps_the_peak_and_a_later_run_is_compared_on_it(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    (suite_dir / "tail.json").write_text(json.dumps(TAIL))
    (suite_dir / "story.toml").write_text(SUITE + '[gate]\ntail = "tail.json"\n')
    pytester.runpytest_subprocess(*novelty_args, "--snapshot-update").assert_outcomes(passed=3)
    (stored,) = [p for p in (suite_dir / "__novelty_snapshots__").rglob("*novelty_at_peak*") if p.is_file()]
    record = json.loads(stored.read_text())
    assert record["tail_ids"] == ["p1", "p3", "p5"]
    # Another peak in the accepted record: the candidate is recomputed on the record's peak.
    record["tail_ids"] = ["p0", "p2"]
    stored.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    report = pytester.path / "report"
    pytester.runpytest_subprocess(*novelty_args, "--novelty-snapshots", f"--novelty-report={report}")
    data = json.loads((report / "report.json").read_text())
    (row,) = [r for r in data["rows"] if r["metric"] == "novelty_at_peak@0.5"]
    novelty = _per_prompt_novelty(data)
    assert row["comparison"]["candidate_value"] == pytest.approx((novelty["p0"] + novelty["p2"]) / 2, abs=1e-6)
    assert row["comparison"]["n_pairs"] == 2


def test_a_gated_peak_needs_its_entry_in_the_tail_file(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    (suite_dir / "tail.json").write_text('["p0", "p2", "p4"]')
    (suite_dir / "story.toml").write_text(SUITE + '[gate]\ntail = "tail.json"\n')
    result = pytester.runpytest_subprocess(*novelty_args)
    assert result.ret == 4
    lines = [line for line in result.stderr.lines + result.stdout.lines if "not a peak" in line]
    assert lines and "tail.json" in lines[0] and "Traceback" not in result.stderr.str()
