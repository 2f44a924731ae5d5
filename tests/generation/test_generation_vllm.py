"""The vLLM backend's adapter, against a stand-in ``vllm`` module (vLLM itself needs a CUDA GPU).

The stand-in keeps vLLM's public surface that the adapter uses: ``LLM(model=..., seed=...,
trust_remote_code=...)``, ``get_tokenizer()``, ``generate(prompts, [SamplingParams], use_tqdm=)``
returning one request output per prompt with ``outputs[0].text`` and ``.token_ids``, and
``SamplingParams`` with vLLM's field names (an unknown name is a TypeError, as in vLLM). It
samples with transformers on the tiny checkpoint, seeded per request, and applies stop strings as
vLLM documents them: the text ends at the first stop, which is kept with
``include_stop_str_in_output``.
"""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pytest_novelty.generation import generate
from pytest_novelty.generation.backends import open_generator
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.suites.schema import GenerationSettings

pytestmark = pytest.mark.slow

TEXTS = ["Lily went to the park.", "Tom had a red ball.", "Mia saw a big dog near the tree.", "Ben ran."]
SETTINGS = GenerationSettings(samples=2, max_new_tokens=10, seed=3)


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    seed: int | None = None
    stop: list[str] | None = None
    max_tokens: int | None = 16
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True


class _Completion:
    def __init__(self, text: str, token_ids: list[int]) -> None:
        self.text, self.token_ids = text, token_ids


class _RequestOutput:
    def __init__(self, prompt: str, completion: _Completion) -> None:
        self.prompt, self.outputs = prompt, [completion]


class LLM:
    instances: ClassVar[list[LLM]] = []

    def __init__(self, model: str, *, trust_remote_code: bool = False, seed: int = 0, **_: Any) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.model = AutoModelForCausalLM.from_pretrained(model).eval()
        self.calls: list[list[SamplingParams]] = []
        LLM.instances.append(self)

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def generate(self, prompts: list[str], params: list[SamplingParams], use_tqdm: bool = True) -> list[_RequestOutput]:
        import torch

        assert isinstance(params, list) and len(params) == len(prompts)
        self.calls.append(params)
        outputs = []
        for prompt, p in zip(prompts, params, strict=True):
            assert p.n == 1 and p.seed is not None
            torch.manual_seed(p.seed)
            enc = self.tokenizer([prompt], return_tensors="pt", add_special_tokens=False)
            with torch.inference_mode():
                out = self.model.generate(
                    **enc,
                    do_sample=p.temperature > 0,
                    temperature=p.temperature or None,
                    top_k=None if p.top_k < 1 else p.top_k,
                    max_new_tokens=p.max_tokens,
                    pad_token_id=self.tokenizer.eos_token_id,
                )
            ids = out[0, enc["input_ids"].shape[1] :].tolist()
            text = self.tokenizer.decode(ids, skip_special_tokens=p.skip_special_tokens)
            for stop in p.stop or []:
                at = text.find(stop)
                if at >= 0:
                    text = text[: at + (len(stop) if p.include_stop_str_in_output else 0)]
            outputs.append(_RequestOutput(prompt, _Completion(text, ids)))
        return outputs


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("vllm")
    module.LLM = LLM  # type: ignore[attr-defined]
    module.SamplingParams = SamplingParams  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", module)
    LLM.instances.clear()
    return module


def test_rows_are_seeded_requests_in_input_order(fake_vllm: types.ModuleType, tiny_checkpoint: Path) -> None:
    gen = open_generator(str(tiny_checkpoint), device="cuda", backend="vllm")
    answers, stats = generate(gen, TEXTS, SETTINGS)
    assert [len(a) for a in answers] == [2, 2, 2, 2]
    assert stats.batches == 1 and stats.rows == 8 and stats.tokens == gen.tokens_generated > 0
    (call,) = LLM.instances[0].calls
    assert len({p.seed for p in call}) == 8  # one seed per row
    again, _ = generate(gen, list(reversed(TEXTS)), replace(SETTINGS, batch_size=3))
    assert list(reversed(again)) == answers  # the same rows, whatever the batch and order
    other, _ = generate(gen, TEXTS, replace(SETTINGS, seed=4))
    assert other != answers


