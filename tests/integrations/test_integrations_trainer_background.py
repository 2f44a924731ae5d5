"""``NoveltyGateCallback(wait=False)``: training that never waits for its gates.

A real (tiny) ``Trainer`` run on the CPU; each gate is the real ``pytest`` subprocess. The slow
gate's judge is a real server on 127.0.0.1 that holds every judge request until the test lets
it answer, so "the gate takes longer than the training steps" holds by construction, not by a
timing margin: the test lets the judge answer only once the training steps are done (or never).

Shown here: the steps do not wait for a gate; gates run one at a time and a save still waiting
is skipped when a newer one arrives (``skip_queued``); every result is logged at its own
checkpoint's step by each installed tracker of the Trainer's ``report_to`` (TensorBoard, MLflow,
W&B), without costing the Trainer its own log points; a failing gate stops training at the
first step after its result is known; at the end of training a gate still running after
``end_timeout`` is stopped and said; a gate waited for (``wait=True``) that runs past its
``gate_timeout`` is stopped and said while training goes on; a training process that exits with a
gate running stops it and says so; a gate whose training process is killed outright stops too, and the next training
run over the same folder says it never ended.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.conftest import tracker_env
from tests.integrations.training import StepClock, make_trainer, scalars
from tests.servers.openai_api import FakeOpenAI, default_reply
from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder

pytestmark = pytest.mark.slow

pytest.importorskip("tensorboard", reason="needs the tensorboard extra (the Trainer's report_to)")

LOGGER = "pytest_novelty.integrations.trainer"
HELD_JUDGE = "openai:judge-model?timeout=600"  # a held request must not time out and be retried


class HeldJudge:
    """A judge server whose answers wait until :meth:`release` (at most ``limit`` seconds)."""

    def __init__(self, limit: float = 600.0) -> None:
        self.released = threading.Event()
        self.limit = limit
        self.server = FakeOpenAI(reply=self._reply)

    def _reply(self, prompt: str, choice: int) -> str:
        self.released.wait(self.limit)
        return default_reply(prompt, choice)

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def held_judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldJudge]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge = HeldJudge()
    judge.server.start()
    try:
        yield judge
    finally:
        judge.release()
        judge.server.stop()


def _gate(tmp_path: Path, tiny_index: Path, suite: str, **settings: Any) -> Any:
    from pytest_novelty.integrations import NoveltyGateCallback

    suites = write_story_suite_folder(tmp_path / "suites", story_prompts(2), suite)
    return NoveltyGateCallback(suites=suites, originality=f"infini-gram:{tiny_index}", cache=tmp_path / "cache",
                               device="cpu", wait=False, **settings)  # fmt: skip


def _held_suite() -> str:
    return suite_toml(samples=1, judge=HELD_JUDGE, thresholds=[("originality@4", 0.0), ("quality", 0.0)])


def _trackers(monkeypatch: pytest.MonkeyPatch, folder: Path) -> list[str]:
    """The Trainer's ``report_to``: TensorBoard, and MLflow (a folder store) and W&B (offline) when installed."""
    for name, value in tracker_env(folder).items():
        monkeypatch.setenv(name, value)
    report_to = ["tensorboard"]
    if importlib.util.find_spec("mlflow"):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"file:{folder / 'mlruns'}")
        monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "trainer-background")
        report_to.append("mlflow")
    if importlib.util.find_spec("wandb"):
        monkeypatch.setenv("WANDB_PROJECT", "trainer-background")
        report_to.append("wandb")
    return report_to


def _mlflow_history(folder: Path, metric: str) -> dict[int, float]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"file:{folder / 'mlruns'}")
    (experiment,) = [e for e in client.search_experiments() if e.name == "trainer-background"]
    (run,) = client.search_runs([experiment.experiment_id])
    return {p.step: p.value for p in client.get_metric_history(run.info.run_id, metric)}


