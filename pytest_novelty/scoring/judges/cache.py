"""Judge answers kept on disk, so that an interrupted run resumes and a rerun costs nothing.

Answers live in the ``answers`` namespace of the one cache (:mod:`pytest_novelty.infra.cache`),
each written the moment it arrives (a kill loses at most the answers in flight), or in memory
without a folder. Nothing secret is stored. Keys come from :func:`judge_key`, one named field for
everything that changes an answer, so that no judge forgets one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pytest_novelty.infra.cache import Cache, Namespace
from pytest_novelty.infra.storage import key_digest

NAMESPACE = "answers"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def answer_key(*parts: object) -> str:
    """The key of one judge or concept answer: the 64-digit key digest of the parts that determine it."""
    return key_digest(list(parts), length=64)


def endpoint_identity(url: str | None) -> str:
    """Where a remote judge lives, as it enters cache keys: scheme, host (lower-cased), port (the
    scheme's default written out) and path (no trailing slash), never credentials or the query, so
    equal endpoints spelled differently share answers and different ones never do."""
    if not url:
        return ""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:
        port = None
    host = (parts.hostname or "").lower()
    return f"{scheme}://{host}:{port}{parts.path.rstrip('/')}"


def judge_key(
    *, kind: str, model: str, endpoint: str = "", rubric: str = "", sampling: Mapping[str, Any] | None = None,
    samples: int = 1, task: str = "", prompt: str, response: str, sample: int = 0,
) -> str:
    """The cache key of one judge answer: ``kind``, ``model`` (a name, or a checkpoint's path and
    identity_id), ``endpoint`` (:func:`endpoint_identity`), the rubric's version, the sampling
    settings, the answers drawn per item, then the item and the sample index."""
    return answer_key({
        "kind": kind, "model": model, "endpoint": endpoint, "rubric": rubric, "sampling": dict(sampling or {}),
        "samples": samples, "task": task, "prompt": prompt, "response": response, "sample": sample,
    })  # fmt: skip


class AnswerCache:
    """A key -> JSON-object store: a folder's ``answers`` namespace, a given :class:`Namespace`, or memory."""

    def __init__(self, directory: Path | str | Namespace | None) -> None:
        if directory is None or isinstance(directory, Namespace):
            self.store = directory
        else:
            self.store = Cache(directory).namespace(NAMESPACE, validate=lambda value: isinstance(value, dict))
        self.path = None if self.store is None else self.store.folder
        self._memory: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Return the stored value of each key that has one."""
        wanted = list(dict.fromkeys(keys))
        with self._lock:
            found = {key: self._memory[key] for key in wanted if key in self._memory}
        if self.store is not None:
            found.update(self.store.get_many(key for key in wanted if key not in found))
        return {key: json.loads(json.dumps(value)) for key, value in found.items()}

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the stored value of ``key``, or ``None``."""
        return self.get_many([key]).get(key)

    def put(self, key: str, value: dict[str, Any]) -> dict[str, Any]:
        """Store ``value`` under ``key`` at once; return the stored answer (an earlier writer's wins)."""
        stored = json.loads(json.dumps(value, ensure_ascii=False))
        if self.store is not None:
            stored = self.store.put(key, stored)
        with self._lock:
            self._memory[key] = stored
        return dict(stored)

    def __len__(self) -> int:
        if self.store is None:
            with self._lock:
                return len(self._memory)
        return sum(1 for _ in self.store.folder.glob("*/*.json"))

    def close(self) -> None:
        """Nothing to close: every answer is already on disk (kept for the judges' interface)."""

    def __repr__(self) -> str:
        return f"AnswerCache({str(self.path) if self.path else 'memory'!r})"
