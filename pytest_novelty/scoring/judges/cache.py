"""An on-disk store of judge answers, so that an interrupted run resumes and a rerun costs nothing.

Each answer is one row of an SQLite database (``judge-answers.sqlite3`` in the cache folder) in
write-ahead-log mode, committed as soon as it arrives: a crash or Ctrl-C loses at most the answers
in flight, and several processes (pytest-xdist workers) can share one folder. Keys are SHA-256
hashes of the parts that determine an answer (see :func:`answer_key`); values are small JSON
objects. Nothing secret is stored: no API key, no request headers.

Without a folder the cache lives in memory for the life of the judge.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FILENAME = "judge-answers.sqlite3"


def answer_key(*parts: object) -> str:
    """Hash the parts that determine one answer (judge, rubric version, prompt, response, sample)."""
    blob = json.dumps(parts, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class AnswerCache:
    """A key -> JSON-object store, on disk when ``directory`` is given, in memory otherwise."""

    def __init__(self, directory: Path | str | None) -> None:
        self.path = None if directory is None else Path(directory) / FILENAME
        self._memory: dict[str, str] = {}
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self._db = db
        return self._db

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Return the stored value of each key that has one."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, str] = {}
        with self._lock:
            if self.path is None:
                found = {key: self._memory[key] for key in wanted if key in self._memory}
            else:
                db = self._connect()
                for start in range(0, len(wanted), 500):
                    chunk = wanted[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    rows = db.execute(f"SELECT key, value FROM answers WHERE key IN ({marks})", chunk)
                    found.update(rows.fetchall())
        return {key: json.loads(value) for key, value in found.items()}

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the stored value of ``key``, or ``None``."""
        return self.get_many([key]).get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` under ``key`` and commit at once (a single atomic transaction)."""
        blob = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            if self.path is None:
                self._memory[key] = blob
            else:
                self._connect().execute("INSERT OR REPLACE INTO answers VALUES (?, ?)", (key, blob))

    def __len__(self) -> int:
        with self._lock:
            if self.path is None:
                return len(self._memory)
            return int(self._connect().execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        """Close the database connection (it reopens on next use)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __repr__(self) -> str:
        return f"AnswerCache({str(self.path) if self.path else 'memory'!r})"
