"""Generation with a Hugging Face causal LM: batched, left-padded, seeded sampling.

torch and transformers are imported here only, when a checkpoint is loaded.
"""

from __future__ import annotations

import json
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_novelty.generation import DTYPES, GENERATOR_BACKENDS, Batch, LoadSettings
from pytest_novelty.generation.devices import resolve_device
from pytest_novelty.infra.errors import ConfigError, HarnessError, NoveltyError
from pytest_novelty.infra.hashing import Memo
from pytest_novelty.infra.hub import resolve_hub
from pytest_novelty.infra.identity import checkpoint_identity
from pytest_novelty.infra.storage import stable_hash
from pytest_novelty.suites.schema import GenerationSettings

if TYPE_CHECKING:
    from pytest_novelty.generation import ModelInput

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "spiece.model")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
_SIZE_FIELDS = (
    "n_layer", "n_head", "n_embd", "n_positions", "n_ctx", "n_inner", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "hidden_size", "intermediate_size", "max_position_embeddings", "vocab_size", "head_dim",
)  # fmt: skip
"""config.json fields that must be whole numbers (or null): a string there fails deep inside
transformers with a long traceback, so it is named here first."""
_CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "n_ctx", "seq_length")


def check_checkpoint(
    model: str, *, trust_remote_code: bool = True, base_model: str | None = None, option: str = "--model"
) -> None:
    """Cheap checks of a local checkpoint folder, before anything heavy is imported.

    A string that is not an existing path but looks like a hub id (``org/name`` or
    ``org/name@revision``) is pinned to its commit sha now (:func:`~pytest_novelty.infra.hub.resolve_hub`);
    without network it must be in the local Hugging Face cache, which is decided within seconds.
    With ``trust_remote_code=False`` a folder whose config or tokenizer config maps to its own
    Python code (``auto_map``) is refused. A PEFT adapter folder (``adapter_config.json``, no
    ``config.json``) is checked with its base model (``base_model``, else the one its adapter
    config names). Errors name ``option``, the option the user gave the folder with
    (``--baseline-model``, ``--base-model``), or the adapter config's ``base_model_name_or_path``.
    """
    path = Path(model)
    if not path.exists():
        if _looks_like_hub_id(model):
            resolve_hub(model)
            return
        demo = " or 'demo'" if option == "--model" else ""
        raise ConfigError(
            "checkpoint folder not found; pass a Hugging Face folder (with config.json), a hub id "
            f"such as org/name or org/name@revision{demo}",
            path=model,
            field=option,
        )
    if not path.is_dir():
        raise ConfigError("expected a checkpoint folder, got a file", path=model, field=option)
    try:
        empty = not any(path.iterdir())
    except OSError as exc:
        raise ConfigError(f"cannot read the folder ({exc.strerror or exc})", path=model, field=option) from None
    if empty:
        raise ConfigError(
            "an empty folder: nothing has been saved here yet (a save that has not started, or was interrupted)",
            path=model,
            field=option,
        )
    if not (path / "config.json").is_file() and (path / ADAPTER_CONFIG).is_file():
        base = adapter_base(model, base_model, option=option)
        if base_model:
            check_checkpoint(base, trust_remote_code=trust_remote_code, option="--base-model")
            return
        try:
            check_checkpoint(base, trust_remote_code=trust_remote_code, option="base_model_name_or_path")
        except ConfigError as exc:
            raise ConfigError(
                f"the adapter's base checkpoint {base!r} cannot be used ({exc.detail}); pass it with --base-model PATH",
                path=path / ADAPTER_CONFIG,
                field="base_model_name_or_path",
            ) from None
        return
    if not (path / "config.json").is_file():
        raise ConfigError(
            "no config.json: this is not a Hugging Face checkpoint folder (save it with model.save_pretrained)",
            path=model,
            field=option,
        )
    if not any((path / name).is_file() for name in _TOKENIZER_FILES):
        raise ConfigError(
            "no tokenizer files (tokenizer.json or tokenizer_config.json): save the tokenizer next to "
            "the weights with tokenizer.save_pretrained(FOLDER)",
            path=model,
            field=option,
        )
    if not trust_remote_code and _ships_code(path):
        raise ConfigError(
            "this checkpoint ships its own Python code (auto_map); review it, then pass --trust-remote-code",
            path=model,
            field=option,
        )
    _check_config(path)
    _check_weights(path, option)


