"""Regression against a snapshot: direction, tolerance, significance, q@Tail and the stored JSON."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pytest_novelty.gate.comparison import Comparison
from pytest_novelty.gate.regression import MetricRecord, compare, make_record, per_prompt_key, redact
from pytest_novelty.suites.suite_file import parse_suite

IDS = [f"p{i:02d}" for i in range(30)]


def record(values: np.ndarray | list[float], *, higher: bool = True, **kwargs: object) -> MetricRecord:
    """A record whose value is the mean of its per-prompt values (NaN left out)."""
    array = np.asarray(values, dtype=float)
    base: dict[str, object] = {
        "suite": "poetry",
        "metric": "quality",
        "value": float(np.nanmean(array)) if np.any(~np.isnan(array)) else None,
        "higher_is_better": higher,
        "per_prompt": dict(zip(IDS, array.tolist(), strict=True)),
        "model": "ckpt-a",
        "identity_id": "abc123",
        "judge": "rules",
    }
    base.update(kwargs)
    return MetricRecord(**base)  # type: ignore[arg-type]


@pytest.fixture
def baseline_values() -> np.ndarray:
    return np.random.default_rng(7).uniform(0.4, 0.8, size=len(IDS))


def shifted(values: np.ndarray, shift: float, noise: float, seed: int = 1) -> np.ndarray:
    return values + shift + np.random.default_rng(seed).normal(0.0, noise, size=values.size)


# direction


def test_identical_records_are_the_same(baseline_values: np.ndarray) -> None:
    snap = record(baseline_values)
    result = compare(snap, snap)
    assert result.status == "same"
    assert result.passed and not result.warning


def test_a_clear_drop_is_a_regression_with_its_numbers(baseline_values: np.ndarray) -> None:
    snap = record(baseline_values)
    cand = record(shifted(baseline_values, -0.07, 0.02))
    result = compare(snap, cand)
    assert result.status == "regressed" and not result.passed
    assert result.delta == pytest.approx(cand.value - snap.value)  # type: ignore[operator]
    assert result.delta_ci is not None and result.delta_ci[0] < result.delta_ci[1] < 0
    assert result.p_value is not None and result.p_value < 0.001
    assert result.n_pairs == len(IDS)
    assert result.message.startswith(f"poetry quality: {snap.value:.4f} -> {cand.value:.4f} (-0.0")
    assert "tolerance 0.0200, 95% CI [" in result.message
    assert result.message.endswith(": regression")


def test_a_clear_rise_is_an_improvement_and_never_fails(baseline_values: np.ndarray) -> None:
    result = compare(record(baseline_values), record(shifted(baseline_values, +0.2, 0.01)))
    assert result.status == "improved" and result.passed
    # Never decided by a test, but shown with its interval like every comparison: it lies above 0.
    assert result.delta_ci is not None and result.delta_ci[0] > 0


def test_for_max_thresholds_a_rise_is_the_regression(baseline_values: np.ndarray) -> None:
    snap = record(baseline_values, higher=False)
    assert compare(snap, record(shifted(baseline_values, +0.07, 0.02), higher=False)).status == "regressed"
    assert compare(snap, record(shifted(baseline_values, -0.07, 0.02), higher=False)).status == "improved"


# tolerance


def test_a_drop_within_the_absolute_tolerance_passes_with_a_warning(baseline_values: np.ndarray) -> None:
    cand = record(baseline_values - 0.015)
    result = compare(record(baseline_values), cand)
    assert result.status == "within_tolerance"
    assert result.passed and result.warning
    assert result.tolerance == pytest.approx(0.02)


def test_tolerance_comes_from_the_candidate(baseline_values: np.ndarray) -> None:
    snap = record(baseline_values, tolerance_abs=0.001)
    cand = record(baseline_values - 0.015, tolerance_abs=0.05)
    assert compare(snap, cand).tolerance == pytest.approx(0.05)
    assert compare(snap, cand).status == "within_tolerance"
    tight = replace(cand, tolerance_abs=0.001)
    assert compare(snap, tight).status == "regressed"  # an exact shift: p = 0


def test_relative_tolerance_scales_with_the_snapshot_value(baseline_values: np.ndarray) -> None:
    snap = record(baseline_values)
    cand = record(baseline_values - 0.04, tolerance_abs=0.0, tolerance_rel=0.1)
    result = compare(snap, cand)
    assert result.tolerance == pytest.approx(0.1 * snap.value)  # type: ignore[operator]
    assert result.status == "within_tolerance"  # 0.04 < 0.1 × ~0.6
    bigger_abs = replace(cand, tolerance_abs=0.5)
    assert compare(snap, bigger_abs).tolerance == pytest.approx(0.5)  # the larger of the two


# significance


def test_noise_beyond_tolerance_is_not_significant(baseline_values: np.ndarray) -> None:
    # The mean falls by more than the tolerance, but per-prompt noise is far larger than the shift.
    noise = np.random.default_rng(3).normal(0.0, 0.25, size=len(IDS))
    values = baseline_values - 0.03 + (noise - noise.mean())  # the mean falls by exactly 0.03
    snap = record(baseline_values)
    cand = record(values)
    result = compare(snap, cand)
    assert snap.value - cand.value > 0.02  # type: ignore[operator]
    assert result.status == "not_significant"
    assert result.passed and result.warning
    assert result.p_value is not None and result.p_value >= 0.05
    assert result.delta_ci is not None and result.delta_ci[0] < 0 < result.delta_ci[1]
    assert "drop not significant" in result.message


def test_alpha_comes_from_the_candidate(baseline_values: np.ndarray) -> None:
    snap = record(baseline_values)
    cand = record(shifted(baseline_values, -0.05, 0.2, seed=5))
    p = compare(snap, cand).p_value
    # p comes from 10,000 bootstrap resamples: well above their resolution here.
    assert p is not None and 1e-3 < p < 0.5
    assert compare(snap, replace(cand, alpha=min(1.0, p * 2))).status == "regressed"
    assert compare(snap, replace(cand, alpha=p / 2)).status == "not_significant"


def test_without_per_prompt_values_a_drop_beyond_tolerance_fails() -> None:
    snap = MetricRecord("poetry", "quality", 0.6, True)
    cand = MetricRecord("poetry", "quality", 0.5, True)
    result = compare(snap, cand)
    assert result.status == "regressed"
    assert "too few paired prompts" in result.message
    assert result.n_pairs == 0


def test_only_shared_prompts_are_paired(baseline_values: np.ndarray) -> None:
    snap = record(baseline_values)
    values = dict(zip(IDS, (baseline_values - 0.1).tolist(), strict=True))
    values.pop("p00")
    values["extra"] = 0.0
    cand = replace(snap, value=snap.value - 0.1, per_prompt=values)  # type: ignore[operator]
    result = compare(snap, cand)
    assert result.n_pairs == len(IDS) - 1
    assert result.status == "regressed"


# NaN handling


def test_nan_prompts_are_left_out_of_the_pairs(baseline_values: np.ndarray) -> None:
    values = shifted(baseline_values, -0.07, 0.02)
    values[:5] = np.nan
    result = compare(record(baseline_values), record(values))
    assert result.n_pairs == len(IDS) - 5
    assert result.status == "regressed"


def test_a_candidate_value_that_cannot_be_computed_regresses(baseline_values: np.ndarray) -> None:
    cand = record(np.full(len(IDS), np.nan))
    result = compare(record(baseline_values), cand)
    assert cand.value is None
    assert result.status == "regressed" and "could not be computed" in result.message
    assert result.candidate_value is None


def test_a_snapshot_without_value_is_beaten_by_any_value(baseline_values: np.ndarray) -> None:
    snap = record(np.full(len(IDS), np.nan))
    assert compare(snap, record(baseline_values)).status == "improved"
    assert compare(snap, snap).status == "same"


# q@Tail


def test_q_at_tail_is_recomputed_on_the_snapshot_tail() -> None:
    tail = ["p00", "p01", "p02"]
    snap_values = np.full(len(IDS), 0.5)
    snap = record(snap_values, metric="q_at_tail@0.1", value=0.5, tail_ids=tail)
    # The candidate's own tail (other prompts) looks great; on the snapshot's tail it dropped.
    cand_values = np.full(len(IDS), 0.9)
    cand_values[:3] = [0.2, 0.25, 0.3]
    cand = record(cand_values, metric="q_at_tail@0.1", value=0.9, tail_ids=["p10", "p11", "p12"])
    result = compare(snap, cand)
    assert result.candidate_value == pytest.approx(0.25)
    assert result.n_pairs == 3
    # A drop on every tail prompt, but three prompts can show nothing at alpha 0.05 (the smallest p is 2/2³).
    assert result.status == "not_significant" and result.p_value == pytest.approx(0.25)
    assert "3 paired prompts can give no p-value below 0.25" in result.message


def test_q_at_tail_with_missing_tail_prompts_uses_the_ones_left() -> None:
    snap_values = np.linspace(0.4, 0.7, len(IDS))
    tail = ["p00", "p01", "p29"]
    snap = record(snap_values, metric="q_at_tail@0.1", value=float(np.mean(snap_values[[0, 1, 29]])), tail_ids=tail)
    cand_values = dict(zip(IDS, snap_values.tolist(), strict=True))
    del cand_values["p29"]
    cand = replace(snap, per_prompt=cand_values, value=0.0)
    result = compare(snap, cand)
    assert result.status == "same"  # both judged on p00 and p01 only
    assert result.accepted_value == pytest.approx(np.mean(snap_values[[0, 1]]))
    assert "on 2 of 3 tail prompts" in result.message


# stored JSON


def test_json_round_trip(baseline_values: np.ndarray) -> None:
    values = baseline_values.copy()
    values[3] = np.nan
    original = record(values, tail_ids=["p02", "p01"], tolerance_rel=0.05, alpha=0.01)
    text = original.to_json()
    back = MetricRecord.from_json(text)
    assert back.suite == original.suite and back.metric == original.metric
    assert back.value == pytest.approx(original.value, abs=1e-6)
    assert math.isnan(back.per_prompt["p03"])
    assert back.per_prompt["p04"] == pytest.approx(values[4], abs=1e-6)
    assert back.tail_ids == ["p01", "p02"]
    assert (back.tolerance_rel, back.alpha) == (0.05, 0.01)
    assert back.to_json() == text  # a fixed point: re-serialising never churns the file


def test_json_is_deterministic_and_diff_friendly(baseline_values: np.ndarray) -> None:
    first = record(baseline_values)
    reordered = replace(first, per_prompt=dict(reversed(list(first.per_prompt.items()))))
    text = first.to_json()
    assert text == reordered.to_json()
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert all(len(str(v).split(".")[-1]) <= 6 for v in data["per_prompt"].values())
    prompt_lines = [line for line in text.splitlines() if re.match(r'^\s+"p\d\d": ', line)]
    assert len(prompt_lines) == len(IDS)  # one prompt per line
    assert "NaN" not in record([math.nan] * len(IDS)).to_json()


def test_json_never_stores_credentials() -> None:
    rec = MetricRecord(
        "s",
        "quality",
        0.5,
        True,
        model="https://user:hunter2@models.example/ckpt",
        judge="openai:gpt-x key sk-abcdefghijklmnopqrstuvwxyz",
    )
    text = rec.to_json()
    assert "hunter2" not in text and "sk-abcdefghijklmnop" not in text
    assert "https://models.example/ckpt" in text
    assert redact("plain words") == "plain words"


@pytest.mark.parametrize(
    "text",
    ["not json", "[1, 2]", '{"format": 99}', '{"format": 1, "suite": "s"}'],
)
def test_from_json_rejects_other_text(text: str) -> None:
    with pytest.raises(ValueError):
        MetricRecord.from_json(text)


def test_comparison_lines_and_dict(baseline_values: np.ndarray) -> None:
    result = compare(record(baseline_values), record(shifted(baseline_values, -0.07, 0.02)))
    text = "\n".join(result.lines())
    assert result.lines()[0] == "poetry quality: regression"
    labels = ("snapshot value 0.", "new value 0.", "delta -0.0", "tolerance 0.0200", "95% CI [-0.", "p-value 0.0002")
    for label in labels:
        assert label in text, label
    data = result.to_json()
    json.dumps(data, allow_nan=False)
    assert data["status"] == "regressed" and data["verdict"] == "regression"
    assert Comparison.from_json(json.loads(json.dumps(data))) == result  # read back as it was written
    baseline = compare(record(baseline_values), record(shifted(baseline_values, -0.07, 0.02)), against="baseline")
    assert "baseline value 0." in baseline.lines()[1] and "snapshot" not in "\n".join(baseline.lines())


# building records from a suite's results


def test_make_record_takes_settings_from_the_suite_and_threshold() -> None:
    suite = parse_suite(
        {
            "task": "story",
            "name": "poetry",
            "prompts": {"source": "builtin:story"},
            "gate": {"alpha": 0.01, "tolerance_abs": 0.03, "tolerance_rel": 0.1},
            "thresholds": [
                {"metric": "quality", "min": 0.3},
                {"metric": "top10_novelty@5", "max": 0.9, "tolerance_abs": 0.005},
                {"metric": "q_at_tail@0.1", "min": 0.2},
            ],
        },
        Path("poetry.toml"),
    )
    quality, top10, tail = suite.thresholds
    metrics = {"quality": 0.5, "top10_novelty@5": math.nan, "q_at_tail@0.1": 0.4}
    per_prompt = {"quality": [0.4, 0.6], "novelty@5": [0.2, math.nan]}
    ids = ["a", "b"]

    rec = make_record(suite, quality, metrics=metrics, per_prompt=per_prompt, prompt_ids=ids, model="m")
    assert (rec.suite, rec.metric, rec.value, rec.higher_is_better) == ("poetry", "quality", 0.5, True)
    assert rec.per_prompt == {"a": 0.4, "b": 0.6}
    assert (rec.tolerance_abs, rec.tolerance_rel, rec.alpha) == (0.03, 0.1, 0.01)

    rec = make_record(suite, top10, metrics=metrics, per_prompt=per_prompt, prompt_ids=ids)
    assert rec.value is None and rec.higher_is_better is False
    assert rec.per_prompt["a"] == 0.2 and math.isnan(rec.per_prompt["b"])  # paired on novelty@5
    assert rec.tolerance_abs == 0.005

    rec = make_record(suite, tail, metrics=metrics, per_prompt=per_prompt, prompt_ids=ids, tail_ids=["b"])
    assert rec.per_prompt == {"a": 0.4, "b": 0.6} and rec.tail_ids == ["b"]
    assert per_prompt_key("distinct_k") == "distinct_k"

    with pytest.raises(ValueError, match="per-prompt values"):
        make_record(suite, quality, metrics=metrics, per_prompt=per_prompt, prompt_ids=["a"])


def test_a_record_of_an_earlier_version_names_its_identity_as_it_did() -> None:
    """Snapshots written before the identity had one name said ``fingerprint``: read as its id."""
    data = json.loads(MetricRecord("s", "quality", 0.5, True, identity_id="abc123").to_json())
    assert "fingerprint" not in data and data["identity_id"] == "abc123"
    data["fingerprint"] = data.pop("identity_id")
    assert MetricRecord.from_json(json.dumps(data)).identity_id == "abc123"
