"""A tiny end-to-end build of the demo: both checkpoints load with transformers and generate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

TINY = {"vocab_size": 320, "n_embd": 32, "n_layer": 1, "n_head": 2, "n_positions": 64,
        "batch_size": 8, "seq_len": 32, "long_every": 2}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(build: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("demo")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (out / f".tmp-{gone.stdout.strip()}-dead").mkdir()  # left by a build that was killed
    facts = build.build_demo(out, steps=6, early_step=2, docs=400, recipe=TINY, progress=False)
    return out, facts


def test_build_installs_corpus_checkpoints_and_marker(build: ModuleType, built: tuple[Path, dict]) -> None:
    out, facts = built
    assert build.read_facts(out) == facts == json.loads((out / "DONE").read_text())
    assert facts["steps"] == 6 and facts["early_step"] == 2 and facts["docs"] == 400
    assert facts["final_loss"] < facts["early_loss"]
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "DONE", "corpus.jsonl", "demo", "demo-early"]
    assert not list(out.glob(".tmp-*"))
    assert len((out / "corpus.jsonl").read_text().splitlines()) == 400
    for name in ("demo", "demo-early"):
        files = {p.name for p in (out / name).iterdir()}
        assert {"model.safetensors", "config.json", "generation_config.json", "tokenizer.json"} <= files


@pytest.mark.parametrize("name", ["demo", "demo-early"])
def test_checkpoint_loads_and_generates(built: tuple[Path, dict], name: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = built[0] / name
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert tokenizer.eos_token_id == tokenizer.bos_token_id == tokenizer.pad_token_id == eot
    assert model.config.eos_token_id == model.generation_config.pad_token_id == eot
    assert tokenizer.padding_side == "left"
    batch = tokenizer(["Once upon a time, there was a girl named Lily.", "Tom ran."], return_tensors="pt",
                      padding=True)
    assert batch["input_ids"][1, 0] == eot and batch["attention_mask"][1, 0] == 0
    torch.manual_seed(0)
    out = model.generate(**batch, do_sample=True, max_new_tokens=8)
    assert out.shape[0] == 2 and out.shape[1] <= batch["input_ids"].shape[1] + 8
    assert all(isinstance(t, str) for t in tokenizer.batch_decode(out, skip_special_tokens=True))


def test_failed_rebuild_keeps_the_finished_build(
    build: ModuleType, built: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, facts = built

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(build.sibling("train"), "train", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build.build_demo(out, seed=1, steps=6, early_step=2, docs=400, recipe=TINY, progress=False)
    assert build.read_facts(out) == facts
    assert not list(out.glob(".tmp-*"))
