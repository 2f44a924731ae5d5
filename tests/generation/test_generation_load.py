"""Loading a checkpoint that transformers cannot build is one line naming the folder, never a
traceback from deep inside transformers (real tiny checkpoints, damaged in the test)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_novelty.generation import LoadSettings
from pytest_novelty.generation.checkpoint import check_checkpoint, context_length
from pytest_novelty.generation.hf import HFGenerator
from pytest_novelty.infra.errors import ConfigError


def damaged(tiny_checkpoint: Path, tmp_path: Path, **config: object) -> Path:
    folder = tmp_path / "damaged"
    shutil.copytree(tiny_checkpoint, folder)
    data = json.loads((folder / "config.json").read_text())
    data.update(config)
    (folder / "config.json").write_text(json.dumps(data))
    return folder


def test_a_config_transformers_cannot_build_is_one_line(tiny_checkpoint: Path, tmp_path: Path) -> None:
    folder = damaged(tiny_checkpoint, tmp_path, activation_function="no-such-activation")
    generator = HFGenerator(str(folder), LoadSettings(device="cpu"))  # the cheap checks pass: the value is a string
    with pytest.raises(ConfigError, match=r"damaged: --model: cannot load the model: KeyError: ") as caught:
        _ = generator.model
    assert "\n" not in str(caught.value)


def test_a_config_field_of_the_wrong_type_is_named_before_loading(tiny_checkpoint: Path, tmp_path: Path) -> None:
    folder = damaged(tiny_checkpoint, tmp_path, n_head="two")
    with pytest.raises(ConfigError, match=r"config.json: n_head: expected a whole number, got 'two'"):
        check_checkpoint(str(folder))


def test_the_context_length_is_read_from_the_config(tiny_checkpoint: Path) -> None:
    assert context_length(str(tiny_checkpoint)) == 128