def _check_config(path: Path) -> None:
    """config.json is a JSON object whose size fields are whole numbers."""
    file = path / "config.json"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"not valid JSON ({exc}); save it again with model.save_pretrained", path=file) from None
    if not isinstance(data, dict):
        raise ConfigError(f"expected a JSON object, got {type(data).__name__}", path=file)
    configs = [data] + [v for v in data.values() if isinstance(v, dict) and "model_type" in v]
    for config in configs:
        for name in _SIZE_FIELDS:
            value = config.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(
                    f"expected a whole number, got {value!r}; fix the value (e.g. {name}: 4)", path=file, field=name
                )


def _check_weights(path: Path, option: str = "--model") -> None:
    """The folder holds whole weights: no weight file still being written, every shard its index
    names, an index for shards, and no truncated safetensors file.

    What a save or a copy leaves while it is under way, and how each is told: transformers'
    ``save_pretrained`` writes each safetensors file in place (header first, so a file still being
    written is shorter than its header says), and the shards of a sharded checkpoint one by one,
    then their ``*.index.json`` last (shards without an index are a save under way); copy tools and
    downloads write beside the final name (``.model.safetensors.Xy12Ab`` from rsync,
    ``*.incomplete``, ``*.part``, ``*.tmp``). Only names and headers are read: milliseconds.
    """
    names = [p.name for p in path.iterdir() if p.is_file()]
    partial = sorted(name for name in names if _is_partial(name))
    if partial:
        raise ConfigError(
            f"{partial[0]} is still being written (or was left by an interrupted save or copy); wait for it to "
            "finish, or copy the checkpoint again",
            path=path,
            field=option,
        )
    files = [path / name for name in names if Path(name).suffix in _WEIGHT_SUFFIXES]
    if not files:
        raise ConfigError(
            "no weights (model.safetensors or pytorch_model.bin); save them with model.save_pretrained(FOLDER)",
            path=path,
            field=option,
        )
    indexes = list(path.glob("*.index.json"))
    for index in indexes:
        try:
            shards = set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values())
        except (OSError, ValueError, AttributeError) as exc:
            raise ConfigError(f"unreadable shard index ({exc})", path=index, field=option) from None
        missing = sorted(name for name in shards if not (path / name).is_file())
        if missing:
            raise ConfigError(f"names a missing weight file {missing[0]}; copy the checkpoint again", path=index,
                              field=option)
    pieces = sorted(file.name for file in files if _SHARD.fullmatch(file.name))
    if pieces and not indexes:
        raise ConfigError(
            f"weight shards ({pieces[0]}, ...) but no *.index.json, which save_pretrained writes after the last "
            "shard: the save is still under way, or was interrupted; wait for it, or save the checkpoint again",
            path=path,
            field=option,
        )
    for file in files:
        if file.suffix == ".safetensors":
            _check_safetensors(file, option)


_SHARD = re.compile(r".+-\d{5}-of-\d{5}\.(safetensors|bin)")
"""The name save_pretrained gives each shard of a sharded checkpoint (``model-00001-of-00003.safetensors``)."""
_PARTIAL_SUFFIXES = (".tmp", ".part", ".partial", ".incomplete")


def _is_partial(name: str) -> bool:
    """Whether a file name is one a save, copy or download uses while it writes a file: a temporary
    suffix, or a weight file's name with more after it (rsync's hidden ``.model.safetensors.Xy12Ab``)."""
    if name.endswith(_PARTIAL_SUFFIXES):
        return True
    stem = name.lstrip(".")
    return not stem.endswith(".index.json") and any(f"{suffix}." in stem for suffix in _WEIGHT_SUFFIXES)


