"""One gate of a saved checkpoint, in a process of its own: its command, its device, its log and its result.

A gate is ``python -m pytest --novelty-model=OUTPUT/checkpoint-N ...``, the same code path as a
user's run, started from the training script's folder (its ``suites/``, its pytest config). Once
earlier checkpoints were gated it runs as a series instead (``--novelty-model-series`` over links
to them and the new one, newest last), whose earlier checkpoints come from the cache.

Everything a gate leaves is in ``OUTPUT/novelty-gate/checkpoint-N/``:

* ``pytest.log``: the gate's output, written as it comes (its first line the command, redacted),
  so a gate that is stopped or killed keeps what it had written;
* ``report/``: its ``report.json``, ``report.md`` and plots (``--novelty-report``);
* ``gate.json``: that the gate started (its pid, its command) and, once it ended, how (its exit
  status, its outcome, its one line). A record without an end is a gate whose training process
  died first; the next training run over the same output folder says so
  (:func:`unfinished_gates`).

A gate placed on a device of its own sees only that device: ``cuda:N`` runs it with
``CUDA_VISIBLE_DEVICES`` set to the N-th GPU the training process sees (as ``--novelty-device
cuda``), ``cpu`` with no GPU visible at all, so it never holds memory on the training's GPUs.

On Linux the gate asks the kernel to stop it (SIGTERM) when the training process is gone, even
when that process was killed outright (``PR_SET_PDEATHSIG``, set by a few lines of Python before
pytest starts), so a gate never outlives its training run unseen.
"""

from __future__ import annotations

import datetime
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS, USAGE_EXIT_STATUS, last_line
from pytest_novelty.infra.redact import redact
from pytest_novelty.infra.storage import atomic_write_json, read_json
from pytest_novelty.integrations.run import TrackedRun

#: Where each gate's report and output go, inside the Trainer's output folder.
GATE_FOLDER = "novelty-gate"
LOG_NAME = "pytest.log"
RECORD_NAME = "gate.json"

NO_CASE_EXIT_STATUS = 5
"""pytest's exit status when no case ran (every case deselected): bad input for a gate."""

STOP_GRACE = 10.0
"""Seconds a gate asked to stop (SIGTERM) gets before it is killed."""

# Run before pytest in the gate's process (Linux): the kernel sends SIGTERM to the gate when the
# training process (argv[1]) is gone; a gate whose training process ended before this line ran
# does not start at all. The exec keeps the pid, so the training process waits on pytest itself.
_LAUNCHER = """\
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
except (AttributeError, OSError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit("novelty gate: the training process ended before this gate started")
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""


@dataclass(frozen=True)
class GateJob:
    """One save to gate: its step and its checkpoint folder."""

    step: int
    checkpoint: Path

    @property
    def name(self) -> str:
        return self.checkpoint.name

    @property
    def folder(self) -> Path:
        """``OUTPUT/novelty-gate/checkpoint-N``: the gate's log, record and report."""
        return self.checkpoint.parent / GATE_FOLDER / self.checkpoint.name


@dataclass(frozen=True)
class GateResult:
    """One gated checkpoint: its step and folder, the gate's exit status, its report, and the time."""

    step: int
    checkpoint: Path
    status: int
    """The gate's exit status; negative when it was stopped by a signal (``-15``: SIGTERM)."""
    seconds: float
    report: Path
    run: TrackedRun | None
    """The gate's results; None when it reached no verdict (no report with a case)."""
    message: str = ""
    """The gate's one line: the cause of a harness error or of bad input, else pytest's summary."""
    log: Path | None = None
    arrived: float = 0.0
    """When the gate ended (``time.monotonic()``)."""
    outcome: str = ""
    """``passed``, ``failed``, ``bad input`` or ``error`` (no verdict); see :func:`outcome_of`."""

    @property
    def failed(self) -> bool:
        """Whether the checkpoint failed its gate (exit status 1), not a harness error."""
        return self.outcome == "failed"

    @property
    def error(self) -> bool:
        """Whether the gate reached no verdict: a harness error, a gate stopped or killed."""
        return self.outcome == "error"

    @property
    def bad_input(self) -> bool:
        """Whether the gate refused its input (exit status 4, or no case ran): every later
        checkpoint would be refused the same way."""
        return self.outcome == "bad input"

    def logs(self) -> dict[str, float]:
        """The values logged through the Trainer at the checkpoint's step."""
        if self.run is None:
            return {}
        return {**self.run.gated.flat(), **self.run.summary_scalars()}


