"""Generation with vLLM (``--generator vllm``), for throughput on GPU machines.

vLLM schedules its own batches, so a call hands it every row at once, each one request with its
own seed. Its sampler draws differently from ours, so the identity_id names the backend (and its
batch-invariant mode, which is turned on where the installed vLLM has it) and the two never share
cached answers. Stop strings stay in the output, as with ``hf`` (the task cuts at the
stop). ``gpus`` > 1 is tensor parallelism; a LoRA adapter folder loads its base with LoRA enabled
and sends every request with a ``LoRARequest``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_novelty.generation import DTYPES, Batch, LoadSettings, Reproducibility
from pytest_novelty.generation.backends import GENERATOR_BACKENDS
from pytest_novelty.generation.checkpoint import (
    ADAPTER_CONFIG,
    adapter_base,
    check_checkpoint,
    is_adapter,
    render,
    token_counts,
)
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.identity import checkpoint_identity
from pytest_novelty.suites.schema import GenerationSettings

if TYPE_CHECKING:
    from pytest_novelty.generation import ModelInput

ROWS_PER_CALL = 4096  # vLLM batches inside a call; calls this size keep progress and caching fine-grained


@GENERATOR_BACKENDS.register("vllm", summary="vLLM on CUDA GPUs (tensor parallelism over --gpus-per-worker)")
class VLLMGenerator:
    """Samples continuations with ``vllm.LLM``."""

    def __init__(self, model: str, load: LoadSettings | None = None) -> None:
        """Loads ``model`` now (vLLM allocates its KV cache up front); ``load.placement`` does not apply."""
        load = load or LoadSettings()
        check_checkpoint(model, trust_remote_code=load.trust_remote_code, base_model=load.base_model)
        try:
            import vllm
        except ImportError:
            raise ConfigError(
                "--generator vllm needs vLLM, which is not installed; pip install vllm (Linux with a CUDA GPU), "
                "or use --generator hf",
                field="--generator",
            ) from None
        if load.device == "cpu":
            raise ConfigError("vLLM runs on a GPU here; use --generator hf with --device cpu", field="--device")
        self._vllm = vllm
        self.name = model
        self.device = "cuda" if load.device == "auto" else load.device
        self.identity = checkpoint_identity(model, memo=load.memo, base=load.base_model)
        self.batch_invariant = _batch_invariant_mode()
        self.identity_id = ("vllm-invariant:" if self.batch_invariant else "vllm:") + self.identity.id
        options: dict[str, Any] = {"trust_remote_code": load.trust_remote_code, "seed": 0, **self.identity.load_options}
        if load.gpus > 1:
            options["tensor_parallel_size"] = load.gpus
        if load.dtype != "auto":
            options["dtype"] = DTYPES[load.dtype]
        self._lora: Any = None
        weights = self.identity.source
        if is_adapter(model):
            weights = adapter_base(model, load.base_model)
            options.update(enable_lora=True, max_lora_rank=_lora_rank(model))
            from vllm.lora.request import LoRARequest

            self._lora = LoRARequest("adapter", 1, str(Path(model).resolve()))
        self.llm = vllm.LLM(model=weights, **options)
        self.tokenizer = self.llm.get_tokenizer()
        self.tokens_generated = 0

    @property
    def reproducibility(self) -> Reproducibility:
        if self.batch_invariant:
            return Reproducibility(True, "vLLM in its batch-invariant mode (VLLM_BATCH_INVARIANT=1)")
        return Reproducibility(False, "vLLM without a batch-invariant mode (this vLLM has none, or "
                                      f"{INVARIANT_VARIABLE}=0 is set): an answer can change with its batch")

    def render(self, model_input: ModelInput) -> str:
        return render(self.tokenizer, self.name, model_input)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return token_counts(self.tokenizer, texts)

    def max_rows(self, prompt_tokens: int, settings: GenerationSettings) -> int:
        """vLLM fits the rows to the memory itself."""
        return ROWS_PER_CALL

    def sample(self, batch: Batch) -> list[str]:
        """One request per row, seeded by its row seed; vLLM reports nothing within a call, so every
        row is handed on when it returns (at most :data:`ROWS_PER_CALL`, which bounds what a kill loses)."""
        params = [self._params(batch.settings, seed) for seed in batch.seeds]
        extra = {} if self._lora is None else {"lora_request": self._lora}
        outputs: list[Any] = self.llm.generate(list(batch.texts), params, use_tqdm=False, **extra)
        answers = []
        for row, output in enumerate(outputs):
            completion = output.outputs[0]
            self.tokens_generated += len(completion.token_ids)
            answers.append(str(completion.text))
            batch.finished(row, answers[-1])
        return answers

    def _params(self, settings: GenerationSettings, seed: int) -> Any:
        return self._vllm.SamplingParams(
            n=1, temperature=settings.temperature, top_p=settings.top_p, max_tokens=settings.max_new_tokens,
            top_k=settings.top_k if settings.top_k > 0 else -1, seed=seed, stop=list(settings.stop) or None,
            include_stop_str_in_output=True, skip_special_tokens=True,
        )


INVARIANT_VARIABLE = "VLLM_BATCH_INVARIANT"
"""vLLM's switch for batch-invariant kernels (vLLM 0.11 and later; NVIDIA GPUs of compute capability
8.0 on, per its documentation)."""


def _batch_invariant_mode() -> bool:
    """Turn on vLLM's batch-invariant mode where the installed vLLM has one and the user has not
    turned it off (the variable set to 0); whether it is on."""
    import os

    try:
        import vllm.envs as envs
    except ImportError:
        return False
    if INVARIANT_VARIABLE not in getattr(envs, "environment_variables", {}):
        return False
    os.environ.setdefault(INVARIANT_VARIABLE, "1")
    return os.environ[INVARIANT_VARIABLE] not in ("", "0")


def _lora_rank(adapter: str) -> int:
    """``max_lora_rank`` for the adapter: its rank ``r`` rounded up to a power of two, at least 8 (the
    values vLLM accepts)."""
    try:
        rank = int(json.loads((Path(adapter) / ADAPTER_CONFIG).read_text(encoding="utf-8")).get("r", 8))
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError(f"unreadable adapter config ({exc})", path=adapter, field="--model") from None
    return 1 << max(3, (max(rank, 1) - 1).bit_length())
