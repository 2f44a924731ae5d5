"""The pipeline end to end on a tiny real checkpoint and a real index, without pytest's plugin."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pytest_novelty.infra.progress import notices_to
from pytest_novelty.metrics import gated_novelty
from pytest_novelty.pipeline.runner import RunConfig, Runner
from pytest_novelty.suites.suite_file import load_suite
from tests.suite_text import suite_toml

pytestmark = pytest.mark.slow

SUITE = suite_toml(
    task="{task}", samples=3, max_new_tokens=12, ngrams=[4, 5],
    thresholds=[("novelty@5", 0.0), ("q_at_tail@0.5", 0.0), ("distinct_k", 1)],
)


@pytest.fixture
def suite_file(tmp_path: Path) -> Path:
    prompts = [
        {"id": f"p{i}", "text": text, "meta": {"characters": text.split()[:1]}}
        for i, text in enumerate(
            ["Lily went to the park with her red ball.", "Tom and Mia saw a bird.", "Ben had a cake.", "Sue sang."]
        )
    ]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    path = tmp_path / "story.toml"
    path.write_text(SUITE.format(task="story"))
    return path


@pytest.fixture
def tiny_config(tiny_checkpoint: Path, tiny_index: Path, tmp_path: Path) -> RunConfig:
    """The tiny checkpoint on the CPU, scored against the tiny index, with a fresh cache."""
    return RunConfig(
        model=str(tiny_checkpoint),
        cache_dir=tmp_path / "cache",
        device="cpu",
        originality=f"infini-gram:{tiny_index}",
    )


def test_suite_runs_end_to_end_and_resumes_from_cache(suite_file: Path, tiny_config: RunConfig) -> None:
    config = tiny_config
    suite = load_suite(suite_file)
    result = Runner(config).run(suite)

    assert len(result.prompts) == 4
    assert [len(a) for a in result.answers] == [3, 3, 3, 3]
    assert result.quality.shape == (4, 3)
    assert set(result.originality) == {4, 5}
    # novelty@5 is the mean of per-generation harmonic means as the gate counts them (an answer
    # with no 5-gram at 0), recomputed here from the arrays.
    expected = np.nanmean(gated_novelty(result.quality, result.originality[5]))
    assert math.isclose(result.metrics["novelty@5"], float(expected), rel_tol=1e-12)
    assert 0.0 <= result.metrics["q_at_tail@0.5"] <= 1.0
    assert 1.0 <= result.metrics["distinct_k"] <= 3.0
    work = result.generated.work
    assert work.batches == 3  # 12 rows (4 prompts x 3 samples), 4 per batch
    assert (work.rows, work.cached_rows) == (12, 0)
    assert work.tokens > 0
    assert work.worker == "main"
    assert len(result.per_prompt["novelty@5"]) == 4

    again = Runner(config).run(suite)
    assert again.generated.work.batches == 0
    assert (again.generated.work.rows, again.generated.work.cached_rows) == (0, 12)
    assert again.answers == result.answers
    assert again.metrics == result.metrics


def test_progress_bars_for_generation_originality_and_judging(
    suite_file: Path, tiny_config: RunConfig, tmp_path: Path
) -> None:
    import io

    from pytest_novelty.infra.progress import ProgressSink

    stream = io.StringIO()
    lines: list[str] = []
    config = replace(tiny_config, progress=ProgressSink(stream=stream, enabled=True))
    with notices_to(lines.append):
        Runner(config).run(load_suite(suite_file))
    shown = stream.getvalue()
    assert "story: generating" in shown and "12/12" in shown and "tok/s" in shown
    assert "story: originality" in shown and "story: judging" in shown
    # With bars on, the quarter-way generation lines stay out of the log.
    assert not any("generated 3/12" in line for line in lines)

    quiet: list[str] = []
    config = replace(config, cache_dir=tmp_path / "other", progress=ProgressSink(enabled=False))
    with notices_to(quiet.append):
        Runner(config).run(load_suite(suite_file))
    assert any("story: generated 12/12 samples" in line and "tokens/s, ETA" in line for line in quiet)


NOVEL_EXAMPLES = SUITE.replace('[generation]', '[prompting]\nmethod = "novel-examples"\nexamples = 1\n[generation]')
COPIED = 'Tom and Sam went to the park. Tom saw a ball near the tree. Sam said, "Let us play with the ball!"'
FRESH = "Quiet lanterns drifted over marshes where herons argued about borrowed silver spoons all winter"


def test_novel_examples_scores_the_examples_with_the_suite_index(tmp_path: Path, tiny_config: RunConfig) -> None:
    """``novel-examples`` runs end to end: the held-out examples are scored with the suite's index
    and only the most original one (1 example, the top 10 % of 8 but at least 1) is shown."""
    test = [{"id": f"p{i}", "text": text} for i, text in enumerate(["Lily went to the park.", "Ben had a cake."])]
    held = [{"id": f"x{i}", "text": f"Tell story {i}.", "reference": COPIED, "split": "examples"} for i in range(7)]
    held.append({"id": "x7", "text": "Tell story 7.", "reference": FRESH, "split": "examples"})
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in test + held))
    path = tmp_path / "novel.toml"
    path.write_text(NOVEL_EXAMPLES.format(task="story"))
    suite = load_suite(path)
    runner = Runner(tiny_config)

    scores = runner.example_scores(suite)
    assert set(scores) == {f"x{i}" for i in range(8)}
    assert max(scores, key=scores.__getitem__) == "x7" and scores["x7"] > scores["x0"]
    _, inputs = runner.prompts(suite)
    assert all(FRESH in text and COPIED not in text for text in inputs)
    result = runner.run(suite)
    assert [p.id for p in result.prompts] == ["p0", "p1"] and "novelty@5" in result.metrics


def test_scoring_models_load_once_per_session_on_its_device(
    tmp_path: Path, tiny_config: RunConfig, tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every sweep value, and a second checkpoint's runner, use the session's one equivalence check
    and one judge, opened with the session's device and --trust-remote-code."""
    from pytest_novelty.pipeline.runner import SessionModels
    from pytest_novelty.scoring import equivalence as partitioners

    opened: list[tuple[str, dict[str, object]]] = []
    real = partitioners.open_equivalence

    def recording(spec: str, **options: object) -> object:
        opened.append((spec, options))
        return real(spec, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(partitioners, "open_equivalence", recording)
    prompts = [{"id": f"p{i}", "text": t} for i, t in enumerate(["Lily went to the park.", "Ben had a cake."])]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    sweep = '[sweep]\nparameter = "generation.temperature"\nvalues = [0.5, 1.0]\n'
    (tmp_path / "sweep.toml").write_text(SUITE.format(task="story") + sweep)
    config = replace(tiny_config, trust_remote_code=True)
    models = SessionModels(config)
    candidate, other = Runner(config, models), Runner(replace(config, model=str(tiny_checkpoint)), models)
    suite = load_suite(tmp_path / "sweep.toml")
    results = [runner.run(run) for run in suite.runs() for runner in (candidate, other)]

    assert all("distinct_k" in r.metrics for r in results)
    assert opened == [("unigram", {"device": "cpu", "trust_remote_code": True})]
    assert models.opened == [f"originality {tiny_config.originality}", "judge rules", "equivalence unigram"]
    hf = models.judge(replace(suite.runs()[0], scoring=replace(suite.scoring, judge=f"hf:{tiny_checkpoint}")))
    assert (hf.device, hf.trust_remote_code) == ("cpu", True)  # loads on the session's device, when it first scores
