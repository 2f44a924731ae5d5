"""The tracker Protocol, the registry of ``--novelty-log`` specs, and logging a run to every tracker.

A tracker is opened from a spec (``tensorboard:DIR``, ``wandb:PROJECT?entity=..``, ``mlflow:URI``)
registered by its prefix in its own module, and answers two calls:

* ``check()``: the preflight, before anything is generated: its client library is installed (else
  one line naming the extra to install), the spec's destination is one the tool accepts, a server
  answers, a folder takes a write. Bad input (a spec or URI the tool refuses, a folder that can
  never be written) is a :class:`~pytest_novelty.infra.errors.ConfigError` (exit 4); a destination
  that cannot be reached or written now (a server down or silent, a full disk) a
  :class:`~pytest_novelty.infra.errors.PreflightError` (exit 8);
* ``log(run)``: log a :class:`~pytest_novelty.integrations.run.TrackedRun` through the tool's own
  client library; returns one line saying where it went.

A tracker is an edge like a judge or an index: every request it makes is bounded through the
tool's own settings (:data:`CALL_TIMEOUT` seconds, :data:`CALL_RETRIES` retry), and its whole check
or log through :func:`within` (:data:`DEADLINE` seconds), so a server that never answers costs
the run seconds, named in one line, never a hang.

Credentials follow each tool's own conventions (environment variables, netrc, its login files);
nothing here reads or prints them, and every line shown is redacted.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Protocol, TypeVar

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
        """The preflight (see the module doc): :class:`ConfigError` for bad input,
        :class:`PreflightError` for a destination that cannot be reached or written now."""

    def log(self, run: TrackedRun) -> str:
        """Log ``run``; return one line saying where it went."""


TRACKERS: Registry[Tracker] = Registry(
    "tracker",
    field=FIELD,
    builtins=(
        "pytest_novelty.integrations.tensorboard",
        "pytest_novelty.integrations.wandb",
        "pytest_novelty.integrations.mlflow",
    ),
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
    """Open and check every spec, before anything is generated: every spec is parsed first (a typo
    in the last one costs no request), then each tracker is checked within :data:`DEADLINE`.
    Raises on the first problem: :class:`ConfigError` (bad input, exit 4) or
    :class:`PreflightError` (exit 8)."""
    trackers = open_trackers(specs)
    for tracker in trackers:
        within(tracker.spec, "check", tracker.check)
    return trackers


def within(spec: str, what: str, call: Callable[[], T], seconds: float = DEADLINE) -> T:
    """``call()``, given at most ``seconds``: its result, or its error as raised; when it has not
    returned by then, a :class:`PreflightError` (a harness error) naming ``spec``.

    The call runs in a daemon thread, the one way to stop waiting for a client library that does
    not give up on its own; the thread is left to end by itself and never keeps the process alive.
    """
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the caller as it is
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"novelty-tracker-{what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise PreflightError(f"{spec}: the tracker's {what} did not finish within {seconds:g} s; gave up on it")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


@dataclass(frozen=True)
class Logged:
    """What logging a run did: a line per tracker, and the exit status a failure asks for (0: none)."""

    lines: tuple[str, ...]
    status: int = 0


def log_run(specs: Sequence[str], run: TrackedRun, write: Callable[[str], None] | None = None) -> Logged:
    """Log ``run`` to every tracker in ``specs``, each on its own: one that fails does not stop
    the others. A bad spec or a missing extra is bad input (status 4); a tracker that fails while
    logging (a server down, a refused write) is a harness error (status 8). Each outcome is one
    redacted line, passed to ``write`` as it happens."""
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
    """An exception of a tool's client as one printable line: why a request got no answer when it
    was one (``connection refused``, ``timed out``), else its type and the first line of its message
    (which may quote what a server sent)."""
    reason = failure_reason(exc)
    if not reason.startswith(f"{type(exc).__name__}:"):
        return reason
    text = str(exc).strip().splitlines()
    return echo(f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__, limit=300)


#: Why a folder cannot be written, for the causes that stay until the user changes something.
def local_folder(spec: str, folder: str | Path) -> Path:
    """A destination folder, created if needed, that takes a write (one small file, written,
    synced and removed): one that never can (read-only, no permission, a file in the way) is bad
    input naming it; one that cannot now (a full disk) is a harness error."""
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
