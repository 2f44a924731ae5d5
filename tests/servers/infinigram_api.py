"""A fake infini-gram web API (and infini-gram mini) on 127.0.0.1, for originality tests.

It is a real HTTP server (:class:`~tests.servers.base.FakeServer`: ``http.server`` in a background
thread, HTTP/1.1 keep-alive) speaking the public services' JSON: ``POST /`` with
``{"index", "query_type", "query" | "query_ids"}``.

- Token indexes (infini-gram API): ``count`` of ``query_ids`` (or of a ``query`` string when a
  tokenizer is given) over documents of token ids, answered as
  ``{"count", "approx", "latency", "token_ids", "tokens"}``; empty query: the total token count.
- Text indexes (infini-gram mini): ``count`` of the ``query`` string, raw characters,
  case-sensitive, overlapping occurrences, answered as ``{"count", "latency"}``.
- Like the real services, every validation problem (unknown index, unsupported query type, bad
  ids) is an HTTP 200 answer with an ``error`` field.

Counts never cross a document boundary, exactly as in an index.

Faults are injected with :meth:`FakeInfiniGram.inject` for the next ``times`` requests (optionally
only those whose query contains ``match``): ``slow`` (sleep ``seconds`` then answer normally: a
client with a shorter timeout gives up), ``status`` (HTTP ``status``, e.g. 429 with
``Retry-After`` or 500), ``error`` (HTTP 200 with an ``error`` field), ``drop`` (close the
connection without answering), ``garbage`` (HTTP 200 whose body is not JSON). ``fail_rate``
injects a random fault into that share of requests (seeded, reproducible).

Rate-limited mode (``rate=R``): like the public services, at most ``R`` requests a second from
a token bucket of ``burst`` tokens (default ``R``), counted as requests arrive; one beyond it is
answered 429 with ``Retry-After: 1`` and counted in :attr:`FakeInfiniGram.limited`.

Usage::

    with FakeInfiniGram(token_indexes={"v4_fake_llama": docs}) as server:
        backend = open_backend(f"infini-gram-api:v4_fake_llama?url={server.url}&tokenizer=DIR")
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from typing import Any

from tests.servers.base import FakeHandler, FakeServer, Fault

FAULT_KINDS = ("slow", "status", "error", "drop", "garbage")
OVERLOADED = "The server is temporarily overloaded, please retry"
"""The message of a ``status`` or ``error`` fault injected without one."""


def count_sublist(docs: Sequence[Sequence[int]], query: Sequence[int]) -> int:
    """Occurrences of ``query`` inside the documents (brute force, never across documents)."""
    n = len(query)
    if n == 0:
        return sum(len(d) for d in docs)
    q = list(query)
    return sum(1 for d in docs for i in range(len(d) - n + 1) if d[i] == q[0] and list(d[i : i + n]) == q)


def count_substring(docs: Sequence[str], query: str) -> int:
    """Overlapping occurrences of ``query`` inside the documents."""
    if not query:
        return sum(len(d) for d in docs)
    total = 0
    for doc in docs:
        start = doc.find(query)
        while start >= 0:
            total += 1
            start = doc.find(query, start + 1)
    return total


class _Handler(FakeHandler):
    fake: FakeInfiniGram

    def post(self, raw: bytes) -> None:
        fake = self.fake
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        fake._record(body if isinstance(body, dict) else {"raw": body})
        if not fake._admit():
            self._send(429, {"detail": "Too many requests: slow down"}, {"Retry-After": "1"})
            return
        query = body.get("query", body.get("query_ids", "")) if isinstance(body, dict) else body
        fault = fake._take_fault(json.dumps(query))
        if fake.latency:
            time.sleep(fake.latency)
        if fault is not None:
            with fake._lock:
                fake.faulted += 1
            message = OVERLOADED if fault.message is None else fault.message
            if fault.kind == "drop":
                self._drop()
                return
            if fault.kind == "status":
                self._send(fault.status, {"detail": message}, fault.headers())
                return
            if fault.kind == "error":
                self._send(200, {"error": message})
                return
            if fault.kind == "garbage":
                self._send(200, b"<html><body>502 Bad Gateway</body></html>")
                return
            time.sleep(fault.seconds)  # slow: answer late
        self._send(200, fake.answer(body))


class FakeInfiniGram(FakeServer):
    """The server; see the module docstring. Start it with ``with`` or :meth:`start`."""

    fault_kinds = FAULT_KINDS
    fault_seconds = 1.0
    handler = _Handler
    name = "fake-infinigram"
    path = "/"

    def __init__(
        self,
        *,
        token_indexes: dict[str, list[list[int]]] | None = None,
        text_indexes: dict[str, list[str]] | None = None,
        tokenizer: Any = None,
        latency: float = 0.0,
        fail_rate: float = 0.0,
        fail_kinds: Sequence[str] = ("status", "error", "drop", "garbage"),
        seed: int = 0,
        rate: float | None = None,
        burst: float | None = None,
    ) -> None:
        super().__init__()
        self.rate = rate
        self.burst = float(burst if burst is not None else max(1.0, rate or 1.0))
        self._tokens = self.burst
        self._filled = time.monotonic()
        self.limited = 0
        """How many requests were refused with 429 for coming above the rate (rate-limited mode)."""
        self.token_indexes = {k: [list(d) for d in v] for k, v in (token_indexes or {}).items()}
        self.text_indexes = dict(text_indexes or {})
        self.tokenizer = tokenizer
        self.latency = latency
        self.fail_rate = fail_rate
        self.fail_kinds = tuple(fail_kinds)
        self._rng = random.Random(seed)
        self.faulted = 0
        """How many requests got a fault instead of an answer."""

    def _admit(self) -> bool:
        """Whether a request arriving now is within the rate (always, without one)."""
        if not self.rate:
            return True
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._filled) * self.rate)
            self._filled = now
            if self._tokens >= 1:
                self._tokens -= 1
                return True
            self.limited += 1
            return False

    def clear_faults(self) -> None:
        """Remove every pending fault and stop injecting random ones."""
        with self._lock:
            self._faults.clear()
            self.fail_rate = 0.0

    def _random_fault(self) -> Fault | None:
        """With probability ``fail_rate``, a random fault from ``fail_kinds`` (seeded)."""
        if self.fail_rate and self._rng.random() < self.fail_rate:
            kind = self._rng.choice(self.fail_kinds)
            status = self._rng.choice((429, 500, 502, 503))
            return Fault(kind, status=status, retry_after="0" if status == 429 else None, seconds=0.5)
        return None

    def answer(self, body: Any) -> dict[str, Any]:
        """The JSON answer to one request body (validation errors as an ``error`` field)."""
        if not isinstance(body, dict):
            return {"error": "Request body must be a JSON object"}
        index = body.get("index")
        if body.get("query_type") != "count":
            return {"error": f"Unsupported query_type: {body.get('query_type')!r}"}
        start = time.perf_counter()
        if index in self.token_indexes:
            docs = self.token_indexes[index]
            if "query_ids" in body:
                ids = body["query_ids"]
                if not isinstance(ids, list) or not all(isinstance(t, int) and t >= 0 for t in ids):
                    return {"error": "query_ids must be a list of non-negative integers"}
            elif isinstance(body.get("query"), str) and self.tokenizer is not None:
                ids = list(self.tokenizer.encode(body["query"], add_special_tokens=False).ids)
            else:
                return {"error": "Please provide query_ids (or query with a tokenizer)"}
            count = count_sublist(docs, ids)
            tokens = [self.tokenizer.id_to_token(t) if self.tokenizer is not None else str(t) for t in ids]
            latency = (time.perf_counter() - start) * 1000
            return {"count": count, "approx": False, "latency": latency, "token_ids": ids, "tokens": tokens}
        if index in self.text_indexes:
            query = body.get("query")
            if not isinstance(query, str):
                return {"error": "query must be a string"}
            count = count_substring(self.text_indexes[index], query)
            return {"count": count, "latency": (time.perf_counter() - start) * 1000}
        return {"error": f"Invalid index: {index!r}"}
