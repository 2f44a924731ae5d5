"""PEFT (LoRA) adapter folders: loaded over their base model, gated as their own checkpoint."""

from __future__ import annotations

import contextlib
import json
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_novelty.generation import Batch
from pytest_novelty.generation.backends import open_generator
from pytest_novelty.generation.checkpoint import check_checkpoint
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.identity import checkpoint_identity
from pytest_novelty.suites.schema import GenerationSettings
from tests.generation.conftest import write_story_suite
from tests.generation.tiny_models import build_family_checkpoint

pytestmark = pytest.mark.slow

TEXTS = ["Lily went to the park.", "Tom had a red ball and", "Mia saw a big dog"]
GREEDY = GenerationSettings(samples=1, temperature=0.0, max_new_tokens=10)


def make_adapter(base: Path, folder: Path, *, seed: int = 1) -> Path:
    """A LoRA adapter with random (not zero) weights over ``base``, saved as peft saves it."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base)
    config = LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    with quiet_peft():
        get_peft_model(model, config).save_pretrained(folder)
    return folder


@contextlib.contextmanager
def quiet_peft() -> Iterator[None]:
    """peft's own deprecation notice under transformers 5 (the package silences it the same way)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, tiny_corpus: list[str]) -> Path:
    import torch

    torch.set_num_threads(1)
    return build_family_checkpoint(tmp_path_factory.mktemp("base") / "llama", "llama", tiny_corpus)


