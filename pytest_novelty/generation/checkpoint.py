"""A local checkpoint short of sampling: its folder's cheap checks before anything heavy is imported,
its context length, an adapter's base; loading it with transformers (each loader's error one line
naming the checkpoint), the adapter merged, and its tokenizer's text side (chat template, lengths).
"""

from __future__ import annotations

import json
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_novelty.infra.errors import ConfigError, HarnessError, NoveltyError, first_line
from pytest_novelty.infra.hub import looks_like_hub_id, resolve_hub
from pytest_novelty.infra.identity import ships_code
from pytest_novelty.infra.storage import read_json

if TYPE_CHECKING:
    from pytest_novelty.generation import ModelInput

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "spiece.model")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
_SIZE_FIELDS = (
    "n_layer", "n_head", "n_embd", "n_positions", "n_ctx", "n_inner", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "hidden_size", "intermediate_size", "max_position_embeddings", "vocab_size", "head_dim",
)  # fmt: skip
"""config.json fields that must be whole numbers or null (a string fails deep inside transformers)."""
_CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "n_ctx", "seq_length")

ADAPTER_CONFIG = "adapter_config.json"


def check_checkpoint(
    model: str, *, trust_remote_code: bool = True, base_model: str | None = None, option: str = "--model"
) -> None:
    """Cheap checks of a local checkpoint folder, before anything heavy is imported.

    A hub id that is not an existing path is pinned to its commit now
    (:func:`~pytest_novelty.infra.hub.resolve_hub`). Without ``trust_remote_code`` a folder that ships
    code (``auto_map``) is refused. An adapter folder is checked with its base. Errors name ``option``
    (``--baseline-model``, ``--base-model``), or the adapter config's ``base_model_name_or_path``.
    """
    path = Path(model)
    if not path.exists() and looks_like_hub_id(model):
        resolve_hub(model)
        return
    problem = _folder_problem(path, option)
    if problem is None and is_adapter(model):
        _check_adapter(model, base_model, trust_remote_code=trust_remote_code, option=option)
        return
    problem = problem or _file_problem(path, trust_remote_code)
    if problem is not None:
        raise ConfigError(problem, path=model, field=option)
    _check_config(path)
    _check_weights(path, option)


def _folder_problem(path: Path, option: str) -> str | None:
    """What keeps ``path`` from being a checkpoint folder at all, in words; None when nothing does."""
    if not path.exists():
        demo = " or 'demo'" if option == "--model" else ""
        return ("checkpoint folder not found; pass a Hugging Face folder (with config.json), a hub id such as "
                f"org/name or org/name@revision{demo}")
    if not path.is_dir():
        return "expected a checkpoint folder, got a file"
    try:
        if not any(path.iterdir()):
            return ("an empty folder: nothing has been saved here yet (a save that has not started, or was "
                    "interrupted)")
    except OSError as exc:
        return f"cannot read the folder ({exc.strerror or exc})"
    return None


def _file_problem(path: Path, trust_remote_code: bool) -> str | None:
    """What a checkpoint folder lacks, or holds that it may not run, in words; None when nothing."""
    if not (path / "config.json").is_file():
        return "no config.json: this is not a Hugging Face checkpoint folder (save it with model.save_pretrained)"
    if not any((path / name).is_file() for name in _TOKENIZER_FILES):
        return ("no tokenizer files (tokenizer.json or tokenizer_config.json): save the tokenizer next to the "
                "weights with tokenizer.save_pretrained(FOLDER)")
    if not trust_remote_code and ships_code(path):
        return "this checkpoint ships its own Python code (auto_map); review it, then pass --trust-remote-code"
    return None


def _check_adapter(model: str, base_model: str | None, *, trust_remote_code: bool, option: str) -> None:
    """An adapter folder's base, checked as a checkpoint; errors point at ``--base-model`` or the config."""
    base = adapter_base(model, base_model, option=option)
    if base_model:
        check_checkpoint(base, trust_remote_code=trust_remote_code, option="--base-model")
        return
    try:
        check_checkpoint(base, trust_remote_code=trust_remote_code, option="base_model_name_or_path")
    except ConfigError as exc:
        raise ConfigError(
            f"the adapter's base checkpoint {base!r} cannot be used ({exc.detail}); pass it with --base-model PATH",
            path=Path(model) / ADAPTER_CONFIG, field="base_model_name_or_path",
        ) from None


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
    """The folder holds whole weights, told from names and headers only (milliseconds).

    ``save_pretrained`` writes each safetensors file in place, header first (a file still being
    written is shorter than its header says), and a sharded checkpoint's ``*.index.json`` after the
    last shard (shards without an index are a save under way); copies and downloads write beside
    the final name (:func:`_is_partial`).
    """
    def refused(why: str) -> ConfigError:
        return ConfigError(why, path=path, field=option)

    names = [p.name for p in path.iterdir() if p.is_file()]
    partial = sorted(name for name in names if _is_partial(name))
    if partial:
        raise refused(f"{partial[0]} is still being written (or was left by an interrupted save or copy); wait "
                      "for it to finish, or copy the checkpoint again")
    files = [path / name for name in names if Path(name).suffix in _WEIGHT_SUFFIXES]
    if not files:
        raise refused("no weights (model.safetensors or pytorch_model.bin); save them with "
                      "model.save_pretrained(FOLDER)")
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
        raise refused(f"weight shards ({pieces[0]}, ...) but no *.index.json, which save_pretrained writes after "
                      "the last shard: the save is still under way, or was interrupted; wait for it, or save the "
                      "checkpoint again")
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
            "off); wait for the save to finish, or copy it again", path=file, field=option,
        )


