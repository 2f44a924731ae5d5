"""What every HTTP client of the harness shares: when to retry, how long to wait, and what may be shown.

Three clients reach remote services: the chat client of the ``openai:`` judges and concept
extractors (:mod:`pytest_novelty.scoring.llm`, through the ``openai`` package), the infini-gram
API client (:mod:`pytest_novelty.scoring.originality.client`) and the served-model generator
(:mod:`pytest_novelty.generation.openai`). Their transports differ (the ``openai`` package's
typed errors, a thread pool for one JSON query per POST, an async pool for long completions);
the rules do not, so they live here, once:

- :data:`RETRYABLE_STATUS` and :func:`is_retryable`: 408, 409, 425, 429 and every 5xx are worth
  another attempt; any other status is an answer.
- :func:`retry_after`: the wait a server asks for, from ``retry-after-ms`` or ``Retry-After``
  (seconds or an HTTP date).
- :class:`RetryPolicy`: at most ``max_attempts`` attempts and ``max_retry_time`` seconds of
  attempts and waits for one logical request; between attempts the server's ``Retry-After``
  (capped at :data:`MAX_RETRY_AFTER`, stretched by up to 10 % so that clients told the same wait
  do not return together), else exponential backoff ``backoff × 2^(attempt-1)`` capped at
  ``max_backoff``, with "equal jitter" (a uniform factor in [0.5, 1]).
- :class:`Secret` and :func:`scrub`: keys that never appear in a repr, an error or a cache.
- :func:`run_coroutine`: synchronous APIs drive asyncio code even inside a running event loop.

Standard library only; this module imports no layer.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import threading
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pytest_novelty.redact import redact

__all__ = [
    "MAX_RETRY_AFTER",
    "RETRYABLE_STATUS",
    "RetryPolicy",
    "Secret",
    "is_retryable",
    "retry_after",
    "run_coroutine",
    "scrub",
]

T = TypeVar("T")

MAX_RETRY_AFTER = 120.0
"""The longest ``Retry-After`` wait honoured, in seconds; a longer one is cut to this."""
RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
"""Statuses below 500 worth another attempt: timeout, conflict, too early, rate limit."""


def is_retryable(status: int) -> bool:
    """Whether an HTTP ``status`` is worth another attempt (see :data:`RETRYABLE_STATUS`; all 5xx)."""
    return status in RETRYABLE_STATUS or status >= 500


def retry_after(headers: Mapping[str, str] | Any | None) -> float | None:
    """The wait the server asked for, in seconds: ``retry-after-ms``, else ``Retry-After`` as seconds
    or as an HTTP date; None when there is none or it cannot be read. ``headers`` is any mapping
    with ``get`` (case-insensitive ones, as httpx's and http.client's, find either spelling)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long one logical request is retried (see the module docstring)."""

    max_attempts: int = 6
    """Attempts of one logical request, the first one included."""
    backoff: float = 0.5
    """Seconds before the second attempt when the server names no wait; doubled after each failure."""
    max_backoff: float = 30.0
    """The longest backoff wait, in seconds (a server's ``Retry-After`` is capped separately)."""
    max_retry_time: float = 120.0
    """Seconds one logical request may spend on attempts and waits in all (``math.inf``: no bound)."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.backoff < 0 or self.max_backoff < 0 or not self.max_retry_time >= 0:
            raise ValueError("backoff, max_backoff and max_retry_time must be 0 or more")

    def delay(self, attempt: int, server_wait: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if server_wait is not None:
            return min(server_wait, MAX_RETRY_AFTER) * random.uniform(1.0, 1.1)
        return min(self.max_backoff, self.backoff * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)

    def start(self) -> Attempts:
        """The attempt counter of one logical request, its clock started now."""
        return Attempts(self)


class Attempts:
    """The attempts of one logical request: count them, and say how long to wait or that it is over."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.number = 0
        """Attempts made so far (call :meth:`begin` before each)."""
        self.started = time.monotonic()

    def begin(self) -> int:
        """Count a new attempt; returns its number (1 for the first)."""
        self.number += 1
        return self.number

    def forget(self) -> None:
        """Do not count the current attempt (a request changed and sent again, not a failure)."""
        self.number -= 1

    @property
    def spent(self) -> float:
        """Seconds since the first attempt began."""
        return time.monotonic() - self.started

    def next_wait(self, server_wait: float | None = None) -> float | None:
        """The wait before the next attempt, or None when the request has used its attempts or
        the wait would take it past ``max_retry_time``."""
        if self.number >= self.policy.max_attempts:
            return None
        wait = self.policy.delay(self.number, server_wait)
        if self.spent + wait > self.policy.max_retry_time:
            return None
        return wait


class Secret:
    """Holds an API key so that reprs, ``vars()`` and debug dumps show ``***``, never the key."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The key itself, for the one place that sends it."""
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return "***" if self._value else "''"


def scrub(text: str, *secrets: Secret | str) -> str:
    """``text`` with each secret, and anything :mod:`pytest_novelty.redact` recognises as one,
    replaced by ``***``: what every client does to a server's message before showing it."""
    for secret in secrets:
        value = secret.reveal() if isinstance(secret, Secret) else secret
        if value:
            text = text.replace(value, "***")
    return redact(text)


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion, in a helper thread when an event loop is already running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coroutine)
        except BaseException as error:
            box["error"] = error

    thread = threading.Thread(target=target, name="novelty-http")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
