"""Where the layers' notices go under pytest (:func:`~pytest_novelty.infra.progress.notice`).

The layers say what a person should know while a run goes (a model loads, generation a quarter
done, a server that makes requests wait, an index without checksums) through the one channel of
:mod:`pytest_novelty.infra.progress`; under pytest, :func:`send_notices` points it:

- in a process that has the terminal (no xdist, or the xdist controller), to
  :class:`TerminalNotices`: each line on the terminal past pytest's capture (:func:`terminal_line`,
  redacted, on its own line even inside a verbose test line; on stderr while the plugin configures,
  before pytest's terminal exists);
- on an xdist worker, whose own output never reaches the terminal, to :class:`WorkerNotices`: the
  lines said during a phase of a test go with that phase's report as ``novelty_notice`` user
  properties, each line in exactly one report, and the controller shows them as they arrive, each
  once (a line the controller said itself, a worker's repeat of a check it made first, is not
  shown twice).

The channel before is restored, and the plugin object unregistered, at the configuration's
cleanup, so nothing leaks from one pytest session into the next (pytester runs several in one
process). A worker's work line is not a notice: its case carries it as ``novelty_work``.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Generator

import pytest

from pytest_novelty.infra.progress import send_notices_to, to_stderr

__all__ = ["NOTICE_PROPERTY", "TerminalNotices", "TerminalStream", "WorkerNotices", "send_notices", "terminal_line"]

NOTICE_PROPERTY = "novelty_notice"
"""The user property that carries a notice an xdist worker's test said to the controller's terminal."""


def terminal_line(config: pytest.Config, line: str) -> None:
    """``line``, redacted, on the terminal past pytest's output capture, on its own line even in the
    middle of a verbose test line: the session's one channel for progress and notices (on stderr
    while the plugin configures, before pytest's terminal exists: the demo being prepared, a hub
    that cannot be checked)."""
    from pytest_novelty.infra.redact import redact

    reporter = config.pluginmanager.getplugin("terminalreporter")
    if reporter is None:  # early in pytest_configure, before pytest's terminal exists
        to_stderr(redact(line))
        return
    capman = config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
        reporter.write_line(redact(line))


class TerminalStream:
    """A text stream to the real terminal while pytest captures output (for progress bars)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def write(self, text: str) -> int:
        capman = self.config.pluginmanager.getplugin("capturemanager")
        if capman is None:
            return sys.stderr.write(text)
        with capman.global_and_fixture_disabled():
            written = sys.stderr.write(text)
            sys.stderr.flush()
        return written

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        # pytest's capture has moved file descriptor 2 by now; its terminal writer knows whether the
        # session writes to a terminal (and honours --color / NO_COLOR for it).
        return bool(self.config.get_terminal_writer().hasmarkup)


class TerminalNotices:
    """The notice channel of a process that has the terminal, and (as a plugin) the reader of the
    notices a worker's reports carry (see the module doc)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._said: set[str] = set()
        self._lock = threading.Lock()

    def add(self, line: str) -> None:
        """This process's own notice."""
        with self._lock:
            self._said.add(line)
        terminal_line(self.config, line)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A worker's report (xdist sets its ``node``): its notices, unless this process said the same."""
        if getattr(report, "node", None) is None:
            return
        for name, value in report.user_properties:
            if name == NOTICE_PROPERTY:
                with self._lock:
                    if str(value) in self._said:
                        continue
                terminal_line(self.config, str(value))


class WorkerNotices:
    """An xdist worker's notice channel, and (as a plugin) what hands them to the reports.

    Lines said before the worker's first test are dropped: they come from the checks every process
    makes alike when it starts (the options, the checkpoint folders, a hub id), which the controller
    makes too and says itself.
    """

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._started = False
        self._lock = threading.Lock()

    def add(self, line: str) -> None:
        """One notice, kept for the report of the test phase that says it."""
        with self._lock:
            if self._started:
                self._lines.append(line)

    def take(self) -> list[str]:
        """The lines said since the last call, in order."""
        with self._lock:
            lines, self._lines = self._lines, []
        return lines

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        with self._lock:
            self._started = True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """The notices said during this phase of the test go with its report (only: the report holds
        a copy of the item's properties, so the next phase's does not repeat them)."""
        report = yield
        report.user_properties.extend((NOTICE_PROPERTY, line) for line in self.take())
        return report


def send_notices(config: pytest.Config, *, worker: bool) -> None:
    """From now on, the layers' notices go where the module doc says, until the configuration's cleanup."""
    plugin: TerminalNotices | WorkerNotices = WorkerNotices() if worker else TerminalNotices(config)
    previous = send_notices_to(plugin.add)
    config.pluginmanager.register(plugin, "novelty-notices")

    def restore() -> None:
        send_notices_to(previous)
        config.pluginmanager.unregister(plugin)

    config.add_cleanup(restore)
