"""Which accelerator each pytest-xdist worker uses, decided before CUDA initialises, and how one
model is spread over several.

Worker ``gwN`` gets GPU group N (``per_worker`` GPUs each), written back to ``CUDA_VISIBLE_DEVICES``
in its process so that every later CUDA call there sees only its own devices. Without GPUs,
workers share the CPU and split its threads.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Mapping, Sequence

from pytest_novelty.infra.errors import ConfigError, did_you_mean


def visible_gpus(env: Mapping[str, str] | None = None) -> list[str]:
    """The GPU ids this process may use: ``CUDA_VISIBLE_DEVICES`` when set, else all of them (counted
    through NVML, which creates no CUDA context: safe before the worker pins its device)."""
    env = os.environ if env is None else env
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip() and d.strip() != "-1"]
    if "torch" not in sys.modules and not gpu_device_nodes():
        return []  # no driver's device here: nothing for torch to count, and no reason to import it
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return []
    return [str(i) for i in range(torch.cuda.device_count())]


GPU_DEVICE_NODES = ("/dev/nvidia[0-9]*", "/dev/kfd", "/dev/dxg")
"""The device files a GPU driver makes on Linux: NVIDIA's (containers too), ROCm's, WSL 2's."""


def gpu_device_nodes(patterns: Sequence[str] = GPU_DEVICE_NODES) -> list[str]:
    """The GPU drivers' device files this machine has (Linux). Elsewhere a marker that says "ask
    torch": the absence of these files proves nothing there."""
    if not sys.platform.startswith("linux"):
        return ["(not Linux)"]
    return sorted(path for pattern in patterns for path in glob.glob(pattern))


def worker_index(worker_id: str) -> int:
    """``gw3`` → 3."""
    if not worker_id.startswith("gw") or not worker_id[2:].isdigit():
        raise ValueError(f"not an xdist worker id: {worker_id!r}")
    return int(worker_id[2:])


def assign_gpus(worker_id: str, gpus: Sequence[str], per_worker: int = 1) -> list[str]:
    """The GPUs of ``worker_id``: its group of ``per_worker`` consecutive devices. More workers than
    groups is refused (two workers on one GPU would both load the model and run out of memory)."""
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


DEVICE_NAMES = ("auto", "cpu", "mps", "cuda")
"""The device names ``--device`` takes; ``cuda:N`` names one GPU."""


def check_device(device: str) -> None:
    """``--device`` as the user typed it, checked before anything loads: a known name or ``cuda:N``
    (a GPU this machine has); CUDA asked for on a machine without it is bad input too."""
    name, colon, index = device.partition(":")
    if device in DEVICE_NAMES or (name == "cuda" and colon and index.isdigit()):
        if name != "cuda":
            return
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(f"{device}: CUDA is not available on this machine; use --device cpu (or auto)",
                              field="--device")
        if index and int(index) >= torch.cuda.device_count():
            raise ConfigError(f"{device}: this machine has {torch.cuda.device_count()} GPUs (cuda:0 to "
                              f"cuda:{torch.cuda.device_count() - 1})", field="--device")
        return
    raise ConfigError(
        f"{device!r} is not a device{did_you_mean(device, DEVICE_NAMES)}; use auto, cpu, cuda or cuda:N",
        field="--device",
    )


def resolve_device(device: str | None = "auto") -> str:
    """The one device resolver for every model the harness loads: ``auto`` (or None) is CUDA when
    available, else the CPU; ``cuda`` without CUDA is refused; anything else is returned as given."""
    import torch

    if device is None or device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("CUDA is not available on this machine; use --device cpu", field="--device")
    return device


def model_devices(device: str, per_worker: int, count: int) -> list[str]:
    """The devices one model is spread over: the first ``per_worker`` of the ``count`` GPUs this
    process sees (a worker sees only its own group); one device (``per_worker`` 1, the CPU) as is."""
    if per_worker <= 1 or device == "cpu":
        return [device]
    if device not in ("cuda", "cuda:0"):
        raise ConfigError(
            f"--device {device} pins one GPU; use --device cuda (or auto) with --gpus-per-worker {per_worker}",
            field="--device",
        )
    if count < per_worker:
        raise ConfigError(
            f"{per_worker} GPUs per worker asked, but this process sees {count}; lower --gpus-per-worker "
            "or make more GPUs visible (CUDA_VISIBLE_DEVICES)",
            field="--gpus-per-worker",
        )
    return [f"cuda:{i}" for i in range(per_worker)]


WEIGHT_SHARE = 0.8
"""The part of a device's free memory the weights may take when spread; the rest is the KV cache's."""


def shard_placement(
    devices: Sequence[str], free: Mapping[str, int], *, offload_folder: str | None = None
) -> dict[str, object]:
    """``from_pretrained`` arguments that spread one model over ``devices`` with accelerate.

    ``max_memory`` names only these devices (nothing lands on another worker's GPU), each GPU allowed
    :data:`WEIGHT_SHARE` of its ``free`` bytes. GPUs only get ``device_map="balanced"`` (layers split
    evenly, one GPU active at a time); with ``cpu`` or ``disk`` (which needs ``offload_folder``),
    ``"auto"``. One device: no device map.
    """
    if len(devices) <= 1:
        return {}
    missing = [d for d in devices if d not in free]
    if missing:
        raise ValueError(f"no free memory given for {', '.join(missing)}")
    gpus_only = all(d.startswith("cuda") for d in devices)
    max_memory: dict[int | str, int] = {}
    for d in devices:
        key: int | str = int(d.partition(":")[2] or 0) if d.startswith("cuda") else d
        max_memory[key] = int(free[d] * (WEIGHT_SHARE if d.startswith("cuda") else 1.0))
    placement: dict[str, object] = {"device_map": "balanced" if gpus_only else "auto", "max_memory": max_memory}
    if "disk" in devices:
        if offload_folder is None:
            raise ValueError("offloading to disk needs an offload_folder")
        placement["offload_folder"] = offload_folder
    return placement
