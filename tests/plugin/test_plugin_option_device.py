"""``--device`` on an xdist worker: the GPU pinning and torch's thread count are undone after the session."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow

REPORTING_CONFTEST = """
import os

import pytest
import torch


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # what pytest-xdist gives the config of its worker gw1 of two, before any plugin configures
    config.workerinput = {"workerid": "gw1", "workercount": 2}
    config.workeroutput = {}


def pytest_collection_finish(session):
    print("DURING", os.environ.get("CUDA_VISIBLE_DEVICES"), torch.get_num_threads())
"""


@pytest.fixture
def as_worker(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """An in-process run that believes it is xdist worker gw1 of two: its config has the worker's
    ``workerinput`` (the variables xdist sets stay out: a child run inherits those too)."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    pytester.makeconftest(REPORTING_CONFTEST)
    return pytester


def test_cuda_visible_devices_restored_after_the_session(
    as_worker: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, novelty_args: list[str]
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    result = as_worker.runpytest(*novelty_args, "--co", "-s")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["DURING 5 *"])  # worker gw1 gets the second visible GPU
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "4,5"


def test_torch_threads_restored_after_the_session(
    as_worker: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, novelty_args: list[str]
) -> None:
    import torch

    from pytest_novelty.generation.devices import cpu_threads

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU: workers share the cores
    before = torch.get_num_threads()
    try:
        result = as_worker.runpytest(*novelty_args, "--co", "-s")
        assert result.ret == 0
        result.stdout.fnmatch_lines([f"DURING  {cpu_threads(2)}"])
        assert torch.get_num_threads() == before
    finally:
        torch.set_num_threads(before)
