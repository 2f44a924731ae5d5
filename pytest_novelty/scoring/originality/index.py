"""An index folder built by :func:`~.build.build_index`: what it holds, and checking it before use.

A folder holds the infini-gram files (``tokenized.S``, ``table.S``, ``offset.S`` per shard ``S``)
and ``novelty-index.json``: the tokenizer (in ``words`` mode the vocabulary), the token dtype, counts,
a checksum of the documents and their sources, and the size and SHA-256 of every file, verified when
the index is opened (:func:`read_index`). It is not called ``metadata.json``: the engine recognises
files by substring of the full path and would read it as document metadata, then crash. For the
same reason a folder whose path holds one of :data:`TRAP_WORDS` (``/home/me/stable/...``) reaches
the engine and the indexer through a neutrally named symbolic link (:func:`engine_path`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.infra.hashing import Memo, hash_files, memo_at
from pytest_novelty.infra.progress import notice
from pytest_novelty.scoring.originality.backend import BACKENDS
from pytest_novelty.scoring.originality.tokenization import Tokenizer, WordCodec, WordsTokenizer, load_hf_tokenizer

B = TypeVar("B")
T = TypeVar("T")

__all__ = [
    "BUILD_HINT", "CHECKSUM_MEMO", "FORMAT", "INFO_FILE", "TRAP_WORDS", "IndexInfo", "engine_path", "is_index",
    "pointer_bytes", "read_index", "reads_index_folders",
]

INFO_FILE = "novelty-index.json"
FORMAT = 1
TRAP_WORDS = ("tokenized", "table", "offset", "metadata", "metaoff", "unigram")
BUILD_HINT = "pytest-novelty index build CORPUS... --out DIR"
CHECKSUM_MEMO = "index-checksums"
"""The memo of verified index files, inside the originality cache folder a backend is opened with."""
_FOLDER_READERS: set[Callable[..., Any]] = set()
"""The factories :func:`register_local` registered: their argument is index folders."""


def reads_index_folders(factory: Callable[..., Any]) -> bool:
    """Whether the registered ``factory`` opens index folders (:func:`register_local`): its spec's
    identity is then those folders' verified content (see :mod:`.identity`)."""
    return factory in _FOLDER_READERS


def engine_path(path: Path) -> Path:
    """A path to ``path`` that the engine and indexer read correctly: itself, or for a path holding
    one of :data:`TRAP_WORDS` a link in the temporary folder named after a hash of the real path
    (created atomically, shared by every process that opens the folder)."""
    real = Path(path).expanduser().resolve()
    if not _traps(str(real)):
        return real
    digest = hashlib.sha256(str(real).encode()).hexdigest()[:20]
    alias = Path(tempfile.gettempdir()).resolve() / f"pytest-novelty-index-{digest}"
    if _traps(str(alias)):
        raise ConfigError(
            f"the index path contains {_traps(str(real))[0]!r}, which the infini-gram engine misreads, and so "
            f"does the temporary folder; move the index to a path without any of: {', '.join(TRAP_WORDS)}",
            path=path,
        )
    if not (alias.is_symlink() and os.readlink(alias) == str(real)):
        staging = alias.with_name(f"{alias.name}.{os.getpid()}")
        staging.unlink(missing_ok=True)
        staging.symlink_to(real, target_is_directory=True)
        os.replace(staging, alias)
    return alias


def _traps(text: str) -> list[str]:
    return [w for w in TRAP_WORDS if w in text]


def is_index(path: Path) -> bool:
    """Whether ``path`` holds an index built by :func:`build_index`."""
    return (Path(path) / INFO_FILE).is_file()


class _Recorded(Generic[T]):
    """An entry of ``novelty-index.json`` read as an attribute of :class:`IndexInfo`: ``meta[key]``
    through ``convert``, each time it is asked for (an entry no reader asks for is never needed)."""

    def __init__(self, key: str, convert: Callable[[Any], T]) -> None:
        self.key = key
        self.convert = convert

    def __get__(self, info: IndexInfo, owner: type | None = None) -> T:
        return self.convert(info.meta[self.key])


@dataclass(frozen=True)
class IndexInfo:
    """An index folder and its ``novelty-index.json``, with the entries the readers use."""

    path: Path
    meta: dict[str, Any]

    tokenizer_spec = _Recorded("tokenizer", str)
    """``words``, or the spec of the tokenizer the index was built with."""
    fingerprint = _Recorded("tokenizer_fingerprint", str)
    dtype = _Recorded("dtype", str)
    """The token type of the token files, ``u16`` or ``u32``."""
    shards = _Recorded("shard_bytes", len)

    @property
    def token_width(self) -> int:
        return 2 if self.dtype == "u16" else 4

    def token_file(self, shard: int) -> Path:
        return self.path / f"tokenized.{shard}"

    def load_tokenizer(self) -> Tokenizer:
        """The tokenizer the index was built with (``words`` vocabulary or the saved tokenizer.json)."""
        if self.tokenizer_spec == "words":
            words = self.meta["words"]
            return WordsTokenizer(words["vocab"], WordCodec.for_vocab(len(words["vocab"]), words["single"]))
        saved = self.path / "tokenizer.json"
        if not saved.is_file():
            raise HarnessError(f"{self.path}: tokenizer.json is missing; rebuild the index ({BUILD_HINT})")
        tokenizer = load_hf_tokenizer(str(saved))
        tokenizer.spec = self.tokenizer_spec
        return tokenizer


