"""Honest verdicts: the CI is the gated statistic's, the verdict agrees with it, one frozen q@Tail tail."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pytest_novelty.gate import tail
from pytest_novelty.gate.regression import MetricRecord, compare
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.metrics import top_fraction_mean
from pytest_novelty.suites.suite_file import load_suite

IDS = [f"p{i:02d}" for i in range(40)]


def _top10_record(novelty: np.ndarray) -> MetricRecord:
    return MetricRecord(  # type: ignore[call-arg]
        suite="story",
        metric="top10_novelty@5",
        value=top_fraction_mean(novelty.ravel(), 0.1),
        higher_is_better=True,
        per_prompt=dict(zip(IDS, novelty.mean(axis=1).tolist(), strict=True)),
        per_generation={i: row.tolist() for i, row in zip(IDS, novelty, strict=True)},
        tolerance_abs=0.0,
    )


def test_the_top10_ci_is_the_ci_of_the_top10_statistic() -> None:
    rng = np.random.default_rng(3)
    snapshot = rng.uniform(0.2, 0.6, size=(len(IDS), 2))
    snapshot[:4, 0] = 0.95  # the best generations, which the top-10 % statistic is about
    candidate = snapshot.copy()
    candidate[:4, 0] = 0.55  # they lose their edge; the mean barely moves
    result = compare(_top10_record(snapshot), _top10_record(candidate))
    delta = top_fraction_mean(candidate.ravel(), 0.1) - top_fraction_mean(snapshot.ravel(), 0.1)
    assert result.delta == pytest.approx(delta)
    assert result.delta_ci is not None
    # The interval is around the change of the top 10 %, not around the (ten times smaller) change
    # of the per-prompt mean, and the test is named with its statistic.
    assert result.delta_ci[0] <= delta <= result.delta_ci[1]
    assert result.delta_ci[1] < 0
    assert result.status == "regressed"
    assert "top 10 %" in result.test
    assert "top 10 %" in result.message


def test_the_verdict_agrees_with_the_ci_it_shows() -> None:
    # Small drops on 12 prompts: near the edge of significance, where a t-test's p and a bootstrap
    # CI used to disagree ("not significant" with a CI of [-0.061, -0.001]).
    disagree, tested = [], 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        base = rng.uniform(0.3, 0.7, size=12)
        cand = base - 0.04 + rng.normal(0.0, 0.06, size=12)
        snap = MetricRecord("s", "quality", float(base.mean()), True, dict(zip(IDS, base.tolist(), strict=False)))
        new = MetricRecord(
            "s", "quality", float(cand.mean()), True, dict(zip(IDS, cand.tolist(), strict=False)), tolerance_abs=0.0
        )
        result = compare(snap, new)
        if result.delta_ci is not None:
            tested += 1
            if (result.status == "regressed") != (result.delta_ci[1] < 0):
                disagree.append(result.message)
    assert tested > 20
    assert disagree == []
    assert getattr(result, "test", "").startswith("paired sign-flip")


def test_the_top10_record_round_trips_its_generations() -> None:
    record = _top10_record(np.full((len(IDS), 2), 0.5))
    again = MetricRecord.from_json(record.to_json())
    assert again.per_generation == {i: [0.5, 0.5] for i in IDS}
    # Other metrics keep the stored layout they had.
    assert "per_generation" not in json.loads(MetricRecord("s", "quality", 0.5, True).to_json())


# one frozen tail


def test_the_tail_comes_from_baseline_then_snapshot_then_suite_file_then_candidate(tmp_path: Path) -> None:
    file = tmp_path / "tail.json"
    file.write_text(json.dumps({"q_at_tail@0.1": ["p3", "p4"]}))
    metric = "q_at_tail@0.1"
    first = tail.choose_tail(metric, baseline=["p1"], snapshot=["p2"], tail_file=file, candidate=["p5"])
    assert first.source == "baseline"
    assert tail.choose_tail(metric, snapshot=["p2"], tail_file=file, candidate=["p5"]).ids == ["p2"]
    chosen = tail.choose_tail(metric, tail_file=file, candidate=["p5"])
    assert (chosen.ids, chosen.source) == (["p3", "p4"], "suite file")
    assert chosen.describe(2) == "tail file tail.json, 2 prompts"
    assert tail.choose_tail(metric, candidate=["p5"]).describe(1) == "candidate's own tail, 1 prompts"


def test_tail_value_is_the_comparisons_value() -> None:
    per_prompt = {"a": 0.2, "b": float("nan"), "c": 0.6}
    value, used = tail.tail_value(per_prompt, ["c", "b", "x"])
    assert used == ["c", "b"] and value == pytest.approx(0.6)
    snap = MetricRecord("s", "q_at_tail@0.1", 0.5, True, {"a": 0.5, "b": 0.5, "c": 0.5}, tail_ids=["c", "b", "x"])
    cand = MetricRecord("s", "q_at_tail@0.1", value, True, per_prompt)
    assert compare(snap, cand).candidate_value == pytest.approx(value)


@pytest.mark.parametrize(
    ("content", "words"),
    [("not json", "cannot read the tail file"), ('{"other": ["a"]}', 'no "q_at_tail@0.1" entry'), ("[]", "non-empty")],
)
def test_a_bad_tail_file_is_one_clear_line(tmp_path: Path, content: str, words: str) -> None:
    file = tmp_path / "tail.json"
    file.write_text(content)
    with pytest.raises(ConfigError, match=words) as info:
        tail.choose_tail("q_at_tail@0.1", tail_file=file)
    assert str(file) in str(info.value) and "\n" not in str(info.value)


SUITE = """
task = "story"
[prompts]
source = "builtin:story"
[gate]
{gate}
[[thresholds]]
metric = "{metric}"
{bound}
"""


def _suite(tmp_path: Path, metric: str, bound: str = "min = 0.5", gate: str = "") -> Path:
    path = tmp_path / "s.toml"
    path.write_text(SUITE.format(metric=metric, bound=bound, gate=gate))
    return path


def test_the_schema_accepts_coverage_unscored_and_a_tail_file(tmp_path: Path) -> None:
    (tmp_path / "tail.json").write_text('["p1"]')
    assert load_suite(_suite(tmp_path, "coverage@5", "min = 0.9")).thresholds[0].metric == "coverage@5"
    assert load_suite(_suite(tmp_path, "unscored", "max = 0.05")).thresholds[0].op == "<="
    suite = load_suite(_suite(tmp_path, "q_at_tail@0.1", gate='tail = "tail.json"'))
    assert suite.gate.tail == (tmp_path / "tail.json").resolve()


@pytest.mark.parametrize(
    ("metric", "bound", "gate", "words"),
    [
        ("coverage", "min = 0.9", "", "coverage needs an n-gram order"),
        ("coverage@3", "min = 0.9", "", "n = 3 is not in scoring.ngrams"),
        ("unscored@5", "max = 0.1", "", "unscored takes no @ argument"),
        ("unscored", "max = 1.5", "", "can never be met"),
        ("q_at_tail@0.1", "min = 0.5", 'tail = "missing.json"', "gate.tail"),
    ],
)
def test_the_schema_refuses_bad_new_keys(tmp_path: Path, metric: str, bound: str, gate: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        load_suite(_suite(tmp_path, metric, bound, gate))