@pytest.fixture(scope="module")
def adapter(base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_adapter(base, tmp_path_factory.mktemp("adapter") / "lora")


def test_an_adapter_folder_is_a_checkpoint(adapter: Path, base: Path) -> None:
    assert (adapter / "adapter_config.json").is_file() and not (adapter / "config.json").exists()
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == str(base)
    check_checkpoint(str(adapter), trust_remote_code=False)  # the old code: "no config.json"


def test_loading_an_adapter_shows_no_third_party_warning(adapter: Path) -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        open_generator(str(adapter), device="cpu").sample(Batch(["Lily went"], [1], GREEDY))
    assert [f"{w.category.__name__}: {w.message}" for w in seen if w.category is not DeprecationWarning] == []


def test_adapter_answers_are_the_adapted_model_not_the_base(adapter: Path, base: Path) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    ours = open_generator(str(adapter), device="cpu")
    answers = ours.sample(Batch(TEXTS, [0] * len(TEXTS), GREEDY))
    plain = open_generator(str(base), device="cpu").sample(Batch(TEXTS, [0] * len(TEXTS), GREEDY))
    assert answers != plain
    # The reference: peft's own (unmerged) model, decoded greedily by model.generate.
    with quiet_peft():
        reference = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), adapter).eval()
    tok = ours.tokenizer
    for text, answer in zip(TEXTS, answers, strict=True):
        enc = tok([text], return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            out = reference.generate(**enc, do_sample=False, max_new_tokens=10, pad_token_id=tok.pad_token_id)
        ids = out[0, enc["input_ids"].shape[1] :].tolist()
        ends = set(ours.eos_ids)
        ids = ids[: next((i for i, t in enumerate(ids) if t in ends), len(ids))]
        assert answer == tok.decode(ids, skip_special_tokens=True)


def test_identity_covers_adapter_and_base(adapter: Path, base: Path, tmp_path: Path, tiny_corpus: list[str]) -> None:
    other_base = build_family_checkpoint(tmp_path / "other-base", "llama", tiny_corpus, seed=5)
    other_adapter = make_adapter(base, tmp_path / "other-lora", seed=2)
    def identity(model: Path, base_model: Path | None = None) -> str:
        return checkpoint_identity(str(model), base=None if base_model is None else str(base_model)).id

    own = identity(adapter)
    assert own not in (identity(base), identity(other_adapter))
    assert identity(adapter, other_base) != own  # same adapter over another base
    assert identity(adapter, base) == own


def test_base_model_override_and_a_missing_base(adapter: Path, base: Path, tmp_path: Path) -> None:
    moved = tmp_path / "moved-lora"
    shutil.copytree(adapter, moved)
    config = json.loads((moved / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(tmp_path / "gone")
    (moved / "adapter_config.json").write_text(json.dumps(config))
    # The message blames the adapter config's field that names the base, not --model.
    with pytest.raises(ConfigError, match=r"adapter_config.json: base_model_name_or_path: the adapter's base "
                                          r"checkpoint '.*gone' cannot be used \(checkpoint folder not found"):
        check_checkpoint(str(moved))
    gen = open_generator(str(moved), device="cpu", base_model=str(base))
    direct = open_generator(str(adapter), device="cpu")
    assert gen.sample(Batch(TEXTS[:1], [0], GREEDY)) == direct.sample(Batch(TEXTS[:1], [0], GREEDY))
    del config["base_model_name_or_path"]
    (moved / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="base_model_name_or_path is not set: pass the base checkpoint with --base"):
        check_checkpoint(str(moved))


def test_the_gate_runs_an_adapter_as_its_own_checkpoint(
    pytester: pytest.Pytester, adapter: Path, base: Path, tiny_index: Path, tmp_path: Path
) -> None:
    suites = write_story_suite(tmp_path / "suites")
    common = [f"--novelty-suites={suites}", f"--novelty-cache={tmp_path / 'cache'}",
              f"--originality=infini-gram:{tiny_index}", "-p", "no:cacheprovider"]  # fmt: skip
    first = pytester.runpytest_subprocess(f"--model={base}", *common)
    first.assert_outcomes(passed=2)
    assert "8 generated in 1 batch" in first.stdout.str()
    second = pytester.runpytest_subprocess(f"--model={adapter}", *common)
    second.assert_outcomes(passed=2)
    # Its own answers: none comes from the base model's cache.
    assert "8 generated in 1 batch" in second.stdout.str() and ", 0 from cache" in second.stdout.str()
    second.stdout.fnmatch_lines(["*novelty gate*", f"suite story  (model {adapter}*"])


def test_vllm_gets_the_adapter_as_a_lora_request(monkeypatch: pytest.MonkeyPatch, adapter: Path, base: Path) -> None:
    """vLLM is not installed here: a double records what the backend asks of it."""
    import sys
    import types

    made: list[dict[str, object]] = []
    calls: list[dict[str, object]] = []

    class LLM:
        def __init__(self, model: str, **options: object) -> None:
            made.append({"model": model, **options})

        def get_tokenizer(self) -> object:
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(base)

        def generate(self, texts: list[str], params: list[object], **kwargs: object) -> list[object]:
            calls.append(kwargs)
            done = types.SimpleNamespace(text="ok", token_ids=[1])
            return [types.SimpleNamespace(outputs=[done]) for _ in texts]

    class LoRARequest:
        def __init__(self, name: str, lora_id: int, path: str) -> None:
            self.lora_name, self.lora_int_id, self.lora_path = name, lora_id, path

    vllm = types.ModuleType("vllm")
    vllm.LLM = LLM  # type: ignore[attr-defined]
    vllm.SamplingParams = lambda **kw: kw  # type: ignore[attr-defined]
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest  # type: ignore[attr-defined]
    for name, module in (("vllm", vllm), ("vllm.lora", types.ModuleType("vllm.lora")), ("vllm.lora.request", request)):
        monkeypatch.setitem(sys.modules, name, module)
    gen = open_generator(str(adapter), device="cuda", backend="vllm", gpus=2)
    assert gen.sample(Batch(["Lily went"], [3], GREEDY)) == ["ok"]
    assert made == [
        {"model": str(base), "trust_remote_code": False, "seed": 0, "tensor_parallel_size": 2,
         "enable_lora": True, "max_lora_rank": 8}
    ]  # fmt: skip
    lora = calls[0]["lora_request"]
    assert isinstance(lora, LoRARequest) and lora.lora_path == str(adapter.resolve())
    assert gen.identity_id == "vllm:" + checkpoint_identity(str(adapter)).id
