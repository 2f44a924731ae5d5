"""What an originality answer depends on: the identity of an index, whatever the spelling of its path.

Cached originality answers are keyed by :func:`index_identity`, so they are reused exactly when
they were computed against the same index:

- **An index pytest-novelty built** (with ``novelty-index.json``): it is read and verified as the
  backend will read it (:func:`~.index.read_indexes`: sizes, and the SHA-256 of every file recorded
  at build, each file read once per stat through the memo the backend uses too), and identified by
  that verified content: the recorded checksums and the entries that decide how a text becomes
  units (tokenizer, its fingerprint, the token type, the ``words`` vocabulary, counts). Build
  timings, the corpus files' names and the engine version that built it do not count, so two
  builds of one corpus are one index and a rebuild from another corpus, even at the same path, is
  another. An older build without recorded checksums is identified by the SHA-256 of its files.
- **An index of another format**, read by a backend that another package registered for local
  folders or files (``NAME:DIR``): the content of every file under it
  (:func:`~pytest_novelty.infra.hashing.content_identity`), memoised by stat as checkpoints are.
- **A remote index** (``infini-gram-api:NAME``, ``infini-gram-mini:NAME``, any spec whose argument
  names nothing on this machine): the spec text, as before.

The backend's kind and the spec's ``?`` options count as well (another backend, or another option,
is another answer). The spelling of a local path does not: ``~``, relative paths, symbolic links,
``.`` and ``..``, doubled and trailing slashes all reach the same folders, and the identity is made
of what is in them.

Cost: on a warm run one ``stat`` per index file and one memo read per file (the backend's own
verification, done anyway when answers are not cached, then reads nothing); cold, each file is
hashed once (about 1.9 GB/s per core here), and that digest serves the backend's check too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pytest_novelty.infra.hashing import content_identity, hash_files, memo_at
from pytest_novelty.infra.storage import stable_hash
from pytest_novelty.scoring.originality.index import (
    CHECKSUM_MEMO,
    INFO_FILE,
    IndexInfo,
    is_index,
    read_index,
    read_indexes,
    reads_index_folders,
)

__all__ = ["DESCRIPTIVE", "index_identity", "local_targets"]

DESCRIPTIVE = frozenset({"seconds", "sources", "engine", "checksums"})
"""Entries of ``novelty-index.json`` that describe a build without changing any answer
(``checksums`` enters the identity as content, below)."""

_VERSION = "pytest-novelty index identity 1"


def local_targets(spec: str) -> list[Path] | None:
    """The local folders (or files) a spec's backend reads, each as the user spelt it with ``~``
    expanded; None for a remote index.

    A backend registered for index folders (:func:`~.index.register_local`) always reads local
    folders; another registered backend is taken to read local data when every part of its
    argument (separated by commas or ``os.pathsep``) exists here.
    """
    from pytest_novelty.scoring.originality.backend import BACKENDS

    parsed = BACKENDS.parse(spec)
    parts = [Path(p.strip()).expanduser() for p in _split(parsed.argument)]
    if reads_index_folders(parsed.backend.factory):
        return parts
    if parts and all(p.exists() for p in parts):
        return parts
    return None


def _split(target: str) -> list[str]:
    return [p for p in re.split(f"[,{re.escape(os.pathsep)}]", target) if p.strip()]


def index_identity(spec: str, *, cache_dir: Path | None = None) -> str:
    """The identity of the index a spec names (see the module docstring); a hex string.

    ``cache_dir`` is the originality cache folder the backend is opened with: its memo of verified
    files is shared, so an index is hashed once for both. A missing, foreign-to-its-backend or
    damaged index raises the same ``ConfigError`` or ``HarnessError`` opening it would.
    """
    from pytest_novelty.scoring.originality.backend import BACKENDS

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
