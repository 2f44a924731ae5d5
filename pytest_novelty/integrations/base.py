"""The tracker Protocol, the registry of ``--novelty-log`` specs, and logging a run to every tracker.

A tracker (``tensorboard:DIR``, ``wandb:PROJECT?entity=..``, ``mlflow:URI``) goes through the
tool's own client library (an optional extra). Every request it makes is bounded through the
tool's settings (:data:`CALL_TIMEOUT`, :data:`CALL_RETRIES`) and its whole check or log by
:func:`within` (:data:`DEADLINE`), so a server that never answers costs seconds, never a hang.
Credentials follow each tool's conventions; nothing here reads or prints them.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Protocol, TypeVar

from pytest_novelty.infra.concurrency import StillRunning, in_thread
from pytest_novelty.infra.errors import ConfigError, NoveltyError, PreflightError
from pytest_novelty.infra.redact import echo
from pytest_novelty.infra.registry import Registry
from pytest_novelty.infra.retry import failure_reason
from pytest_novelty.integrations.run import TrackedRun

FIELD = "--novelty-log"
"""The option the specs come from, as pytest spells it (the command line's ``--log`` is the same option)."""
CALL_TIMEOUT = 10
"""Seconds one request of a tracker's client may wait for an answer (passed through the tool's settings)."""
CALL_RETRIES = 1
"""Retries of a failed request the tool's client may make (MLflow's default is 7, with backoff: minutes)."""
DEADLINE = 60.0
"""Seconds a tracker's whole check, or its whole log, may take before the run gives up on it."""

T = TypeVar("T")


class Tracker(Protocol):
    """One experiment tracker that a gate run logs to."""

    spec: str

    def check(self) -> None:
        """The preflight, before anything is generated (the library installed, the destination one the
        tool accepts, a server answering, a folder taking a write): :class:`ConfigError` for bad input,
        :class:`PreflightError` for a destination that cannot be reached or written now."""

    def log(self, run: TrackedRun) -> str:
        """Log ``run``; return one line saying where it went."""


TRACKERS: Registry[Tracker] = Registry(
    "tracker", field=FIELD,
    builtins=("pytest_novelty.integrations.tensorboard", "pytest_novelty.integrations.wandb",
              "pytest_novelty.integrations.mlflow"),
)


def require(module: str, extra: str, spec: str) -> ModuleType:
    """Import ``module``; when it is missing, one line naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(missing_extra(extra, spec), field=FIELD) from None


def installed(module: str, extra: str, spec: str) -> None:
    """Check that ``module`` is installed without importing it (cheap, for ``check``)."""
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise ConfigError(missing_extra(extra, spec), field=FIELD)


def missing_extra(extra: str, spec: str) -> str:
    return f"{spec} needs the {extra} extra: pip install \"pytest-novelty[{extra}]\""


def open_trackers(specs: Sequence[str]) -> list[Tracker]:
    """Parse every spec and open its tracker (nothing is imported or contacted yet)."""
    return [TRACKERS.open(spec) for spec in specs]


def check_trackers(specs: Sequence[str]) -> list[Tracker]:
    """Open every spec first (a typo in the last one costs no request), then check each tracker within
    :data:`DEADLINE`; the first problem is raised."""
    trackers = open_trackers(specs)
    for tracker in trackers:
        within(tracker.spec, "check", tracker.check)
    return trackers


def within(spec: str, what: str, call: Callable[[], T], seconds: float = DEADLINE) -> T:
    """``call()``'s result or error, or a :class:`PreflightError` naming ``spec`` when it has not returned
    within ``seconds``: it runs in a daemon thread, the one way to stop waiting for a client library
    that does not give up on its own (:func:`~pytest_novelty.infra.concurrency.in_thread`)."""
    try:
        return in_thread(call, name=f"novelty-tracker-{what}", timeout=seconds)
    except StillRunning:
        why = f"{spec}: the tracker's {what} did not finish within {seconds:g} s; gave up on it"
        raise PreflightError(why) from None


@dataclass(frozen=True)
class Logged:
    """What logging a run did: a line per tracker, and the exit status a failure asks for (0: none)."""

    lines: tuple[str, ...]
    status: int = 0


def log_run(specs: Sequence[str], run: TrackedRun, write: Callable[[str], None] | None = None) -> Logged:
    """Log ``run`` to every tracker in ``specs``, one failing not stopping the others: status 4 for bad
    input, 8 for a tracker that fails; each outcome one redacted line, passed to ``write`` at once."""
    from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS
    from pytest_novelty.infra.redact import redact

    lines: list[str] = []
    status = 0

    def say(line: str) -> None:
        line = redact(line)
        lines.append(line)
        if write is not None:
            write(line)

    for spec in specs:
        try:
            tracker = TRACKERS.open(spec)
            within(tracker.spec, "check", tracker.check)
            say(f"novelty log: {within(tracker.spec, 'log', partial(tracker.log, run))}")
        except ConfigError as exc:  # its words without the option's name, which each front end spells its own way
            say(f"novelty log error: {exc.detail}")
            status = max(status, 4)  # a harness error (8) outranks bad input
        except NoveltyError as exc:
            say(f"novelty log harness error: {exc}")
            status = HARNESS_EXIT_STATUS
        except Exception as exc:  # the tool's own client failed: a harness error naming the cause
            say(f"novelty log harness error: {spec}: {failure(exc)}")
            status = HARNESS_EXIT_STATUS
    return Logged(tuple(lines), status)


def failure(exc: BaseException) -> str:
    """An exception of a tool's client as one printable line: why a request got no answer
    (``connection refused``), else its type and its message's first line."""
    reason = failure_reason(exc)
    if not reason.startswith(f"{type(exc).__name__}:"):
        return reason
    text = str(exc).strip().splitlines()
    return echo(f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__, limit=300)


def local_folder(spec: str, folder: str | Path) -> Path:
    """A destination folder, created if needed, that takes a write: one that never can (read-only, no
    permission, a file in the way) is bad input naming it; one that cannot now (a full disk) a harness error."""
    from pytest_novelty.infra.storage import never_writable, probe_write, write_cause

    path = Path(folder).expanduser()
    try:
        probe_write(path)
    except OSError as exc:
        if never_writable(exc):
            raise ConfigError(f"{spec}: the folder {path} cannot be written: {write_cause(exc, path)}",
                              field=FIELD) from None
        raise PreflightError(f"{spec}: the folder {path} cannot be written now: {write_cause(exc, path)}") from None
    return path
