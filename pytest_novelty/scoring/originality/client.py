"""A small JSON-over-POST client for the infini-gram web APIs: concurrency, retries, clear failures.

Requests go through the one HTTP client (:meth:`pytest_novelty.infra.http.Connection.client`). Besides
what the connection's :class:`~pytest_novelty.infra.retry.RetryPolicy` retries, a body that is not
JSON and an HTTP 200 answer with an ``error`` field (how the infini-gram APIs report problems) are
retried; other HTTP errors fail at once, redacted. A request out of attempts stops the whole batch
with a ``HarnessError`` naming the endpoint and the last problem. :meth:`JsonClient.check` is the
preflight: one real query within :data:`PREFLIGHT_TIMEOUT` seconds (one quick retry), else one
``PreflightError`` line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pytest_novelty.infra.concurrency import fan_out, run_coroutine
from pytest_novelty.infra.errors import ConfigError, HarnessError, PreflightError
from pytest_novelty.infra.http import PREFLIGHT_TIMEOUT, Connection, Traffic, post_json, preflight_timeout
from pytest_novelty.infra.redact import echo, scrub
from pytest_novelty.infra.retry import RetryPolicy, is_retryable

if TYPE_CHECKING:
    import httpx

__all__ = ["PREFLIGHT_TIMEOUT", "JsonClient"]

def _problem(response: httpx.Response) -> str | None:
    """Why a 200 answer is no answer (not JSON, not an object, or an ``error`` field), or None."""
    try:
        answer = json.loads(response.content)
    except ValueError:
        return f"the answer is not JSON: {echo(response.content, limit=120)}"
    if isinstance(answer, dict) and "error" not in answer:
        return None
    error = answer.get("error") if isinstance(answer, dict) else answer
    return f"the answer reports an error: {echo(str(error))}"


class JsonClient:
    """POSTs JSON payloads to one URL and returns the decoded JSON answers."""

    def __init__(self, url: str, *, name: str, connection: Connection, hint: str = "") -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"{name} URL must be http:// or https://, got {url!r}", field="url")
        self.url = url
        self.name = name
        self.hint = hint
        self.connection = connection
        self.traffic = Traffic()
        """HTTP requests sent (every attempt counts) and retries, over the client's life."""

    def check(self, payload: dict[str, Any], *, timeout: float = PREFLIGHT_TIMEOUT) -> dict[str, Any]:
        """Preflight: POST ``payload`` within ``timeout`` seconds (two attempts); its answer, or a
        one-line :class:`PreflightError` (unreachable, silent, refused, or answering with an error)."""
        timeout = preflight_timeout(timeout)
        probe = Connection(
            timeout=timeout, concurrency=1, retry=RetryPolicy(max_attempts=2, backoff=0.5, max_retry_time=timeout)
        )
        return run_coroutine(self._check(probe, payload))

    async def _check(self, probe: Connection, payload: dict[str, Any]) -> dict[str, Any]:
        where = f"{self.name} at {scrub(self.url)}"
        async with probe.client(self.url, self.traffic, accept=_problem) as client:
            reply = await post_json(client, self.url, payload)
        if reply.response is None:
            if reply.problem == "timed out":
                raise PreflightError(
                    f"{where} did not answer a test query within {probe.timeout:g} s: it accepts connections but "
                    f"does not answer; {self.hint.rstrip('; ')}"
                )
            raise PreflightError(f"cannot reach {where} ({reply.problem}); {self.hint.rstrip('; ')}")
        if reply.status != 200:
            raise PreflightError(f"{where} answered a test query with {reply.problem}: {echo(reply.response.content)}")
        problem = _problem(reply.response)
        if problem:
            raise PreflightError(f"{where} answered a test query, but {problem}")
        return dict(reply.response.json())

    def post(self, payload: dict[str, Any]) -> dict[str, Any]:
        """POST ``payload`` with retries; the decoded answer, or :class:`HarnessError`."""
        answers: list[dict[str, Any]] = []
        self.post_all([payload], lambda _, answer: answers.append(answer))
        return answers[0]

    def post_all(
        self,
        payloads: Sequence[dict[str, Any]],
        on_answer: Callable[[int, dict[str, Any]], None],
        on_progress: Callable[[], None] | None = None,
    ) -> None:
        """POST every payload, ``concurrency`` at a time, ``on_answer(i, answer)`` as each arrives; the
        first request that fails for good stops the batch with its error."""
        payloads = list(payloads)

        async def post_all() -> None:
            async with self.connection.client(self.url, self.traffic, accept=_problem) as client:

                async def one(i: int) -> None:
                    on_answer(i, await self._post(client, payloads[i]))
                    if on_progress is not None:
                        on_progress()

                await fan_out(len(payloads), one, concurrency=self.connection.concurrency)

        run_coroutine(post_all())

    async def _post(self, client: httpx.AsyncClient, payload: dict[str, Any]) -> dict[str, Any]:
        reply = await post_json(client, self.url, payload)
        problem = reply.problem
        if reply.response is not None:
            if reply.status == 200:
                problem = _problem(reply.response) or ""
                if not problem:
                    return dict(reply.response.json())
            elif not is_retryable(reply.response.status_code):
                raise HarnessError(
                    f"{self.name} at {scrub(self.url)} refused a query with {problem}: "
                    f"{echo(reply.response.content, limit=300)}"
                )
        raise HarnessError(
            f"{self.name} at {scrub(self.url)} gave no usable answer after {reply.attempts} attempts "
            f"(last: {problem}); {self.hint}answers received so far are cached"
        )
