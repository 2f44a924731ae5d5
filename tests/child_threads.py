"""Child runs started by a pytest-xdist worker take that worker's share of torch's threads.

The plugin gives each xdist worker ``cpus // workers`` torch threads
(:func:`pytest_novelty.generation.devices.cpu_threads`); a child process it starts (a pytester run, a
``pytest-novelty`` command line) is not a worker and would take every core. With a child per
worker, the cores are then oversubscribed and a tiny model's generation slows several-fold (22
against 95 tokens/s here with other jobs on the same 2 cores). ``OMP_NUM_THREADS`` is read by torch
when it starts, so the children get the worker's count; outside xdist nothing changes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pytest_novelty.generation.devices import cpu_threads


def worker_threads() -> dict[str, str]:
    """``OMP_NUM_THREADS`` for a child of this process: a worker's share under xdist, else nothing."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers or "OMP_NUM_THREADS" in os.environ:
        return {}
    return {"OMP_NUM_THREADS": str(cpu_threads(int(workers)))}


@contextmanager
def sharing_the_workers_threads() -> Iterator[None]:
    """Within it, the child processes started take :func:`worker_threads` (for a module-scoped
    fixture's runs); the environment before is restored after it."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in worker_threads().items():
            patch.setenv(name, value)
        yield


@pytest.fixture
def children_share_the_workers_threads() -> Iterator[None]:
    """The test's child processes take :func:`worker_threads`."""
    with sharing_the_workers_threads():
        yield
