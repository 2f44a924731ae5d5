"""A small JSON-over-POST client for the infini-gram web APIs: concurrency, retries, clear failures.

Standard library only (``http.client``), one keep-alive connection per worker thread. A request is
retried on timeouts, dropped or refused connections, the statuses
:func:`pytest_novelty.http.is_retryable` names (429 and 5xx among them), bodies that are not JSON,
and HTTP 200 answers that carry an ``error`` field (how the infini-gram APIs report problems): at
most ``max_retries`` times and ``max_retry_time`` seconds, waiting as the shared
:class:`pytest_novelty.http.RetryPolicy` says (``Retry-After`` honoured, else exponential backoff
with jitter). Other HTTP errors fail at once; what a server says is redacted before it is shown.
When a request has used up its retries the whole batch stops (the other workers give up at their
next step) and :class:`~pytest_novelty.errors.HarnessError` names the endpoint and the last
problem, so a dead server fails a run quickly and clearly.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from pytest_novelty.errors import ConfigError, HarnessError
from pytest_novelty.http import RetryPolicy, is_retryable, retry_after, scrub

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
        max_retry_time: float = 120.0,
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
        self.timeout = float(timeout)
        self.retry = RetryPolicy(int(max_retries) + 1, float(backoff), float(max_backoff), float(max_retry_time))
        """When a query is retried and how long it waits (:class:`pytest_novelty.http.RetryPolicy`)."""
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

    def _send(self, body: bytes) -> tuple[int, Any, bytes]:
        conn = self._connection()
        with self._lock:
            self.requests += 1
        conn.request("POST", self._path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        if response.getheader("Connection", "").lower() == "close":
            self._drop_connection()
        return response.status, response.headers, data

    def post(self, payload: dict[str, Any], stop: threading.Event | None = None) -> dict[str, Any]:
        """POST ``payload`` with retries; the decoded answer, or :class:`HarnessError`."""
        stop = stop or threading.Event()
        body = json.dumps(payload).encode("utf-8")
        problem = "no attempt made"
        attempts = self.retry.start()
        while True:
            if stop.is_set():
                raise _Stopped
            attempts.begin()
            server_wait: float | None = None
            try:
                status, headers, data = self._send(body)
            except (OSError, http.client.HTTPException) as exc:
                self._drop_connection()
                problem = scrub(f"{type(exc).__name__}: {exc}".rstrip(": "))
            else:
                if status == 200:
                    try:
                        answer = json.loads(data)
                    except ValueError:
                        problem = scrub(f"the answer is not JSON: {data[:120]!r}")
                    else:
                        if isinstance(answer, dict) and "error" not in answer:
                            return answer
                        error = answer.get("error") if isinstance(answer, dict) else answer
                        problem = scrub(f"the answer reports an error: {error}")
                elif is_retryable(status):
                    problem = f"HTTP {status}"
                    server_wait = retry_after(headers)
                else:
                    raise HarnessError(
                        f"{self.name} at {scrub(self.url)} refused a query with HTTP {status}: "
                        f"{scrub(data[:300].decode('utf-8', 'replace'))}"
                    )
            wait = attempts.next_wait(server_wait)
            if wait is None:
                break
            with self._lock:
                self.retries += 1
            if stop.wait(wait):
                raise _Stopped
        raise HarnessError(
            f"{self.name} at {scrub(self.url)} gave no usable answer after {attempts.number} attempts "
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
