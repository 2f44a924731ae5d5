"""``NoveltyGateCallback`` in a real (tiny) ``Trainer`` run on the CPU.

A GPT-2 of 32 dimensions trains for 24 steps on the tiny corpus, saving every 8; each save is
gated in its own process on a story suite of three prompts. TensorBoard (the Trainer's own
``report_to``) must then hold the novelty scalars at every save step, a later ``--model-series``
over the output folder must generate nothing and agree, and with ``stop_on_failure`` a checkpoint
that fails its gate must end the training at that save.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.training import dataset, make_trainer, scalars
from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder

pytestmark = pytest.mark.slow

pytest.importorskip("tensorboard", reason="needs the tensorboard extra (the Trainer's report_to)")

REPO = Path(__file__).resolve().parents[2]
STEPS, SAVE_EVERY = 24, 8


def _train(checkpoint: Path, output: Path, suites: Path, tiny_index: Path, cache: Path, **gate: Any) -> Any:
    """Train the tiny model with the callback attached; returns the trainer and the callback."""
    from pytest_novelty.integrations import NoveltyGateCallback

    callback = NoveltyGateCallback(
        suites=suites, originality=f"infini-gram:{tiny_index}", cache=cache, device="cpu", **gate
    )
    trainer = make_trainer(checkpoint, output, callback, max_steps=STEPS, save_steps=SAVE_EVERY,
                           logging_steps=SAVE_EVERY, report_to=["tensorboard"])  # fmt: skip
    trainer.train()
    return trainer, callback


def test_every_save_is_gated_and_logged_at_its_step_and_a_later_series_agrees(
    tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path
) -> None:
    passing = suite_toml(samples=1, thresholds=[("originality@4", 0.0), ("quality", 0.0)])
    suites = write_story_suite_folder(tmp_path / "suites", story_prompts(3), passing)
    output, cache = tmp_path / "out", tmp_path / "cache"
    _, callback = _train(tiny_checkpoint, output, suites, tiny_index, cache)
    saves = list(range(SAVE_EVERY, STEPS + 1, SAVE_EVERY))
    assert [r.step for r in callback.history] == saves and all(r.status == 0 for r in callback.history)
    logged = scalars(output)
    for name in ("novelty/story/quality", "novelty/story/originality@4", "novelty/story/coverage@4", "novelty/passed"):
        assert sorted(logged[f"train/{name}"]) == saves, name  # the Trainer's TensorBoard callback adds train/
    for result in callback.history:
        report = json.loads((result.report / "report.json").read_text())
        quality = {r["metric"]: r["value"] for r in report["rows"]}["quality"]
        assert logged["train/novelty/story/quality"][result.step] == pytest.approx(quality, abs=1e-6)
    assert logged["train/loss"]  # the training's own curve is in the same log
    # Gated after the first, each save ran as a series over the checkpoints gated so far.
    last = json.loads((callback.history[-1].report / "report.json").read_text())
    assert [e["step"] for e in last["series"]] == saves

    # The same numbers from a later series over the output folder, which generates nothing.
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", f"--novelty-model-series={output}", f"--novelty-suites={suites}",
         f"--novelty-cache={cache}", f"--novelty-originality=infini-gram:{tiny_index}", "--novelty-device=cpu",
         f"--novelty-report={tmp_path / 'later'}", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "novelty work done: 0 samples generated" in done.stdout
    assert "earlier checkpoints: 0 samples generated" in done.stdout
    later = json.loads((tmp_path / "later" / "report.json").read_text())
    for entry in later["series"]:
        assert entry["suites"]["story"]["metrics"]["quality"] == pytest.approx(
            logged["train/novelty/story/quality"][entry["step"]], abs=1e-6
        )


def test_stop_on_failure_ends_training_at_the_checkpoint_that_fails(
    tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path
) -> None:
    # No checkpoint of an untrained tiny model writes quality 0.99: the first gated save fails.
    failing = suite_toml(samples=1, thresholds=[("quality", 0.99)])
    suites = write_story_suite_folder(tmp_path / "suites", story_prompts(3), failing)
    output = tmp_path / "out"
    trainer, callback = _train(tiny_checkpoint, output, suites, tiny_index, tmp_path / "cache", stop_on_failure=True)
    (result,) = callback.history
    assert result.failed and result.step == SAVE_EVERY
    assert trainer.state.global_step == SAVE_EVERY  # stopped at the first save, not after 24 steps
    assert sorted(p.name for p in output.glob("checkpoint-*")) == [f"checkpoint-{SAVE_EVERY}"]
    assert scalars(output)["train/novelty/passed"] == {SAVE_EVERY: 0.0}
    assert "below the minimum 0.99" in (output / "novelty-gate" / f"checkpoint-{SAVE_EVERY}" / "pytest.log").read_text()


def test_a_callback_not_attached_says_how_to_attach_it(tmp_path: Path, tiny_checkpoint: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

    from pytest_novelty.infra.errors import ConfigError
    from pytest_novelty.integrations import NoveltyGateCallback

    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=1, report_to=[], use_cpu=True)
    trainer = Trainer(model=AutoModelForCausalLM.from_pretrained(tiny_checkpoint), args=args,
                      train_dataset=dataset(tokenizer, count=8), callbacks=[NoveltyGateCallback()])  # fmt: skip
    with pytest.raises(ConfigError, match=r"attach\(trainer\)"):
        trainer.train()
    with pytest.raises(ConfigError, match="every must be a whole number"):
        NoveltyGateCallback(every=0)
