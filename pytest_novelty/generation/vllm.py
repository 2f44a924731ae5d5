"""Generation with vLLM (``--generator vllm``), for throughput on GPU machines.

vLLM schedules its own batches (continuous batching, paged KV cache), so a call hands it every
row at once; each row becomes one request with its own seed, so answers are reproducible and do
not depend on the batch, as with the Hugging Face backend. vLLM's sampler draws differently from
ours, so the same seed gives other answers than ``--generator hf``: the fingerprint names the
backend and the two never share cached answers. Stop strings are kept in the output, as the HF
backend keeps them; the task cuts answers at the stop afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_novelty.errors import ConfigError
from pytest_novelty.generation.hf import check_checkpoint, render, token_counts
from pytest_novelty.identity import Memo, checkpoint_identity
from pytest_novelty.suites.schema import GenerationSettings

if TYPE_CHECKING:
    from pytest_novelty.generation import ModelInput, StepCallback

ROWS_PER_CALL = 4096  # vLLM batches inside a call; calls this size keep progress and caching fine-grained


class VLLMGenerator:
    """Samples continuations with ``vllm.LLM``."""

    def __init__(
        self, model: str, *, device: str = "auto", trust_remote_code: bool = False, memo: Memo | None = None
    ) -> None:
        check_checkpoint(model, trust_remote_code=trust_remote_code)
        try:
            import vllm
        except ImportError:
            raise ConfigError(
                "--generator vllm needs vLLM, which is not installed; pip install vllm (Linux with a CUDA GPU), "
                "or use --generator hf",
                field="--generator",
            ) from None
        if device == "cpu":
            raise ConfigError("vLLM runs on a GPU here; use --generator hf with --device cpu", field="--device")
        self._vllm = vllm
        self.name = model
        self.device = "cuda" if device == "auto" else device
        self.identity = checkpoint_identity(model, memo=memo)
        self.fingerprint = "vllm:" + self.identity.id
        self.llm = vllm.LLM(
            model=self.identity.source, revision=self.identity.revision, trust_remote_code=trust_remote_code, seed=0
        )
        self.tokenizer = self.llm.get_tokenizer()
        self.tokens_generated = 0

    def render(self, model_input: ModelInput) -> str:
        return render(self.tokenizer, self.name, model_input)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return token_counts(self.tokenizer, texts)

    def max_rows(self, prompt_tokens: int, settings: GenerationSettings) -> int:
        """vLLM fits the rows to the memory itself."""
        return ROWS_PER_CALL

    def sample(
        self,
        texts: Sequence[str],
        seeds: Sequence[int],
        settings: GenerationSettings,
        on_step: StepCallback | None = None,
    ) -> list[str]:
        """One request per row, seeded by its row seed (vLLM reports no progress within a call)."""
        params = [self._params(settings, seed) for seed in seeds]
        outputs: list[Any] = self.llm.generate(list(texts), params, use_tqdm=False)
        answers = []
        for output in outputs:
            completion = output.outputs[0]
            self.tokens_generated += len(completion.token_ids)
            answers.append(str(completion.text))
        return answers

    def _params(self, settings: GenerationSettings, seed: int) -> Any:
        return self._vllm.SamplingParams(
            n=1,
            temperature=settings.temperature,
            top_p=settings.top_p,
            top_k=settings.top_k if settings.top_k > 0 else -1,
            max_tokens=settings.max_new_tokens,
            seed=seed,
            stop=list(settings.stop) or None,
            include_stop_str_in_output=True,
            skip_special_tokens=True,
        )