@dataclass(frozen=True)
class SkippedSave:
    """A save that was never gated, and why (a newer save replaced it in the queue, its folder
    was removed before its turn, training stopped first)."""

    step: int
    checkpoint: Path
    reason: str


@dataclass(frozen=True)
class GateSettings:
    """What every gate's command line is made of (the callback's arguments, checked already)."""

    suites: Path | None = None
    originality: str | None = None
    judge: str | None = None
    cache: Path | None = None
    device: str | None = None
    extra_args: tuple[str, ...] = ()
    python: str = sys.executable

    def options(self) -> list[str]:
        """The pytest options every gate gets: the callback's keywords, then ``extra_args``."""
        given = (("suites", self.suites), ("originality", self.originality), ("judge", self.judge),
                 ("cache", self.cache), ("device", self.gate_device))  # fmt: skip
        return [f"--novelty-{option}={value}" for option, value in given if value is not None] + list(self.extra_args)

    @property
    def gate_device(self) -> str | None:
        """``--novelty-device`` in the gate: ``cuda`` for ``cuda:N`` (the one GPU it sees), else as given."""
        if self.device is not None and self.device.startswith("cuda:"):
            return "cuda"
        return self.device

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The gate's environment: the training process's, with only the gate's own device visible."""
        env = dict(os.environ if base is None else base)
        if self.device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
        elif self.device is not None and self.device.startswith("cuda:"):
            from pytest_novelty.generation.devices import visible_gpus

            env["CUDA_VISIBLE_DEVICES"] = visible_gpus(env)[int(self.device.partition(":")[2])]
        return env

    def pytest_command(self, *args: str, options: Sequence[str] | None = None) -> list[str]:
        """``python -m pytest ARGS -p no:cacheprovider -q OPTIONS``: a gate's (``OPTIONS``: :meth:`options`)."""
        return [self.python, "-m", "pytest", *args, "-p", "no:cacheprovider", "-q",
                *(self.options() if options is None else options)]  # fmt: skip


def process_command(command: Sequence[str]) -> list[str]:
    """``command`` (``python -m pytest ...``) as the gate's process runs it: on Linux through the
    launcher that ties the gate's life to this process (see the module doc)."""
    if not sys.platform.startswith("linux"):
        return list(command)
    return [command[0], "-c", _LAUNCHER, str(os.getpid()), *command[1:]]


