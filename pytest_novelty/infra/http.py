"""The one HTTP client of the harness: how a remote service is reached, and what a request did.

The ``openai:`` judges and concept extractors (through the ``openai`` package, its own retries
off), the infini-gram API client and the served-model generator all send through an
``httpx.AsyncClient`` from :meth:`Connection.client`, whose :class:`RetryTransport` retries as
:mod:`pytest_novelty.infra.retry` says; only what an answer means differs between them. Under the
retries, ``concurrency`` one-connection *lanes* send the attempts, each keeping the component's
:class:`Pace` when it has a ``rate``. ``httpx`` is imported when a client opens.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypedDict, cast, get_type_hints
from urllib.parse import urlsplit

from pytest_novelty.infra.concurrency import wait_aside
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.retry import RetryPolicy, failure_reason, is_retryable, retry_after

if TYPE_CHECKING:
    import httpx

__all__ = ["CONNECTION_OPTIONS", "PREFLIGHT_TIMEOUT", "Connection", "ConnectionOptions", "Pace", "Reply",
           "RetryTransport", "Traffic", "attempts_of", "post_json", "preflight_timeout"]

PREFLIGHT_TIMEOUT = 10.0
"""Seconds a preflight waits for its one request: a service that cannot answer in this time will not
serve a run either. ``PYTEST_NOVELTY_PREFLIGHT_TIMEOUT`` sets another (:func:`preflight_timeout`)."""
PREFLIGHT_TIMEOUT_VARIABLE = "PYTEST_NOVELTY_PREFLIGHT_TIMEOUT"


def preflight_timeout(given: float) -> float:
    """The seconds a preflight waits: ``PYTEST_NOVELTY_PREFLIGHT_TIMEOUT`` when it is set (a slow link
    to a far service; a test of a silent one), else ``given``."""
    text = os.environ.get(PREFLIGHT_TIMEOUT_VARIABLE)
    if not text:
        return given
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0.0 < seconds < 3600.0:
        raise ConfigError(f"{text!r} is not a number of seconds above 0 and below 3600; set it so, or unset it",
                          field=PREFLIGHT_TIMEOUT_VARIABLE)
    return seconds


class ConnectionOptions(TypedDict, total=False):
    """The options every remote backend accepts (in its spec after ``?``, or as keywords)."""

    timeout: float
    concurrency: int
    max_attempts: int
    backoff: float
    max_backoff: float
    max_retry_time: float
    rate: float
    """Requests per second at most, retries included (0: no limit); see :class:`Pace`."""


CONNECTION_OPTIONS: dict[str, type | None] = dict(get_type_hints(ConnectionOptions))
"""The names and types of :class:`ConnectionOptions`, for a backend's registration."""
_RETRY_OPTIONS = tuple(f.name for f in fields(RetryPolicy))


@dataclass(frozen=True)
class Connection:
    """How one remote service is reached: the timeout of one request, the requests in flight, retries."""

    timeout: float = 60.0
    """Seconds one HTTP request may take."""
    concurrency: int = 8
    """Requests in flight at once."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    rate: float = 0.0
    """Requests per second at most, every attempt counted (0: no limit)."""

    @classmethod
    def of(cls, options: ConnectionOptions, **defaults: Any) -> Connection:
        """The connection ``options`` ask for, ``defaults`` (same names) filling what they leave out."""
        given = {**defaults, **options}
        unknown = sorted(set(given) - set(CONNECTION_OPTIONS))
        if unknown:
            raise TypeError(f"unknown connection options: {', '.join(unknown)}")
        for name, least in (("concurrency", 1), ("max_attempts", 1), ("timeout", 1e-9)):
            if name in given and not given[name] >= least:
                raise ConfigError(f"{name} must be at least {least:g}, got {given[name]}", field=name)
        for name in ("backoff", "max_backoff", "max_retry_time", "rate"):
            if name in given and not given[name] >= 0:
                raise ConfigError(f"{name} must be 0 or more, got {given[name]}", field=name)
        if "rate" in given and given["rate"] == math.inf:
            given["rate"] = 0.0  # no limit, spelt as a number
        whole = ("concurrency", "max_attempts")
        typed: dict[str, Any] = {name: int(v) if name in whole else float(v) for name, v in given.items()}
        retry = {name: typed.pop(name) for name in _RETRY_OPTIONS if name in typed}
        return replace(cls(retry=replace(RetryPolicy(), **retry)), **typed)

    def client(
        self, url: str, traffic: Traffic, *, headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None, accept: Callable[[httpx.Response], str | None] | None = None,
        on_wait: Callable[[str, int, float], None] | None = None,
    ) -> httpx.AsyncClient:
        """A fresh client for requests to ``url`` (within one event loop), retrying as :attr:`retry`
        says; ``headers`` and ``params`` go with every request, ``traffic`` counts, and ``accept`` and
        ``on_wait`` are :class:`RetryTransport`'s."""
        import httpx

        inner = _transport(url, self.concurrency, traffic.paced(self.rate))
        transport = RetryTransport(self.retry, traffic, accept=accept, on_wait=on_wait, inner=inner)
        # RetryTransport has the shape of an httpx.AsyncBaseTransport without subclassing it, so
        # that httpx is imported only when a client opens.
        return httpx.AsyncClient(
            transport=cast("httpx.AsyncBaseTransport", transport), headers=dict(headers or {}),
            params=dict(params or {}), timeout=self.timeout, trust_env=False,
        )


