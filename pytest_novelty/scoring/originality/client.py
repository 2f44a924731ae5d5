"""A small JSON-over-POST client for the infini-gram web APIs: concurrency, retries, clear failures.

Standard library only (``http.client``), one keep-alive connection per worker thread. A request is
retried, with exponential backoff and jitter, on timeouts, dropped or refused connections, HTTP
429 (honouring ``Retry-After``), HTTP 5xx, bodies that are not JSON, and HTTP 200 answers that
carry an ``error`` field (how the infini-gram APIs report problems); at most ``max_retries`` times.
Other HTTP errors fail at once. When a request has used up its retries the whole batch stops (the
other workers give up at their next step) and :class:`~pytest_novelty.errors.HarnessError` names
the endpoint and the last problem, so a dead server fails a run quickly and clearly.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from pytest_novelty.errors import ConfigError, HarnessError

__all__ = ["JsonClient"]


class _Stopped(Exception):
    """Another request of the batch failed for good."""


class JsonClient:
    """POSTs JSON payloads to one URL and returns the decoded JSON answers."""

    def __init__(
        self,
        url: str,
        *,
        name: str,
        hint: str = "",
        concurrency: int = 8,
        max_retries: int = 5,
        timeout: float = 30.0,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"{name} URL must be http:// or https://, got {url!r}", field="url")
        if int(concurrency) < 1:
            raise ConfigError(f"concurrency must be at least 1, got {concurrency}", field="concurrency")
        if int(max_retries) < 0:
            raise ConfigError(f"max_retries must be 0 or more, got {max_retries}", field="max_retries")
        self.url = url
        self.name = name
        self.hint = hint
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.concurrency = int(concurrency)
        self.max_retries = int(max_retries)
        self.timeout = float(timeout)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.requests = 0
        """HTTP requests sent (every attempt counts)."""
        self.retries = 0
        self._local = threading.local()
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    # -- one request -------------------------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=self.timeout)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _send(self, body: bytes) -> tuple[int, str | None, bytes]:
        conn = self._connection()
        with self._lock:
            self.requests += 1
        conn.request("POST", self._path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        if response.getheader("Connection", "").lower() == "close":
            self._drop_connection()
        return response.status, response.getheader("Retry-After"), data

    def post(self, payload: dict[str, Any], stop: threading.Event | None = None) -> dict[str, Any]:
        """POST ``payload`` with retries; the decoded answer, or :class:`HarnessError`."""
        stop = stop or threading.Event()
        body = json.dumps(payload).encode("utf-8")
        problem = "no attempt made"
        for attempt in range(self.max_retries + 1):
            if stop.is_set():
                raise _Stopped
            wait: float | None = None
            try:
                status, retry_after, data = self._send(body)
            except (OSError, http.client.HTTPException) as exc:
                self._drop_connection()
                problem = f"{type(exc).__name__}: {exc}".rstrip(": ")
            else:
                if status == 200:
                    try:
                        answer = json.loads(data)
                    except ValueError:
                        problem = f"the answer is not JSON: {data[:120]!r}"
                    else:
                        if isinstance(answer, dict) and "error" not in answer:
                            return answer
                        error = answer.get("error") if isinstance(answer, dict) else answer
                        problem = f"the answer reports an error: {error}"
                elif status == 429 or status >= 500:
                    problem = f"HTTP {status}"
                    wait = _seconds(retry_after)
                else:
                    raise HarnessError(
                        f"{self.name} at {self.url} refused a query with HTTP {status}: "
                        f"{data[:300].decode('utf-8', 'replace')}"
                    )
            if attempt == self.max_retries:
                break
            with self._lock:
                self.retries += 1
            delay = min(self.max_backoff, self.backoff * 2**attempt) * random.uniform(0.5, 1.0)
            if wait is not None:
                delay = min(max(delay, wait), self.max_backoff)
            if stop.wait(delay):
                raise _Stopped
        raise HarnessError(
            f"{self.name} at {self.url} gave no usable answer after {self.max_retries + 1} attempts "
            f"(last: {problem}); {self.hint}answers received so far are cached"
        )

    # -- a batch -----------------------------------------------------------------------------

    def post_all(
        self,
        payloads: Sequence[dict[str, Any]],
        on_answer: Callable[[int, dict[str, Any]], None],
        on_progress: Callable[[], None] | None = None,
    ) -> None:
        """POST every payload, ``concurrency`` at a time; ``on_answer(i, answer)`` as each arrives.

        The first request that fails for good stops the batch and its error is raised.
        """
        stop = threading.Event()

        def one(i: int) -> None:
            try:
                answer = self.post(payloads[i], stop)
            except _Stopped:
                raise
            except BaseException:
                stop.set()
                raise
            on_answer(i, answer)
            if on_progress is not None:
                on_progress()

        failure: BaseException | None = None
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="infini-gram-api") as pool:
            futures = [pool.submit(one, i) for i in range(len(payloads))]
            try:
                for future in futures:
                    try:
                        future.result()
                    except _Stopped:
                        continue
                    except Exception as exc:
                        failure = failure or exc
                        stop.set()
            except BaseException:
                stop.set()  # interrupted: let the workers give up at their next step
                raise
        if failure is not None:
            raise failure

    def close(self) -> None:
        """Close every connection."""
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()


def _seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
