"""The parts of the Trainer callback's gates that need no training: a gate's device, the launcher
that ties a gate's life to its training process, how an exit status is read, and a save whose
folder is gone before its turn."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_novelty.integrations.trainer_gate import (
    GateJob,
    GateResult,
    GateSettings,
    RunningGate,
    SkippedSave,
    gate_cause,
    outcome_of,
    process_command,
)
from pytest_novelty.integrations.trainer_queue import GateQueue


@pytest.mark.parametrize(
    ("device", "visible", "expected", "option"),
    [
        ("cuda:1", "4,6", "6", "--novelty-device=cuda"),  # the second GPU the training process sees
        ("cuda:0", "3", "3", "--novelty-device=cuda"),
        ("cpu", "0,1", "", "--novelty-device=cpu"),  # no GPU at all
        (None, "0,1", "0,1", None),  # left as the training process has it
    ],
)
def test_a_gate_sees_only_its_own_device(device: str | None, visible: str | None, expected: str,
                                         option: str | None) -> None:  # fmt: skip
    base = {"PATH": os.environ.get("PATH", "")} | ({} if visible is None else {"CUDA_VISIBLE_DEVICES": visible})
    settings = GateSettings(device=device)
    assert settings.env(base)["CUDA_VISIBLE_DEVICES"] == expected
    devices = [o for o in settings.options() if o.startswith("--novelty-device")]
    assert devices == ([] if option is None else [option])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
def test_the_launcher_asks_the_kernel_to_stop_the_gate_with_its_training_process() -> None:
    # The program the launcher executes reads back its own parent-death signal and parent.
    probe = (
        "import ctypes, os; value = ctypes.c_int(); "
        "ctypes.CDLL(None).prctl(2, ctypes.byref(value)); print(value.value, os.getppid())"  # PR_GET_PDEATHSIG
    )
    done = subprocess.run(process_command([sys.executable, "-c", probe]), capture_output=True, text=True,
                          check=True, timeout=60)  # fmt: skip
    signal_number, parent = map(int, done.stdout.split())
    assert signal_number == 15 and parent == os.getpid()  # SIGTERM when this process is gone


@pytest.mark.parametrize(
    ("status", "reported", "gone", "outcome"),
    [
        (0, True, [], "passed"),
        (1, True, [], "failed"),
        (0, False, [], "error"),  # exit 0 without a report that holds a case: no verdict
        (8, False, [], "error"),
        (4, False, [], "bad input"),
        (5, False, [], "bad input"),  # no case ran
        (4, False, ["checkpoint-8"], "error"),  # refused because the Trainer removed the checkpoint meanwhile
        (-15, False, [], "error"),  # stopped
    ],
)
def test_an_exit_status_is_read_as_an_outcome(status: int, reported: bool, gone: list[str], outcome: str) -> None:
    assert outcome_of(status, reported=reported, gone=gone) == outcome


def test_a_removed_checkpoint_is_named_as_the_cause() -> None:
    cause = gate_cause("... no weights ...", None, 4, gone=["checkpoint-8"])
    assert cause == "checkpoint-8 was removed while its gate ran (the Trainer's save_total_limit?)"


def test_a_save_whose_folder_is_gone_before_its_turn_is_skipped_without_a_gate(tmp_path: Path) -> None:
    started: list[GateJob] = []

    def start(job: GateJob, done: Sequence[GateResult]) -> RunningGate:
        started.append(job)
        raise AssertionError("no gate may start for a folder that is gone")

    queue = GateQueue(start)
    try:
        queue.submit(GateJob(8, tmp_path / "out" / "checkpoint-8"))
        assert queue.wait(60)
        (ended,) = queue.drain()
    finally:
        queue.close("the test ended")
    assert isinstance(ended, SkippedSave) and ended.step == 8 and started == []
    assert ended.reason == "skipped: its folder was removed before its gate started (the Trainer's save_total_limit?)"


def test_a_gate_that_cannot_start_is_a_result_without_a_verdict(tmp_path: Path) -> None:
    checkpoint = tmp_path / "out" / "checkpoint-8"
    checkpoint.mkdir(parents=True)
    missing = str(tmp_path / "no-such-python")
    queue = GateQueue(lambda job, done: RunningGate(job, GateSettings(python=missing), ()).start())
    try:
        queue.submit(GateJob(8, checkpoint))
        deadline = time.monotonic() + 60
        while not queue.idle and time.monotonic() < deadline:
            time.sleep(0.05)
        (ended,) = queue.drain()
    finally:
        queue.close("the test ended")
    assert isinstance(ended, GateResult) and ended.error and ended.run is None
    assert ended.message.startswith("the gate could not run: FileNotFoundError")
