"""A folder built once for the whole test run, shared by every pytest-xdist worker.

A module-scoped fixture runs once per worker that runs a test of its module: under ``pytest -n 2``
a costly one (three shard runs of the demo's gate) is often built twice, once on each worker, at
the same time on the same cores. :func:`built_once` builds the folder under the run's common
temporary folder (the parent of each worker's own), behind a file lock: the first worker builds,
the other waits and reuses it. Tests only read such a folder; one that writes takes a copy.
"""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

_DONE = ".built"


def built_once(config: pytest.Config, factory: pytest.TempPathFactory, name: str,
               build: Callable[[Path], None]) -> Path:  # fmt: skip
    """The folder ``name`` that ``build(folder)`` filled, built by the first worker that asks.

    A build that fails leaves no mark of being done: the next worker to ask builds again (and
    fails the same way, in its own tests)."""
    base = factory.getbasetemp()
    if hasattr(config, "workerinput"):  # an xdist worker: its basetemp is one per worker, under the run's
        base = base.parent
    folder = base / name
    with (base / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (folder / _DONE).exists():
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir()
                build(folder)
                (folder / _DONE).touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return folder
