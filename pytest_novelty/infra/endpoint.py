"""One OpenAI-compatible endpoint, under the served model (:mod:`pytest_novelty.generation.openai`),
the ``openai:`` judges and the concept extractors (:mod:`pytest_novelty.scoring.llm`).

What reaching such an endpoint takes, whatever is asked of it, lives here once:

- **The base URL**, as given, credentials and all (``https://user:KEY@host/v1``,
  ``http://host/v1?api_key=KEY``): they are the user's to send, so requests go to that URL, its query
  sent as a query with every request (never glued onto the path), while every secret in it is
  registered for redaction (:mod:`pytest_novelty.infra.redact`) and messages show the URL without
  them: :attr:`Endpoint.shown` (secrets masked), :attr:`Endpoint.bare` (no user info, no query).
- **The key**: the ``api_key`` given, else the first of the environment variables named that is
  set, held in a :class:`~pytest_novelty.infra.redact.Secret` and sent as ``Authorization: Bearer``
  only; where it came from (:attr:`Endpoint.key_from`) is kept for the hint of a refusal.
- **The client** of one run: the harness's one HTTP client (:meth:`~pytest_novelty.infra.http.Connection.client`:
  its retries, backoff, ``Retry-After``, timeouts and lanes).
- **The preflight**: one ``GET {base}/models`` within :data:`~pytest_novelty.infra.http.PREFLIGHT_TIMEOUT`
  seconds (:meth:`Endpoint.get_models`); an unreachable endpoint and a silent one (it accepts the
  connection, never answers) are each one line, and the answer is the caller's to read.
- **Reading a refusal**: the message of the error object a server answers with
  (:meth:`Endpoint.error_message`), on one line and without the key.
- **The wait notices**: every retry is a :func:`~pytest_novelty.infra.progress.notice`, and so is
  any other line the caller says through :meth:`Endpoint.say`, at most one of each kind every
  ``notify_every`` seconds however many requests wait.

What a failure means stays the caller's: a judge's sample goes unscored where a served model's row
stops the run, and each names its own option in its hints.

One transport, not two: the judges once went through the ``openai`` package, but its own retries
were off (the harness's client retried), its typed requests and replies were skipped (a plain
``post`` of the route: the typed layers cost a third of a judge's CPU), and what it still brought,
its exception classes and a ``models.list()``, differ between its major versions. Both callers now
send their requests through the same client and read the same answers, so one preflight, one
refusal reader and one notice throttle serve the three.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from pytest_novelty.infra.errors import PreflightError
from pytest_novelty.infra.http import Connection, Traffic
from pytest_novelty.infra.progress import notice
from pytest_novelty.infra.redact import Secret, echo, redact, register_secret, secrets_in_url
from pytest_novelty.infra.retry import RetryPolicy, failure_reason

if TYPE_CHECKING:
    import httpx

__all__ = ["NOTIFY_EVERY", "OPENAI_HOST", "Endpoint", "bare_url"]

OPENAI_HOST = "api.openai.com"
"""OpenAI's own endpoint, which needs a key: without one it is refused before any request."""
NOTIFY_EVERY = 10.0
"""Seconds between two notices of one kind (a retry, a wait), however many requests have one to say."""


