"""The shipped demo weights: trained by this very builder, and a rebuild from scratch writes the same demo.

A first ``pytest --model demo`` places the weights shipped in ``fixtures/demo/trained/`` instead of
training for minutes. That is honest only while they are exactly what the builder trains: the
manifest names the builder's hash (the one that keys the cache folder), every file has its sha256,
and one test here trains the demo from scratch (the only training in the test suite) and compares
the two folders file by file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_novelty.infra.hashing import file_digest
from pytest_novelty.pipeline import demo

# Keys of the index description that say where and how fast it was built, not what it holds.
RUN_SPECIFIC = ("sources", "seconds", "path")


def test_the_shipped_weights_were_trained_by_this_builder() -> None:
    manifest = demo.read_manifest()
    assert manifest is not None, f"no {demo.MANIFEST} in {demo.trained_dir()}"
    assert manifest["builder"] == demo._builder_digest(), (
        "fixtures/demo changed since its weights were shipped: run `python -m pytest_novelty.pipeline.demo ship`"
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
        assert file_digest(demo_assets / name / "model.safetensors") == manifest["weights"][name]["sha256"]
        facts = json.loads((demo_assets / name / "demo_facts.json").read_text())
        assert facts["loss"] == manifest["weights"][name]["loss"]


# Facts of a checkpoint's training that float order changes in the last digits.
FLOAT_FACTS = ("loss", "train_loss")
# How far the losses of two trainings of one recipe may differ: float sums in another order (another
# CPU model, even with the same torch, capability flags and thread count) move them by far less.
LOSS_TOLERANCE = 0.02


def _comparable(path: Path) -> bytes:
    """What of a demo file must be the same on every machine, as bytes.

    Weights are compared by their layout (tensor names, dtypes, shapes: the safetensors header
    without its offsets), facts without the losses, the index description without its run records;
    everything else (corpus, tokenizer, configs, index tables) byte for byte.
    """
    if path.name == "novelty-index.json":
        info = json.loads(path.read_text())
        return json.dumps({k: v for k, v in info.items() if k not in RUN_SPECIFIC}, sort_keys=True).encode()
    if path.suffix == ".safetensors":
        return json.dumps(_tensor_layout(path), sort_keys=True).encode()
    if path.name == "demo_facts.json":
        facts = json.loads(path.read_text())
        return json.dumps({k: v for k, v in facts.items() if k not in FLOAT_FACTS}, sort_keys=True).encode()
    return path.read_bytes()


def _tensor_layout(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Each tensor's dtype and shape, read from the safetensors header."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as weights:
        return {
            name: (str(weights.get_slice(name).get_dtype()), tuple(weights.get_slice(name).get_shape()))
            for name in weights.keys()  # noqa: SIM118 - safe_open is not a mapping
        }


def test_what_a_rebuild_must_match_ignores_float_noise_but_not_layout(tmp_path: Path, demo_assets: Path) -> None:
    """The comparison below can fail: a tensor of another shape or a changed recipe is caught,
    a loss that differs in its last digits (another CPU model) is not."""
    weights = demo_assets / "demo" / "model.safetensors"
    assert _comparable(weights) == _comparable(weights)
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(weights))
    noisy = {name: t + 1e-7 for name, t in tensors.items()}
    save_file(noisy, str(tmp_path / "noisy.safetensors"), metadata={"format": "pt"})
    assert _comparable(tmp_path / "noisy.safetensors") == _comparable(weights)
    name = next(iter(tensors))
    reshaped = {**tensors, name: tensors[name].reshape(-1)[:-1].clone()}
    save_file(reshaped, str(tmp_path / "reshaped.safetensors"), metadata={"format": "pt"})
    assert _comparable(tmp_path / "reshaped.safetensors") != _comparable(weights)

    facts = json.loads((demo_assets / "demo" / "demo_facts.json").read_text())
    (tmp_path / "demo_facts.json").write_text(json.dumps({**facts, "loss": facts["loss"] * (1 + 1e-9)}))
    assert _comparable(tmp_path / "demo_facts.json") == _comparable(demo_assets / "demo" / "demo_facts.json")
    (tmp_path / "demo_facts.json").write_text(json.dumps({**facts, "step": facts["step"] + 1}))
    assert _comparable(tmp_path / "demo_facts.json") != _comparable(demo_assets / "demo" / "demo_facts.json")


@pytest.mark.slow
@pytest.mark.rebuild
def test_a_rebuild_from_scratch_writes_the_demo_that_the_shipped_weights_give(
    demo_assets: Path, tmp_path: Path
) -> None:
    """Train the demo here (about two minutes on two cores) and compare with the prepared one.

    What a rebuild promises on any machine of the kind the README names: corpus, tokenizer,
    configs and index byte for byte; the weights' layout (every tensor's name, dtype and shape)
    exactly; each checkpoint's losses within 2 % of the shipped ones. Not the weights' bytes:
    float32 training is not bit-reproducible across CPU models, even with the same torch,
    capability flags and thread count (seen: the same build differed in the loss's last digits).
    """
    manifest = demo.read_manifest()
    assert manifest is not None
    trained = demo.ensure_demo(tmp_path / "cache", progress=False, train=True)
    assert json.loads((trained / "BUILD.json").read_text())["trained_here"] is True
    assert json.loads((demo_assets / "BUILD.json").read_text())["trained_here"] is False

    files = sorted(p.relative_to(trained) for p in trained.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(demo_assets) for p in demo_assets.rglob("*") if p.is_file())
    for rel in files:
        if rel.name in ("BUILD.json", "DONE"):
            continue
        assert _comparable(trained / rel) == _comparable(demo_assets / rel), f"{rel} differs"
    for name in demo.DEMO_MODELS:
        here = json.loads((trained / name / "demo_facts.json").read_text())
        for fact in FLOAT_FACTS:
            assert here[fact] == pytest.approx(manifest["weights"][name][fact], rel=LOSS_TOLERANCE), (name, fact)
