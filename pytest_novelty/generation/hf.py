"""Generation with a Hugging Face causal LM: batched, left-padded, seeded sampling.

torch and transformers are imported here only, when a checkpoint is loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_novelty.errors import ConfigError, HarnessError
from pytest_novelty.suites.schema import GenerationSettings

if TYPE_CHECKING:
    from pytest_novelty.generation import ModelInput

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "spiece.model")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


def check_checkpoint(model: str, *, trust_remote_code: bool = True) -> None:
    """Cheap checks of a local checkpoint folder, before anything heavy is imported.

    A string that is not an existing path but looks like a hub id (``org/name``) passes: it is
    resolved by transformers when the model is loaded. With ``trust_remote_code=False`` a folder
    whose config or tokenizer config maps to its own Python code (``auto_map``) is refused.
    """
    path = Path(model)
    if not path.exists():
        if _looks_like_hub_id(model):
            return
        raise ConfigError(
            "checkpoint folder not found; pass a Hugging Face folder (with config.json), a hub id "
            "such as org/name, or 'demo'",
            path=model,
            field="--model",
        )
    if not path.is_dir():
        raise ConfigError("expected a checkpoint folder, got a file", path=model, field="--model")
    if not (path / "config.json").is_file():
        raise ConfigError(
            "no config.json: this is not a Hugging Face checkpoint folder (save it with model.save_pretrained)",
            path=model,
            field="--model",
        )
    if not any((path / name).is_file() for name in _TOKENIZER_FILES):
        raise ConfigError(
            "no tokenizer files (tokenizer.json or tokenizer_config.json): save the tokenizer next to "
            "the weights with tokenizer.save_pretrained(FOLDER)",
            path=model,
            field="--model",
        )
    if not trust_remote_code and _ships_code(path):
        raise ConfigError(
            "this checkpoint ships its own Python code (auto_map); review it, then pass --trust-remote-code",
            path=model,
            field="--model",
        )


def _ships_code(path: Path) -> bool:
    for name in ("config.json", "tokenizer_config.json"):
        try:
            data = json.loads((path / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("auto_map"):
            return True
    return False


def _looks_like_hub_id(model: str) -> bool:
    parts = model.split("/")
    return (
        len(parts) == 2
        and all(parts)
        and not model.startswith((".", "/", "~"))
        and all(c.isalnum() or c in "-_." for c in model.replace("/", ""))
    )


def checkpoint_fingerprint(model: str) -> str:
    """A content fingerprint of a checkpoint, used in cache keys.

    For a local folder: SHA-256 over every file's name and size, the full content of the small
    files (configs, tokenizer) and the first and last MiB of each weight file, which changes
    whenever the weights do, without reading many gigabytes. For a hub id: the id itself (and
    the revision a user pins in it).
    """
    path = Path(model)
    if not path.is_dir():
        return "hub:" + model
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = file.relative_to(path).as_posix()
        size = file.stat().st_size
        digest.update(f"{rel}\0{size}\0".encode())
        with file.open("rb") as fh:
            if file.suffix in _WEIGHT_SUFFIXES and size > 2 << 20:
                digest.update(fh.read(1 << 20))
                fh.seek(-(1 << 20), os.SEEK_END)
                digest.update(fh.read(1 << 20))
            else:
                digest.update(fh.read())
    return digest.hexdigest()[:16]


def resolve_device(device: str) -> str:
    """``auto`` picks CUDA when it is available, else the CPU."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("CUDA is not available on this machine; use --device cpu", field="--device")
    return device


def _load(what: str, model: str, load: Callable[[], Any]) -> Any:
    """Run a transformers loader, turning its errors into one line that names the checkpoint."""
    try:
        return load()
    except ValueError as exc:
        if "trust_remote_code" in str(exc):
            raise ConfigError(
                "this checkpoint ships its own code; review it, then pass --trust-remote-code",
                path=model,
                field="--model",
            ) from None
        raise ConfigError(f"cannot load the {what}: {exc}", path=model, field="--model") from None
    except OSError as exc:
        raise ConfigError(f"cannot load the {what}: {exc}", path=model, field="--model") from None


