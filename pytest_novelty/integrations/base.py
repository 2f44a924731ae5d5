"""The tracker Protocol, the registry of ``--novelty-log`` specs, and logging a run to every tracker.

A tracker is opened from a spec (``tensorboard:DIR``, ``wandb:PROJECT?entity=..``, ``mlflow:URI``)
registered by its prefix in its own module, and answers two calls:

* ``check()``: cheap, before the run: its client library is installed (else one line naming the
  extra to install) and the destination is usable where that can be told without a network
  request;
* ``log(run)``: log a :class:`~pytest_novelty.integrations.run.TrackedRun` through the tool's own
  client library; returns one line saying where it went.

Credentials follow each tool's own conventions (environment variables, netrc, its login files);
nothing here reads or prints them, and every line shown is redacted.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Protocol

from pytest_novelty.infra.errors import ConfigError, NoveltyError
from pytest_novelty.infra.registry import Registry
from pytest_novelty.integrations.run import TrackedRun

FIELD = "--novelty-log"


class Tracker(Protocol):
    """One experiment tracker that a gate run logs to."""

    spec: str

    def check(self) -> None:
        """Raise :class:`ConfigError` when the tracker cannot be used (missing extra, bad destination)."""

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
    """Open and check every spec; raises :class:`ConfigError` (bad input, exit 4) on the first problem."""
    trackers = open_trackers(specs)
    for tracker in trackers:
        tracker.check()
    return trackers


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
            tracker.check()
            say(f"novelty log: {tracker.log(run)}")
        except ConfigError as exc:
            say(f"novelty log error: {exc}")
            status = max(status, 4)  # a harness error (8) outranks bad input
        except NoveltyError as exc:
            say(f"novelty log harness error: {exc}")
            status = HARNESS_EXIT_STATUS
        except Exception as exc:  # the tool's own client failed: a harness error naming the cause
            say(f"novelty log harness error: {spec}: {failure(exc)}")
            status = HARNESS_EXIT_STATUS
    return Logged(tuple(lines), status)


def failure(exc: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def local_folder(spec: str, folder: str | Path) -> Path:
    """A destination folder, created if needed; one that cannot be is bad input naming it."""
    path = Path(folder).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{spec}: cannot create the folder {path}: {exc.strerror or exc}", field=FIELD) from None
    return path