def bare_url(url: str) -> str:
    """``url`` without user info, query or trailing slash (``http://host:8000/v1``)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path.rstrip("/"), "", ""))


class Endpoint:
    """An OpenAI-compatible endpoint: where it is, the key, its client, its preflight, its notices.

    ``variables`` are the environment variables the key is read from when ``api_key`` is None, the
    first one set winning; ``notify_every`` spaces the notices (see the module doc).
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        variables: Sequence[str] = ("OPENAI_API_KEY",),
        notify_every: float = NOTIFY_EVERY,
    ) -> None:
        for secret in secrets_in_url(base_url):
            register_secret(secret)
        parts = urlsplit(base_url)
        self.base_url = base_url
        """The URL as given (secrets included: never show it; :attr:`shown` and :attr:`bare` are for that)."""
        self.root = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
        """Where request paths are appended: the URL without its query and trailing slash."""
        self.query = dict(parse_qsl(parts.query, keep_blank_values=True))
        """The URL's query, sent with every request."""
        self.shown = redact(base_url)
        """The URL as messages show it: secrets masked, the rest as given."""
        self.bare = bare_url(base_url)
        """The URL without user info, query or trailing slash: as a served model's lines show it and
        its cache key holds it."""
        self.variables = tuple(variables)
        if api_key is not None:
            self.key_from: str | None = "the api_key argument"
            value = api_key
        else:
            self.key_from = next((name for name in self.variables if os.environ.get(name)), None)
            value = os.environ[self.key_from] if self.key_from else ""
        self.key = Secret(value)
        """The key (``Secret``: never in a repr, an error or a cache); empty when none is set."""
        register_secret(value)
        self.notify_every = notify_every
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Endpoint({self.shown!r})"

    # -- requests -----------------------------------------------------------------------------------

    @property
    def needs_key(self) -> bool:
        """Whether a request is sure to be refused for want of a key (OpenAI's own endpoint, no key)."""
        return not self.key and urlsplit(self.root).hostname == OPENAI_HOST

    def url(self, path: str) -> str:
        """The URL of ``path`` (``/chat/completions``) on this endpoint; the query goes as a query."""
        return self.root + path

    def client(
        self,
        connection: Connection,
        traffic: Traffic,
        *,
        accept: Callable[[httpx.Response], str | None] | None = None,
        on_wait: Callable[[str, int, float], None] | None = None,
    ) -> httpx.AsyncClient:
        """A fresh client of one run (see :meth:`~pytest_novelty.infra.http.Connection.client`) that
        sends the key and the URL's query with every request."""
        headers = {"Authorization": f"Bearer {self.key.reveal()}"} if self.key else {}
        return connection.client(self.root, traffic, headers=headers, params=self.query, accept=accept,
                                 on_wait=on_wait)  # fmt: skip

    async def get_models(self, timeout: float, *, where: str, silent: str = "", fix: str = "the URL") -> httpx.Response:
        """The preflight's one ``GET {base}/models``, within ``timeout`` seconds and without a retry.

        An endpoint that cannot be reached, or that accepts the connection and does not answer in
        time, is a :class:`~pytest_novelty.infra.errors.PreflightError` in one line naming ``where``
        (``the judge openai:gpt-4o at https://...``), with ``silent`` after the time (what a silent
        server may be) and ``fix`` (what to check: ``the URL``, ``--model-base-url``). Any answer is
        returned for the caller to read (a 401, a 404: not every server lists its models).
        """
        import asyncio

        import httpx

        from pytest_novelty.infra.http import preflight_timeout

        timeout = preflight_timeout(timeout)
        once = Connection(timeout=timeout, concurrency=1, retry=RetryPolicy(max_attempts=1))
        silent = silent or f"; is it stuck or still starting, and is {fix} right?"
        async with self.client(once, Traffic()) as client:
            try:
                response = await client.get(self.url("/models"))
            except (httpx.TimeoutException, asyncio.CancelledError):  # anyio may cancel a connect it timed out
                raise PreflightError(f"{where} did not answer GET /models within {timeout:g} s{silent}") from None
            except httpx.TransportError as error:
                raise PreflightError(
                    f"cannot reach {where} ({failure_reason(error)}); is the server running and {fix} right?"
                ) from None
        if response.status_code == 200:
            try:
                json.loads(response.content)
            except ValueError:
                said = echo(response.text, self.key)
                raise PreflightError(f"{where} answered GET /models with what is not JSON ({said}); is {fix} that "
                                     "of an OpenAI-compatible server?") from None
        return response

    # -- reading answers ---------------------------------------------------------------------------

    def error_of(self, response: httpx.Response) -> dict[str, Any] | None:
        """The error object of an answer (its JSON's ``error``, or the JSON itself when it has none),
        when the answer is a JSON object; else None."""
        try:
            data = json.loads(response.content)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        error = data.get("error", data)
        return error if isinstance(error, dict) else None

    def error_message(self, response: httpx.Response) -> str:
        """What the server says is wrong (its error object's ``message``), quoted printable
        (:func:`~pytest_novelty.infra.redact.echo`: one line, short, without the key); ``""`` when it
        says nothing readable."""
        error = self.error_of(response)
        message = error.get("message") if error is not None else None
        return echo(str(message), self.key) if message else ""

    def scrub(self, text: str) -> str:
        """``text`` with the key, and anything that looks like a key, replaced by ``***``."""
        return self.key.hide(text)

    # -- notices -----------------------------------------------------------------------------------

    def say(self, kind: str, line: str) -> None:
        """``line`` as a notice, unless a line of this ``kind`` was said less than ``notify_every``
        seconds ago (concurrent requests share the allowance)."""
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(kind, -math.inf) < self.notify_every:
                return
            self._last[kind] = now
        notice(line)

    def on_wait(self, where: str, policy: RetryPolicy) -> Callable[[str, int, float], None]:
        """The client's ``on_wait``: each retry of a request to ``where`` (``judge at URL``) said as a
        ``retry`` notice with what went wrong, the attempt and when the request gives up."""

        def waiting(problem: str, attempt: int, wait: float) -> None:
            self.say(
                "retry",
                f"[novelty] {where}: {self.scrub(problem)}; retrying (attempt {attempt + 1} of {policy.max_attempts}, "
                f"giving up after {policy.max_retry_time:g} s)",
            )

        return waiting