def pointer_bytes(ds_size: int) -> int:
    """Bytes per suffix-array pointer, as the indexer computes it."""
    return max(1, math.ceil(math.log2(max(ds_size, 2)) / 8))


def read_index(path: Path, *, memo: Memo | None = None) -> IndexInfo:
    """Read and check an index folder (sizes, and every file's SHA-256 once per stat through ``memo``);
    a missing, foreign or damaged index is a clear error, one without checksums used after a line."""
    path = Path(path).expanduser()
    if not path.is_dir():
        raise ConfigError(f"no index folder here; build one with `{BUILD_HINT}`", path=path)
    info_file = path / INFO_FILE
    if not info_file.is_file():
        if (path / "table.0").exists():
            raise ConfigError(
                f"an infini-gram index without {INFO_FILE} (not built by pytest-novelty, so its tokenizer is "
                f"unknown); rebuild it with `{BUILD_HINT}`",
                path=path,
            )
        raise ConfigError(f"not an index folder (no {INFO_FILE}); build one with `{BUILD_HINT}`", path=path)
    try:
        meta = json.loads(info_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{info_file}: unreadable ({exc}); rebuild the index with `{BUILD_HINT}`") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ConfigError(f"index format {meta.get('format') if isinstance(meta, dict) else '?'} is not {FORMAT}; "
                          f"rebuild it with `{BUILD_HINT}`", path=path)
    info = IndexInfo(path.resolve(), meta)
    for shard, expected in enumerate(meta["shard_bytes"]):
        for name in (f"tokenized.{shard}", f"table.{shard}", f"offset.{shard}"):
            if not (path / name).is_file():
                raise HarnessError(f"{path / name} is missing; rebuild the index with `{BUILD_HINT}`")
        size = (path / f"tokenized.{shard}").stat().st_size
        table = (path / f"table.{shard}").stat().st_size
        if size != expected or table != size // info.token_width * pointer_bytes(size):
            raise HarnessError(
                f"{path}: shard {shard} is damaged (token file {size} bytes, expected {expected}; "
                f"suffix array {table} bytes); rebuild the index with `{BUILD_HINT}`"
            )
    _verify_checksums(info, memo)
    return info


_NOTED: set[str] = set()
"""The indexes this process has said it cannot verify byte for byte."""


def _verify_checksums(info: IndexInfo, memo: Memo | None) -> None:
    """Compare every file with the size and SHA-256 recorded at build; a difference is a HarnessError."""
    recorded = info.meta.get("checksums")
    if not isinstance(recorded, dict) or not recorded:
        if str(info.path) in _NOTED:
            return  # said once per process: the preflight and the run open the same index
        _NOTED.add(str(info.path))
        notice(
            f"[novelty] note: {info.path} records no checksums (built by an older version); only its sizes "
            f"are checked; rebuild it to have every byte verified"
        )
        return
    files: list[Path] = []
    for name, entry in sorted(recorded.items()):
        file = info.path / name
        if not file.is_file():
            raise HarnessError(f"{file} is missing; the index is damaged: rebuild it with `{BUILD_HINT}`")
        size = file.stat().st_size
        if not isinstance(entry, dict) or size != entry.get("bytes"):
            raise HarnessError(
                f"{file} is damaged ({size} bytes, {entry.get('bytes') if isinstance(entry, dict) else '?'} "
                f"recorded at build); rebuild the index with `{BUILD_HINT}`"
            )
        files.append(file)
    digests = hash_files(files, memo=memo, what=f"index {info.path.name}")
    for file in files:
        if digests[file] != recorded[file.name].get("sha256"):
            raise HarnessError(
                f"{file} is damaged: its content differs from the SHA-256 recorded at build (same size); "
                f"rebuild the index with `{BUILD_HINT}`"
            )


def read_indexes(target: str, *, cache_dir: Path | None = None) -> list[IndexInfo]:
    """The index folders of a spec argument (:func:`split_targets`), each read and checked;
    ``cache_dir`` remembers which files were verified."""
    parts = split_targets(target)
    if not parts:
        raise ConfigError("needs an index folder, as in infini-gram:DIR", field="originality")
    memo = None if cache_dir is None else memo_at(Path(cache_dir) / CHECKSUM_MEMO)
    return [read_index(Path(part.strip()).expanduser(), memo=memo) for part in parts]


def split_targets(target: str) -> list[str]:
    """The parts of a spec argument: shards of one corpus, separated by commas or ``os.pathsep``."""
    return [p for p in re.split(f"[,{re.escape(os.pathsep)}]", target) if p.strip()]


def register_local(name: str, *, options: dict[str, type | None], summary: str) -> Callable[[type[B]], type[B]]:
    """Register a backend class that reads local index folders as ``NAME:DIR[,DIR...]``.

    The class is built as ``cls(infos, spec=..., **options)`` from the folders :func:`read_indexes`
    reads and checks (``cache_dir`` remembers the verified files)."""
    def decorate(cls: type[B]) -> type[B]:
        build: Callable[..., B] = cls

        def open_local(target: str, *, cache_dir: Path | None = None, **given: Any) -> B:
            return build(read_indexes(target, cache_dir=cache_dir), spec=f"{name}:{target}", **given)

        open_local.__module__ = cls.__module__
        open_local.__qualname__ = f"{cls.__qualname__}.open"
        open_local.__doc__ = f"``{name}:DIR``: {summary}."
        _FOLDER_READERS.add(open_local)  # its identity is its folders' (see .identity)
        BACKENDS.register(name, argument="DIR", needs="an index folder", options=options, summary=summary)(open_local)
        return cls

    return decorate
