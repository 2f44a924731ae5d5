"""Running out of memory while a checkpoint loads is the machine's problem: a harness error (exit 8)
in one line, never bad input (exit 4) blamed on the checkpoint.

A GPU cannot be made to run out of memory on this machine, so a real ``torch.OutOfMemoryError`` is
raised from inside transformers' own loading path: its function that places each shard's tensors
in the model (``convert_and_load_state_dict_in_model``) is replaced by one that raises it, exactly
where CUDA would. Everything around it (the sharded checkpoint, ``from_pretrained``, the plugin)
is real.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.generation import LoadSettings
from pytest_novelty.generation.hf import HFGenerator
from pytest_novelty.infra.errors import ConfigError, HarnessError

CUDA_MESSAGE = "CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total capacity of 79.15 GiB"

PLUGIN = f'''
"""Make transformers run out of GPU memory while it places a checkpoint's shards."""
import torch
import transformers.modeling_utils as loading


def _out_of_memory(*args, **kwargs):
    raise torch.OutOfMemoryError({CUDA_MESSAGE!r})


loading.convert_and_load_state_dict_in_model = _out_of_memory
'''


@pytest.fixture
def sharded(tmp_path: Path, tiny_checkpoint: Path) -> Path:
    """The tiny checkpoint saved in shards with their index, as a large model is."""
    from transformers import AutoModelForCausalLM

    folder = tmp_path / "sharded"
    shutil.copytree(tiny_checkpoint, folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    (folder / "model.safetensors").unlink()
    model.save_pretrained(folder, max_shard_size="40KB")
    assert len(list(folder.glob("model-*-of-*.safetensors"))) > 1
    assert (folder / "model.safetensors.index.json").is_file()
    return folder


@pytest.fixture
def out_of_memory(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """transformers' shard placement raises CUDA's out-of-memory error; counts the calls that reached it."""
    import torch
    import transformers.modeling_utils as loading

    calls: list[int] = []

    def place(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        raise torch.OutOfMemoryError(CUDA_MESSAGE)

    monkeypatch.setattr(loading, "convert_and_load_state_dict_in_model", place)
    return calls


def test_out_of_memory_while_loading_shards_is_a_harness_error(sharded: Path, out_of_memory: list[int]) -> None:
    generator = HFGenerator(str(sharded), LoadSettings(device="cpu"))
    with pytest.raises(HarnessError) as caught:
        _ = generator.model
    assert out_of_memory  # the error came from inside from_pretrained's shard loading
    assert not isinstance(caught.value, ConfigError)
    assert str(caught.value) == (
        f"{sharded}: out of memory while loading the model (OutOfMemoryError: {CUDA_MESSAGE}); free memory on the "
        "device, or spread the model over more GPUs (--gpus-per-worker N)"
    )


def test_pytest_says_it_in_one_line_and_exits_8(
    pytester: pytest.Pytester, sharded: Path, tiny_index: Path, tmp_path: Path
) -> None:
    from tests.generation.conftest import write_story_suite

    suites = write_story_suite(pytester.path / "gate-suites")
    pytester.makepyfile(oom_plugin=PLUGIN)
    result = pytester.runpytest_subprocess(
        "-p", "oom_plugin", "--model", str(sharded), f"--novelty-suites={suites}", f"--novelty-cache={tmp_path / 'c'}",
        f"--originality=infini-gram:{tiny_index}", "-p", "no:cacheprovider",
    )  # fmt: skip
    assert result.ret == 8  # the old code: exit 4, bad input blamed on the checkpoint
    text = result.stdout.str() + "\n" + result.stderr.str()
    assert text.count("out of memory while loading the model (OutOfMemoryError: CUDA out of memory.") == 1, text
    assert "Traceback" not in text and "cannot load the model" not in text


def test_the_command_line_exits_8(
    sharded: Path, tiny_index: Path, tmp_path: Path, out_of_memory: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_novelty.cli import main
    from tests.generation.conftest import write_story_suite

    suites = write_story_suite(tmp_path / "suites")
    status = main(["run", "--model", str(sharded), "--suites", str(suites), "--cache", str(tmp_path / "c"),
                   "--originality", f"infini-gram:{tiny_index}"])
    assert status == 8 and out_of_memory
    assert "out of memory while loading the model" in capsys.readouterr().err
