"""One cache for everything a run can reuse: generations, originality answers, judge answers, memos.

``Cache(root).namespace("generations")`` is a :class:`Namespace`, a key -> JSON value store in
``root/generations``, one small JSON file per entry named by a hash of its key (canonical JSON
for a key that is not a string)::

    {"format": 1, "version": 1, "key": "...", "sha256": "<of the value>", "value": ...}

- **Nothing damaged is trusted.** An entry that does not parse, has another layout, format or
  version, names another key, fails its checksum or its namespace's ``validate`` is a miss (never
  an error), counted once in :func:`repaired` for the run's summary line.
- **Writes never tear.** An entry is written to a temporary file, then linked into place. A
  refused write is one :class:`~pytest_novelty.infra.errors.HarnessError` line naming the folder.
  No fsync unless ``durable=True``: it costs about 6 ms against 0.25 ms for the write, and the
  checksum already catches an entry that a crash left short.
- **First writer wins.** ``os.link`` fails on an existing name, so concurrent writers of one key
  all end up with the stored answer; only a damaged entry is replaced.
- **Clearing is safe while others run.** A clear renames a folder aside, then deletes it; clears
  take turns (``.clear.lock``) so each counts the bytes it removed itself, and the next one removes
  the ``.trash-*`` folder an interrupted one left.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

from pytest_novelty.infra.storage import canonical, file_lock, folder_error, key_digest, write_temp

__all__ = ["FORMAT", "Cache", "Namespace", "as_namespace", "entry_digest", "link_new", "repaired", "sound_entry"]

FORMAT = 1
"""The layout of an entry file; bump it when the envelope changes."""
_FIELDS = frozenset({"format", "version", "key", "sha256", "value"})
_TRASH = ".trash-"
_CLEAR_LOCK = ".clear.lock"
"""Held by one clear while it renames, measures and deletes; runs that read and write entries never take it."""
_ATTEMPTS = 3  # a write that meets a concurrent clear (its folder renamed away) is retried


class _Tally:
    """Damaged entries dropped in this process: one tally, since every layer opens its own
    ``Cache`` and the run reports one total."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: set[tuple[str, int]] = set()
        self.count = 0

    def add(self, path: Path, raw: bytes = b"") -> None:
        """Count one damaged entry, once however often this process reads it."""
        with self._lock:
            seen = (str(path), hash(raw))
            if seen not in self._seen:
                self._seen.add(seen)
                self.count += 1


_REPAIRED = _Tally()


def repaired() -> int:
    """How many damaged cache entries this process has dropped (and its callers recomputed)."""
    return _REPAIRED.count


def _key_text(key: Any) -> str:
    return key if isinstance(key, str) else canonical(key)


def entry_digest(key: Any) -> str:
    """The name an entry of ``key`` is stored under (in the folder of its first two digits)."""
    return key_digest(key, length=40)


def _envelope(raw: bytes) -> dict[str, Any] | None:
    """The entry in ``raw`` when its envelope is whole and its value hashes to its checksum, any version."""
    try:
        entry = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(entry, dict) or set(entry) != _FIELDS or entry["format"] != FORMAT:
        return None
    if not isinstance(entry["key"], str) or entry["value"] is None:
        return None
    if entry["sha256"] != hashlib.sha256(canonical(entry["value"]).encode()).hexdigest():
        return None
    return entry


def sound_entry(raw: bytes, digest: str) -> dict[str, Any] | None:
    """The entry in ``raw`` when it is whole and belongs under the name ``digest``, whatever its
    namespace and version: what a merge of caches trusts (:mod:`pytest_novelty.infra.cache_merge`)."""
    entry = _envelope(raw)
    return entry if entry is not None and entry_digest(entry["key"]) == digest else None