def _wandb_history(folder: Path, metric: str) -> dict[int, float]:
    from tests.integrations.wandb_files import read_run

    (path,) = (folder / "wandb-dir").rglob("run-*.wandb")
    rows = read_run(path)["history"]
    return {int(r["train/global_step"]): float(r[metric]) for r in rows if metric in r}


def test_training_never_waits_for_its_gates_and_each_result_is_logged_at_its_own_step(
    tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path, held_judge: HeldJudge, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    report_to = _trackers(monkeypatch, tmp_path)
    gate = _gate(tmp_path, tiny_index, _held_suite(), skip_queued=True,
                 extra_args=[f"--novelty-judge-base-url={held_judge.server.url}"])  # fmt: skip
    output = tmp_path / "out"
    trainer = make_trainer(tiny_checkpoint, output, gate, max_steps=24, save_steps=8, logging_steps=4,
                           report_to=report_to)  # fmt: skip
    # The judge answers once the last save was taken: every training step ran while the first gate was held.
    clock = StepClock(gate, at_save={24: held_judge.release})
    trainer.add_callback(clock.callback())
    with caplog.at_level(logging.INFO, logger=LOGGER):
        trainer.train()
    if "wandb" in report_to:
        import wandb

        wandb.finish()

    # (1) The steps did not wait: all 24 ended before any gate did, and the first gate outlasted them.
    assert [s for s, _, _ in clock.ends] == list(range(1, 25))
    assert all(ended == 0 for _, _, ended in clock.ends)
    first, last = gate.history[0], gate.history[-1]
    assert first.arrived > clock.time_of(24)
    assert first.seconds > clock.time_of(24) - clock.time_of(8)
    # (2) One gate at a time: the save of step 16 waited behind the first and was replaced by 24's.
    assert [(r.step, r.status) for r in gate.history] == [(8, 0), (24, 0)]
    replaced = "skipped: checkpoint-24 was saved before its gate started"
    assert [(s.step, s.reason) for s in gate.skipped] == [(16, replaced)]
    assert f"novelty gate, checkpoint-16: {replaced}" in caplog.text
    series = json.loads((last.report / "report.json").read_text())["series"]
    assert [e["step"] for e in series] == [8, 24]  # the second gate ran as the series of the gated ones
    # (3) Each result at its own step, in every tracker, with the value its report holds.
    quality = {r.step: {c.metric: c.value for c in r.run.cases}["quality"] for r in gate.history}
    logged = scalars(output)
    assert logged["train/novelty/story/quality"] == pytest.approx(quality, abs=1e-6)
    assert logged["train/novelty/passed"] == {8: 1.0, 24: 1.0}
    for own in ("train/loss", "train/epoch"):  # the Trainer's own curves keep every point
        assert sorted(logged[own]) == [4, 8, 12, 16, 20, 24], own
    assert logged["train/epoch"][8] == pytest.approx(8 / 12)  # 12 steps an epoch; not the epoch the result came in
    if "mlflow" in report_to:
        assert _mlflow_history(tmp_path, "novelty/story/quality") == pytest.approx(quality, abs=1e-6)
    if "wandb" in report_to:
        assert _wandb_history(tmp_path, "train/novelty/story/quality") == pytest.approx(quality, abs=1e-6)
    assert trainer.state.global_step == 24  # the state is the Trainer's own again
    assert [h["step"] for h in trainer.state.log_history if "novelty/passed" in h] == [8, 24]


def test_a_failing_gate_stops_training_at_the_first_step_after_its_result(
    tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path
) -> None:
    # No checkpoint of an untrained tiny model writes quality 0.99: the gate of step 2 fails.
    gate = _gate(tmp_path, tiny_index, suite_toml(samples=1, thresholds=[("quality", 0.99)]), stop_on_failure=True)
    trainer = make_trainer(tiny_checkpoint, tmp_path / "out", gate, max_steps=100_000, save_strategy="no",
                           logging_steps=100_000)  # fmt: skip

    def save(control: Any) -> None:
        control.should_save = True

    # Steps that leave the CPU to the gate, and the one save at step 2.
    clock = StepClock(gate, actions={2: save}, pause=0.2, limit=400)
    trainer.add_callback(clock.callback())
    trainer.train()
    (result,) = gate.history
    assert result.failed and result.step == 2
    stopped = trainer.state.global_step
    after = [s for s, t, _ in clock.ends if t > result.arrived]
    # The step whose end first saw the result is the last one; the clock stamps each step after the
    # gate callback looked, so a result can land between the two: that step or the one before.
    assert stopped in (after[0], after[0] + 1), (stopped, after[:3])
    assert stopped < 100_000 and clock.ends[-1][0] == stopped
    assert [h["step"] for h in trainer.state.log_history if "novelty/passed" in h] == [2]


def test_a_gate_still_running_after_end_timeout_is_stopped_and_said(
    tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path, held_judge: HeldJudge, caplog: pytest.LogCaptureFixture
) -> None:
    gate = _gate(tmp_path, tiny_index, _held_suite(), end_timeout=2,
                 extra_args=[f"--novelty-judge-base-url={held_judge.server.url}"])  # fmt: skip
    output = tmp_path / "out"
    trainer = make_trainer(tiny_checkpoint, output, gate, max_steps=8, save_steps=8)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        trainer.train()  # the judge is never released
    (result,) = gate.history
    log = output / "novelty-gate" / "checkpoint-8" / "pytest.log"
    assert result.error and result.status < 0 and result.run is None
    assert result.message == "stopped: still running 2 s after training ended (end_timeout)"
    assert f"novelty gate, checkpoint-8: harness error, no verdict: {result.message} (its log: {log})" in caplog.text
    record = json.loads((log.parent / "gate.json").read_text())
    assert record["outcome"] == "error" and record["ended"] and record["status"] == result.status
    with pytest.raises(ProcessLookupError):
        os.kill(record["pid"], 0)


def test_a_waited_for_gate_past_its_gate_timeout_is_stopped_and_training_goes_on_from_its_state(
    tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path, held_judge: HeldJudge, caplog: pytest.LogCaptureFixture
) -> None:
    from pytest_novelty.integrations import NoveltyGateCallback

    suites = write_story_suite_folder(tmp_path / "suites", story_prompts(2), _held_suite())
    gate = NoveltyGateCallback(suites=suites, originality=f"infini-gram:{tiny_index}", cache=tmp_path / "cache",
                               device="cpu", gate_timeout=3,
                               extra_args=[f"--novelty-judge-base-url={held_judge.server.url}"])  # fmt: skip
    output = tmp_path / "out"
    trainer = make_trainer(tiny_checkpoint, output, gate, max_steps=16, save_steps=8)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        trainer.train()  # the judge is never released: no gate can end by itself
    assert [r.step for r in gate.history] == [8, 16]  # the training went on past the stopped gate
    assert trainer.state.global_step == 16
    assert not any("novelty/passed" in h for h in trainer.state.log_history)  # nothing logged for a gate stopped
    for result in gate.history:
        log = output / "novelty-gate" / result.checkpoint.name / "pytest.log"
        assert result.error and result.status < 0 and result.run is None
        assert result.message == "stopped: still running after its time limit of 3 s (gate_timeout)"
        assert (f"novelty gate, {result.checkpoint.name}: harness error, no verdict: {result.message} (its log: "
                f"{log})") in caplog.text  # fmt: skip
        record = json.loads((log.parent / "gate.json").read_text())
        assert record["outcome"] == "error" and record["ended"] and record["message"] == result.message
        assert not _alive(record["pid"])
    assert not list((output / "novelty-gate").rglob("*.tmp"))  # nothing half-written
    for report in (output / "novelty-gate").rglob("report.json"):
        assert json.loads(report.read_text())["summary"]["complete"] is False  # no verdict, whole


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
def test_a_gate_never_outlives_a_killed_training_process_and_the_next_run_says_so(
    tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path, held_judge: HeldJudge, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = tmp_path / "out" / "checkpoint-8"
    checkpoint.parent.mkdir()
    checkpoint.symlink_to(tiny_checkpoint, target_is_directory=True)
    suites = write_story_suite_folder(tmp_path / "suites", story_prompts(2), _held_suite())
    # A training process that starts a gate the way the callback does, then is killed outright.
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from pytest_novelty.integrations.trainer_gate import GateJob, GateSettings, RunningGate\n"
        f"settings = GateSettings(suites=Path({str(suites)!r}), originality={f'infini-gram:{tiny_index}'!r}, "
        f"cache=Path({str(tmp_path / 'cache')!r}), device='cpu', "
        f"extra_args=('--novelty-judge-base-url={held_judge.server.url}',))\n"
        f"gate = RunningGate(GateJob(8, Path({str(checkpoint)!r})), settings).start()\n"
        "print(gate.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    training = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert training.stdout is not None
        pid = int(training.stdout.readline())
        os.kill(training.pid, signal.SIGKILL)
        training.wait(30)
        deadline = time.monotonic() + 60
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(pid), "the gate outlived its training process"
    finally:
        if training.poll() is None:
            training.kill()
    record = json.loads((tmp_path / "out" / "novelty-gate" / "checkpoint-8" / "gate.json").read_text())
    assert record["pid"] == pid and "ended" not in record

    gate = _gate(tmp_path / "next", tiny_index, suite_toml(samples=1))
    trainer = make_trainer(tiny_checkpoint, tmp_path / "out", gate, max_steps=1, save_strategy="no")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        trainer.train()
    log = tmp_path / "out" / "novelty-gate" / "checkpoint-8" / "pytest.log"
    assert f"novelty gate, checkpoint-8: its gate from an earlier training process never ended (its log: {log})" \
        in caplog.text  # fmt: skip
    assert json.loads(log.with_name("gate.json").read_text())["outcome"] == "error"  # said once, not at every run


def test_a_training_process_that_exits_with_a_gate_running_stops_it_and_says_so(
    tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path, held_judge: HeldJudge
) -> None:
    checkpoint = tmp_path / "out" / "checkpoint-8"
    checkpoint.parent.mkdir()
    checkpoint.symlink_to(tiny_checkpoint, target_is_directory=True)
    suites = write_story_suite_folder(tmp_path / "suites", story_prompts(2), _held_suite())
    # Training that ends without on_train_end (it raised, or the script returned) while its gate runs.
    script = (
        "import time\n"
        "from pathlib import Path\n"
        "from pytest_novelty.integrations.trainer_gate import GateJob, GateSettings, RunningGate\n"
        "from pytest_novelty.integrations.trainer_queue import GateQueue\n"
        f"settings = GateSettings(suites=Path({str(suites)!r}), originality={f'infini-gram:{tiny_index}'!r}, "
        f"cache=Path({str(tmp_path / 'cache')!r}), device='cpu', "
        f"extra_args=('--novelty-judge-base-url={held_judge.server.url}',))\n"
        "queue = GateQueue(lambda job, done: RunningGate(job, settings, ()).start())\n"
        f"queue.submit(GateJob(8, Path({str(checkpoint)!r})))\n"
        "while queue.running() is None:\n"
        "    time.sleep(0.05)\n"
        "raise SystemExit(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3
    folder = tmp_path / "out" / "novelty-gate"
    assert (f"novelty gate: the training process is exiting; stopping the gates of checkpoint-8 (their logs: "
            f"{folder})") in done.stderr  # fmt: skip
    record = json.loads((folder / "checkpoint-8" / "gate.json").read_text())
    assert record["outcome"] == "error" and record["message"] == "stopped: the training process exited first"
    assert not _alive(record["pid"])


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, ended but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