def context_length(model: str) -> int | None:
    """The checkpoint's context in tokens, from its config.json (None when it does not say)."""
    data = read_json(Path(model) / "config.json")
    if isinstance(data, dict) and isinstance(data.get("text_config"), dict):
        data = {**data["text_config"], **{k: v for k, v in data.items() if k in _CONTEXT_FIELDS}}
    for name in _CONTEXT_FIELDS:
        value = data.get(name) if isinstance(data, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def context_refusal(wanted: int, context: int, **where: Any) -> ConfigError:
    """The one line for ``generation.max_new_tokens`` at or past the model's context of ``context``
    tokens (``where``: the suite file's ``path``): no room is left for a prompt."""
    return ConfigError(f"{wanted} new tokens do not fit the model's context of {context} tokens, with no room left "
                       f"for a prompt; use fewer than {context}", field="generation.max_new_tokens", **where)


def attention_sizes(config: Any) -> tuple[int, int, int, int]:
    """A loaded model config's layers, attention heads, key/value heads (fewer in grouped-query
    models) and head width (which Gemma sets apart from ``hidden_size / heads``), whatever each
    family calls them."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config

    def field(*names: str) -> int:
        return next((int(v) for v in (getattr(text, n, None) for n in names) if v), 0)

    heads = field("num_attention_heads", "n_head") or 1
    head_dim = field("head_dim") or (field("hidden_size", "n_embd") or 1) // heads
    return field("num_hidden_layers", "n_layer") or 1, heads, field("num_key_value_heads") or heads, head_dim


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
            "base_model_name_or_path is not set: pass the base checkpoint with --base-model PATH", path=str(config),
            field="base_model_name_or_path",
        )
    return base


# -- loading with transformers ------------------------------------------------------------------


def run_loader(what: str, model: str, load: Callable[[], Any]) -> Any:
    """Run a transformers loader, turning its error into one line that names the checkpoint: a
    :class:`ConfigError` with the error's first line (transformers fails in many ways on a bad folder,
    all of them the checkpoint's problem), or a :class:`HarnessError` when memory ran out (the machine's).
    """
    try:
        return load()
    except (KeyboardInterrupt, NoveltyError):
        raise
    except Exception as exc:
        if _out_of_memory(exc):
            raise _no_memory(what, model, exc) from None
        if "trust_remote_code" in str(exc):
            raise ConfigError("this checkpoint ships its own code; review it, then pass --trust-remote-code",
                              path=model, field="--model") from None
        raise ConfigError(
            f"cannot load the {what}: {type(exc).__name__}: {first_line(exc)}", path=model, field="--model"
        ) from None


def tokenizer_source(model: str, base_model: str | None = None) -> str:
    """Where a checkpoint's tokenizer loads from: its folder, or the base of an adapter without tokenizer files."""
    if is_adapter(model) and not any((Path(model) / name).is_file() for name in _TOKENIZER_FILES):
        return adapter_base(model, base_model)
    return model


def load_tokenizer(name: str, **options: Any) -> Any:
    """``AutoTokenizer.from_pretrained(name, **options)`` through :func:`run_loader`."""
    from transformers import AutoTokenizer

    return run_loader("tokenizer", name, lambda: AutoTokenizer.from_pretrained(name, **options))


def _out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is ``MemoryError`` or ``torch.OutOfMemoryError`` (torch is imported by then if in use)."""
    torch = sys.modules.get("torch")
    device_oom = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    return isinstance(exc, MemoryError) or (isinstance(device_oom, type) and isinstance(exc, device_oom))


def _no_memory(what: str, model: str, exc: BaseException) -> HarnessError:
    """The one line for running out of memory while loading: the machine's problem (exit 8), not bad input."""
    return HarnessError(
        f"{model}: out of memory while loading the {what} ({type(exc).__name__}: {first_line(exc)}); free memory "
        "on the device, or spread the model over more GPUs (--gpus-per-worker N)"
    )


def with_adapter(model: Any, adapter: str) -> Any:
    """The base ``model`` with the PEFT adapter merged into its weights (LoRA: W + BA), so the decode
    loop and its speed are the same for adapters and full checkpoints."""
    try:
        from peft import PeftModel
    except ImportError:
        raise ConfigError(
            "this is a PEFT adapter folder and peft is not installed; pip install 'pytest-novelty[peft]'",
            path=adapter, field="--model",
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