def _check_safetensors(file: Path, option: str) -> None:
    size = file.stat().st_size
    try:
        with file.open("rb") as fh:
            head = fh.read(8)
            length = int.from_bytes(head, "little") if len(head) == 8 else -1
            if length < 2 or 8 + length > size:
                raise ValueError(f"{size} bytes, too short for its header")
            header = json.loads(fh.read(length))
        ends = [int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"]
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise ConfigError(f"not a valid safetensors file ({exc}); copy it again", path=file, field=option) from None
    needed = 8 + length + max(ends, default=0)
    if size < needed:
        raise ConfigError(
            f"truncated: its header needs {needed:,} bytes, the file has {size:,} (still being written, or cut "
            "off); wait for the save to finish, or copy it again",
            path=file,
            field=option,
        )


def context_length(model: str) -> int | None:
    """The checkpoint's context in tokens, from its config.json (None when it does not say)."""
    try:
        data = json.loads((Path(model) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("text_config"), dict):
        data = {**data["text_config"], **{k: v for k, v in data.items() if k in _CONTEXT_FIELDS}}
    for name in _CONTEXT_FIELDS:
        value = data.get(name) if isinstance(data, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


ADAPTER_CONFIG = "adapter_config.json"


def is_adapter(model: str) -> bool:
    """Whether ``model`` is a PEFT adapter folder (``adapter_config.json`` and no ``config.json``)."""
    path = Path(model)
    return (path / ADAPTER_CONFIG).is_file() and not (path / "config.json").is_file()


def adapter_base(adapter: str, base_model: str | None = None, *, option: str = "--model") -> str:
    """The base checkpoint an adapter folder loads over: ``base_model`` (``--base-model``) when
    given, else ``base_model_name_or_path`` of its ``adapter_config.json``."""
    if base_model:
        return base_model
    config = Path(adapter) / ADAPTER_CONFIG
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"unreadable adapter config ({exc})", path=str(config), field=option) from None
    base = data.get("base_model_name_or_path") if isinstance(data, dict) else None
    if not isinstance(base, str) or not base:
        raise ConfigError(
            "base_model_name_or_path is not set: pass the base checkpoint with --base-model PATH",
            path=str(config),
            field="base_model_name_or_path",
        )
    return base


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
    from pytest_novelty.infra.hub import looks_like_hub_id

    return looks_like_hub_id(model)


def checkpoint_identity_id(model: str, *, memo: Memo | None = None) -> str:
    """The hex id of :func:`~pytest_novelty.infra.identity.checkpoint_identity`, used in cache keys.

    Every byte of the files the model loads from counts (nothing else in the folder); a hub id
    counts by its commit sha. ``memo`` remembers file digests between runs.
    """
    return checkpoint_identity(model, memo=memo).id


def _load(what: str, model: str, load: Callable[[], Any]) -> Any:
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
    if is_adapter(model) and not any((Path(model) / name).is_file() for name in _TOKENIZER_FILES):
        return adapter_base(model, base_model)
    return model


def load_tokenizer(name: str, **options: Any) -> Any:
    """``AutoTokenizer.from_pretrained(name, **options)``; a tokenizer that cannot be read (a cut-off
    ``tokenizer.json``, a class transformers does not know) is one line naming the checkpoint
    (:func:`_load`). The generation step and the preflight's prompt lengths load it alike."""
    from transformers import AutoTokenizer

    return _load("tokenizer", name, lambda: AutoTokenizer.from_pretrained(name, **options))


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


class NoChatTemplate(ConfigError):
    """Chat messages were given to a checkpoint without a chat template (a base model)."""


class PromptTooLong(ConfigError):
    """A prompt (with its in-context examples) fills the model's whole context.

    ``tokens`` is the longest prompt of the batch, ``context`` the model's context; the runner
    finds which prompt it was and names its file and line.
    """

    def __init__(self, tokens: int, context: int) -> None:
        self.tokens = tokens
        self.context = context
        super().__init__(f"a prompt of {tokens} tokens does not fit the model's context of {context} tokens")


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


@GENERATOR_BACKENDS.register("hf", summary="transformers, on the CPU or GPUs (accelerate spreads one model)")
class HFGenerator:
    """Samples continuations from a transformers causal LM, with a decode loop that retires rows.

    ``model.generate`` keeps every row of a batch running until the longest one ends, so on short,
    varied answers most of its work goes to rows that have already stopped. This loop calls the
    model's forward pass itself: after each step the rows that produced an end-of-sequence token
    or a stop string leave the batch (and the KV cache, through ``Cache.reorder_cache``), so the
    cost follows the tokens actually produced. Sampling is seeded per row (see ``sampling.py``).
    """

    def __init__(self, model: str, load: LoadSettings | None = None) -> None:
        """Checks ``model`` and its identity now; the tokenizer and the weights load when first needed.

        ``load`` (default: :class:`~pytest_novelty.generation.LoadSettings`'s defaults) says where
        and how: ``gpus`` > 1 spreads the model over that many of the visible GPUs (accelerate's
        device map), ``placement`` gives ``from_pretrained`` a device map of the caller's instead;
        an adapter folder loads over ``base_model`` or the base its adapter config names.
        """
        self.load = load = load or LoadSettings()
        check_checkpoint(model, trust_remote_code=load.trust_remote_code, base_model=load.base_model)
        self.name = model
        self.adapter = model if is_adapter(model) else None
        self.base = adapter_base(model, load.base_model) if self.adapter else model
        self.identity = checkpoint_identity(model, memo=load.memo, base=load.base_model)  # what is loaded, its key
        self.identity_id = self.identity.id
        self.tokens_generated = 0
        self._device: str | None = None
        self._tokenizer: Any = None
        self._model: Any = None
        self._pieces: list[str] | None = None

    def _load_options(self) -> dict[str, Any]:
        """``from_pretrained`` options: remote code as allowed, a hub model at its pinned commit."""
        return {"trust_remote_code": self.load.trust_remote_code, **self.identity.load_options}

    # The tokenizer, the device and the weights are loaded when first needed: a rerun whose answers
    # are all cached renders its inputs and reads the cache without importing torch.

    @property
    def device(self) -> str:
        """Where inputs go: the device (the first one of a model spread over several)."""
        if self._device is None:
            self._device = resolve_device(self.load.device)
        return self._device

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            if self.adapter:
                name = tokenizer_source(self.adapter, self.load.base_model)
                remote: dict[str, Any] = {"trust_remote_code": self.load.trust_remote_code}
            else:
                name, remote = self.identity.source, self._load_options()
            tokenizer = load_tokenizer(name, **remote)
            tokenizer.padding_side = "left"
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            self._tokenizer = tokenizer
        return self._tokenizer

    def _placement_kwargs(self) -> dict[str, Any]:
        """``from_pretrained`` arguments that spread the weights, or {} for one device."""
        if self.load.placement is not None:
            return dict(self.load.placement)
        if self.load.gpus <= 1:
            return {}
        from pytest_novelty.generation import devices

        spread = devices.model_devices(self.device, self.load.gpus, devices.cuda_count())
        return devices.shard_placement(spread, devices.cuda_free_memory(spread))

    @property
    def model(self) -> Any:
        if self._model is None:
            import inspect

            import torch
            from transformers import AutoModelForCausalLM

            if self.adapter:
                name, remote = self.base, {"trust_remote_code": self.load.trust_remote_code}
            else:
                name, remote = self.identity.source, self._load_options()
            dtype = getattr(torch, DTYPES[self.load.dtype]) if self.load.dtype != "auto" else None
            dtype = dtype or (torch.bfloat16 if self.device.startswith("cuda") else torch.float32)
            placement = self._placement_kwargs()
            model = _load(
                "model", name, lambda: AutoModelForCausalLM.from_pretrained(name, dtype=dtype, **remote, **placement)
            )
            if self.adapter:
                model = _with_adapter(model, self.adapter)
            if not placement:
                _load("model", name, lambda: model.to(self.device))  # placing the weights can run out of memory
            self.device_map = dict(getattr(model, "hf_device_map", None) or {"": self.device})
            model.eval()
            config = model.config
            self.context = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
            self.eos_ids = _eos_ids(model, self.tokenizer)
            self.processors = checkpoint_processors(model, self.device)
            params = inspect.signature(model.forward).parameters
            # transformers 5.2x renamed past_key_values to cache; older releases know only the first.
            self._cache_arg = "cache" if "cache" in params else "past_key_values"
            self._last_logits = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
            self._model = model
        return self._model

    def render(self, model_input: ModelInput) -> str:
        """The exact text fed to the model: chat messages go through the chat template.

        A rendered chat input is remembered in the identity memo (when there is one) under the
        checkpoint's content identity, which covers its tokenizer files and so its template: a
        rerun renders it again without loading the tokenizer (and without importing transformers),
        so a warm rerun of a chat suite loads nothing either.
        """
        if isinstance(model_input, str):
            return model_input  # plain text needs no tokenizer (and a cached rerun loads none)
        key = f"chat-render/{self.identity_id}/{stable_hash([dict(m) for m in model_input])}"
        known = None if self.load.memo is None else self.load.memo.get(key)
        if isinstance(known, str):
            return known
        text = render(self.tokenizer, self.name, model_input)
        if self.load.memo is not None:
            self.load.memo.put(key, text)
        return text

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Prompt lengths in tokens, as the model will see them."""
        return token_counts(self.tokenizer, texts)

    def max_rows(self, prompt_tokens: int, settings: GenerationSettings) -> int:
        """Rows per batch for prompts of up to ``prompt_tokens`` tokens: what the memory allows.

        On CUDA: half the free memory (of every GPU the model is spread over) divided by a row's KV
        cache at full length (:func:`kv_bytes_per_token`) plus its sampling buffers. On the CPU the
        time per step grows with the rows beyond a few hundred, so batches stop at 256 rows.
        """
        length = prompt_tokens + settings.max_new_tokens
        if not self.device.startswith("cuda"):
            return max(1, min(256, (1 << 16) // max(1, length)))
        import torch

        config = self.model.config
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        # Sampling holds a few full-vocabulary vectors per row (float32 logits, float64 probabilities
        # and their cumulative sum): 32 bytes per vocabulary entry.
        per_row = kv_bytes_per_token(config, self.model.dtype) * length + 32 * int(getattr(text, "vocab_size", 0) or 0)
        gpus = sorted({str(d) for d in self.device_map.values() if str(d).startswith("cuda") or isinstance(d, int)})
        free = sum(torch.cuda.mem_get_info(torch.device(_torch_device(d)))[0] for d in gpus or [self.device])
        return max(1, min(1024, int(0.5 * free) // per_row))

    def sample(self, batch: Batch) -> list[str]:
        """One sampled continuation (new text only) per row; ``on_step`` hears of finished rows and
        tokens, ``on_row(i, text)`` of each row the moment it ends.

        On a CUDA out-of-memory error the batch is split in halves and retried; rows are seeded
        one by one, so the split does not change the answers.
        """
        import torch

        try:
            return self._decode(batch)
        except torch.OutOfMemoryError:
            if len(batch) == 1:
                raise HarnessError(f"{self.name}: out of memory on a single prompt") from None
        # Retried outside the except clause: there, the traceback still holds the failed attempt's
        # tensors (its KV cache), and the halves would run short of the very memory it took.
        torch.cuda.empty_cache()
        half = len(batch) // 2
        before = self.tokens_generated
        first = self.sample(batch.part(0, half))
        later = batch.part(half, len(batch), tokens_before=self.tokens_generated - before)
        return first + self.sample(later)

    def _max_new(self, width: int, settings: GenerationSettings) -> int:
        """New tokens for a batch whose longest prompt has ``width`` tokens.

        ``max_new_tokens`` at or beyond the context is refused (it would be cut for every row, and
        size batches for a length that never happens); a prompt that fills the context raises
        :class:`PromptTooLong`; otherwise a long prompt shortens its batch's answers to fit.
        """
        if self.context is None:
            return settings.max_new_tokens
        if settings.max_new_tokens >= self.context:
            raise ConfigError(
                f"{settings.max_new_tokens} new tokens do not fit the model's context of {self.context} "
                f"tokens, with no room left for a prompt; use fewer than {self.context}",
                field="generation.max_new_tokens",
            )
        if width >= self.context:
            raise PromptTooLong(width, self.context)
        return min(settings.max_new_tokens, self.context - width)

    def _decode(self, batch: Batch) -> list[str]:
        import random

        import torch

        from pytest_novelty.generation.sampling import next_tokens

        texts, settings = batch.texts, batch.settings

        # The k samples of a prompt share its prompt: run each distinct prompt once, then give every
        # row its own copy of that prompt's KV cache.
        distinct = list(dict.fromkeys(texts))
        model = self.model  # loads the weights on first use, and with them the context and stop ids
        enc = self.tokenizer(distinct, return_tensors="pt", padding=True, add_special_tokens=False)
        mask = enc["attention_mask"].to(self.device)
        ids = enc["input_ids"].to(self.device)
        max_new = self._max_new(ids.shape[1], settings)
        where = {text: i for i, text in enumerate(distinct)}
        expand = torch.tensor([where[text] for text in texts], device=self.device)
        rngs = [random.Random(seed) for seed in batch.seeds]
        produced: list[list[int]] = [[] for _ in texts]
        stops = _StopWatch(settings.stop, self._token_pieces() if settings.stop else [], len(texts))
        live = list(range(len(texts)))  # the original row of each row still in the batch
        decoded: dict[int, str] = {}

        def finish(row: int) -> None:
            # A row that ends is decoded and handed on at once (to be cached before the batch ends).
            decoded[row] = str(self.tokenizer.decode(produced[row], skip_special_tokens=True))
            batch.finished(row, decoded[row])

        tokens = 0
        positions = (mask.cumsum(-1) - 1).clamp_(min=0)
        with torch.inference_mode():
            out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **self._last_logits)
            cache, logits = _cache_of(out), out.logits[:, -1, :].to(self.device)
            if len(distinct) < len(texts):
                cache.reorder_cache(expand)
                logits, mask, positions, ids = logits[expand], mask[expand], positions[expand], ids[expand]
            position = positions[:, -1:] + 1
            for step in range(max_new):
                if self.processors:
                    logits = self.processors(ids, logits.float())
                chosen = next_tokens(
                    logits,
                    [rngs[r] for r in live],
                    temperature=settings.temperature,
                    top_k=settings.top_k,
                    top_p=settings.top_p,
                )
                keep = []
                for slot, (row, token) in enumerate(zip(live, chosen.tolist(), strict=True)):
                    if token in self.eos_ids:
                        finish(row)
                        continue
                    produced[row].append(token)
                    tokens += 1
                    if not stops.hit(row, token):
                        keep.append(slot)
                    else:
                        finish(row)
                batch.step(len(texts) - len(keep), tokens)
                if not keep or step == max_new - 1:
                    break
                if self.processors:
                    ids = torch.cat([ids, chosen.unsqueeze(-1)], dim=-1)  # the processors read the whole row
                if len(keep) < len(live):
                    index = torch.tensor(keep, device=self.device)
                    cache.reorder_cache(index)
                    mask, position, chosen, ids = mask[index], position[index], chosen[index], ids[index]
                    live = [live[slot] for slot in keep]
                mask = torch.cat([mask, mask.new_ones((len(live), 1))], dim=-1)
                out = model(
                    input_ids=chosen.unsqueeze(-1),
                    attention_mask=mask,
                    position_ids=position,
                    use_cache=True,
                    **{self._cache_arg: cache},
                )
                cache, logits = _cache_of(out), out.logits[:, -1, :].to(self.device)
                position = position + 1
        for row in range(len(texts)):
            if row not in decoded:
                finish(row)  # reached the length limit
        self.tokens_generated += tokens
        return [decoded[row] for row in range(len(texts))]

    def _token_pieces(self) -> list[str]:
        """Each token's text on its own, to spot stop strings without decoding every row each step."""
        if self._pieces is None:
            size = len(self.tokenizer)
            self._pieces = [self.tokenizer.decode([i], skip_special_tokens=True) for i in range(size)]
        return self._pieces


class _StopWatch:
    """Notices when a row's recent text contains a stop string.

    Only the last few characters of each row are kept (as long as the longest stop string plus
    one token). Token pieces decoded one by one can differ from the joined text for multi-byte
    characters; stop strings here end generation early only, the task cuts answers at the exact
    stop afterwards.
    """

    def __init__(self, stops: Sequence[str], pieces: Sequence[str], rows: int) -> None:
        self.stops = [s for s in stops if s]
        self.pieces = pieces
        self.keep = max((len(s) for s in self.stops), default=0)
        self.tails = [""] * rows
        self.seen = [False] * rows

    def hit(self, row: int, token: int) -> bool:
        if not self.stops:
            return False
        piece = self.pieces[token] if token < len(self.pieces) else ""
        text = self.tails[row] + piece
        # Leading whitespace never counts as a stop (as in the tasks' cut_at_stops).
        if not self.seen[row]:
            text = text.lstrip()
            self.seen[row] = bool(text)
        self.tails[row] = text[-(self.keep + len(piece)) :]
        return any(stop in text for stop in self.stops)


def checkpoint_processors(model: Any, device: str) -> Any:
    """The token rules of the checkpoint's own generation config, as transformers logits processors.

    Sampling itself (temperature, top-k, top-p, length) follows the suite, so that every
    checkpoint is sampled the same way. What a checkpoint's ``generation_config.json`` says about
    which tokens may come is kept, as ``model.generate`` would keep it: ``repetition_penalty``,
    ``no_repeat_ngram_size``, ``bad_words_ids`` and ``suppress_tokens``. Returns None when it sets
    none of them.
    """
    from transformers import (
        LogitsProcessorList,
        NoBadWordsLogitsProcessor,
        NoRepeatNGramLogitsProcessor,
        RepetitionPenaltyLogitsProcessor,
        SuppressTokensLogitsProcessor,
    )

    config = getattr(model, "generation_config", None)
    if config is None:
        return None
    processors = LogitsProcessorList()
    penalty = getattr(config, "repetition_penalty", None)
    if penalty is not None and penalty != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(float(penalty)))
    ngram = getattr(config, "no_repeat_ngram_size", None)
    if ngram:
        processors.append(NoRepeatNGramLogitsProcessor(int(ngram)))
    bad = getattr(config, "bad_words_ids", None)
    if bad:
        processors.append(NoBadWordsLogitsProcessor(bad, eos_token_id=getattr(config, "eos_token_id", None)))
    suppress = getattr(config, "suppress_tokens", None)
    if suppress:
        processors.append(SuppressTokensLogitsProcessor(suppress, device=device))
    return processors or None


def kv_bytes_per_token(config: Any, dtype: Any) -> int:
    """Bytes of KV cache one token takes: keys and values of every layer, for the key/value heads only.

    Grouped-query models (Llama 3, Qwen2, Mistral, Gemma) keep ``num_key_value_heads`` heads of
    ``head_dim`` each, which may differ from ``hidden_size / num_attention_heads`` (Gemma); a
    multimodal config is read through its text part.
    """
    import torch

    text = config.get_text_config() if hasattr(config, "get_text_config") else config

    def field(*names: str) -> int:
        return next((int(v) for v in (getattr(text, n, None) for n in names) if v), 0)

    layers = field("num_hidden_layers", "n_layer") or 1
    heads = field("num_attention_heads", "n_head") or 1
    kv_heads = field("num_key_value_heads") or heads
    head_dim = field("head_dim") or (field("hidden_size", "n_embd") or 1) // heads
    return 2 * layers * kv_heads * head_dim * (torch.finfo(dtype).bits // 8)


def _torch_device(entry: Any) -> str:
    """A device map entry (0, "cuda:1", "cpu") as a torch device string."""
    return f"cuda:{entry}" if isinstance(entry, int) or str(entry).isdigit() else str(entry)


def _with_adapter(model: Any, adapter: str) -> Any:
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


def _cache_of(output: Any) -> Any:
    """The KV cache a forward pass returned (``cache`` in recent transformers, ``past_key_values`` before)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """End-of-sequence ids: the generation config's (chat models list several) and the tokenizer's."""
    ids: set[int] = set()
    for value in (getattr(getattr(model, "generation_config", None), "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return ids
