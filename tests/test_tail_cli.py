"""``pytest-novelty tail build`` and ``tail agreement`` on the demo's checkpoints.

A tail built from a pool of two demo checkpoints is the ranking ``prompt_scores`` gives on the same
numbers; a suite that freezes it judges every checkpoint on its prompts (tail and peak); the
agreement command runs on three demo-derived checkpoints (the demo, demo-early and a copy of the
demo's weights with noise added) and says what the metrics module says. Bad input is one line and
exit 4, a dead endpoint exit 8, before anything is generated.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixtures.noisy_checkpoint import noisy_copy
from pytest_novelty.cli import main
from pytest_novelty.metrics.novelty import originality_counting_short
from pytest_novelty.metrics.tail import peak_prompts, prompt_scores, tail_prompts
from pytest_novelty.pipeline import demo
from tests.conftest import REPO, copy_demo

pytestmark = pytest.mark.slow

PROMPTS = [json.loads(line) for line in (REPO / "suites" / "data" / "story.jsonl").read_text().splitlines()][:12]
SUITE = """
task = "story"
[prompts]
source = "jsonl:prompts.jsonl"
[generation]
samples = 2
max_new_tokens = 32
seed = 7
[scoring]
ngrams = [4, 5]
judge = "rules"
judge_samples = 1
{gate}
[[thresholds]]
metric = "q_at_tail@0.25"
min = 0.0
[[thresholds]]
metric = "novelty_at_peak@0.25"
min = 0.0
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory, demo_assets: Path) -> Path:
    """A private copy of the demo: the module's runs generate into it and reuse each other's answers."""
    return copy_demo(demo_assets, tmp_path_factory.mktemp("tail-cache"))


