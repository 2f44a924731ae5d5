"""What exactly is this checkpoint? A content identity for cache keys and reports.

A local folder is identified by the BLAKE3 digest of exactly the files a model is loaded from
(:func:`loaded_files`; for an adapter, with its base's identity), so a fine-tune saved over the
folder gets a new one and an index or logs saved beside the weights change nothing
(``docs/caching.md``). The format (2) and the digest's name open the hashed text, so identities of
different formats never meet. A hub id is identified by its commit (:func:`~.hub.resolve_hub`).
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.hashing import Memo, hash_files
from pytest_novelty.infra.hub import looks_like_hub_id, resolve_hub
from pytest_novelty.infra.storage import read_json

__all__ = ["Identity", "checkpoint_identity", "loaded_files", "ships_code"]

CHECKPOINT_DIGEST = "blake3"
"""The digest of a checkpoint's files: BLAKE3 runs at about 5 GB/s per core here, SHA-256 at 1.9."""
# The files transformers, tokenizers and peft read from a checkpoint folder (top level only).
_LOADED_NAMES = frozenset({
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "added_tokens.json", "vocab.json", "vocab.txt", "merges.txt", "tokenizer.model", "spiece.model",
    "chat_template.jinja", "chat_template.json", "preprocessor_config.json", "adapter_config.json",
})  # fmt: skip
_LOADED_PATTERNS = (
    "*.safetensors", "*.safetensors.index.json", "pytorch_model*.bin", "pytorch_model*.bin.index.json",
    "adapter_model.*", "*.tiktoken", "sentencepiece*.model",
)  # fmt: skip
_TEMPLATE_FOLDER = "additional_chat_templates"  # transformers 5 reads extra chat templates from here


@dataclass(frozen=True)
class Identity:
    """What a checkpoint is: ``id`` (hex, for cache keys), ``description`` (for people), and what to
    load: ``source`` at ``revision`` (a hub commit; None for a folder). ``files`` maps each file that
    counted to its digest; ``trusted``: a hub revision read from the local cache without asking the hub.
    """

    id: str
    description: str
    source: str
    revision: str | None = None
    files: dict[str, str] = field(default_factory=dict, compare=False)
    trusted: bool = False

    @property
    def load_options(self) -> dict[str, str]:
        """Keyword arguments for ``from_pretrained`` (the pinned ``revision`` of a hub model)."""
        return {} if self.revision is None else {"revision": self.revision}


def loaded_files(folder: Path) -> list[Path]:
    """The files of ``folder`` a model is loaded from, sorted by name: config, tokenizer and chat
    template files, weight shards and their index, adapter files, and the Python files of a
    checkpoint that ships its own code (``auto_map``); not indexes, logs, optimizer state, READMEs."""
    folder = Path(folder)
    chosen = []
    for entry in folder.iterdir():
        if not entry.is_file():
            continue
        name = entry.name
        if name in _LOADED_NAMES or any(fnmatch.fnmatchcase(name, p) for p in _LOADED_PATTERNS):
            chosen.append(entry)
    templates = folder / _TEMPLATE_FOLDER
    if templates.is_dir():
        chosen.extend(p for p in templates.iterdir() if p.is_file() and p.suffix in (".jinja", ".json"))
    code = [p for p in folder.glob("*.py") if p.is_file()]
    if code and ships_code(folder):  # only a checkpoint that maps to its own code runs these
        chosen.extend(code)
    return sorted(set(chosen), key=lambda p: p.relative_to(folder).as_posix())


def ships_code(folder: Path) -> bool:
    """Whether the checkpoint's config or tokenizer config maps to its own Python code (``auto_map``)."""
    for name in ("config.json", "tokenizer_config.json"):
        data = read_json(folder / name)
        if isinstance(data, dict) and data.get("auto_map"):
            return True
    return False


def _folder_identity(
    folder: Path, *, memo: Memo | None, on_progress: Callable[[int, int], None] | None, base: str | None
) -> Identity:
    files = loaded_files(folder)
    digests = hash_files(files, memo=memo, what=folder.name, on_progress=on_progress, algorithm=CHECKPOINT_DIGEST)
    # Format 2 and the digest's name open the hashed text (see the module docstring).
    total = hashlib.sha256(f"pytest-novelty checkpoint identity 2 {CHECKPOINT_DIGEST}\0".encode())
    named = {f.relative_to(folder).as_posix(): digests[f] for f in files}
    for name, digest in sorted(named.items()):
        total.update(f"{name}\0{digest}\0".encode())
    base_model = _adapter_base(folder, base)
    if base_model is not None:
        base_id = checkpoint_identity(base_model, memo=memo, on_progress=on_progress)
        total.update(f"base\0{base_id.id}\0".encode())
    hex_id = total.hexdigest()[:24]
    return Identity(hex_id, f"{folder.name} @ {hex_id[:8]}", str(folder), None, named)


def _adapter_base(folder: Path, base: str | None) -> str | None:
    """The base model of an adapter folder: ``base`` if given, else its ``base_model_name_or_path``."""
    if not (folder / "adapter_config.json").is_file():
        return None
    if base is not None:
        return base
    data = read_json(folder / "adapter_config.json")
    name = data.get("base_model_name_or_path") if isinstance(data, dict) else None
    return str(name) if name else None


def checkpoint_identity(
    model: str | Path, *, memo: Memo | None = None, on_progress: Callable[[int, int], None] | None = None,
    base: str | None = None,
) -> Identity:
    """The identity of a checkpoint folder or hub id; ``memo`` and ``on_progress`` are
    :func:`~.hashing.hash_files`', ``base`` overrides an adapter's ``base_model_name_or_path``."""
    path = Path(model).expanduser()
    if path.is_dir():
        return _folder_identity(path.resolve(), memo=memo, on_progress=on_progress, base=base)
    text = str(model)
    if not looks_like_hub_id(text):
        raise ConfigError(
            "checkpoint folder not found; pass a Hugging Face folder (with config.json), a hub id "
            "such as org/name or org/name@revision, or 'demo'", path=text, field="--model",
        )
    hub = resolve_hub(text)
    description = f"{hub.repo} @ {hub.sha[:8]}" + (" (cached, unchecked)" if hub.trusted else "")
    if hub.offline and hub.snapshot is not None:
        # Offline: load the cached snapshot folder itself, so transformers never tries the network.
        return Identity(hub.sha, description, str(hub.snapshot), None, trusted=hub.trusted)
    return Identity(hub.sha, description, hub.repo, hub.sha)

