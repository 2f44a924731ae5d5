"""The one HTTP client of the harness: when to retry, how long to wait, and what may be shown.

Three clients reach remote services: the chat client of the ``openai:`` judges and concept
extractors (:mod:`pytest_novelty.scoring.llm`, through the ``openai`` package), the infini-gram
API client (:mod:`pytest_novelty.scoring.originality.client`) and the served-model generator
(:mod:`pytest_novelty.generation.openai`). All three send their requests through an
``httpx.AsyncClient`` that :meth:`Connection.client` opens, whose transport
(:class:`RetryTransport`) retries as one policy says; the ``openai`` package is handed that client
with its own retries switched off. What differs between them is only what an answer means.

- :data:`RETRYABLE_STATUS` and :func:`is_retryable`: 408, 409, 425, 429 and every 5xx are worth
  another attempt; any other status is an answer.
- :func:`retry_after`: the wait a server asks for, from ``retry-after-ms`` or ``Retry-After``
  (seconds or an HTTP date).
- :class:`RetryPolicy`: at most ``max_attempts`` attempts and ``max_retry_time`` seconds of
  attempts and waits for one logical request; between attempts the server's ``Retry-After``
  (capped at :data:`MAX_RETRY_AFTER`, stretched by up to 10 % so that clients told the same wait
  do not return together), else exponential backoff ``backoff × 2^(attempt-1)`` capped at
  ``max_backoff``, with "equal jitter" (a uniform factor in [0.5, 1]).
- :class:`Connection`: the policy, the timeout of one request, the requests in flight and the
  rate limit, built from the options every remote backend accepts (:data:`CONNECTION_OPTIONS`).
- :class:`RetryTransport`: sends a request again on a timeout, a refused or dropped connection, a
  retryable status, or an answer the client's ``accept`` check rejects; when the request has used
  its attempts, the caller gets the last answer or the last error, and :func:`attempts_of` says
  how many attempts it took. Under it, ``concurrency`` one-connection *lanes* send the attempts
  (a request takes an idle lane), each keeping the component's :class:`Pace` when it has a
  ``rate``: at most that many requests a second, every attempt counted.
- :class:`Held`: a caller's place among its requests in flight, given up while a request waits
  to be retried, so that a ``Retry-After`` of one request does not hold up the others.
- :class:`Secret` and :func:`scrub`: keys that never appear in a repr, an error or a cache.
- :func:`echo`: a server's reply as a message may quote it: scrubbed, on one line, short, and
  printable whatever bytes the server sent.
- :func:`fan_out`: run one coroutine per item, ``concurrency`` at a time; the first failure stops
  the batch (nothing new starts, what is in flight is cancelled) and is raised, unless it is of a
  kind the caller collects (then it takes the item's place and the batch goes on).
- :func:`run_coroutine`: synchronous APIs drive asyncio code even inside a running event loop.

This module imports no layer (only the shared errors); ``httpx`` is imported when a client opens.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import math
import random
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, cast, get_type_hints, overload
from urllib.parse import urlsplit

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.redact import redact

if TYPE_CHECKING:
    import httpx

__all__ = [
    "CONNECTION_OPTIONS",
    "MAX_RETRY_AFTER",
    "PREFLIGHT_TIMEOUT",
    "RETRYABLE_STATUS",
    "Connection",
    "ConnectionOptions",
    "Held",
    "Pace",
    "Reply",
    "RetryPolicy",
    "RetryTransport",
    "Secret",
    "Traffic",
    "attempts_of",
    "echo",
    "failure_reason",
    "fan_out",
    "is_retryable",
    "post_json",
    "retry_after",
    "run_coroutine",
    "scrub",
]

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)

PREFLIGHT_TIMEOUT = 10.0
"""Seconds a preflight waits for its one request (a served model's or a judge's ``GET /models``, a
web API's test query): a service that cannot answer that in this time will not serve a run either."""
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
        base, policy = cls(), RetryPolicy()
        return cls(
            float(given.get("timeout", base.timeout)),
            int(given.get("concurrency", base.concurrency)),
            RetryPolicy(
                int(given.get("max_attempts", policy.max_attempts)),
                float(given.get("backoff", policy.backoff)),
                float(given.get("max_backoff", policy.max_backoff)),
                float(given.get("max_retry_time", policy.max_retry_time)),
            ),
            float(given.get("rate", base.rate)),
        )

    def client(
        self,
        url: str,
        traffic: Traffic,
        *,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        accept: Callable[[httpx.Response], str | None] | None = None,
        on_wait: Callable[[str, int, float], None] | None = None,
    ) -> httpx.AsyncClient:
        """A fresh client for requests to ``url`` (within one event loop), retrying as :attr:`retry` says.

        ``headers`` and ``params`` (a query) go with every request; ``accept(response)`` may reject a
        200 answer worth another attempt by returning the problem in words (``response.request`` is
        the request it answers); ``on_wait(problem, attempt, seconds)`` hears of each wait;
        ``traffic`` counts.
        """
        import httpx

        transport = RetryTransport(
            self.retry,
            traffic,
            accept=accept,
            on_wait=on_wait,
            inner=_transport(url, self.concurrency, traffic.paced(self.rate)),
        )
        # RetryTransport has the shape of an httpx.AsyncBaseTransport without subclassing it, so
        # that httpx is imported only when a client opens.
        return httpx.AsyncClient(
            transport=cast("httpx.AsyncBaseTransport", transport),
            headers=dict(headers or {}),
            params=dict(params or {}),
            timeout=self.timeout,
            trust_env=False,
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
    """``concurrency`` connections, each its own one-connection ``httpx`` transport (a *lane*);
    a request takes an idle lane, waiting for one in arrival order, and gives it back once its
    answer is read.

    One pool of ``concurrency`` connections would do the same, but ``httpcore``'s pool looks over
    every connection, and every connection again for each idle one, whenever a request comes or
    goes: at 32 connections that was most of a judge's CPU. Answers are read whole here (every
    client of the harness reads them whole anyway), so a lane is free when its request returns.
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
    """What a client sent: requests (every attempt) and retries; and, when its requests are
    rate-limited, the :class:`Pace` they keep, shared by every client opened with it (so a limit
    holds across the batches and runs of one component, not only within one client)."""

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
    """At most ``rate`` requests a second: a token bucket that holds one token.

    A request leaves no sooner than ``1 / rate`` seconds after the one before it actually left
    (a request that wakes late, on a busy event loop, moves the next one on, so late requests
    never leave in a bunch); so no second sees more than ``rate`` requests go, however many are
    in flight, and a server that allows ``rate`` a second never has to refuse one. It is taken
    when a connection is free, just before sending. Thread-safe and bound to no event loop (a
    component opens a client per run).
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
        return Reply(None, *_tried(attempts_of(error), failure_reason(error)))
    problem = "" if response.status_code == 200 else f"HTTP {response.status_code}"
    return Reply(response, *_tried(attempts_of(response), problem))


def _tried(attempts: tuple[int, float], problem: str) -> tuple[int, str, float]:
    return attempts[0], problem, attempts[1]


@dataclass
class RetryTransport:
    """An ``httpx`` async transport that sends a request until it gets an answer, as a policy says.

    An attempt fails on a transport error (timeout, refused or dropped connection), a retryable
    status (:func:`is_retryable`) or a 200 answer that ``accept`` rejects; the wait before the
    next is the server's ``Retry-After`` or the policy's backoff. When the request has used its
    attempts (or its time), the last answer is returned (its status tells the caller what went
    wrong) or the last error raised. Either way the request's extensions hold
    ``(attempts, seconds)`` under :data:`ATTEMPTS`.
    """

    policy: RetryPolicy
    traffic: Traffic
    inner: Any
    """The transport that sends one attempt (an ``httpx.AsyncHTTPTransport``)."""
    accept: Callable[[httpx.Response], str | None] | None = None
    """Says why a 200 answer is worth another attempt, or None when it is an answer."""
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
            await _wait_aside(wait)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> RetryTransport:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.inner.__aexit__(*exc)


_HELD: contextvars.ContextVar[Held | None] = contextvars.ContextVar("novelty_held_slot", default=None)


class Held:
    """A place among a caller's ``concurrency`` requests in flight (one acquisition of its
    semaphore), that a request gives up while it waits to be retried.

    ``async with Held(semaphore):`` around sending a request: a retry wait of that request
    (:class:`RetryTransport`, in the same task) releases the semaphore for its duration and takes
    it again after, so that a request told to come back in a minute does not keep another from
    going now.
    """

    def __init__(self, semaphore: asyncio.Semaphore) -> None:
        self.semaphore = semaphore
        self.holding = False
        self._token: contextvars.Token[Held | None] | None = None

    async def __aenter__(self) -> Held:
        await self.semaphore.acquire()
        self.holding = True
        self._token = _HELD.set(self)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._token is not None:
            _HELD.reset(self._token)
        if self.holding:
            self.holding = False
            self.semaphore.release()

    async def wait_aside(self, seconds: float) -> None:
        """Sleep ``seconds`` without the place, then take one again (in line with the others)."""
        if self.holding:
            self.holding = False
            self.semaphore.release()
        await asyncio.sleep(seconds)
        await self.semaphore.acquire()
        self.holding = True


async def _wait_aside(seconds: float) -> None:
    """Wait before a retry, giving up the caller's :class:`Held` place meanwhile, if it holds one."""
    held = _HELD.get()
    if held is None:
        await asyncio.sleep(seconds)
    else:
        await held.wait_aside(seconds)


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

    def hide(self, text: str) -> str:
        """``text`` with this secret, and anything else that looks like one, replaced by ``***``."""
        return scrub(text, self)


def scrub(text: str, *secrets: Secret | str) -> str:
    """``text`` with each secret, and anything :mod:`pytest_novelty.infra.redact` recognises as one,
    replaced by ``***``: what every client does to a server's message before showing it."""
    for secret in secrets:
        value = secret.reveal() if isinstance(secret, Secret) else secret
        if value:
            text = text.replace(value, "***")
    return redact(text)


ECHO_LIMIT = 200
"""How many characters of a server's reply a message quotes."""


def echo(reply: str | bytes, *secrets: Secret | str, limit: int = ECHO_LIMIT) -> str:
    """``reply`` (a body, a message, any text a server sent) as a message may quote it to a terminal.

    Bytes are read as UTF-8, a byte that is not UTF-8 shown as ``\\xNN``; the secrets and anything
    :func:`scrub` recognises become ``***``; runs of white space (new lines, tabs) become one space;
    every character left that is not printable (a NUL, an escape sequence, U+FFFD, which stands for
    bytes already lost) is written as its Python escape (``\\x00``, ``\\x1b``, ``\\ufffd``), so what a
    server sends can neither garble the terminal nor hide in it; the result is cut to ``limit``
    characters. Scrubbed before it is cut, so no part of a key survives the cut.
    """
    text = bytes(reply).decode("utf-8", "backslashreplace") if isinstance(reply, (bytes, bytearray)) else str(reply)
    text = " ".join(scrub(text, *secrets).split())
    shown = "".join(c if c.isprintable() and c != "\ufffd" else c.encode("unicode_escape").decode() for c in text)
    return shown if len(shown) <= limit else shown[: max(0, limit - 3)] + "..."


@overload
async def fan_out(count: int, work: Callable[[int], Awaitable[T]], *, concurrency: int | None) -> list[T]: ...


@overload
async def fan_out(
    count: int, work: Callable[[int], Awaitable[T]], *, concurrency: int | None, collect: tuple[type[E], ...]
) -> list[T | E]: ...


async def fan_out(
    count: int,
    work: Callable[[int], Awaitable[T]],
    *,
    concurrency: int | None,
    collect: tuple[type[BaseException], ...] = (),
) -> list[Any]:
    """``[await work(0), ..., await work(count - 1)]``, at most ``concurrency`` running at once: the
    one bounded fan-out of the harness.

    A fixed pool of ``concurrency`` workers takes the indices in order, so no more than
    ``concurrency`` items are ever in flight; ``None`` puts every item under way at once, for work
    that bounds its own requests with a semaphore it gives up while a request waits to be retried
    (:class:`Held`: the judges and the concept extractors, whose items send several requests).

    An item that raises one of the ``collect`` types (the collect-failures mode: a request that
    failed, which the caller counts) has that exception in its place, and the batch goes on. Any
    other exception stops the batch: no worker starts another item once it is known (the flag is
    set before the error leaves the item), the items in flight are cancelled, and that first error
    is raised as it is.
    """
    results: list[Any] = [None] * count
    indices = iter(range(count))
    failed: list[BaseException] = []

    async def worker() -> None:
        while not failed:
            i = next(indices, None)
            if i is None:
                return
            try:
                results[i] = await work(i)
            except collect as error:
                results[i] = error
            except BaseException as error:
                failed.append(error)
                raise

    size = count if concurrency is None else min(max(1, concurrency), count)
    workers = [asyncio.ensure_future(worker()) for _ in range(size)]
    try:
        if workers:
            await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
        if failed:
            raise failed[0]
        for task in workers:
            task.result()
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return results


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
