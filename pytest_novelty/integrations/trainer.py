"""Gate while training: a ``transformers.TrainerCallback`` that gates every checkpoint the Trainer saves.

::

    from pytest_novelty.integrations import NoveltyGateCallback

    trainer = Trainer(model=model, args=TrainingArguments(..., save_steps=500, report_to=["tensorboard"]), ...)
    NoveltyGateCallback(suites="suites/", originality="infini-gram:corpus-index", stop_on_failure=True).attach(trainer)
    trainer.train()

On each save (every ``every``-th one) the callback gates the saved checkpoint in a process of its
own (:mod:`.trainer_gate`: ``python -m pytest --novelty-model=OUTPUT/checkpoint-N ...``, the same
code path as a user's run, sharing the cache; a series over the checkpoints gated so far once
there are earlier ones, so ``[gate] against = "series-best"`` compares with the best of them).
Each gate's report, log and record are kept in ``OUTPUT/novelty-gate/checkpoint-N/``.

``wait=True`` (the default) waits for the gate at the save: training resumes once the verdict is
known, and ``stop_on_failure`` ends training at the failing checkpoint itself; ``gate_timeout`` bounds that wait:
a gate still running after it is stopped (SIGTERM, then SIGKILL) and is a harness error whose one
line names the limit, and training goes on from the state it saved. ``wait=False``
returns to training at once (:mod:`.trainer_queue`): gates run one at a time in the background,
a newer save waits behind the running gate (with ``skip_queued``, a save still waiting is dropped
when a newer one arrives), each result is logged when it arrives at its own checkpoint's step,
``stop_on_failure`` ends training at the first step after a failing result is known (and stops
the gates after it), and at the end of training the callback waits for the gates still running
or waiting, at most ``end_timeout`` seconds, then stops the rest and says so. ``device="cuda:1"``
(or ``"cpu"``) gives the gates a device of their own. Why ``wait=True`` stays the default, and
what each tracker does with an earlier step: ``docs/trainer.md``.

The results reach the Trainer's own ``report_to`` integrations through ``Trainer.log``, with the
Trainer's step set to the checkpoint's for that one call: the scalars of
:class:`~pytest_novelty.integrations.run.TrackedRun` (every gated metric, quality, originality@n,
coverage@n and unscored per suite, ``novelty/passed`` and the case counts); the Trainer's loggers
add their own prefix (``train/``). Hence :meth:`NoveltyGateCallback.attach`, which gives the
callback the Trainer to log through (and runs it before the trackers' callbacks, so the last
results are logged before they close their runs).

A checkpoint that fails its gate (exit status 1) is logged and, with ``stop_on_failure``, ends
training. A harness error (exit status 8, a gate stopped: no verdict) is a warning that names
its cause (the gate's one line) and its log, and never stops training. Bad input is found before
the first training step (:mod:`.trainer_checks`: the callback's arguments when it is made, the
gate's options by a dry run when training begins); a gate that still refuses its input (exit
status 4, or no case ran) raises :class:`~pytest_novelty.infra.errors.ConfigError` in the
training loop, since every later checkpoint would be refused the same way. The gates run on the
main process only (``state.is_world_process_zero``); ``stop_on_failure`` is meant for
single-process training.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.integrations import trainer_checks
from pytest_novelty.integrations.trainer_gate import (
    GATE_FOLDER,
    GateJob,
    GateResult,
    GateSettings,
    RunningGate,
    SkippedSave,
    unfinished_gates,
)
from pytest_novelty.integrations.trainer_queue import GateQueue

__all__ = ["GATE_FOLDER", "GateResult", "NoveltyGateCallback", "SkippedSave"]

logger = logging.getLogger(__name__)

END_TIMEOUT = 3600.0
"""Seconds ``on_train_end`` waits, by default, for the gates still running or waiting (``wait=False``)."""


class NoveltyGateCallback(TrainerCallback):
    """Gates each checkpoint the Trainer saves (see the module's docs).

    ``suites``, ``originality``, ``judge``, ``cache`` and ``device`` become the gate's
    ``--novelty-suites``, ``--novelty-originality``, ``--novelty-judge``, ``--novelty-cache`` and
    ``--novelty-device`` (each left to the suites and defaults when None; ``cuda:N`` and ``cpu``
    also make the gate see only that device); ``extra_args`` are more pytest arguments
    (``-k story``, ``--novelty-snapshots``, ``--novelty-log=...``). ``every`` gates every N-th save.
    ``wait``, ``skip_queued`` and ``end_timeout`` (seconds, None: no bound) say how training and
    its gates share time; ``gate_timeout`` (seconds, None: no bound) is how long one gate may run
    before it is stopped. ``history`` lists what each gate found, in the order they ended;
    ``skipped`` the saves that were not gated, with why.
    """

    def __init__(
        self,
        *,
        suites: str | os.PathLike[str] | None = None,
        originality: str | None = None,
        judge: str | None = None,
        every: int = 1,
        stop_on_failure: bool = False,
        cache: str | os.PathLike[str] | None = None,
        device: str | None = None,
        extra_args: Sequence[str] = (),
        python: str = sys.executable,
        wait: bool = True,
        skip_queued: bool = False,
        end_timeout: float | None = END_TIMEOUT,
        gate_timeout: float | None = None,
    ) -> None:
        folder = None if suites is None else Path(suites).resolve()
        trainer_checks.check_arguments(
            every=every, flags={"stop_on_failure": stop_on_failure, "wait": wait, "skip_queued": skip_queued},
            end_timeout=end_timeout, gate_timeout=gate_timeout, device=device, suites=folder, originality=originality,
            judge=judge, extra_args=extra_args,
        )  # fmt: skip
        self.settings = GateSettings(
            suites=folder, originality=originality, judge=judge, device=device, extra_args=tuple(extra_args),
            cache=None if cache is None else Path(cache).resolve(), python=python,
        )  # fmt: skip
        self.every, self.stop_on_failure = every, stop_on_failure
        self.wait, self.skip_queued, self.end_timeout = wait, skip_queued, end_timeout
        self.gate_timeout = gate_timeout
        self.history: list[GateResult] = []
        self.skipped: list[SkippedSave] = []
        self._saves = 0
        self._trainer: Any = None
        self._queue: GateQueue | None = None
        self._unlogged: list[GateResult] = []
        self._checked = False
        self._stopping = False

    def attach(self, trainer: Any) -> Any:
        """Add the callback to ``trainer`` and log through it; returns the trainer.

        The callback goes first in the Trainer's list, before the trackers' callbacks: at the end of
        training the last gates' results are logged before those close their runs (MLflow's
        callback ends its run in its own ``on_train_end``).
        """
        trainer.add_callback(self)
        callbacks = trainer.callback_handler.callbacks
        callbacks.insert(0, callbacks.pop(callbacks.index(self)))
        self._trainer = trainer
        return trainer

    # -- the Trainer's events -------------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._trainer is None:
            raise ConfigError(
                "NoveltyGateCallback logs through the Trainer's report_to integrations: add it with "
                "NoveltyGateCallback(...).attach(trainer) instead of Trainer(callbacks=[...])"
            )
        if not state.is_world_process_zero:
            return
        for gate in unfinished_gates(Path(args.output_dir)):
            logger.warning("novelty gate, %s: its gate from an earlier training process never ended%s (its log: %s)",
                           Path(gate.checkpoint).name, f"; pid {gate.pid} is still running" if gate.running else "",
                           gate.log)  # fmt: skip
        if not self._checked:  # the gate's options, read by pytest as every gate will read them
            trainer_checks.dry_run(self.settings)
            self._checked = True
        if not self.wait:
            self._warn_shared_gpu(args)
        if self._queue is None:
            self._queue = GateQueue(self._start, skip_queued=self.skip_queued, limit=self.gate_timeout)
        self._stopping = False

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        # Logging here never cancels the Trainer's own pending log (Trainer.log clears should_log).
        self._collect(control, state)
        self._log_arrived(state)
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self._collect(control, state)  # a failing result known now stops training after this step
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if not state.is_world_process_zero or self._queue is None:
            return control
        self._saves += 1
        if (self._saves - 1) % self.every:
            return control
        job = GateJob(int(state.global_step), Path(args.output_dir) / f"checkpoint-{state.global_step}")
        for skipped in self._queue.submit(job):
            self._skip(skipped)
        if self.wait:
            self._queue.wait()
            self._collect(control, state)
            self._log_arrived(state)
        else:
            running = self._queue.running()
            if running is not None and running != job:
                logger.info("novelty gate, %s: queued behind the gate of %s", job.name, running.name)
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        queue = self._queue
        if queue is None or not state.is_world_process_zero:
            return control
        if self._stopping:  # stopped on a failing gate: the gates after it are not waited for
            for skipped in queue.close("training stopped on a failing gate (stop_on_failure)"):
                self._skip(skipped)
        left = [*([queue.running()] if queue.running() else []), *queue.waiting()]
        if left:
            bound = "no bound" if self.end_timeout is None else f"at most {self.end_timeout:g} s"
            logger.info("novelty gate: training ended; waiting for the gates of %s (%s)",
                        ", ".join(j.name for j in left if j), bound)  # fmt: skip
        finished = queue.wait(self.end_timeout)
        self._collect(control, state)
        if not finished:
            reason = f"still running {self.end_timeout:g} s after training ended (end_timeout)"
            for skipped in queue.close(reason):
                self._skip(skipped)
            self._collect(control, state)
        self._log_arrived(state)
        queue.close("training ended")
        self._queue = None
        return control

    # -- gates ----------------------------------------------------------------------------------

    def _start(self, job: GateJob, done: Sequence[GateResult]) -> RunningGate:
        """Start ``job``'s gate (on the queue's thread): a series over the earlier gated checkpoints."""
        earlier = [r.checkpoint for r in done if r.run is not None and r.step < job.step]
        return RunningGate(job, self.settings, earlier).start()

    def _collect(self, control: Any, state: Any) -> None:
        """Take what ended from the queue: say it, keep it, and act on it (stop, refuse)."""
        if self._queue is None:
            return
        for ended in self._queue.drain():
            if isinstance(ended, SkippedSave):
                self._skip(ended)
                continue
            self.history.append(ended)
            where = f"(its log: {ended.log})"
            if ended.bad_input:
                self._queue.close(f"{ended.checkpoint.name}'s gate refused its input")
                self._queue = None
                raise ConfigError(f"the gate of {ended.checkpoint.name} refused its input: {ended.message} {where}")
            if ended.error:
                logger.warning("novelty gate, %s: harness error, no verdict: %s %s",
                               ended.checkpoint.name, ended.message, where)  # fmt: skip
                continue
            self._unlogged.append(ended)
            verdict = "FAILED" if ended.failed else "passed"
            late = "" if ended.step == state.global_step else f", known at step {state.global_step}"
            logger.info("novelty gate, %s: %s in %.1f s%s", ended.checkpoint.name, verdict, ended.seconds, late)
            if ended.failed and self.stop_on_failure and not self._stopping:
                logger.warning("novelty gate, %s: failed; stopping training (stop_on_failure)", ended.checkpoint.name)
                self._stopping = True
            if self._stopping:
                control.should_training_stop = True

    def _log_arrived(self, state: Any) -> None:
        """Log every result not logged yet, each at its own checkpoint's step."""
        while self._unlogged:
            result = self._unlogged.pop(0)
            with _at_step(state, result.step):
                self._trainer.log(dict(result.logs()))

    def _skip(self, skipped: SkippedSave) -> None:
        self.skipped.append(skipped)
        logger.info("novelty gate, %s: %s", skipped.checkpoint.name, skipped.reason)

    def _warn_shared_gpu(self, args: Any) -> None:
        """A background gate on the training's GPU competes with it for memory: say so once."""
        device = getattr(args, "device", None)
        if device is None or getattr(device, "type", None) != "cuda":
            return
        gate = self.settings.device
        if gate in (None, "auto", "cuda") or gate == f"cuda:{device.index or 0}":
            logger.warning("novelty gate: wait=False with the gate on the training's GPU (device=%r): both hold "
                           "memory there at once; give the gate a device of its own (device='cuda:1' or 'cpu')",
                           gate)  # fmt: skip


@contextmanager
def _at_step(state: Any, step: int) -> Iterator[None]:
    """The Trainer's state at a checkpoint's step for one ``Trainer.log`` call: every ``report_to``
    integration reads the step from the state (restored afterwards, whatever happens).

    At a step earlier than the Trainer's, the state has no epoch for that call: ``Trainer.log``
    adds the state's epoch to every log, and the epoch the result arrived in would be a wrong
    point on the epoch curve at the checkpoint's step.
    """
    saved = state.global_step, state.epoch
    if step < state.global_step:
        state.epoch = None
    state.global_step = step
    try:
        yield
    finally:
        state.global_step, state.epoch = saved
