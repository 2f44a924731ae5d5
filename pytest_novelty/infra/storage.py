"""Small, dependency-free helpers for files that must never be half-written.

Every cache entry and report is written to a temporary file in the same folder and moved into
place with ``os.replace``, which is atomic on POSIX and Windows: a run killed at any moment
leaves either the old file or the new one, never a torn one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO


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


def stable_hash(*parts: Any) -> str:
    """A short SHA-256 of JSON-serialisable parts, for cache keys."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


def default_cache_dir() -> Path:
    """``$PYTEST_NOVELTY_CACHE``, else ``$XDG_CACHE_HOME/pytest-novelty``, else ``~/.cache/pytest-novelty``."""
    if os.environ.get("PYTEST_NOVELTY_CACHE"):
        return Path(os.environ["PYTEST_NOVELTY_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-novelty"
