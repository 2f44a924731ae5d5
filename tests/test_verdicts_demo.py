"""Honest verdicts on the real demo: saying little fails story novelty, and the report adds up.

These use the demo prepared once for the test run (the ``demo_assets`` fixture, from the shipped
weights). Each works on a copy of the shared demo cache (``demo_run_cache``: the assets, and the
demo's answers where other tests of this worker already ran it, which the baseline ``demo`` of the
``demo-early`` run reuses), so generations and reports stay out of the shared one.
"""

from __future__ import annotations

import json
import math
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from pytest_novelty.gate import check_threshold
from pytest_novelty.pipeline import demo
from pytest_novelty.pipeline.runner import RunConfig, Runner, SuiteResult
from pytest_novelty.report.json_report import read_records
from pytest_novelty.suites.schema import Suite
from pytest_novelty.suites.suite_file import load_suite
from tests.child_pytest import copy_cache

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo_cache(tmp_path_factory: pytest.TempPathFactory, demo_run_cache: Path) -> Path:
    """A private cache holding a copy of the shared demo cache (the prepared demo, and whatever
    answers of the demo's own suites it holds by now)."""
    return copy_cache(demo_run_cache, tmp_path_factory.mktemp("demo-cache") / "cache")


@pytest.fixture(scope="module")
def story() -> Suite:
    return load_suite(REPO / "suites" / "story.toml")


@pytest.fixture(scope="module")
def runner(demo_cache: Path) -> Runner:
    return Runner(RunConfig(model="demo", cache_dir=demo_cache))


@pytest.fixture(scope="module")
def real(runner: Runner, story: Suite) -> SuiteResult:
    return runner.run(story)


def _failed(suite: Suite, result: SuiteResult) -> set[str]:
    return {t.metric for t in suite.thresholds if not check_threshold(suite.name, t, result.metrics).passed}


def test_the_real_demo_passes_story(story: Suite, real: SuiteResult) -> None:
    assert _failed(story, real) == set()
    assert 0.5 < real.metrics["coverage@5"] < 1.0  # the demo ends some stories at once, and it shows


def test_they_smiled_in_place_of_most_answers_fails_story_novelty(
    runner: Runner, story: Suite, real: SuiteResult
) -> None:
    rng = np.random.default_rng(0)
    flat = [a for samples in real.answers for a in samples]
    for index in rng.choice(len(flat), size=int(0.9 * len(flat)), replace=False):
        flat[index] = " They smiled."
    width = len(real.answers[0])
    answers = [flat[i : i + width] for i in range(0, len(flat), width)]
    result = runner.score(story, real.prompts, answers)
    failed = _failed(story, result)
    assert {"novelty@5", "coverage@5"} <= failed, result.metrics
    # Before, the 10 % left were the whole mean: 0.5465 against the real demo's 0.4995.
    assert result.metrics["novelty@5"] < real.metrics["novelty@5"] / 2


def test_stories_copied_from_the_corpus_fail_the_creativity_floor_the_demo_passes(
    runner: Runner, story: Suite, real: SuiteResult, demo_cache: Path
) -> None:
    """The story suite's ``creativity_index >= 1`` is a floor against copying: answers that are the
    training corpus's own stories, verbatim, score 0 and fail it; the demo's stories pass."""
    with (demo.demo_dir(demo_cache) / "corpus.jsonl").open(encoding="utf-8") as handle:
        stories = [t for t in (json.loads(line)["text"] for line in handle) if t.startswith("Once upon")]
    width = len(real.answers[0])
    copied = [stories[i * width : (i + 1) * width] for i in range(len(real.prompts))]
    result = runner.score(story, real.prompts, copied)
    assert "creativity_index" in _failed(story, result) and result.metrics["creativity_index"] == 0.0
    assert result.metrics["uniqueness@12"] == 0.0  # every word sits in a copied span of 12 or more
    assert real.metrics["creativity_index"] > 1.5 and "creativity_index" not in _failed(story, real)


