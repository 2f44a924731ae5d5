"""Loading a checkpoint with transformers, and the text side of its tokenizer: every loader's
error as one line that names the checkpoint (running out of memory as the machine's), a PEFT
adapter merged into its base, chat inputs through the chat template, and prompt lengths.

torch, transformers and peft are imported only inside the functions that load.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_novelty.generation.checkpoint import TOKENIZER_FILES, adapter_base, is_adapter
from pytest_novelty.infra.errors import ConfigError, HarnessError, NoveltyError

if TYPE_CHECKING:
    from pytest_novelty.generation import ModelInput


def run_loader(what: str, model: str, load: Callable[[], Any]) -> Any:
    """Run a transformers loader, turning any error it raises into one line that names the checkpoint.

    transformers fails in many ways on a bad folder (TypeError for a config field of the wrong
    type, SafetensorError for a cut-off file, OSError, ValueError); all of them are the
    checkpoint's problem, not a bug, so each becomes a :class:`ConfigError` with the first line
    of its message. Running out of memory (``MemoryError``, ``torch.OutOfMemoryError`` while the
    shards are placed on a GPU) is the machine's, not the checkpoint's: a :class:`HarnessError`
    (:func:`_no_memory`).
    """
    try:
        return load()
    except (KeyboardInterrupt, NoveltyError):
        raise
    except Exception as exc:
        if _out_of_memory(exc):
            raise _no_memory(what, model, exc) from None
        if "trust_remote_code" in str(exc):
            raise ConfigError(
                "this checkpoint ships its own code; review it, then pass --trust-remote-code",
                path=model,
                field="--model",
            ) from None
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise ConfigError(
            f"cannot load the {what}: {type(exc).__name__}: {first}", path=model, field="--model"
        ) from None


def tokenizer_source(model: str, base_model: str | None = None) -> str:
    """Where a checkpoint's tokenizer loads from: its own folder, or, for an adapter folder without
    tokenizer files of its own (no added tokens), its base (``base_model`` or the one its config names)."""
    if is_adapter(model) and not any((Path(model) / name).is_file() for name in TOKENIZER_FILES):
        return adapter_base(model, base_model)
    return model


def load_tokenizer(name: str, **options: Any) -> Any:
    """``AutoTokenizer.from_pretrained(name, **options)``; a tokenizer that cannot be read (a cut-off
    ``tokenizer.json``, a class transformers does not know) is one line naming the checkpoint
    (:func:`run_loader`). The generation step and the preflight's prompt lengths load it alike."""
    from transformers import AutoTokenizer

    return run_loader("tokenizer", name, lambda: AutoTokenizer.from_pretrained(name, **options))


def _out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says the machine ran out of memory: the host's (``MemoryError``) or a device's
    (``torch.OutOfMemoryError``, which CUDA raises; torch is imported by then if it is in use)."""
    torch = sys.modules.get("torch")
    device_oom = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    return isinstance(exc, MemoryError) or (isinstance(device_oom, type) and isinstance(exc, device_oom))


def _no_memory(what: str, model: str, exc: BaseException) -> HarnessError:
    """The one line for running out of memory while loading: the machine's problem (exit 8), not bad input."""
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return HarnessError(
        f"{model}: out of memory while loading the {what} ({type(exc).__name__}: {first}); free memory on the "
        "device, or spread the model over more GPUs (--gpus-per-worker N)"
    )


def with_adapter(model: Any, adapter: str) -> Any:
    """The base ``model`` with the PEFT adapter in ``adapter`` applied and merged into its weights.

    Merging (LoRA: W + BA) gives the adapted model's outputs with the base model's forward pass
    and speed, so the decode loop is the same for adapters and full checkpoints.
    """
    try:
        from peft import PeftModel
    except ImportError:
        raise ConfigError(
            "this is a PEFT adapter folder and peft is not installed; pip install 'pytest-novelty[peft]'",
            path=adapter,
            field="--model",
        ) from None
    try:
        with warnings.catch_warnings():
            # peft asks transformers 5 a deprecated question while it wraps the model; the user can
            # do nothing about it, so it does not reach the run's output.
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            return PeftModel.from_pretrained(model, adapter).merge_and_unload()
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        if _out_of_memory(exc):  # torch.OutOfMemoryError is a RuntimeError: the machine's, not the adapter's
            raise _no_memory("adapter", adapter, exc) from None
        raise ConfigError(f"cannot apply the adapter: {exc}", path=adapter, field="--model") from None


class NoChatTemplate(ConfigError):
    """Chat messages were given to a checkpoint without a chat template (a base model)."""


def render(tokenizer: Any, name: str, model_input: ModelInput) -> str:
    """The exact text a model sees for one input: chat messages go through the chat template."""
    if isinstance(model_input, str):
        return model_input
    if not getattr(tokenizer, "chat_template", None):
        raise NoChatTemplate(
            f'{name} has no chat template; use prompting.method = "few-shot" for base models',
            field="prompting.method",
        )
    return str(tokenizer.apply_chat_template(list(model_input), tokenize=False, add_generation_prompt=True))


def token_counts(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    """Prompt lengths in tokens (no special tokens added: the rendered text already holds them)."""
    return [len(x) for x in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]
