"""A persistent cache of web-API answers, so that no n-gram is ever asked twice.

Answers are entries of the one cache (:mod:`pytest_novelty.infra.cache`, namespace ``counts``),
written as they arrive, shared by processes, and asked again when damaged. They are keyed by service,
index name and query, not by URL, so a mirror of the same index shares them. Without a folder the
cache lives in memory only.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeGuard

from pytest_novelty.infra.cache import Cache

__all__ = ["NAMESPACE", "CountCache", "is_count"]

NAMESPACE = "counts"


def is_count(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is a count a service may answer: a whole number, not negative."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class CountCache:
    """``count`` answers of one (service, index), in memory and, with a folder, on disk."""

    def __init__(self, folder: Path | None, service: str, index: str) -> None:
        self.service = service
        self.index = index
        self.store = None if folder is None else Cache(folder).namespace(NAMESPACE, validate=is_count)
        self._memory: dict[str, int] = {}
        self._lock = threading.Lock()

    def get_many(self, queries: Iterable[str]) -> dict[str, int]:
        """The cached answers among ``queries``."""
        wanted = list(dict.fromkeys(queries))
        with self._lock:
            found = {q: self._memory[q] for q in wanted if q in self._memory}
        if self.store is not None:
            # An entry's key is (service, index, query): a mirror of the same index shares it.
            stored = self.store.get_many((self.service, self.index, q) for q in wanted if q not in found)
            found.update({query: int(count) for (_, _, query), count in stored.items()})
            with self._lock:
                self._memory.update(found)
        return found

    def put(self, query: str, count: int) -> None:
        """Record one answer (on disk at once)."""
        value = int(count)
        if self.store is not None:
            value = int(self.store.put((self.service, self.index, query), value))
        with self._lock:
            self._memory[query] = value

    def close(self) -> None:
        """Nothing to close: every answer is already on disk (kept for the backends' interface)."""