def _transport(url: str, concurrency: int, pace: Pace | None = None) -> _Lanes:
    """The plain transport under the retries: ``concurrency`` connections, through the proxy the
    environment names for ``url`` unless its host is exempt (``NO_PROXY``); every attempt keeps
    ``pace`` when there is one."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme)
    if proxy and parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        proxy = None
    return _Lanes(concurrency, proxy, pace)


class _Lanes:
    """``concurrency`` one-connection ``httpx`` transports (*lanes*); a request waits in arrival order
    for an idle lane and gives it back once its answer is read whole.

    One pool would do the same, but ``httpcore``'s pool scans every connection, and again for each
    idle one, whenever a request comes or goes: at 32 connections that was most of a judge's CPU.
    """

    def __init__(self, concurrency: int, proxy: str | None, pace: Pace | None = None) -> None:
        self.concurrency = max(1, concurrency)
        self.proxy = proxy
        self.pace = pace
        self._idle: asyncio.Queue[Any] | None = None
        self._lanes: list[Any] = []
        self._verify: Any = None

    def _lane(self) -> Any:
        import httpx

        if self._verify is None:
            # One TLS context for every lane, made as httpx makes its default one (loading the
            # certificate store takes tens of milliseconds: once, not once per lane).
            make = getattr(httpx, "create_ssl_context", None)
            self._verify = make() if make is not None else True
        one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        lane = httpx.AsyncHTTPTransport(limits=one, proxy=self.proxy, verify=self._verify)
        self._lanes.append(lane)
        return lane

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` on an idle lane and read its answer whole."""
        import httpx

        if self._idle is None:  # made in the event loop of the client's first request
            self._idle = asyncio.Queue()
            for _ in range(self.concurrency):
                self._idle.put_nowait(None)  # a lane not opened yet
        lane = await self._idle.get()
        try:
            if lane is None:
                lane = self._lane()
            if self.pace is not None:
                await self.pace.take()
            response = await lane.handle_async_request(request)
            try:  # the bytes as sent (still compressed, if they were): the client decodes them once
                content = b"".join([chunk async for chunk in response.aiter_raw()])
            finally:
                await response.aclose()
        finally:
            self._idle.put_nowait(lane)
        return httpx.Response(
            response.status_code, headers=response.headers, content=content, extensions=response.extensions
        )

    async def aclose(self) -> None:
        for lane in self._lanes:
            await lane.aclose()

    async def __aenter__(self) -> _Lanes:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


@dataclass
class Traffic:
    """What a client sent: requests (every attempt) and retries; and the :class:`Pace` of a rate limit,
    shared by every client opened with it, so the limit holds across one component's batches and runs."""

    requests: int = 0
    retries: int = 0
    pace: Pace | None = field(default=None, compare=False, repr=False)

    def paced(self, rate: float) -> Pace | None:
        """The pace of ``rate`` requests per second (None: no limit), kept from one client to the next."""
        if not rate:
            return None
        if self.pace is None or self.pace.rate != rate:
            self.pace = Pace(rate)
        return self.pace


class Pace:
    """At most ``rate`` requests a second: a token bucket that holds one token, taken just before sending.

    A request leaves no sooner than ``1 / rate`` s after the one before it actually left (one that
    wakes late moves the next on, so late requests never leave in a bunch), so a server that allows
    ``rate`` a second never refuses one. Thread-safe and bound to no event loop.
    """

    def __init__(self, rate: float) -> None:
        if not rate > 0:
            raise ValueError(f"rate must be above 0, got {rate}")
        self.rate = float(rate)
        self.interval = 1.0 / self.rate
        self._next = -math.inf
        self._lock = threading.Lock()

    def _claim(self) -> float:
        """Go now if the moment has come (0.0), else the seconds until it."""
        with self._lock:
            now = time.monotonic()
            if now >= self._next:
                self._next = now + self.interval
                return 0.0
            return self._next - now

    async def take(self) -> None:
        """Wait until this request may leave."""
        while (wait := self._claim()) > 0:
            await asyncio.sleep(wait)

    def seconds(self, requests: int) -> float:
        """How long ``requests`` requests take at this pace (the first one goes at once)."""
        return max(0, requests - 1) * self.interval