def _suite(folder: Path, gate: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    path = folder / "story.toml"
    path.write_text(SUITE.format(gate=gate))
    return path


def _results(cache: Path, suite_path: Path, models: list[str], originality: str | None = None) -> list[Any]:
    """Every model's result on the suite, from the cache the commands filled."""
    from pytest_novelty.pipeline.config import RunConfig
    from pytest_novelty.pipeline.session import ResultsSession
    from pytest_novelty.suites.suite_file import load_suite

    suite = load_suite(suite_path)
    session = ResultsSession(lambda m: RunConfig(model=m, cache_dir=cache, originality=originality),
                             model=models[0])  # fmt: skip
    return [session.model_result(m, suite) for m in models]


def test_a_built_tail_is_prompt_scores_on_the_pools_numbers(tmp_path: Path, cache: Path) -> None:
    suite = _suite(tmp_path / "suites")
    out = tmp_path / "tail.json"
    args = ["tail", "build", str(suite), "--pool", "demo", "--pool", "demo-early", "--alpha", "0.25",
            "--alpha", "0.5", "--out", str(out), "--cache", str(cache)]  # fmt: skip
    assert main(args) == 0
    built = json.loads(out.read_text())
    first, early = _results(cache, suite, ["demo", "demo-early"])
    ids = [p.id for p in first.prompts]
    own = first.scores.prompt_novelty
    means = [originality_counting_short(r.originality[4]).mean(axis=1) for r in (first, early)]
    scores = prompt_scores(own, [[m[j] for m in means] for j in range(len(ids))])
    keep = ~np.isnan(scores)
    ranked = [i for i, k in zip(ids, keep, strict=True) if k]
    for alpha in (0.25, 0.5):
        assert built[f"q_at_tail@{alpha:g}"] == list(tail_prompts(ranked, scores[keep], alpha))
        assert built[f"novelty_at_peak@{alpha:g}"] == list(peak_prompts(ranked, scores[keep], alpha))
    provenance = built["provenance"]
    assert built["format"] == 1 and provenance["n"] == 4
    assert [m["source"] for m in provenance["pool"]] == ["demo", "demo-early"]
    assert [m["identity"] for m in provenance["pool"]] == [first.generated.identity, early.generated.identity]
    assert provenance["index"]["identity"] and provenance["index"]["setting"] == "auto"
    for j, prompt_id in enumerate(ids):
        recorded = provenance["scores"][prompt_id]
        assert recorded["score"] == pytest.approx(scores[j], abs=1e-6)
        assert recorded["members"] == pytest.approx([means[0][j], means[1][j]], abs=1e-6)


def test_a_suite_freezing_it_judges_every_checkpoint_on_its_prompts(tmp_path: Path, cache: Path) -> None:
    suite = _suite(tmp_path / "suites", gate='[gate]\ntail = "tail.json"')
    out = suite.parent / "tail.json"
    assert main(["tail", "build", str(suite), "--pool", "demo", "--pool", "demo-early", "--alpha", "0.25",
                 "--out", str(out), "--cache", str(cache)]) == 0  # fmt: skip
    built = json.loads(out.read_text())
    judged = {}
    for model in ("demo", "demo-early"):
        report = tmp_path / f"report-{model}"
        main(["run", "--model", model, "--suites", str(suite.parent), "--cache", str(cache), "--report", str(report)])
        data = json.loads((report / "report.json").read_text())
        rows = {r["metric"]: r for r in data["rows"]}
        judged[model] = rows["q_at_tail@0.25"]["tail"]["ids"]
        assert rows["q_at_tail@0.25"]["tail"]["description"] == (
            f"tail file tail.json, {len(built['q_at_tail@0.25'])} prompts")
        # Novelty at Peak on the file's peak: the checkpoint's own output novelty over those prompts.
        (result,) = _results(cache, suite, [model])
        novelty = dict(zip([p.id for p in result.prompts], originality_counting_short(result.originality[4]).mean(1),
                           strict=True))  # fmt: skip
        peak = built["novelty_at_peak@0.25"]
        assert rows["novelty_at_peak@0.25"]["value"] == pytest.approx(np.mean([novelty[i] for i in peak]), abs=1e-6)
    assert judged["demo"] == judged["demo-early"] == built["q_at_tail@0.25"]


def test_agreement_runs_on_three_demo_checkpoints(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scipy import stats

    suite = _suite(tmp_path / "suites")
    built = demo.demo_dir(cache)
    noisy = noisy_copy(built / "demo", tmp_path / "demo-noisy", seed=1)
    index = f"infini-gram:{built / 'index'}"
    reference = tmp_path / "reference.json"
    reference.write_text(json.dumps({"ranks": {"demo": 1, "noisy": 2, "demo-early": 3}}))
    plot, found = tmp_path / "tau.png", tmp_path / "agreement.json"
    status = main(["tail", "agreement", str(suite), "--model", "demo", "--model", f"noisy={noisy}", "--model",
                   "demo-early", "--reference", str(reference), "--bins", "3", "--alpha", "0.25", "--plot",
                   str(plot), "--json", str(found), "--originality", index, "--cache", str(cache),
                   "--resamples", "300"])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0, out
    assert "bin 1" in out and "bin 3" in out and "q@Tail(0.25)" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads(found.read_text())
    assert [b["prompts"] for b in data["bins"]] == [4, 4, 4]
    # q@Tail's tau is scipy's tau-b of the three models' mean quality on the tail against the reference.
    results = _results(cache, suite, ["demo", str(noisy), "demo-early"], originality=index)
    ids = [p.id for p in results[0].prompts]
    means = [np.nan_to_num(originality_counting_short(r.originality[4])).mean(1) for r in results]
    scores = prompt_scores(results[0].scores.prompt_novelty, [[m[j] for m in means] for j in range(len(ids))])
    keep = ~np.isnan(scores)
    tail = tail_prompts([i for i, k in zip(ids, keep, strict=True) if k], scores[keep], 0.25)
    quality = [np.nanmean([r.per_prompt["quality"][ids.index(i)] for i in tail]) for r in results]
    expected = stats.kendalltau(quality, [-1, -2, -3], variant="b").statistic
    tau = data["q_at_tail"]["tau_b"]
    assert (tau is None and np.isnan(expected)) or tau == pytest.approx(expected, abs=1e-6)
    assert data["q_at_tail"]["means"] == pytest.approx(dict(zip(["demo", "noisy", "demo-early"], quality,
                                                                strict=True)), abs=1e-6)  # fmt: skip


def _fails(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The exit status of ``pytest-novelty ARGS`` (argparse's own errors exit at once) and its last line."""
    try:
        status = main(args)
    except SystemExit as exc:
        status = int(exc.code or 0)
    err = capsys.readouterr().err.strip().splitlines()
    return status, err[-1] if err else ""


def test_bad_input_is_one_line_and_exit_4(tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = str(_suite(tmp_path / "suites"))
    base = ["tail", "build", suite, "--cache", str(cache), "--alpha", "0.1"]
    status, line = _fails([*base, "--pool", "demo", "--pool", str(tmp_path / "nothing"), "--out", str(tmp_path / "t")],
                          capsys)  # fmt: skip
    assert status == 4 and "--pool" in line and "nothing" in line
    status, line = _fails([*base, "--pool", "demo", "--pool", "demo", "--out", str(tmp_path / "t")], capsys)
    assert status == 4 and "given twice" in line
    status, line = _fails([*base, "--pool", "demo", "--out", str(tmp_path)], capsys)
    assert status == 4 and "--out" in line and "folder" in line
    status, line = _fails(["tail", "build", suite, "--pool", "demo", "--alpha", "0", "--out", str(tmp_path / "t")],
                          capsys)  # fmt: skip
    assert status == 4 and "--alpha" in line
    reference = tmp_path / "reference.json"
    reference.write_text(json.dumps({"scores": {"demo": 1.0, "demo-early": 0.5}}))
    agree = ["tail", "agreement", suite, "--cache", str(cache), "--reference", str(reference)]
    status, line = _fails([*agree, "--model", "demo", "--model", "demo-early"], capsys)
    assert status == 4 and "at least three" in line
    status, line = _fails([*agree, "--model", "demo", "--model", "demo-early", "--model", "x=demo"], capsys)
    assert status == 4 and str(reference) in line and "'x'" in line
    assert not (tmp_path / "t").exists()


def test_two_indexes_and_a_dead_endpoint_stop_before_any_generation(
    tmp_path: Path, cache: Path, tiny_checkpoint: Path, tiny_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = str(_suite(tmp_path / "suites"))
    own = tmp_path / "own-index-model"
    shutil.copytree(tiny_checkpoint, own)
    shutil.copytree(tiny_index, own / "novelty-index")  # scored against its own corpus, not the demo's
    fresh = tmp_path / "fresh-cache"
    copy_demo(demo.demo_dir(cache), fresh)
    out = tmp_path / "tail.json"
    status, line = _fails(["tail", "build", suite, "--pool", "demo", "--pool", str(own), "--alpha", "0.1", "--out",
                           str(out), "--cache", str(fresh)], capsys)  # fmt: skip
    assert status == 4 and "different indexes" in line and "--originality" in line
    assert not (fresh / "generations").exists() and not out.exists()  # nothing generated, nothing written
    status, line = _fails(["tail", "build", suite, "--pool", "openai:nobody", "--model-base-url",
                           "http://127.0.0.1:9/v1", "--originality", f"infini-gram:{tiny_index}", "--alpha", "0.1",
                           "--out", str(out), "--cache", str(fresh)], capsys)  # fmt: skip
    assert status == 8 and "127.0.0.1:9" in line and not out.exists()
