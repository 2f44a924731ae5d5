"""Every number says what it measured: originality's units and NoveltyBench's scales in the header."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pytest_novelty.gate.case import header
from pytest_novelty.pipeline.results import SuiteAnswers, SuiteMetrics, SuiteScores
from pytest_novelty.pipeline.runner import RunConfig, Runner, SuiteResult
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.suite_file import parse_suite

pytestmark = pytest.mark.slow

PROMPTS = [{"id": f"p{i}", "text": text} for i, text in enumerate(["Lily went to the park.", "Tom saw a bird."])]


def _suite(folder: Path, thresholds: str, task: str = "story") -> object:
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    text = f'task = "{task}"\n[prompts]\nsource = "jsonl:prompts.jsonl"\n[generation]\nsamples = 2\n'
    text += '[scoring]\nngrams = [4]\njudge = "rules"\njudge_samples = 1\n' + thresholds
    import tomllib

    return parse_suite(tomllib.loads(text), folder / "suite.toml")


ANSWERS = [["Lily and Tom went to the park with a red ball.", "She ran."], ["Tom saw a bird in the tree.", ""]]


@pytest.mark.parametrize("built_with", ["words", "checkpoint"])
def test_the_header_names_the_units_originality_was_counted_in(
    tmp_path: Path, tiny_checkpoint: Path, tiny_corpus: list[str], built_with: str
) -> None:
    from pytest_novelty.scoring.originality import build_index

    index = tmp_path / "idx"
    tokenizer = "words" if built_with == "words" else str(tiny_checkpoint)
    build_index(tiny_corpus[:400], index, tokenizer=tokenizer, progress=False)
    suite = _suite(tmp_path, '[[thresholds]]\nmetric = "novelty@4"\nmin = 0.0\n')
    runner = Runner(
        RunConfig(model=str(tiny_checkpoint), cache_dir=tmp_path / "cache", originality=f"infini-gram:{index}")
    )
    prompts = [Prompt(id=p["id"], task="story", text=p["text"]) for p in PROMPTS]
    result = runner.score(suite, prompts, ANSWERS)  # type: ignore[arg-type]
    expected = "words" if built_with == "words" else "tokens of the checkpoint's tokenizer"
    assert result.scores.units == expected
    assert f"originality in {expected}" in header(result)
    assert "equivalence" not in header(result)


def test_a_noveltybench_header_names_its_equivalence_and_utility_scale(tmp_path: Path) -> None:
    suite = _suite(tmp_path, '[[thresholds]]\nmetric = "distinct_k"\nmin = 1\n', task="open")
    scores = SuiteScores({}, np.zeros((0, 2)), judge="rules (offline heuristic, not an LLM judge)", units="words")
    measured = SuiteMetrics({}, {}, {}, order=4, novelty={})
    result = SuiteResult(SuiteAnswers(suite, "ckpt", [], []), scores, measured)  # type: ignore[arg-type]
    assert "equivalence unigram, utility scale 10 × rubric quality" in header(result)
    result = replace(result, scores=replace(scores, judge="reward model /m (1-10 by thresholds)"))
    assert "utility scale reward model 1-10" in header(result)
