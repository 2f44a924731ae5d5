"""Counting the files a block of code opens, through the interpreter's own audit events (no mocks)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

_OPENED: list[str] = []
_WATCH: list[str] = []


def _audit(event: str, args: tuple) -> None:  # type: ignore[type-arg]
    if event == "open" and _WATCH and isinstance(args[0], (str, os.PathLike)):
        path = os.fspath(args[0])
        if any(path.startswith(w) for w in _WATCH):
            _OPENED.append(path)


sys.addaudithook(_audit)  # audit hooks cannot be removed; this one costs nothing while nothing is watched


@contextlib.contextmanager
def opened_under(folder: Path) -> Iterator[list[str]]:
    """The paths under ``folder`` opened (by ``open``, ``io.open`` or ``os.open``) inside the block."""
    _OPENED.clear()
    _WATCH[:] = [str(Path(folder).resolve())]
    try:
        yield _OPENED
    finally:
        _WATCH.clear()
