"""Errors that reach the user as one line instead of a traceback, redacted when made
(:func:`pytest_novelty.infra.redact.redact`) so that no key reaches a terminal, log or report.

The plugin and the command line exit with :data:`USAGE_EXIT_STATUS` (4) on a :class:`ConfigError`
and :data:`HARNESS_EXIT_STATUS` (8) on a :class:`HarnessError` (the harness could not measure: an
unreachable judge, a corrupt index), so CI can tell "the model regressed" (1) from "the judge was down".
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path

HARNESS_EXIT_STATUS = 8
"""The exit status of a run with any harness error, pytest's and the command line's (pytest itself uses 0-6)."""
USAGE_EXIT_STATUS = 4
"""The exit status of bad input: pytest's own for a usage error, and the command line's too."""


class NoveltyError(Exception):
    """Base class: a problem the user can fix, described in one line (redacted)."""

    def __init__(self, message: str = "") -> None:
        from pytest_novelty.infra.redact import redact

        super().__init__(redact(str(message)))


class ConfigError(NoveltyError):
    """Bad input: names the file, the field and the fix."""

    def __init__(self, message: str, *, path: str | Path | None = None, field: str | None = None) -> None:
        self.path = None if path is None else str(path)
        self.field = field
        self.detail = message
        """The message without the file and field it is about."""
        super().__init__("".join(f"{part}: " for part in (self.path, field) if part) + message)


class HarnessError(NoveltyError):
    """The harness could not do its job (judge unreachable, corrupt index): an error, not a failed gate."""


class PreflightError(HarnessError):
    """An external service the run needs failed its check before anything was generated."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return " (did you mean 'x'?)" for the closest choice, or an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def first_line(error: BaseException, limit: int = 300) -> str:
    """The first line of an error's message, stripped and cut to ``limit`` characters ('' when empty)."""
    return (str(error).strip().splitlines() or [""])[0][:limit]


def last_line(text: str) -> str:
    """The last non-empty line of a message or a failure's text (where pytest and most tools put
    the cause), stripped; '' when there is none."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1] if lines else ""
