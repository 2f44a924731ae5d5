"""Worker-to-device assignment, with fake device lists (no GPU needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_novelty.generation.devices import assign_gpus, auto_workers, cpu_threads, visible_gpus, worker_index
from pytest_novelty.infra.errors import ConfigError


def test_visible_gpus_reads_the_environment() -> None:
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,5, 7"}) == ["2", "5", "7"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == []


@pytest.mark.parametrize(
    ("worker", "per_worker", "expected"),
    [("gw0", 1, ["2"]), ("gw1", 1, ["5"]), ("gw3", 1, ["9"]), ("gw0", 2, ["2", "5"]), ("gw1", 2, ["7", "9"])],
)
def test_each_worker_gets_its_own_group(worker: str, per_worker: int, expected: list[str]) -> None:
    assert assign_gpus(worker, ["2", "5", "7", "9"], per_worker) == expected


def test_all_workers_disjoint() -> None:
    gpus = [str(i) for i in range(8)]
    groups = [tuple(assign_gpus(f"gw{i}", gpus, 2)) for i in range(4)]
    assert len({d for g in groups for d in g}) == 8


def test_more_workers_than_gpus_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"worker gw2 has no GPU.*use -n 2"):
        assign_gpus("gw2", ["0", "1"])


def test_auto_workers_and_cpu_threads() -> None:
    assert auto_workers(["0", "1", "2", "3"]) == 4
    assert auto_workers(["0", "1", "2", "3"], per_worker=2) == 2
    assert auto_workers([]) is None
    assert cpu_threads(2, cpus=16) == 8
    assert cpu_threads(4, cpus=2) == 1


def test_worker_index_rejects_other_names() -> None:
    assert worker_index("gw12") == 12
    with pytest.raises(ValueError):
        worker_index("master")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the device files are Linux's")
def test_a_machine_without_a_gpu_drivers_device_files_counts_no_gpu_without_torch(tmp_path: Path) -> None:
    """The driver's device files are what torch would find GPUs through: none of them, no GPU, and
    the count needs no import of torch (a warm rerun under xdist loads none)."""
    from pytest_novelty.generation.devices import gpu_device_nodes

    patterns = (str(tmp_path / "nvidia[0-9]*"), str(tmp_path / "kfd"))
    assert gpu_device_nodes(patterns) == []
    (tmp_path / "nvidia0").touch()
    (tmp_path / "nvidiactl").touch()  # the control file is no GPU
    (tmp_path / "kfd").touch()
    assert gpu_device_nodes(patterns) == [str(tmp_path / "kfd"), str(tmp_path / "nvidia0")]
    script = ("import sys; from pytest_novelty.generation import devices; "
              "print(devices.visible_gpus({}), 'torch' in sys.modules)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    if not gpu_device_nodes():  # this machine has no GPU driver: counted without torch
        assert done.stdout.split() == ["[]", "False"]
