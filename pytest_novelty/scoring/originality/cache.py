"""A persistent cache of web-API answers, so that no n-gram is ever asked twice.

One row per answer in an SQLite database (``originality-answers.sqlite3`` in the cache folder), in
WAL mode with every answer committed as it arrives: an interrupted run keeps everything it was
told, and several processes (pytest-xdist workers) may share the file. Rows are keyed by service
(``infini-gram`` or ``infini-gram-mini``), index name and query, not by URL, so a mirror of the
same index shares the answers. Without a folder the cache lives in memory only.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

from pytest_novelty.errors import HarnessError

__all__ = ["FILENAME", "CountCache"]

FILENAME = "originality-answers.sqlite3"
_BATCH = 500


class CountCache:
    """``count`` answers of one (service, index), in memory and, with a folder, on disk."""

    def __init__(self, folder: Path | None, service: str, index: str) -> None:
        self.service = service
        self.index = index
        self.path = None if folder is None else Path(folder) / FILENAME
        self._memory: dict[str, int] = {}
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            assert self.path is not None
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute(
                    "CREATE TABLE IF NOT EXISTS counts (service TEXT NOT NULL, idx TEXT NOT NULL, "
                    "query TEXT NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (service, idx, query)) WITHOUT ROWID"
                )
            except sqlite3.Error as exc:
                raise HarnessError(f"{self.path}: cannot open the answer cache ({exc}); delete the file") from exc
            self._db = db
        return self._db

    def get_many(self, queries: Iterable[str]) -> dict[str, int]:
        """The cached answers among ``queries``."""
        wanted = list(dict.fromkeys(queries))
        with self._lock:
            found = {q: self._memory[q] for q in wanted if q in self._memory}
            missing = [q for q in wanted if q not in found]
            if self.path is None or not missing:
                return found
            db = self._connect()
            for lo in range(0, len(missing), _BATCH):
                chunk = missing[lo : lo + _BATCH]
                marks = ",".join("?" * len(chunk))
                rows = db.execute(
                    f"SELECT query, count FROM counts WHERE service = ? AND idx = ? AND query IN ({marks})",
                    (self.service, self.index, *chunk),
                ).fetchall()
                for query, count in rows:
                    found[query] = self._memory[query] = int(count)
        return found

    def put(self, query: str, count: int) -> None:
        """Record one answer (committed at once)."""
        with self._lock:
            self._memory[query] = int(count)
            if self.path is not None:
                self._connect().execute(
                    "INSERT OR REPLACE INTO counts (service, idx, query, count) VALUES (?, ?, ?, ?)",
                    (self.service, self.index, query, int(count)),
                )

    def __len__(self) -> int:
        with self._lock:
            if self.path is None:
                return len(self._memory)
            row = (
                self._connect()
                .execute("SELECT COUNT(*) FROM counts WHERE service = ? AND idx = ?", (self.service, self.index))
                .fetchone()
            )
            return int(row[0])

    def close(self) -> None:
        """Close the database (answers are already committed)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