class HFGenerator:
    """Samples continuations from a transformers causal LM."""

    def __init__(self, model: str, *, device: str = "auto", trust_remote_code: bool = False) -> None:
        check_checkpoint(model, trust_remote_code=trust_remote_code)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name = model
        self.device = resolve_device(device)
        self.fingerprint = checkpoint_fingerprint(model)
        remote = {"trust_remote_code": trust_remote_code}
        self.tokenizer = _load("tokenizer", model, lambda: AutoTokenizer.from_pretrained(model, **remote))
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.model = _load("model", model, lambda: AutoModelForCausalLM.from_pretrained(model, dtype=dtype, **remote))
        self.model.to(self.device)
        self.model.eval()
        self.tokens_generated = 0

    def render(self, model_input: ModelInput) -> str:
        """The exact text fed to the model: chat messages go through the chat template."""
        if isinstance(model_input, str):
            return model_input
        if not getattr(self.tokenizer, "chat_template", None):
            raise ConfigError(
                f"{self.name} has no chat template; use prompting.method = \"few-shot\" for base models",
                field="prompting.method",
            )
        text = self.tokenizer.apply_chat_template(list(model_input), tokenize=False, add_generation_prompt=True)
        return str(text)

    def generate(
        self, texts: Sequence[str], settings: GenerationSettings, *, seed: int, progress: bool = False
    ) -> list[list[str]]:
        """``settings.samples`` sampled continuations (new text only) for each rendered input.

        The caller passes one batch; ``seed`` makes the batch reproducible. On a CUDA
        out-of-memory error the batch is split in halves and retried.
        """
        import torch

        try:
            return self._generate(texts, settings, seed)
        except torch.OutOfMemoryError:
            if len(texts) == 1:
                raise HarnessError(f"{self.name}: out of memory on a single prompt") from None
            torch.cuda.empty_cache()
            half = len(texts) // 2
            return self.generate(texts[:half], settings, seed=seed, progress=progress) + self.generate(
                texts[half:], settings, seed=seed + 1, progress=progress
            )

    def _generate(self, texts: Sequence[str], settings: GenerationSettings, seed: int) -> list[list[str]]:
        import torch

        enc = self.tokenizer(list(texts), return_tensors="pt", padding=True, add_special_tokens=False)
        limit = getattr(self.model.config, "max_position_embeddings", None) or getattr(
            self.model.config, "n_positions", None
        )
        width = enc["input_ids"].shape[1]
        max_new = settings.max_new_tokens
        if limit is not None and width + max_new > limit:
            if width >= limit:
                raise ConfigError(
                    f"a prompt of {width} tokens does not fit the model's context of {limit} tokens; "
                    "use fewer in-context examples (prompting.examples)",
                    field="prompting.examples",
                )
            max_new = limit - width
        enc = {k: v.to(self.device) for k, v in enc.items()}
        torch.manual_seed(seed)
        kwargs: dict[str, Any] = {
            "max_new_tokens": max_new,
            "num_return_sequences": settings.samples,
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if settings.temperature > 0:
            kwargs.update(do_sample=True, temperature=settings.temperature, top_p=settings.top_p, top_k=settings.top_k)
        else:
            kwargs.update(do_sample=False)
        if settings.stop:
            kwargs.update(stop_strings=list(settings.stop), tokenizer=self.tokenizer)
        with torch.inference_mode():
            out = self.model.generate(**enc, **kwargs)
        new = out[:, width:]
        self.tokens_generated += int((new != self.tokenizer.pad_token_id).sum())
        decoded = self.tokenizer.batch_decode(new, skip_special_tokens=True)
        k = settings.samples
        return [decoded[i * k : (i + 1) * k] for i in range(len(texts))]


def describe(generator: HFGenerator) -> str:
    """One line about the loaded model, for the report header."""
    params = sum(p.numel() for p in generator.model.parameters())
    return f"{generator.name} ({params / 1e6:.1f}M parameters, {generator.device})"
