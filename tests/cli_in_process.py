"""The command line run inside the test process, for tests whose point is not the process boundary.

A ``python -m pytest_novelty.cli`` child pays Python's start and the torch and transformers imports
(seconds each time); :func:`run_cli` calls the same ``main`` here and hands back what a child would
have: the exit status and the text written to stdout and stderr, as a ``CompletedProcess``, so a
test reads an in-process run and a child alike. It works in fixtures of any scope (no ``capsys``).
"""

from __future__ import annotations

import contextlib
import io
import subprocess

from pytest_novelty.cli import main


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``pytest-novelty ARGS`` in this process: its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    return subprocess.CompletedProcess(["pytest-novelty", *args], status, out.getvalue(), err.getvalue())