def _eos_pushed(demo_cache: Path, out: Path, push: float) -> Path:
    """A copy of the demo checkpoint whose end-of-text logit is raised by about ``push``.

    The demo ties its output layer to its input embeddings, so the final layer norm's bias moves
    along the end-of-text embedding: the hidden state gains ``push · e / |e|²``, which adds ``push``
    to the end-of-text logit and leaves the input side untouched.
    """
    from safetensors.numpy import load_file, save_file

    shutil.copytree(demo.demo_dir(demo_cache) / "demo", out)
    weights = load_file(out / "model.safetensors")
    eos = int(json.loads((out / "config.json").read_text())["eos_token_id"])
    direction = weights["transformer.wte.weight"][eos]
    weights["transformer.ln_f.bias"] += push * direction / float(direction @ direction)
    save_file(weights, out / "model.safetensors", metadata={"format": "pt"})
    return out


def test_the_eos_pushed_demo_fails_story_novelty_not_only_quality(
    pytester: pytest.Pytester, demo_cache: Path, tmp_path: Path
) -> None:
    checkpoint = _eos_pushed(demo_cache, tmp_path / "eos-demo", push=6.0)
    index = demo.demo_dir(demo_cache) / "index"
    result = pytester.runpytest_subprocess(
        "--model",
        str(checkpoint),
        f"--originality=infini-gram:{index}",
        f"--novelty-suites={REPO / 'suites'}",
        f"--novelty-cache={tmp_path / 'cache'}",
        "-p",
        "no:cacheprovider",
        "-v",
        "-k",
        "story",
        timeout=600,
    )
    out = result.stdout.str()
    for case in ("novelty@5>=0.3", "coverage@5>=0.6", "q_at_tail@0.1>=0.4", "quality>=0.45"):
        assert f"test_metric[story-{case}] FAILED" in out, out[-3000:]
    assert "tail file story-tail.json" in out  # q@Tail on the frozen tail, not the one it picks itself


def test_a_demo_early_report_against_demo_adds_up_and_agrees_with_pytest(
    pytester: pytest.Pytester, demo_cache: Path
) -> None:
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        "--model",
        "demo-early",
        "--baseline-model",
        "demo",
        f"--novelty-suites={REPO / 'suites'}",
        f"--novelty-cache={demo_cache}",
        f"--novelty-report={report}",
        "--junitxml=junit.xml",
        "-p",
        "no:cacheprovider",
        timeout=900,
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    outcomes = {}
    for case in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase"):
        name = case.get("name", "")
        outcomes[name[len("test_metric[") : -1]] = not any(child.tag in ("failure", "error") for child in case)
    data = json.loads((report / "report.json").read_text())
    cases = read_records(data)
    assert len(cases) == len(outcomes) == data["summary"]["cases"]
    assert data["summary"]["failed"] == sum(not ok for ok in outcomes.values())
    for case in cases:
        assert case.threshold is not None
        label = f"{case.suite}-{case.label}"
        assert case.passed == outcomes[label], label
        verdict_fails = case.regressed or not (
            case.value is not None
            and (case.value >= case.threshold if case.op == ">=" else case.value <= case.threshold)
        )
        assert verdict_fails == (not outcomes[label]), label
        compared = case.compared
        if compared is not None and compared.accepted_value is not None and case.value is not None:
            assert math.isclose(case.value - compared.accepted_value, compared.delta, abs_tol=2e-6), case
        if compared is not None and compared.delta_ci:  # the change's interval (case.ci is the value's own)
            low, high = compared.delta_ci
            assert case.regressed == (high < 0 if case.op == ">=" else low > 0), case
            assert compared.n_pairs >= 2 and compared.test.startswith("paired sign-flip")
            if case.metric.startswith("top10_novelty"):
                assert "top 10 %" in compared.test
    warned = [c for c in cases if c.drifted]
    text = (report / "report.md").read_text()
    assert data["summary"]["warnings"] == len(warned)
    for case in warned:
        assert f"{case.suite} {case.metric}:" in text  # every counted drift warning is listed
    assert "['" not in text and "`[" not in text  # no Python reprs in the header
    assert data["suites"]["poetry"]["n"] == 4  # plots at the order poetry gates on
    assert set(data["plots"]["story"]) == {"quality_originality", "novelty_histogram"}