ATTEMPTS = "novelty.attempts"
"""The request extension in which :class:`RetryTransport` records (attempts made, seconds spent)."""


def attempts_of(where: Any) -> tuple[int, float]:
    """(attempts made, seconds spent) of the request behind ``where``: an ``httpx.Request``, a
    response or an error that carries one (``openai`` errors do); ``(1, 0.0)`` when unknown."""
    for holder in (where, getattr(where, "response", None)):
        try:
            request = holder if hasattr(holder, "method") else getattr(holder, "request", None)
        except RuntimeError:  # an httpx object built without its request
            continue
        extensions = getattr(request, "extensions", None)
        if isinstance(extensions, dict) and isinstance(extensions.get(ATTEMPTS), tuple):
            return extensions[ATTEMPTS]
    return (1, 0.0)


@dataclass(frozen=True)
class Reply:
    """How one request sent through :meth:`Connection.client` ended, its retries done."""

    response: httpx.Response | None
    """The last answer, or None when no attempt got one."""
    attempts: int
    problem: str
    """What went wrong in words (``HTTP 503``, ``connection refused``); empty for an HTTP 200."""
    seconds: float = 0.0
    """Seconds the attempts and the waits between them took."""

    @property
    def status(self) -> int | None:
        return None if self.response is None else self.response.status_code


async def post_json(client: httpx.AsyncClient, url: str, body: Any) -> Reply:
    """POST ``body`` as JSON through ``client`` (which retries) and say how it ended."""
    import httpx

    try:
        response = await client.post(url, json=body)
    except httpx.TransportError as error:
        attempts, seconds = attempts_of(error)
        return Reply(None, attempts, failure_reason(error), seconds)
    attempts, seconds = attempts_of(response)
    return Reply(response, attempts, "" if response.status_code == 200 else f"HTTP {response.status_code}", seconds)


@dataclass
class RetryTransport:
    """An ``httpx`` async transport that sends a request until it gets an answer, as a policy says.

    An attempt fails on a transport error, a retryable status (:func:`is_retryable`) or a 200 answer
    that ``accept`` rejects. When the attempts or the time are used up, the last answer is returned
    or the last error raised; either way the request's extensions hold :data:`ATTEMPTS`.
    """

    policy: RetryPolicy
    traffic: Traffic
    inner: Any
    """The transport that sends one attempt (an ``httpx.AsyncHTTPTransport``)."""
    accept: Callable[[httpx.Response], str | None] | None = None
    """Says why a 200 answer is worth another attempt, or None when it is an answer
    (``response.request`` is the request it answers)."""
    on_wait: Callable[[str, int, float], None] | None = None
    """Hears ``(problem, attempt, seconds)`` before each wait."""
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` with retries (see the class doc)."""
        import httpx

        attempts = self.policy.start()
        while True:
            attempts.begin()
            self.traffic.requests += 1
            server_wait: float | None = None
            response: httpx.Response | None = None
            failure: httpx.TransportError | None = None
            try:
                response = await self.inner.handle_async_request(request)
            except httpx.TransportError as error:
                request.extensions[ATTEMPTS] = (attempts.number, attempts.spent)
                problem, failure = failure_reason(error), error
            else:
                await response.aread()
                response.request = request  # what ``accept`` may read (the client sets it only later)
                request.extensions[ATTEMPTS] = (attempts.number, attempts.spent)
                if is_retryable(response.status_code):
                    problem, failure, server_wait = f"HTTP {response.status_code}", None, retry_after(response.headers)
                elif response.status_code == 200 and self.accept is not None:
                    problem, failure = self.accept(response) or "", None
                    if not problem:
                        return response
                else:
                    return response
            wait = attempts.next_wait(server_wait)
            if wait is None:
                if response is not None:
                    return response
                assert failure is not None
                raise failure
            self.traffic.retries += 1
            if self.on_wait is not None:
                self.on_wait(problem, attempts.number, wait)
            await wait_aside(wait)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> RetryTransport:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.inner.__aexit__(*exc)