@dataclass(eq=False, repr=False)
class Namespace:
    """One kind of entry (``root/name``), opened by :meth:`Cache.namespace`; thread- and process-safe."""

    folder: Path
    _: KW_ONLY
    version: int = 1
    """The values' schema version: bump it when their layout changes, and older entries are dropped."""
    validate: Callable[[Any], bool] | None = None
    """Checks a value's own layout on read; a value it rejects (or trips over) is a damaged entry."""
    durable: bool = False
    """Fsync every entry before it is linked into place."""

    def __post_init__(self) -> None:
        self.folder = Path(self.folder)

    @property
    def name(self) -> str:
        return self.folder.name

    def __repr__(self) -> str:
        return f"Namespace({str(self.folder)!r}, version={self.version})"

    def path(self, key: Any) -> Path:
        """Where the entry of ``key`` lives (the file may not exist)."""
        digest = entry_digest(key)
        return self.folder / digest[:2] / f"{digest}.json"

    def get(self, key: Any) -> Any | None:
        """The stored value of ``key``, or None when there is none or it is damaged (then counted)."""
        path = self.path(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError:
            _REPAIRED.add(path)  # unreadable (a folder in its place, no permission): recompute
            return None
        found, value = self._decode(raw, _key_text(key))
        if not found:
            _REPAIRED.add(path, raw)
            return None
        return value

    def get_many(self, keys: Iterable[Any]) -> dict[Any, Any]:
        """The stored value of each key that has a valid entry."""
        return {key: value for key in keys if (value := self.get(key)) is not None}

    def _decode(self, raw: bytes, key: str) -> tuple[bool, Any]:
        """(True, value) for a sound entry of ``key``, (False, None) for anything else."""
        entry = _envelope(raw)
        if entry is None or entry["version"] != self.version or entry["key"] != key:
            return False, None
        value = entry["value"]
        if self.validate is not None and not _safe(self.validate, value):
            return False, None
        return True, value

    def put(self, key: Any, value: Any) -> Any:
        """Store ``value`` (JSON, not None) under ``key`` unless a valid entry is there; return what a
        later :meth:`get` gives: the other writer's entry, or ``value`` as JSON reads it back."""
        if value is None:
            raise ValueError("None cannot be cached (get() answers None for a miss)")
        text = _key_text(key)
        body = canonical(value)
        stored = json.loads(body)
        entry = {
            "format": FORMAT,
            "version": self.version,
            "key": text,
            "sha256": hashlib.sha256(body.encode()).hexdigest(),
            "value": stored,
        }
        data = (json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
        path = self.path(key)
        for _ in range(_ATTEMPTS):
            try:
                return self._put_once(path, text, data, stored)
            except FileNotFoundError:
                continue  # a clear renamed the folder away while we wrote: write again
            except OSError as exc:  # a full disk, a read-only one: one line naming the cache, not a traceback
                raise folder_error(self.folder.parent, "cache folder", exc) from None
        # Clears keep coming: as if each had come just after our write, the entry is gone.
        return stored

    def _put_once(self, path: Path, key: str, data: bytes, stored: Any) -> Any:
        tmp = write_temp(path, data, sync=self.durable)
        try:
            if link_new(tmp, path):
                return stored
            try:
                found, existing = self._decode(path.read_bytes(), key)
            except FileNotFoundError:
                found, existing = False, None  # cleared meanwhile: ours goes in
            if found:
                return existing
            os.replace(tmp, path)  # the entry there was damaged: ours replaces it
            try:
                found, existing = self._decode(path.read_bytes(), key)
            except OSError:
                found = False
            return existing if found else stored
        finally:
            Path(tmp).unlink(missing_ok=True)

    def clear(self) -> None:
        """Remove every entry: rename the folder aside, then delete it (see the module doc)."""
        if self.folder.parent.is_dir():
            with file_lock(self.folder.parent / _CLEAR_LOCK):
                _discard(self.folder)


class Cache:
    """The cache folder; :meth:`namespace` opens one kind of entry in it."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"Cache({str(self.root)!r})"

    def namespace(
        self, name: str, *, version: int = 1, validate: Callable[[Any], bool] | None = None, durable: bool = False
    ) -> Namespace:
        """The entries of one kind, in ``root/name``; the settings are :class:`Namespace`'s."""
        if not name or name.startswith(".") or "/" in name or os.sep in name:
            raise ValueError(f"bad namespace name {name!r}")
        return Namespace(self.root / name, version=version, validate=validate, durable=durable)

    def clear(self, *, keep: Callable[[str], bool] = lambda name: False) -> int:
        """Remove every top-level entry of the cache except those ``keep`` names; bytes removed."""
        if not self.root.is_dir():
            return 0
        removed = 0
        with file_lock(self.root / _CLEAR_LOCK):
            for name in [p.name for p in self.root.iterdir()]:
                if name.startswith(_TRASH):  # left by an interrupted clear (clears take turns)
                    removed += _size(self.root / name)
                    shutil.rmtree(self.root / name, ignore_errors=True)
                elif name != _CLEAR_LOCK and not keep(name):
                    removed += _discard(self.root / name)
        return removed


def link_new(tmp: str, path: Path) -> bool:
    """Put the written file ``tmp`` at ``path`` unless an entry is there already (first writer wins):
    a hard link, which fails on an existing name; without hard links on the file system, a replace
    after a check (a small race window). Whether it was put there."""
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError:  # no hard links here
        if path.exists():
            return False
        os.replace(tmp, path)
        return True


def _discard(path: Path) -> int:
    """Rename ``path`` aside and delete it; bytes removed (0 when someone else was first)."""
    aside = path.parent / f"{_TRASH}{path.name}-{uuid.uuid4().hex[:12]}"
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return 0
    size = _size(aside)
    if aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        aside.unlink(missing_ok=True)
    return size


def _size(path: Path) -> int:
    """Bytes under ``path``; files that vanish meanwhile count as 0."""
    total = 0
    try:
        if not path.is_dir() or path.is_symlink():
            return path.lstat().st_size
        for base, _, files in os.walk(path):
            for file in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(base, file)).st_size
    except OSError:
        pass
    return total


def _safe(check: Callable[[Any], bool], value: Any) -> bool:
    try:
        return bool(check(value))
    except Exception:  # a validator that trips over a strange value has found a bad entry
        return False


def as_namespace(place: Namespace | Path | str | None, name: str | None = None, **options: Any) -> Namespace | None:
    """A namespace as is, or a folder: ``Cache(folder).namespace(name)``, or without ``name`` the
    folder itself as a namespace."""
    if place is None or isinstance(place, Namespace):
        return place
    folder = Path(place)
    if name is None:
        return Cache(folder.parent).namespace(folder.name, **options)
    return Cache(folder).namespace(name, **options)


def cache_usage(cache_dir: Path) -> dict[str, int]:
    """Bytes used by each top-level entry of the cache folder (files removed meanwhile count 0)."""
    try:
        entries = list(cache_dir.iterdir())
    except OSError:
        return {}
    return {entry.name: _size(entry) for entry in entries if entry.name != _CLEAR_LOCK}


def is_demo(name: str) -> bool:
    """Whether a top-level cache entry belongs to the built demo (kept by a plain clear)."""
    return name.startswith((".demo-", "demo-"))


def clear_cache(cache_dir: Path, *, keep_demo: bool = True) -> int:
    """Remove cached generations, scores and judge answers (the built demo stays unless asked); bytes removed."""
    return Cache(cache_dir).clear(keep=is_demo if keep_demo else lambda name: False)
