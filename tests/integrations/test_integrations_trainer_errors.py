"""The training loop says what happened: a gate's harness error names its cause and its log, and
bad input is refused before the first training step.

A real judge server on 127.0.0.1 stops during training (a real tiny ``Trainer`` run); each gate
is the real ``pytest`` subprocess. Bad suite files, specs, tracker specs and options are refused
when the callback is made, or by the dry run of the gate's command when training begins, and
never after training steps were spent.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.infra.errors import ConfigError
from tests.integrations.training import StepClock, make_trainer
from tests.servers.openai_api import FakeOpenAI
from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder

LOGGER = "pytest_novelty.integrations.trainer"


def _callback(**settings: Any) -> Any:
    from pytest_novelty.integrations import NoveltyGateCallback

    return NoveltyGateCallback(**settings)


def _suites(tmp_path: Path, text: str | None = None) -> Path:
    return write_story_suite_folder(tmp_path / "suites", story_prompts(2), text or suite_toml(samples=1))


@pytest.mark.slow
def test_a_judge_that_dies_during_training_is_a_warning_with_its_cause_and_its_log(
    tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    suites = _suites(tmp_path, suite_toml(samples=1, judge="openai:judge-model"))
    output = tmp_path / "out"
    server = FakeOpenAI().start()
    try:
        gate = _callback(suites=suites, originality=f"infini-gram:{tiny_index}", cache=tmp_path / "cache",
                         device="cpu", extra_args=[f"--novelty-judge-base-url={server.url}"])  # fmt: skip
        trainer = make_trainer(tiny_checkpoint, output, gate, max_steps=8, save_strategy="no")

        def save(control: Any) -> None:
            control.should_save = True

        clock = StepClock(gate, actions={1: lambda control: server.stop(), 4: save})  # the judge dies at step 1
        trainer.add_callback(clock.callback())
        with caplog.at_level(logging.INFO, logger=LOGGER):
            trainer.train()
    finally:
        server.stop()
    assert trainer.state.global_step == 8  # a harness error never stops training
    assert [(r.step, r.error, r.run) for r in gate.history] == [(4, True, None)]
    log = output / "novelty-gate" / "checkpoint-4" / "pytest.log"
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == LOGGER]
    assert line.startswith("novelty gate, checkpoint-4: harness error, no verdict: --judge-base-url: cannot reach the "
                           f"judge openai:judge-model at {server.url} (connection refused)")  # fmt: skip
    assert line.endswith(f"(its log: {log})") and "deselected" not in line  # pytest's summary is not the cause
    assert "cannot reach the judge" in log.read_text()


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"suite": ("[generation]", "[generaton]")}, r"story\.toml: generaton: unknown key "
                                                     r"\(did you mean 'generation'\?\)"),
        ({"extra_args": ["--novelty-log=tensorbaord:runs"]}, r"--novelty-log: unknown tracker 'tensorbaord:runs' "
                                                             r"\(did you mean 'tensorboard'\?\)"),
        ({"judge": "openia:judge-model"}, r"NoveltyGateCallback\(judge=\.\.\.\): unknown judge 'openia:judge-model' "
                                          r"\(did you mean 'openai'\?\)"),
        ({"originality": "infini-gram:idx?wrokers=2"}, r"NoveltyGateCallback\(originality=\.\.\.\): originality "
                                                      r"backend infini-gram has no option 'wrokers' \(did you mean"),
        ({"originality": None}, r"story\.toml: scoring\.originality is 'auto' .* pass NoveltyGateCallback\("
                                r"originality='infini-gram:DIR'\)"),
        ({"device": "gpu"}, r"NoveltyGateCallback\(device=\.\.\.\): 'gpu' is not a device"),
        ({"extra_args": ["--novelty-model=elsewhere"]}, r"--novelty-model: the callback sets it on every gate"),
        ({"end_timeout": 0}, r"NoveltyGateCallback\(end_timeout=\.\.\.\): end_timeout is a number of seconds"),
        ({"gate_timeout": "1h"}, r"NoveltyGateCallback\(gate_timeout=\.\.\.\): gate_timeout is a number of seconds "
                                 r"above 0, or None \(no bound\); got '1h'"),
        ({"skip_queued": True}, r"skip_queued applies to wait=False"),
    ],
    ids=["suite-key", "tracker-spec", "judge-spec", "originality-option", "auto-originality", "device",
         "owned-option", "end-timeout", "gate-timeout", "skip-queued-with-wait"],
)  # fmt: skip
def test_bad_input_is_refused_when_the_callback_is_made(
    tmp_path: Path, tiny_index: Path, settings: dict[str, Any], expected: str
) -> None:
    mistyped = settings.pop("suite", ("", ""))  # a table's name, the way a user would mistype it
    text = suite_toml(samples=1).replace(*mistyped) if mistyped[0] else suite_toml(samples=1)
    settings.setdefault("originality", f"infini-gram:{tiny_index}")
    with pytest.raises(ConfigError, match=expected):
        _callback(suites=_suites(tmp_path, text), **settings)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra_args", "expected"),
    [
        (["--novelty-snapshot"], r"NoveltyGateCallback\(extra_args=\.\.\.\): pytest refuses them: "
                                  r"unrecognized arguments: --novelty-snapshot"),
        (["-k", "no-such-suite"], r"NoveltyGateCallback\(extra_args=\.\.\.\): the gate's options select no case "
                                  r"of its suites \(.*deselected"),
    ],
    ids=["unknown-option", "no-case-selected"],
)  # fmt: skip
def test_options_the_gate_refuses_stop_training_before_its_first_step(
    tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path, extra_args: list[str], expected: str
) -> None:
    gate = _callback(suites=_suites(tmp_path), originality=f"infini-gram:{tiny_index}", device="cpu",
                     cache=tmp_path / "cache", extra_args=extra_args)  # fmt: skip
    trainer = make_trainer(tiny_checkpoint, tmp_path / "out", gate, max_steps=8)
    with pytest.raises(ConfigError, match=expected):
        trainer.train()
    assert trainer.state.global_step == 0 and not list((tmp_path / "out").glob("checkpoint-*"))
    assert gate.history == []
