"""Novelty Overall and Novelty at Peak: gateable metrics of the one metric table, with intervals."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.metrics.suite import suite_metrics
from pytest_novelty.metrics.table import FAMILIES, family, values_of
from pytest_novelty.metrics.uncertainty import suite_intervals
from pytest_novelty.suites.schema import BOUNDED_METRICS, COUNT_METRICS, CREATIVITY_METRICS
from pytest_novelty.suites.suite_file import load_suite

IDS = [f"p{i:02d}" for i in range(20)]
METRICS = ["q_at_tail@0.2", "novelty_overall", "novelty_at_peak@0.2"]


def _arrays(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    quality, originality = rng.random((20, 3)), rng.random((20, 3))
    originality[0] = np.nan  # p00's answers are too short for a 4-gram: output novelty 0
    prompt_novelty = rng.random(20)
    prompt_novelty[3] = np.nan  # p03's text has no 4-gram: left out of the ranking
    return quality, originality, prompt_novelty


def test_the_schema_knows_every_family_of_the_metric_table() -> None:
    assert set(BOUNDED_METRICS) | set(COUNT_METRICS) | set(CREATIVITY_METRICS) == set(FAMILIES)


def test_novelty_overall_and_at_peak_are_the_papers_means() -> None:
    quality, originality, prompt_novelty = _arrays()
    values, _, subsets = suite_metrics(quality=quality, originality={4: originality}, prompt_ids=IDS,
                                       metrics=METRICS, prompt_novelty=prompt_novelty)  # fmt: skip
    novelty = np.nan_to_num(originality).mean(axis=1)  # per prompt, too short as 0
    assert values["novelty_overall"] == pytest.approx(novelty.mean())
    peak = subsets["novelty_at_peak@0.2"]
    assert len(peak) == 4 and "p03" not in peak  # ceil(0.2 × 19 ranked prompts)
    scores = (prompt_novelty + novelty) / 2
    ranked = sorted((i for i in range(20) if i != 3), key=lambda i: (scores[i], IDS[i]))
    assert set(peak) == {IDS[i] for i in ranked[:4]}
    assert values["novelty_at_peak@0.2"] == pytest.approx(np.mean([novelty[IDS.index(i)] for i in peak]))
    assert not set(peak) & set(subsets["q_at_tail@0.2"])  # the two ends of one ranking


def test_a_frozen_peak_is_used_unless_a_pool_ranks_the_prompts() -> None:
    quality, originality, prompt_novelty = _arrays()
    frozen = {"novelty_at_peak@0.2": ["p05", "p07"]}
    values, _, subsets = suite_metrics(quality=quality, originality={4: originality}, prompt_ids=IDS,
                                       metrics=METRICS, prompt_novelty=prompt_novelty, frozen_peaks=frozen)  # fmt: skip
    assert subsets["novelty_at_peak@0.2"] == ["p05", "p07"]
    novelty = np.nan_to_num(originality).mean(axis=1)
    assert values["novelty_at_peak@0.2"] == pytest.approx((novelty[5] + novelty[7]) / 2)
    pool = np.zeros_like(originality)
    _, _, ranked = suite_metrics(quality=quality, originality={4: originality}, prompt_ids=IDS, metrics=METRICS,
                                 prompt_novelty=prompt_novelty, pool_novelty=pool, frozen_peaks=frozen)  # fmt: skip
    expected = sorted((i for i in range(20) if i != 3), key=lambda i: (prompt_novelty[i], IDS[i]))[:4]
    assert set(ranked["novelty_at_peak@0.2"]) == {IDS[i] for i in expected}


def test_their_intervals_estimate_the_gated_value_to_the_last_digit() -> None:
    quality, originality, prompt_novelty = _arrays(1)
    values, per_prompt, subsets = suite_metrics(quality=quality, originality={4: originality}, prompt_ids=IDS,
                                                metrics=METRICS, prompt_novelty=prompt_novelty)  # fmt: skip
    intervals = suite_intervals(quality=quality, originality={4: originality}, metrics=METRICS,
                                per_prompt=per_prompt, prompt_ids=IDS, tails=subsets, n_boot=400)  # fmt: skip
    for name in METRICS:
        interval = intervals[name]
        assert interval.estimate == values[name], name
        assert interval.defined and interval.low <= values[name] <= interval.high
    assert intervals["novelty_overall"].n_clusters == 20
    assert intervals["novelty_at_peak@0.2"].n_clusters == 4  # the peak's prompts are its clusters


def test_the_table_pairs_them_on_per_prompt_output_novelty_and_names_their_prompts() -> None:
    assert family("novelty_overall").paired_on("novelty_overall") == "originality@4"
    assert family("novelty_at_peak@0.1").subset == "peak" and family("q_at_tail@0.1").subset == "tail"
    assert not family("novelty_at_peak@0.1").uses_quality  # a judge that disagrees with people does not void it
    quality, originality, _ = _arrays()
    values = values_of("novelty_at_peak@0.1", quality, {4: originality})
    assert values is not None and values[0].tolist() == [0.0, 0.0, 0.0] and not np.isnan(values).any()


SUITE = """
task = "story"
[prompts]
source = "builtin:story"
[[thresholds]]
metric = "{metric}"
min = 0.2
"""


def _suite(tmp_path: Path, metric: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(SUITE.format(metric=metric))
    return path


@pytest.mark.parametrize("metric", ["novelty_overall", "novelty_at_peak@0.1", "novelty_at_peak@.25"])
def test_a_suite_file_gates_them(tmp_path: Path, metric: str) -> None:
    threshold = load_suite(_suite(tmp_path, metric)).thresholds[0]
    assert threshold.metric == metric.replace("@.25", "@0.25") and threshold.op == ">="


@pytest.mark.parametrize(
    ("metric", "words"),
    [("novelty_overall@0.1", "novelty_overall takes no @ argument"),
     ("novelty_at_peak", "novelty_at_peak needs a peak fraction"), ("novelty_at_peak@2", "peak fraction in (0, 1]")],
)  # fmt: skip
def test_a_bad_one_is_one_line_naming_the_field(tmp_path: Path, metric: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_suite(_suite(tmp_path, metric))
    assert words in str(info.value) and "thresholds[0].metric" in str(info.value) and "\n" not in str(info.value)


def test_an_empty_peak_gives_an_undefined_interval_not_an_error() -> None:
    quality, originality, _ = _arrays()
    none = np.full(20, np.nan)  # no prompt has a 4-gram: nothing is ranked
    values, per_prompt, subsets = suite_metrics(quality=quality, originality={4: originality}, prompt_ids=IDS,
                                                metrics=METRICS, prompt_novelty=none)  # fmt: skip
    assert math.isnan(values["novelty_at_peak@0.2"]) and subsets["novelty_at_peak@0.2"] == []
    intervals = suite_intervals(quality=quality, originality={4: originality}, metrics=["novelty_at_peak@0.2"],
                                per_prompt=per_prompt, prompt_ids=IDS, tails=subsets, n_boot=50)  # fmt: skip
    assert not intervals["novelty_at_peak@0.2"].defined
