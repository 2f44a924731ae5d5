"""pytest in a child process for module- and session-scoped fixtures, where pytester cannot go.

pytester is function-scoped: a run it starts belongs to one test. A run that several tests read
(the same gate whose table, report and cache each test looks at from its own side) is started once
by a fixture of a wider scope with :func:`run_pytest`, which gives the child the environment
pytester gives its own (``HOME`` in the run's folder, the outer ``PYTEST_ADDOPTS`` replaced by the
child options, no colours, the folder first on ``PYTHONPATH``, a ``--basetemp`` inside the folder)
and returns pytester's own :class:`pytest.RunResult`, so that the tests read both kinds of run alike.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import CHILD_OPTIONS, CI_MARKERS


@dataclass(frozen=True)
class CachedRun:
    """A child pytest run that several tests read, and the cache it filled (copy it before writing)."""

    result: pytest.RunResult
    cache: Path


def child_env(folder: Path) -> dict[str, str]:
    """The environment pytester gives the runs it starts in ``folder``, with the child options."""
    env = dict(os.environ)
    for name in ("TOX_ENV_DIR", *CI_MARKERS):
        env.pop(name, None)
    env.update({"HOME": str(folder), "USERPROFILE": str(folder), "PY_COLORS": "0", "PYTEST_ADDOPTS": CHILD_OPTIONS})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH", "")]))
    return env


def run_pytest(folder: Path, *args: str, timeout: float = 900) -> pytest.RunResult:
    """``python -m pytest ARGS`` with ``folder`` as its working directory, as pytester's
    ``runpytest_subprocess`` runs it; the result as pytester's ``RunResult``."""
    folder.mkdir(parents=True, exist_ok=True)
    basetemp = folder / "basetemp"
    shutil.rmtree(basetemp, ignore_errors=True)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", f"--basetemp={basetemp}", *args],
        cwd=folder, env=child_env(folder), stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    ret: int | pytest.ExitCode = done.returncode
    with contextlib.suppress(ValueError):
        ret = pytest.ExitCode(done.returncode)
    return pytest.RunResult(ret, done.stdout.splitlines(), done.stderr.splitlines(), time.monotonic() - started)


def copy_cache(source: Path, dest: Path) -> Path:
    """A private copy of the cache folder ``source`` at ``dest`` (which must not exist yet), for a
    test that runs more work in a cache a shared run filled: the shared one stays as it was."""
    shutil.copytree(source, dest, symlinks=True)
    return dest