class RunningGate:
    """One gate from its start to its result: :meth:`start`, then :meth:`wait` (or :meth:`stop`)."""

    def __init__(self, job: GateJob, settings: GateSettings, earlier: Sequence[Path] = ()) -> None:
        self.job, self.settings = job, settings
        self.earlier = [p for p in earlier if p.is_dir()]
        """The checkpoints gated before this one that still exist, oldest first: the series."""
        self.report = job.folder / "report"
        self.log = job.folder / LOG_NAME
        self.record = job.folder / RECORD_NAME
        self._links: tempfile.TemporaryDirectory[str] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._stopped = ""
        self._start = 0.0

    def target(self) -> str:
        """The gate's model option: the checkpoint, or the series over links to the gated ones."""
        if not self.earlier:
            return f"--novelty-model={self.job.checkpoint}"
        self._links = tempfile.TemporaryDirectory(prefix="novelty-series-")
        for path in [*self.earlier, self.job.checkpoint]:
            (Path(self._links.name) / path.name).symlink_to(path.resolve(), target_is_directory=True)
        return f"--novelty-model-series={self._links.name}"

    def start(self) -> RunningGate:
        """Start the gate's process; its output goes to :attr:`log` as it comes."""
        self.job.folder.mkdir(parents=True, exist_ok=True)
        command = self.settings.pytest_command(self.target(), f"--novelty-report={self.report}")
        shown = redact(shlex.join(command))
        self._start = time.perf_counter()
        try:
            with self.log.open("wb") as log:
                log.write(f"$ {shown}\n".encode())
                log.flush()
                self._process = subprocess.Popen(
                    process_command(command), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=self.settings.env(),
                )  # fmt: skip
        except BaseException:
            if self._links is not None:
                self._links.cleanup()
            raise
        atomic_write_json(self.record, {"checkpoint": str(self.job.checkpoint), "step": self.job.step,
                                        "pid": self._process.pid, "started": _now(), "command": shown})  # fmt: skip
        return self

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def seconds(self) -> float:
        """Seconds since the gate started."""
        return time.perf_counter() - self._start

    def stop(self, reason: str) -> None:
        """Stop the gate (SIGTERM, then SIGKILL after :data:`STOP_GRACE` s); :meth:`wait` then
        returns a result with no verdict whose message is ``reason``."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        self._stopped = reason
        process.terminate()
        try:
            process.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            process.kill()

    def wait(self, limit: float | None = None) -> GateResult:
        """Wait for the gate to end and read what it found. A gate still running ``limit`` seconds
        after it started (None: no bound) is stopped as :meth:`stop` stops it, and its result says
        so (``gate_timeout``)."""
        assert self._process is not None, "start the gate first"
        try:
            status = self._process.wait(None if limit is None else max(0.0, limit - self.seconds))
        except subprocess.TimeoutExpired:
            self.stop(f"stopped: still running after its time limit of {limit:g} s (gate_timeout)")
            status = self._process.wait()
        seconds = self.seconds
        if self._links is not None:
            self._links.cleanup()
        output = self.log.read_text(encoding="utf-8", errors="replace")
        run = read_run(self.report / "report.json") if status in (0, 1, HARNESS_EXIT_STATUS) else None
        if run is not None and self.earlier:
            run = at_step(run, self.job.step, self.job.checkpoint)
        outcome = outcome_of(status, reported=run is not None, gone=self.gone())
        if self._stopped:
            message = self._stopped
        elif outcome in ("passed", "failed"):
            message = last_line(output)
        else:
            message = gate_cause(output, run, status, gone=self.gone())
        message = redact(message)
        result = GateResult(self.job.step, self.job.checkpoint, status, seconds, self.report, run, message,
                            self.log, time.monotonic(), outcome)  # fmt: skip
        record = read_json(self.record) or {}
        atomic_write_json(self.record, {**record, "ended": _now(), "status": status, "outcome": outcome,
                                        "message": message})  # fmt: skip
        return result

    def gone(self) -> list[str]:
        """The checkpoints of this gate whose folder is no longer there (the Trainer's
        ``save_total_limit`` removes old ones, possibly while their gate runs)."""
        return [p.name for p in [*self.earlier, self.job.checkpoint] if not p.is_dir()]


def outcome_of(status: int, *, reported: bool, gone: Sequence[str] = ()) -> str:
    """What a gate's exit status says: ``passed`` (0) and ``failed`` (1) when its report holds
    cases (``reported``); ``bad input`` (4, or 5: no case ran) unless a checkpoint of the gate was
    removed while it ran (then the refusal is about the missing folder, not the user's input);
    ``error`` for everything else: a harness error (8), a gate stopped or killed, no report."""
    if status in (0, 1) and reported:
        return "passed" if status == 0 else "failed"
    if status in (USAGE_EXIT_STATUS, NO_CASE_EXIT_STATUS) and not gone:
        return "bad input"
    return "error"


_HARNESS_PREFIX = re.compile(r"^harness error[^:]*:\s*")
# The lines in which a gate's output says why it reached no verdict, in the order they are trusted:
# the plugin's run-stopping line, a tracker that failed, pytest's internal error.
_STOPPED = ("novelty: harness error", "novelty: configuration error")
_CAUSE_PREFIXES = ("novelty: ", "novelty log harness error: ", "novelty log error: ", "INTERNALERROR> ")


def usage_error(output: str) -> str | None:
    """pytest's usage error in ``output`` (``ERROR: ...``, exit status 4), as one line: for an
    option argparse refused, its own line (``unrecognized arguments: --x``), not the usage text."""
    lines = [line.strip() for line in output.splitlines()]
    for i, line in enumerate(lines):
        if not line.startswith("ERROR: "):
            continue
        text = line[len("ERROR: "):].strip()
        if text.startswith("usage:"):
            refused = [follow.partition(": error: ")[2] for follow in lines[i + 1:] if ": error: " in follow]
            if refused:
                return refused[0].strip()
        return text
    return None


def gate_cause(output: str, run: TrackedRun | None, status: int, *, gone: Sequence[str] = ()) -> str:
    """The one line that says why a gate reached no verdict or refused its input.

    In order: a checkpoint removed while the gate ran; the first case the gate reported as an
    error with its cause (later cases only point to it); the plugin's line that stopped the run
    before any case (a service down at the preflight), else pytest's usage error, a tracker's
    failure or an internal error, from the gate's output; else the output's last line and the status.
    """
    if gone:
        return f"{', '.join(gone)} was removed while its gate ran (the Trainer's save_total_limit?)"
    for case in run.cases if run is not None else ():
        if case.outcome == "error" and case.message and "the same as in" not in case.message:
            return _HARNESS_PREFIX.sub("", case.message)
    lines = [line.strip() for line in output.splitlines()]
    stopped = [line for line in lines if line.startswith(_STOPPED)]
    refused = usage_error(output)
    if refused and not stopped:
        return refused
    for prefix in _CAUSE_PREFIXES:
        found = stopped if prefix == "novelty: " else [line for line in lines if line.startswith(prefix)]
        if found:
            line = found[-1] if prefix == "INTERNALERROR> " else found[0]
            return _HARNESS_PREFIX.sub("", line[len(prefix):].strip())
    if status == NO_CASE_EXIT_STATUS:
        return f"no case ran ({last_line(output)})"
    return f"exit status {status}: {last_line(output)}" if last_line(output) else f"exit status {status}"


def read_run(path: Path) -> TrackedRun | None:
    """The run a gate's ``report.json`` describes, or None when there is none or it holds no case
    (a "no verdict" placeholder)."""
    if not path.is_file():
        return None
    try:
        run = TrackedRun.from_report_file(path)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return run if run.cases else None


def at_step(run: TrackedRun, step: int, checkpoint: Path) -> TrackedRun:
    """The gated point named by the real checkpoint folder (the series ran over links to it)."""
    from dataclasses import replace

    gated = replace(run.gated, step=step, model=str(checkpoint))
    return replace(run, points=(*run.points[:-1], gated))


@dataclass(frozen=True)
class Unfinished:
    """A gate an earlier training process started and never saw end."""

    checkpoint: str
    pid: int | None
    running: bool
    """Whether its process is still there (it may still write its report)."""
    log: Path


def unfinished_gates(output_dir: Path) -> list[Unfinished]:
    """The gates under ``output_dir/novelty-gate`` that started and never recorded an end; each is
    marked as reported, so it is said once."""
    out = []
    for record in sorted((output_dir / GATE_FOLDER).glob(f"*/{RECORD_NAME}")):
        data = read_json(record)
        if not isinstance(data, dict) or "ended" in data:
            continue
        pid = data.get("pid") if isinstance(data.get("pid"), int) else None
        running = pid is not None and _alive(pid)
        out.append(Unfinished(str(data.get("checkpoint") or record.parent.name), pid, running,
                              record.parent / LOG_NAME))  # fmt: skip
        outcome = "still running when a later training run started" if running else "never ended"
        atomic_write_json(record, {**data, "ended": None, "outcome": "error", "message": outcome})
    return out


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process; a zombie (ended, not yet reaped by whoever adopted it)
    is not."""
    if Path("/proc/self/stat").is_file():  # Linux: the process's state letter
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False
    if sys.platform == "win32":  # signal 0 is CTRL_C_EVENT there: not asked
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
