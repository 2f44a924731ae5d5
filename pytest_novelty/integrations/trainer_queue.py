"""The gates of a training run, one at a time, in a thread of their own.

:class:`GateQueue` takes saves (:meth:`GateQueue.submit`) and returns at once; one worker thread
starts each save's gate in turn (a process: see :mod:`.trainer_gate`) and waits for it, at most
its ``limit`` (a gate still running then is stopped, a result without a verdict), so a newer save
waits behind the gate that runs. With ``skip_queued`` a save still waiting for its
turn is dropped when a newer one arrives (the newer checkpoint says more about the run); a save
whose folder is gone when its turn comes (the Trainer's ``save_total_limit``) is skipped too.
Each skip is a :class:`~.trainer_gate.SkippedSave` with its reason.

The training thread reads what ended with :meth:`GateQueue.drain` whenever it likes (the
callback does at every step); :meth:`GateQueue.wait` waits, with an optional bound, until
nothing is running or waiting; :meth:`GateQueue.close` drops what waits and stops what runs.
A queue that is still busy when the interpreter exits is closed then, and says so on stderr:
no gate is left running unseen.
"""

from __future__ import annotations

import atexit
import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence

from pytest_novelty.infra.errors import last_line
from pytest_novelty.integrations.trainer_gate import GateJob, GateResult, RunningGate, SkippedSave

logger = logging.getLogger("pytest_novelty.integrations.trainer")

Ended = GateResult | SkippedSave
Starter = Callable[[GateJob, Sequence[GateResult]], RunningGate]
"""Starts one job's gate, given every result that ended before it (for the series)."""


class GateQueue:
    """Saves waiting for their gate, the gate that runs, and what ended (see the module doc)."""

    def __init__(self, start: Starter, *, skip_queued: bool = False, limit: float | None = None) -> None:
        self._start = start
        self.skip_queued = skip_queued
        self.limit = limit
        """Seconds each gate may run before it is stopped (None: no bound)."""
        self._pending: collections.deque[GateJob] = collections.deque()
        self._ended: list[Ended] = []  # not yet drained
        self._results: list[GateResult] = []  # every result, in the order they ended
        self._running: RunningGate | None = None
        self._busy = False  # a job has been taken and has not ended yet
        self._closed = False
        self._lock = threading.Condition()
        self._thread = threading.Thread(target=self._work, name="novelty-gates", daemon=True)
        self._thread.start()
        atexit.register(self._at_exit)

    # -- the training thread's side ---------------------------------------------------------------

    def submit(self, job: GateJob) -> list[SkippedSave]:
        """Queue ``job`` behind the gate that runs; returns the saves it replaced (``skip_queued``)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the gate queue is closed")
            replaced = []
            if self.skip_queued:
                while self._pending:
                    old = self._pending.popleft()
                    replaced.append(SkippedSave(old.step, old.checkpoint,
                                                f"skipped: {job.name} was saved before its gate started"))  # fmt: skip
            self._pending.append(job)
            self._lock.notify_all()
        return replaced

    def drain(self) -> list[Ended]:
        """What ended since the last call, in the order it ended."""
        with self._lock:
            ended, self._ended = self._ended, []
        return ended

    @property
    def idle(self) -> bool:
        """Nothing runs and nothing waits."""
        with self._lock:
            return not self._busy and not self._pending

    def waiting(self) -> list[GateJob]:
        """The saves waiting for their turn, oldest first."""
        with self._lock:
            return list(self._pending)

    def running(self) -> GateJob | None:
        """The save whose gate runs now, if any."""
        with self._lock:
            return None if self._running is None else self._running.job

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until nothing runs or waits, at most ``timeout`` seconds (None: no bound);
        returns whether that happened."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._busy or self._pending:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._lock.wait(left)
        return True

    def close(self, reason: str) -> list[SkippedSave]:
        """Drop every waiting save and stop the gate that runs (its result then says ``reason``);
        returns the dropped saves. Idempotent; the worker thread ends."""
        with self._lock:
            self._closed = True
            dropped = [SkippedSave(j.step, j.checkpoint, f"not gated: {reason}") for j in self._pending]
            self._pending.clear()
            running = self._running
            self._lock.notify_all()
        if running is not None:
            running.stop(f"stopped: {reason}")
        self._thread.join(timeout=60)
        atexit.unregister(self._at_exit)
        return dropped

    # -- the worker thread ----------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closed:
                    self._lock.wait()
                if not self._pending:
                    return
                job = self._pending.popleft()
                self._busy = True
                earlier = list(self._results)
            ended = self._run(job, earlier)
            with self._lock:
                self._running = None
                self._busy = False
                if isinstance(ended, GateResult):
                    self._results.append(ended)
                self._ended.append(ended)
                self._lock.notify_all()

    def _run(self, job: GateJob, earlier: Sequence[GateResult]) -> Ended:
        """One job's gate, from its start to its result; never raises (the thread must go on)."""
        if not job.checkpoint.is_dir():
            why = "skipped: its folder was removed before its gate started (the Trainer's save_total_limit?)"
            return SkippedSave(job.step, job.checkpoint, why)
        try:
            gate = self._start(job, earlier)
            with self._lock:
                self._running = gate
                closed = self._closed
            if closed:
                gate.stop("stopped: training ended")
            return gate.wait(self.limit)
        except Exception as exc:  # the gate's process could not start: no verdict, said in one line
            message = f"the gate could not run: {type(exc).__name__}: {last_line(str(exc))}"
            return GateResult(job.step, job.checkpoint, -1, 0.0, job.folder / "report", None, message,
                              job.folder / "pytest.log", time.monotonic(), "error")  # fmt: skip

    def _at_exit(self) -> None:
        """At interpreter exit: a gate still running or waiting is stopped, and said."""
        running, waiting = self.running(), self.waiting()
        if running is None and not waiting:
            return
        names = ", ".join(j.name for j in [*([running] if running else []), *waiting])
        logger.warning("novelty gate: the training process is exiting; stopping the gates of %s "
                       "(their logs: %s)", names, (running or waiting[0]).folder.parent)  # fmt: skip
        self.close("the training process exited first")
