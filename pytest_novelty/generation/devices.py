"""Which accelerator each pytest-xdist worker uses, decided before CUDA initialises.

Worker ``gwN`` gets GPU group N (``per_worker`` GPUs each, for models that accelerate spreads
over several devices); the choice is made from ``CUDA_VISIBLE_DEVICES`` or the driver's device
count and written back to ``CUDA_VISIBLE_DEVICES`` in the worker's process, so every later CUDA
call there sees only its own devices. Without GPUs, workers share the CPU and split its threads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from pytest_novelty.errors import ConfigError


def visible_gpus(env: Mapping[str, str] | None = None) -> list[str]:
    """The GPU ids this process may use: ``CUDA_VISIBLE_DEVICES`` when set, else all of them.

    Counting devices goes through NVML (``torch.cuda.device_count``) and does not create a CUDA
    context, so it is safe before the worker pins its device.
    """
    env = os.environ if env is None else env
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip() and d.strip() != "-1"]
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return []
    return [str(i) for i in range(torch.cuda.device_count())]


def worker_index(worker_id: str) -> int:
    """``gw3`` → 3."""
    if not worker_id.startswith("gw") or not worker_id[2:].isdigit():
        raise ValueError(f"not an xdist worker id: {worker_id!r}")
    return int(worker_id[2:])


def assign_gpus(worker_id: str, gpus: Sequence[str], per_worker: int = 1) -> list[str]:
    """The GPUs of ``worker_id``: group ``index`` of ``per_worker`` consecutive devices.

    More workers than groups is an error: two workers on one GPU would both load the model and
    run out of memory, so the user is told to lower ``-n``.
    """
    if per_worker < 1:
        raise ConfigError("must be at least 1", field="--gpus-per-worker")
    index = worker_index(worker_id)
    groups = len(gpus) // per_worker
    if index >= groups:
        raise ConfigError(
            f"worker {worker_id} has no GPU: {len(gpus)} visible GPU(s) make {groups} group(s) of "
            f"{per_worker}; use -n {max(groups, 1)} or -n auto",
            field="-n",
        )
    return list(gpus[index * per_worker : (index + 1) * per_worker])


def auto_workers(gpus: Sequence[str], per_worker: int = 1) -> int | None:
    """``-n auto``: one worker per GPU group; None (xdist's CPU count) on a CPU-only machine."""
    return max(1, len(gpus) // per_worker) if gpus else None


def cpu_threads(worker_count: int, cpus: int | None = None) -> int:
    """Threads for torch in one of ``worker_count`` CPU workers sharing the machine."""
    cpus = cpus or os.cpu_count() or 1
    return max(1, cpus // max(1, worker_count))
