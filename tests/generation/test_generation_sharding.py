"""``--gpus-per-worker N``: one model spread over N devices.

Device choice is tested with fake device lists; the accelerate path itself runs on the CPU, with
a tiny model split between the CPU and disk offload by ``max_memory``: its answers must equal
the unsplit model's. A real two-GPU check is marked ``gpu``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_novelty.generation import LoadSettings, generate
from pytest_novelty.generation.devices import WEIGHT_SHARE, assign_gpus, model_devices, shard_placement
from pytest_novelty.generation.hf import HFGenerator
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.suites.schema import GenerationSettings

TEXTS = ["Lily went to the park.", "Tom had a red ball.", "Mia saw a big dog near the tree."]
GB = 1 << 30


def test_a_worker_spreads_its_model_over_its_own_group_only() -> None:
    # Four GPUs, two per worker: gw1 owns physical GPUs 2 and 3, which it sees as cuda:0 and cuda:1.
    assert assign_gpus("gw1", ["0", "1", "2", "3"], 2) == ["2", "3"]
    spread = model_devices("cuda", 2, count=2)
    assert spread == ["cuda:0", "cuda:1"]
    placement = shard_placement(spread, {"cuda:0": 80 * GB, "cuda:1": 60 * GB})
    assert placement == {
        "device_map": "balanced",
        "max_memory": {0: int(80 * GB * WEIGHT_SHARE), 1: int(60 * GB * WEIGHT_SHARE)},
    }


def test_without_xdist_the_first_n_visible_gpus_are_used() -> None:
    assert model_devices("cuda", 2, count=4) == ["cuda:0", "cuda:1"]
    assert model_devices("auto", 1, count=4) == ["auto"] and model_devices("cpu", 4, count=0) == ["cpu"]
    assert shard_placement(["cuda:0"], {"cuda:0": GB}) == {}  # one device: moved there whole


def test_too_few_gpus_or_a_pinned_gpu_is_one_line() -> None:
    with pytest.raises(ConfigError, match="--gpus-per-worker: 4 GPUs per worker asked, but this process sees 2"):
        model_devices("cuda", 4, count=2)
    with pytest.raises(ConfigError, match="--device: --device cuda:1 pins one GPU; use --device cuda"):
        model_devices("cuda:1", 2, count=2)


def test_offload_to_disk_needs_a_folder() -> None:
    with pytest.raises(ValueError, match="offload_folder"):
        shard_placement(["cpu", "disk"], {"cpu": GB, "disk": GB})


@pytest.mark.slow
def test_a_model_split_by_accelerate_answers_as_the_whole_one(tiny_checkpoint: Path, tmp_path: Path) -> None:
    import torch

    torch.set_num_threads(1)
    weights = (tiny_checkpoint / "model.safetensors").stat().st_size
    placement = shard_placement(
        ["cpu", "disk"], {"cpu": int(weights * 0.75), "disk": 100 * weights}, offload_folder=str(tmp_path / "offload")
    )
    split = HFGenerator(str(tiny_checkpoint), LoadSettings(device="cpu", placement=placement))
    whole = HFGenerator(str(tiny_checkpoint), LoadSettings(device="cpu"))
    for settings in (
        GenerationSettings(samples=1, temperature=0.0, max_new_tokens=12),
        GenerationSettings(samples=2, temperature=1.0, max_new_tokens=12, seed=4),
    ):
        assert generate(split, TEXTS, settings)[0] == generate(whole, TEXTS, settings)[0]
    assert set(split.device_map.values()) == {"cpu", "disk"}  # really two parts
    assert whole.device_map == {"": "cpu"}


@pytest.mark.gpu
@pytest.mark.slow
def test_two_gpus_hold_one_model(tiny_checkpoint: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    split = HFGenerator(str(tiny_checkpoint), LoadSettings(device="cuda", gpus=2))
    settings = GenerationSettings(samples=2, temperature=0.0, max_new_tokens=12)
    answers, _ = generate(split, TEXTS, settings)
    assert {str(d) for d in split.device_map.values()} <= {"0", "1"} and len(set(split.device_map.values())) == 2
    whole = HFGenerator(str(tiny_checkpoint), LoadSettings(device="cuda"))
    assert answers == generate(whole, TEXTS, settings)[0]
    assert split.max_rows(16, settings) >= 1
