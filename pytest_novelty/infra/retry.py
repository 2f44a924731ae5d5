"""When a request is tried again, and how long it waits first: the policy of the one HTTP client.

One logical request makes at most ``max_attempts`` attempts within ``max_retry_time`` seconds;
between attempts it waits what the server asks for (capped at :data:`MAX_RETRY_AFTER`, stretched by
up to 10 % so that clients told the same wait do not return together), else ``backoff ×
2^(attempt-1)`` capped at ``max_backoff``, with "equal jitter" (a uniform factor in [0.5, 1]).
:class:`pytest_novelty.infra.http.RetryTransport` follows it.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_novelty.infra.redact import scrub

__all__ = ["MAX_RETRY_AFTER", "RETRYABLE_STATUS", "Attempts", "RetryPolicy", "failure_reason", "is_retryable",
           "retry_after"]

MAX_RETRY_AFTER = 120.0
"""The longest ``Retry-After`` wait honoured, in seconds; a longer one is cut to this."""
RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
"""Statuses below 500 worth another attempt: timeout, conflict, too early, rate limit."""


def is_retryable(status: int) -> bool:
    """Whether an HTTP ``status`` is worth another attempt (see :data:`RETRYABLE_STATUS`; all 5xx)."""
    return status in RETRYABLE_STATUS or status >= 500


def retry_after(headers: Mapping[str, str] | Any | None) -> float | None:
    """The wait the server asked for, in seconds: ``retry-after-ms``, else ``Retry-After`` as seconds
    or as an HTTP date; None when there is none or it cannot be read."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after") or headers.get("Retry-After")
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
    """How often and how long one logical request is retried."""

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


def failure_reason(error: BaseException) -> str:
    """Why a request got no answer, in words: ``connection refused``, ``host name not resolved``,
    ``timed out``, ``connection dropped``, else the error's name and message (redacted)."""
    seen: BaseException | None = error
    for _ in range(6):
        if seen is None:
            break
        text = str(seen).lower()
        if isinstance(seen, ConnectionRefusedError) or "connection refused" in text or "errno 111" in text:
            return "connection refused"
        if any(s in text for s in ("name or service not known", "nodename nor servname", "getaddrinfo")):
            return "host name not resolved"
        if isinstance(seen, TimeoutError) or "timed out" in text or type(seen).__name__.endswith("Timeout"):
            return "timed out"
        if "disconnected without" in text or "connection reset" in text or "connection closed" in text:
            return "connection dropped"
        seen = seen.__cause__ or seen.__context__
    return scrub(f"{type(error).__name__}: {error}".rstrip(": "))

