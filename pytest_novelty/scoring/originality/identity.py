"""What an originality answer depends on: the identity of an index, whatever the spelling of its path.

Cached originality answers are keyed by :func:`index_identity`, so they are reused exactly when
computed against the same index:

- **An index pytest-novelty built**: verified as the backend reads it (:func:`~.index.read_indexes`),
  and identified by that content: the recorded checksums and the entries that decide how a text
  becomes units (tokenizer, fingerprint, token type, ``words`` vocabulary, counts), not timings,
  source names or engine version. So two builds of one corpus are one index, and a rebuild from
  another corpus at the same path is another. An older build without checksums: its files' SHA-256.
- **An index of another format** (a backend another package registered for local data): the content
  of every file under it (:func:`~pytest_novelty.infra.hashing.content_identity`).
- **A remote index** (any spec whose argument names nothing on this machine): the spec text.

The backend's kind and the spec's ``?`` options count too; the spelling of a local path (``~``,
relative, links, ``..``, slashes) does not. Warm, this costs a ``stat`` and a memo read per index
file; cold, each file is hashed once (about 1.9 GB/s per core here), which the backend's check reuses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_novelty.infra.hashing import content_identity, hash_files, memo_at
from pytest_novelty.infra.storage import stable_hash
from pytest_novelty.scoring.originality.backend import BACKENDS
from pytest_novelty.scoring.originality.index import (
    CHECKSUM_MEMO,
    INFO_FILE,
    IndexInfo,
    is_index,
    read_index,
    read_indexes,
    reads_index_folders,
    split_targets,
)

__all__ = ["DESCRIPTIVE", "index_identity", "local_targets"]

DESCRIPTIVE = frozenset({"seconds", "sources", "engine", "checksums"})
"""Entries of ``novelty-index.json`` that describe a build without changing any answer
(``checksums`` enters the identity as content, below)."""

_VERSION = "pytest-novelty index identity 1"


def local_targets(spec: str) -> list[Path] | None:
    """The local folders (or files) a spec's backend reads, as spelt with ``~`` expanded; None for a
    remote index. A backend of :func:`~.index.register_local` reads local folders; another is taken
    to when every part of its argument exists here."""
    parsed = BACKENDS.parse(spec)
    parts = [Path(p.strip()).expanduser() for p in split_targets(parsed.argument)]
    if reads_index_folders(parsed.backend.factory):
        return parts
    if parts and all(p.exists() for p in parts):
        return parts
    return None


def index_identity(spec: str, *, cache_dir: Path | None = None) -> str:
    """The identity (hex) of the index a spec names (module docstring). ``cache_dir`` is the backend's
    originality cache folder, whose memo of verified files both share. A missing, foreign or damaged
    index raises what opening it would."""
    parsed = BACKENDS.parse(spec)
    targets = local_targets(spec)
    if targets is None:
        return stable_hash(spec, [])  # remote: the spec names the index (the key cached answers already have)
    memo = None if cache_dir is None else memo_at(Path(cache_dir) / CHECKSUM_MEMO)
    if reads_index_folders(parsed.backend.factory):
        parts = [_built_identity(info, memo) for info in read_indexes(parsed.argument, cache_dir=cache_dir)]
    else:
        parts = [
            _built_identity(read_index(target, memo=memo), memo)
            if target.is_dir() and is_index(target)
            else content_identity(target, memo=memo)
            for target in targets
        ]
    return stable_hash(_VERSION, parsed.backend.name, parts, sorted(parsed.options.items()))


def _built_identity(info: IndexInfo, memo: Any) -> str:
    """A verified index folder's identity: its content and the entries that decide its units."""
    recorded = info.meta.get("checksums")
    if isinstance(recorded, dict) and recorded:  # verified by read_index against these very digests
        content = {name: entry.get("sha256") for name, entry in sorted(recorded.items()) if isinstance(entry, dict)}
    else:  # an older build: only sizes were checked, so its files are hashed (once per stat)
        files = sorted(p for p in info.path.iterdir() if p.is_file() and p.name != INFO_FILE)
        digests = hash_files(files, memo=memo, what=f"index {info.path.name}")
        content = {file.name: digests[file] for file in files}
    settings = {key: value for key, value in info.meta.items() if key not in DESCRIPTIVE}
    return stable_hash(content, settings)
