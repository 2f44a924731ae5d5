"""A series decides as the gate does: every checkpoint on the case's frozen q@Tail tail, and every
change and the series' best compared on the gated statistic with the same bootstrap as a snapshot
regression (the top-10 % mean for ``top10_novelty``).

Before this round the series measured each checkpoint's q@Tail on its own tail, tested its changes
with a t-test on per-prompt values, and compared ``top10_novelty`` with the best earlier checkpoint
on per-prompt novelty (no per-generation values were passed).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pytest_novelty.gate.case import decide
from pytest_novelty.gate.series import suite_series
from pytest_novelty.pipeline.runner import RunConfig, Runner
from pytest_novelty.pipeline.series import Checkpoint
from pytest_novelty.suites.schema import Suite
from pytest_novelty.suites.suite_file import load_suite
from tests.plugin.test_plugin_model_series import reseeded
from tests.suite_text import story_prompts, suite_toml

pytestmark = pytest.mark.slow

TAIL, TOP = "q_at_tail@0.5", "top10_novelty@4"


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path, tiny_index: Path) -> tuple[Suite, list]:
    """One suite run on two checkpoints of different weights, with series-best against the first."""
    folder = tmp_path_factory.mktemp("series-gate")
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in story_prompts(6)))
    text = suite_toml(samples=3, max_new_tokens=12, ngrams=[4], gate='against = "series-best"\ntolerance_abs = 0.0',
                      thresholds=[(TAIL, 0.0), (TOP, 0.0)])  # fmt: skip
    (folder / "story.toml").write_text(text)
    suite = load_suite(folder / "story.toml")
    results = []
    for seed, step in enumerate((100, 200)):
        model = reseeded(tiny_checkpoint, folder / f"checkpoint-{step}", seed)
        config = RunConfig(model=str(model), cache_dir=folder / "cache", device="cpu",
                           originality=f"infini-gram:{tiny_index}")  # fmt: skip
        results.append(Runner(config).run(suite))
    return suite, results


def test_every_checkpoint_is_measured_on_the_cases_frozen_tail(series: tuple[Suite, list]) -> None:
    _suite, (first, second) = series
    ids = [p.id for p in first.prompts]
    frozen = [i for i in ids if i not in second.measured.tail_ids[TAIL]][:2] or ids[:2]
    entries = suite_series([(Checkpoint(100, "c-100"), first), (Checkpoint(200, "c-200"), second)], {TAIL: frozen})
    for entry, result in zip(entries, (first, second), strict=True):
        quality = dict(zip(ids, result.per_prompt["quality"], strict=True))
        expected = float(np.nanmean([quality[i] for i in frozen]))
        assert entry["metrics"][TAIL] == pytest.approx(expected, abs=1e-6)
    change = entries[1]["change"][TAIL]
    assert change["delta"] == pytest.approx(entries[1]["metrics"][TAIL] - entries[0]["metrics"][TAIL], abs=1e-6)


def test_a_series_change_of_the_top_tenth_is_its_own_bootstrap(series: tuple[Suite, list]) -> None:
    _, (first, second) = series
    entries = suite_series([(Checkpoint(100, "c-100"), first), (Checkpoint(200, "c-200"), second)])
    change = entries[1]["change"][TOP]
    assert "top 10 %" in change["test"] and change["delta_ci"] is not None
    assert change["delta"] == pytest.approx(second.metrics[TOP] - first.metrics[TOP], abs=1e-6)


def test_series_best_compares_the_top_tenth_as_a_snapshot_regression_does(series: tuple[Suite, list]) -> None:
    suite, (first, second) = series
    threshold = next(t for t in suite.thresholds if t.metric == TOP)
    outcome = decide(suite, threshold, second, earlier=[first])
    assert outcome.comparison is not None and outcome.comparison.against == Path(first.model).name
    assert "top 10 %" in outcome.comparison.test and "no per-generation values" not in outcome.comparison.test