def test_stop_strings_stay_in_the_output(fake_vllm: types.ModuleType, tiny_checkpoint: Path) -> None:
    gen = open_generator(str(tiny_checkpoint), device="cuda", backend="vllm")
    free, _ = generate(gen, TEXTS, SETTINGS)
    # The most common letter of the free answers: the stopped run draws with other seeds (its settings differ).
    letters = [c for samples in free for a in samples for c in a[3:] if c.isascii() and c.isalpha()]
    stop = max(sorted(set(letters)), key=letters.count)
    stopped, _ = generate(gen, TEXTS, replace(SETTINGS, stop=(stop,)))
    params = LLM.instances[0].calls[-1][0]
    assert params.stop == [stop] and params.include_stop_str_in_output
    hits = [b for samples in stopped for b in samples if stop in b]
    assert hits and all(b.endswith(stop) for b in hits)


def test_cached_answers_are_not_shared_with_the_hf_backend(
    fake_vllm: types.ModuleType, tiny_checkpoint: Path, tmp_path: Path
) -> None:
    vllm_gen = open_generator(str(tiny_checkpoint), device="cuda", backend="vllm")
    hf_gen = open_generator(str(tiny_checkpoint), device="cpu")
    assert vllm_gen.identity_id == "vllm:" + hf_gen.identity_id
    generate(vllm_gen, TEXTS, SETTINGS, cache_dir=tmp_path)
    _, stats = generate(hf_gen, TEXTS, SETTINGS, cache_dir=tmp_path)
    assert stats.cached_rows == 0 and stats.rows == 8


def test_the_batch_invariant_mode_is_on_where_this_vllm_has_it_and_keys_its_answers_apart(
    fake_vllm: types.ModuleType, tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VLLM_BATCH_INVARIANT", raising=False)
    plain = open_generator(str(tiny_checkpoint), device="cuda", backend="vllm")
    assert not plain.reproducibility.batch_invariant and "VLLM_BATCH_INVARIANT" not in os.environ
    assert "can change with its batch" in plain.reproducibility.how
    envs = types.ModuleType("vllm.envs")
    envs.environment_variables = {"VLLM_BATCH_INVARIANT": lambda: False}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm.envs", envs)
    fake_vllm.envs = envs  # type: ignore[attr-defined]
    invariant = open_generator(str(tiny_checkpoint), device="cuda", backend="vllm")
    assert os.environ["VLLM_BATCH_INVARIANT"] == "1" and invariant.reproducibility.batch_invariant
    assert invariant.identity_id == "vllm-invariant:" + plain.identity.id  # never the other mode's answers
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "0")  # the user turned it off
    assert not open_generator(str(tiny_checkpoint), device="cuda", backend="vllm").reproducibility.batch_invariant


def test_missing_vllm_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tiny_checkpoint: Path) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    with pytest.raises(ConfigError, match="pip install vllm") as info:
        open_generator(str(tiny_checkpoint), backend="vllm")
    assert info.value.field == "--generator"


def test_vllm_on_the_cpu_is_refused(fake_vllm: types.ModuleType, tiny_checkpoint: Path) -> None:
    with pytest.raises(ConfigError, match="GPU"):
        open_generator(str(tiny_checkpoint), device="cpu", backend="vllm")


def test_unknown_backend_suggests_a_name(tiny_checkpoint: Path) -> None:
    with pytest.raises(ConfigError, match="did you mean 'vllm'"):
        open_generator(str(tiny_checkpoint), backend="vlm")


def test_auto_picks_vllm_only_where_it_can_run(
    fake_vllm: types.ModuleType, tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from pytest_novelty.generation.backends import choose_backend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert choose_backend("auto") == "hf"  # no CUDA device: transformers
    assert not open_generator(str(tiny_checkpoint), device="cpu", backend="auto").identity_id.startswith("vllm:")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert choose_backend("auto") == choose_backend("auto", "cuda:1") == "vllm"
    assert choose_backend("auto", "cpu") == "hf"  # the user asked for the CPU
    assert (choose_backend("hf"), choose_backend("vllm", "cpu")) == ("hf", "vllm")  # explicit names stay
    assert open_generator(str(tiny_checkpoint), device="auto", backend="auto").identity_id.startswith("vllm:")

    monkeypatch.setitem(sys.modules, "vllm", None)  # not installed: importing it fails
    assert choose_backend("auto") == "hf"
