"""Small, dependency-free helpers for files that must never be half-written, and for folders that
cannot be written at all.

Every cache entry and report is written to a temporary file in the same folder and moved into
place with ``os.replace``, which is atomic on POSIX and Windows: a run killed at any moment
leaves either the old file or the new one, never a torn one.

A folder that cannot be written (a read-only file system, a full disk, no permission) is found
before any model loads (:func:`check_writable`), and a write that fails later is one line naming
the folder and the cause (:func:`folder_error`), never a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from pytest_novelty.infra.errors import ConfigError, HarnessError, NoveltyError


def write_temp(path: Path, data: bytes | Callable[[BinaryIO], Any], *, sync: bool = True) -> str:
    """Write ``data`` (bytes, or a function that writes to the file) to a new temporary file
    beside ``path``, flushed and (with ``sync``) fsync'd; return its name. The caller moves it
    into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            if isinstance(data, bytes):
                fh.write(data)
            else:
                data(fh)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def atomic_write(path: Path, write: Callable[[BinaryIO], Any]) -> None:
    """Call ``write`` on a temporary file beside ``path``, then move it into place atomically."""
    tmp = write_temp(path, write)
    try:
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` of the file ``path`` (made, with its folder, if missing): runs in
    other processes that ask for the same lock wait. Without ``fcntl`` (Windows) nothing waits."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, creating parent folders."""
    atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))


def atomic_write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON atomically."""
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def read_json(path: Path) -> Any | None:
    """The JSON in ``path``, or None when it is missing or unreadable (a cache miss)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def json_float(value: Any) -> float | None:
    """A number as stored JSON holds it: rounded to 6 decimals; None for None, NaN and infinities
    (JSON has no NaN; a missing value reads as missing)."""
    if value is None:
        return None
    number = float(value)
    return round(number, 6) if math.isfinite(number) else None


def canonical(value: Any) -> str:
    """The canonical JSON text of ``value``: sorted keys, no spaces, non-ASCII as it is. What a cache
    entry's checksum covers, and the text :func:`key_digest` hashes."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def key_digest(key: Any, *, length: int = 24) -> str:
    """The one hash of keys: the first ``length`` hex digits of the SHA-256 of ``key``'s text (a
    string is its own text; anything else its :func:`canonical` JSON).

    Every key of the package goes through it, in one of three lengths kept from the caches already
    written (so their entries stay valid): 24 digits for the answers' keys (:func:`stable_hash`),
    64 for judge and concept answers (:func:`~pytest_novelty.scoring.judges.cache.judge_key`), 40
    for the name a cache entry is stored under (:func:`~pytest_novelty.infra.cache.entry_digest`).
    """
    text = key if isinstance(key, str) else canonical(key)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def stable_hash(*parts: Any) -> str:
    """The key of JSON-serialisable ``parts`` (24 hex digits, :func:`key_digest`): generations, row
    seeds, originality answers, identities.

    The parts are written as JSON the way the first caches wrote them (", " and ": " between items,
    a value JSON cannot hold by its ``str``), not in the compact :func:`canonical` form: that text
    fixes every cached answer's key and every row's seed, so it stays.
    """
    return key_digest(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str))


def default_cache_dir() -> Path:
    """``$PYTEST_NOVELTY_CACHE``, else ``$XDG_CACHE_HOME/pytest-novelty``, else ``~/.cache/pytest-novelty``."""
    if os.environ.get("PYTEST_NOVELTY_CACHE"):
        return Path(os.environ["PYTEST_NOVELTY_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-novelty"


def cache_folder(given: str | Path | None) -> Path:
    """The cache folder a user gave (``~`` expanded, made absolute), else :func:`default_cache_dir`."""
    return Path(given).expanduser().resolve() if given else default_cache_dir()


_CAUSES = {
    errno.EROFS: "a read-only file system",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is used up",
    errno.EACCES: "no permission to write there",
    errno.EPERM: "no permission to write there",
    errno.ENOTDIR: "a file is in the way of the folder",
    errno.EEXIST: "a file is in the way of the folder",
}
_NEVER = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EEXIST})
"""Causes that stay until the user changes something (against a full disk, which frees up)."""
_PROBE_BYTES = 4096  # one page: a full disk refuses it, a read-only one refuses even the file


def write_cause(exc: OSError, folder: Path | str | None = None) -> str:
    """What stopped a write, in a few words, and where when that is outside ``folder`` (a parent
    that could not be created: ``a read-only file system at /home/me/.cache``)."""
    words = _CAUSES.get(exc.errno or 0) or (exc.strerror or type(exc).__name__).lower()
    where = str(exc.filename or "")
    inside = folder is not None and where and Path(where).is_relative_to(Path(folder))
    return words + (f" at {where}" if where and not inside else "")


def folder_error(
    folder: Path | str, what: str, exc: OSError, *, named_by: str | None = None, elsewhere: str = ""
) -> NoveltyError:
    """One line for a folder that cannot be written: bad input (:class:`ConfigError`, exit 4) when the
    user named the folder (``named_by``: the option, ini key or variable) and the cause stays until
    they change something (read-only, no permission, a file in the way); a harness error (exit 8)
    otherwise: a full disk, or a default folder of the environment. ``elsewhere`` says how to give
    another folder (``pass --novelty-cache DIR``)."""
    cause = write_cause(exc, folder)
    if named_by and never_writable(exc):
        return ConfigError(f"the {what} cannot be written: {cause}; give a writable folder", path=folder,
                           field=named_by)
    other = elsewhere or "give another folder"
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    fix = f"free some space, or {other}" if full else f"make it writable, or {other}"
    named = f"{named_by}: " if named_by else ""
    return HarnessError(f"{folder}: {named}the {what} cannot be written: {cause}; {fix}")


def probe_write(folder: Path | str) -> None:
    """Create ``folder`` when missing and write (fsync'd) and remove one small file in it: the
    ``OSError`` of a read-only, full or forbidden folder, found before anything is spent on it."""
    os.unlink(write_temp(Path(folder) / ".novelty-write-check", b"\0" * _PROBE_BYTES))


def never_writable(exc: OSError) -> bool:
    """Whether the cause of ``exc`` stays until the user changes something (read-only, no
    permission, a file in the way), unlike a full disk, which frees up."""
    return exc.errno in _NEVER


def check_writable(folder: Path | str, what: str, *, named_by: str | None = None, elsewhere: str = "") -> None:
    """:func:`probe_write` of ``folder``, its failure raised as :func:`folder_error`'s one line.
    ``what`` names the folder's role (``cache folder``)."""
    try:
        probe_write(folder)
    except OSError as exc:
        raise folder_error(folder, what, exc, named_by=named_by, elsewhere=elsewhere) from None
