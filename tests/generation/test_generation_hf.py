"""Batched, seeded, cached generation on a real tiny checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_novelty.errors import ConfigError
from pytest_novelty.generation import batches, generate, open_generator
from pytest_novelty.generation.hf import check_checkpoint, checkpoint_fingerprint
from pytest_novelty.suites.schema import GenerationSettings

pytestmark = pytest.mark.slow

TEXTS = ["Lily went to the park.", "Tom had a red ball.", "Mia saw a big dog near the tree.", "Ben ran."]
SETTINGS = GenerationSettings(samples=3, max_new_tokens=8, batch_size=2, seed=7)


@pytest.fixture(scope="module")
def generator(tiny_checkpoint: Path):  # type: ignore[no-untyped-def]
    import torch

    torch.set_num_threads(1)
    return open_generator(str(tiny_checkpoint), device="cpu")


def test_batches_group_by_length_and_cover_every_input() -> None:
    plan = batches(TEXTS, 2)
    assert sorted(i for batch in plan for i in batch) == [0, 1, 2, 3]
    assert plan[0] == [3, 1]  # the two shortest first


def test_samples_per_prompt_reproducible_and_cached(generator, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first, generated = generate(generator, TEXTS, SETTINGS, cache_dir=tmp_path)
    assert generated == 2
    assert [len(s) for s in first] == [3, 3, 3, 3]
    assert all(isinstance(t, str) for s in first for t in s)
    # Sampling is real: the three samples of a prompt are not all identical.
    assert any(len(set(s)) > 1 for s in first)
    again, generated_again = generate(generator, TEXTS, SETTINGS, cache_dir=tmp_path)
    assert generated_again == 0 and again == first
    fresh, _ = generate(generator, TEXTS, SETTINGS, cache_dir=None)
    assert fresh == first


def test_resume_after_partial_cache(generator, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    full, _ = generate(generator, TEXTS, SETTINGS, cache_dir=tmp_path)
    files = sorted(tmp_path.rglob("*.json"))
    files[0].unlink()  # as if the run had been killed before this batch was written
    resumed, generated = generate(generator, TEXTS, SETTINGS, cache_dir=tmp_path)
    assert generated == 1 and resumed == full


def test_other_seed_gives_other_samples(generator) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    a, _ = generate(generator, TEXTS, SETTINGS)
    b, _ = generate(generator, TEXTS, replace(SETTINGS, seed=8))
    assert a != b


def test_chat_input_needs_a_chat_template(generator) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="no chat template"):
        generator.render([{"role": "user", "content": "hi"}])


def test_fingerprint_follows_content(tiny_checkpoint: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(tiny_checkpoint, copy)
    assert checkpoint_fingerprint(str(copy)) == checkpoint_fingerprint(str(tiny_checkpoint))
    (copy / "config.json").write_text((copy / "config.json").read_text().replace("0.02", "0.03"))
    assert checkpoint_fingerprint(str(copy)) != checkpoint_fingerprint(str(tiny_checkpoint))


@pytest.mark.parametrize("name", ["org/model", "gpt2-org/tiny.v1"])
def test_hub_ids_pass_the_cheap_check(name: str) -> None:
    check_checkpoint(name)


def test_trust_remote_code_needs_opt_in(tiny_checkpoint: Path, tmp_path: Path) -> None:
    import json
    import shutil

    custom = tmp_path / "custom"
    shutil.copytree(tiny_checkpoint, custom)
    config = json.loads((custom / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_custom.CustomModel"}
    config["model_type"] = "custom-novelty-test"
    (custom / "config.json").write_text(json.dumps(config))
    (custom / "modeling_custom.py").write_text("raise RuntimeError('remote code must not run')\n")
    with pytest.raises(ConfigError, match="--trust-remote-code"):
        open_generator(str(custom), device="cpu")
