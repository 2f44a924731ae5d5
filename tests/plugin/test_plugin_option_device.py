"""``--device`` on an xdist worker: the GPU pinning and torch's thread count are undone after the session."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow

REPORTING_CONFTEST = """
import os

import torch


def pytest_collection_finish(session):
    print("DURING", os.environ.get("CUDA_VISIBLE_DEVICES"), torch.get_num_threads())
"""


@pytest.fixture
def as_worker(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """An in-process run that believes it is xdist worker gw1 of two."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
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
