"""The shipped demo weights: trained by this very builder, and a rebuild from scratch writes the same demo.

A first ``pytest --model demo`` places the weights shipped in ``fixtures/demo/trained/`` instead of
training for minutes. That is honest only while they are exactly what the builder trains: the
manifest names the builder's hash (the one that keys the cache folder), every file has its sha256,
and one test here trains the demo from scratch (the only training in the test suite) and compares
the two folders file by file.
"""

from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path

import pytest

from pytest_novelty import demo

# Keys of the index description that say where and how fast it was built, not what it holds.
RUN_SPECIFIC = ("sources", "seconds", "path")


def test_the_shipped_weights_were_trained_by_this_builder() -> None:
    manifest = demo.read_manifest()
    assert manifest is not None, f"no {demo.MANIFEST} in {demo.trained_dir()}"
    assert manifest["builder"] == demo._builder_digest(), (
        "fixtures/demo changed since its weights were shipped: run `python -m pytest_novelty.demo ship`"
    )
    assert manifest["demo_version"] == demo.DEMO_VERSION
    weights, why = demo.shipped_weights(demo._load_builder())
    assert weights is not None, why
    assert set(weights.files) == set(demo.DEMO_MODELS)


def test_weights_of_another_builder_or_a_damaged_file_are_never_used(tmp_path: Path) -> None:
    builder = demo._load_builder()
    other = tmp_path / "other-builder"
    shutil.copytree(demo.trained_dir(), other)
    manifest = json.loads((other / demo.MANIFEST).read_text())
    manifest["builder"] = "0badc0de"
    (other / demo.MANIFEST).write_text(json.dumps(manifest))
    weights, why = demo.shipped_weights(builder, other)
    assert weights is None and "0badc0de" in why and demo._builder_digest() in why

    damaged = tmp_path / "damaged"
    shutil.copytree(demo.trained_dir(), damaged)
    path = damaged / "demo.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    weights, why = demo.shipped_weights(builder, damaged)
    assert weights is None and str(path) in why and "sha256" in why

    weights, why = demo.shipped_weights(builder, tmp_path / "nothing")
    assert weights is None and "no shipped weights" in why


@pytest.mark.slow
def test_the_prepared_demo_holds_the_shipped_weights(demo_assets: Path) -> None:
    manifest = demo.read_manifest()
    assert manifest is not None
    for name in demo.DEMO_MODELS:
        assert demo._sha256(demo_assets / name / "model.safetensors") == manifest["weights"][name]["sha256"]
        facts = json.loads((demo_assets / name / "demo_facts.json").read_text())
        assert facts["loss"] == manifest["weights"][name]["loss"]


def _same_training_environment(manifest: dict) -> bool:
    import torch

    trained = manifest["trained_with"]
    return (trained["torch"].split("+")[0], trained["cpu_capability"], trained["machine"]) == (
        torch.__version__.split("+")[0], torch.backends.cpu.get_cpu_capability(), platform.machine())


def _comparable(path: Path) -> bytes:
    if path.name == "novelty-index.json":
        info = json.loads(path.read_text())
        return json.dumps({k: v for k, v in info.items() if k not in RUN_SPECIFIC}, sort_keys=True).encode()
    return path.read_bytes()


@pytest.mark.slow
def test_a_rebuild_from_scratch_writes_the_demo_that_the_shipped_weights_give(
    demo_assets: Path, tmp_path: Path
) -> None:
    """Train the demo here (about two minutes on two cores) and compare with the prepared one.

    Corpus, tokenizer, configs and index must match byte for byte (not the build records, which
    hold timings). The weights must too where the
    training ran on the same torch version and CPU kind as the shipped ones (float sums depend on
    both); elsewhere each checkpoint's loss on the builder's fixed evaluation windows must agree
    within 2 %, the most a different float order can honestly promise.
    """
    manifest = demo.read_manifest()
    assert manifest is not None
    trained = demo.ensure_demo(tmp_path / "cache", log=lambda line: None, progress=False, train=True)
    assert json.loads((trained / "BUILD.json").read_text())["trained_here"] is True
    assert json.loads((demo_assets / "BUILD.json").read_text())["trained_here"] is False

    files = sorted(p.relative_to(trained) for p in trained.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(demo_assets) for p in demo_assets.rglob("*") if p.is_file())
    exact = _same_training_environment(manifest)
    for rel in files:
        if rel.name in ("BUILD.json", "DONE") or (rel.name in ("model.safetensors", "demo_facts.json") and not exact):
            continue
        assert _comparable(trained / rel) == _comparable(demo_assets / rel), f"{rel} differs"
    if not exact:
        for name in demo.DEMO_MODELS:
            here = json.loads((trained / name / "demo_facts.json").read_text())["loss"]
            assert here == pytest.approx(manifest["weights"][name]["loss"], rel=0.02), name
