"""A local checkpoint folder, read before anything heavy is imported: the checks that turn a bad
or half-saved folder into one line, its context length, a PEFT adapter's base, and its identity id.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.identity import Memo, checkpoint_identity, looks_like_hub_id, resolve_hub

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "spiece.model")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
_SIZE_FIELDS = (
    "n_layer", "n_head", "n_embd", "n_positions", "n_ctx", "n_inner", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "hidden_size", "intermediate_size", "max_position_embeddings", "vocab_size", "head_dim",
)  # fmt: skip
"""config.json fields that must be whole numbers (or null): a string there fails deep inside
transformers with a long traceback, so it is named here first."""
_CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "n_ctx", "seq_length")

ADAPTER_CONFIG = "adapter_config.json"


def check_checkpoint(
    model: str, *, trust_remote_code: bool = True, base_model: str | None = None, option: str = "--model"
) -> None:
    """Cheap checks of a local checkpoint folder, before anything heavy is imported.

    A string that is not an existing path but looks like a hub id (``org/name`` or
    ``org/name@revision``) is pinned to its commit sha now (:func:`~pytest_novelty.infra.identity.resolve_hub`);
    without network it must be in the local Hugging Face cache, which is decided within seconds.
    With ``trust_remote_code=False`` a folder whose config or tokenizer config maps to its own
    Python code (``auto_map``) is refused. A PEFT adapter folder (``adapter_config.json``, no
    ``config.json``) is checked with its base model (``base_model``, else the one its adapter
    config names). Errors name ``option``, the option the user gave the folder with
    (``--baseline-model``, ``--base-model``), or the adapter config's ``base_model_name_or_path``.
    """
    path = Path(model)
    if not path.exists():
        if looks_like_hub_id(model):
            resolve_hub(model)
            return
        demo = " or 'demo'" if option == "--model" else ""
        raise ConfigError(
            "checkpoint folder not found; pass a Hugging Face folder (with config.json), a hub id "
            f"such as org/name or org/name@revision{demo}",
            path=model,
            field=option,
        )
    _check_folder(model, option)
    if is_adapter(model):
        _check_adapter(model, base_model, trust_remote_code=trust_remote_code, option=option)
        return
    if not (path / "config.json").is_file():
        raise ConfigError(
            "no config.json: this is not a Hugging Face checkpoint folder (save it with model.save_pretrained)",
            path=model,
            field=option,
        )
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
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


def _check_folder(model: str, option: str) -> None:
    """``model`` is a folder that can be read and holds something."""
    path = Path(model)
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


def _check_adapter(model: str, base_model: str | None, *, trust_remote_code: bool, option: str) -> None:
    """An adapter folder's base checkpoint, checked as a checkpoint: errors about ``--base-model``
    name that option; errors about the base its adapter config names point at that config."""
    base = adapter_base(model, base_model, option=option)
    if base_model:
        check_checkpoint(base, trust_remote_code=trust_remote_code, option="--base-model")
        return
    try:
        check_checkpoint(base, trust_remote_code=trust_remote_code, option="base_model_name_or_path")
    except ConfigError as exc:
        raise ConfigError(
            f"the adapter's base checkpoint {base!r} cannot be used ({exc.detail}); pass it with --base-model PATH",
            path=Path(model) / ADAPTER_CONFIG,
            field="base_model_name_or_path",
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


def checkpoint_identity_id(model: str, *, memo: Memo | None = None) -> str:
    """The hex id of :func:`~pytest_novelty.infra.identity.checkpoint_identity`, used in cache keys.

    Every byte of the files the model loads from counts (nothing else in the folder); a hub id
    counts by its commit sha. ``memo`` remembers file digests between runs.
    """
    return checkpoint_identity(model, memo=memo).id

