"""Plumbing shared by the components that ask a chat model: the ``openai:`` and ``hf:`` judges
(:mod:`.judges`) and concept extractors (:mod:`.concepts`).

They differ in what they ask and how they read the reply; reaching the model is the same, so it
lives here, once:

- :class:`OpenAIChat`, a base class for a client of an OpenAI-compatible chat endpoint: the base
  URL (``OPENAI_BASE_URL`` by default) and the key (``OPENAI_API_KEY``), held so that it never
  appears in a repr, an error or a cache; a fresh ``AsyncOpenAI`` client per run with the
  client's own retries switched off; and :meth:`OpenAIChat._create`, one request with bounded
  retries: 408, 409, 429, 5xx, timeouts and connection errors are retried with exponential
  backoff and jitter, honouring ``Retry-After`` (capped at :data:`MAX_RETRY_AFTER`); a model
  that rejects ``temperature`` is asked again without it, for the rest of the client's life; a
  rejected key or an unknown model stops the run (:class:`~pytest_novelty.errors.HarnessError`);
  any other failure is a :class:`RequestFailed` with a reason that is safe to show.
- :class:`LocalChatModel`, a base class for a local causal LM run through the generation layer:
  the checkpoint is checked and fingerprinted when the component is opened (:func:`checked_fingerprint`,
  also used by the reward judge), loaded on first use, and sampled in batches with a seed per
  attempt, so that a re-ask draws new replies.
- :func:`run_coroutine`, which lets the synchronous APIs drive asyncio code whether or not the
  caller already runs an event loop.

Only the layers below scoring are imported (errors, suites, generation), and heavy libraries
(``openai``, transformers through the generation layer) only when they are used.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import re
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pytest_novelty.errors import ConfigError, HarnessError
from pytest_novelty.suites.prompting import Message

T = TypeVar("T")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_RETRY_AFTER = 120.0
"""The longest ``Retry-After`` wait honoured, in seconds; a longer one is cut to this."""
RETRYABLE_STATUS = frozenset({408, 409, 429})
"""Statuses below 500 that are worth another attempt (timeout, conflict, rate limit)."""
_KEY_LIKE = re.compile(r"\b(sk|key|token)-[A-Za-z0-9_\-*.]{6,}", re.IGNORECASE)


# -- secrets and URLs ---------------------------------------------------------------------------


class Secret:
    """Holds an API key so that reprs, ``vars()`` and debug dumps show ``***``, never the key."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The key itself, for the one place that sends it."""
        return self._value

    def __repr__(self) -> str:
        return "***" if self._value else "''"


def safe_url(url: str) -> str:
    """``url`` without its user:password part, if any (for messages and reprs)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def retry_after(error: Exception) -> float | None:
    """The wait the server asked for, from ``retry-after-ms`` or ``retry-after`` (seconds or a date)."""
    headers = getattr(getattr(error, "response", None), "headers", None)
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
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


def is_about(error: Any, param: str) -> bool:
    """Whether a 400 error complains about the request parameter ``param``."""
    body = error.body if isinstance(getattr(error, "body", None), dict) else {}
    if body.get("param") == param:
        return True
    message = str(body.get("message") or getattr(error, "message", "") or "")
    if param == "n":
        return bool(re.search(r"(?<![\w'])'?n'?\s+(must|should|is|>|=)|\bparameter 'n'|`n`", message))
    return param in message.lower()


# -- openai: ------------------------------------------------------------------------------------


class RequestFailed(Exception):
    """A request that yielded no reply; the message says why and holds no key."""


class OpenAIChat:
    """A client of an OpenAI-compatible chat endpoint: settings, key, error wording and retries.

    ``what`` names the component in errors ("judge", "concept extractor"); its spec is
    ``openai:MODEL``. A subclass opens a client per run with :meth:`_client` and sends each
    request through :meth:`_create`.
    """

    def __init__(
        self,
        what: str,
        model: str,
        *,
        base_url: str | None,
        api_key: str | None,
        temperature: float | None,
        concurrency: int,
        timeout: float,
        max_attempts: int,
        backoff: float,
        max_backoff: float,
        max_tokens: int | None,
    ) -> None:
        self.what = what
        self.model = model
        self.spec = f"openai:{model}"
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.temperature = temperature
        self.send_temperature = temperature is not None
        """Whether requests carry ``temperature``: not for ``None``, nor once the model rejected it."""
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_tokens = max_tokens
        self.requests_sent = 0
        """HTTP requests sent over the life of this client (all attempts)."""
        self._api_key = Secret(api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", ""))

    def _client(self) -> Any:
        """A fresh async client for one run (bound to its event loop); its own retries are off."""
        import openai

        return openai.AsyncOpenAI(
            api_key=self._api_key.reveal() or "no-key",  # a local server may need none
            base_url=self.base_url,
            max_retries=0,
            timeout=self.timeout,
        )

    def _body(self, messages: list[Message], **extra: Any) -> dict[str, Any]:
        """The request body: model, messages, ``extra``, and the sampling settings in force now."""
        body: dict[str, Any] = {"model": self.model, "messages": messages, **extra}
        if self.send_temperature:
            body["temperature"] = self.temperature
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    async def _create(
        self,
        client: Any,
        semaphore: asyncio.Semaphore,
        prepare: Callable[[], dict[str, Any] | None],
        *,
        adapt: Callable[[Any, dict[str, Any]], bool] | None = None,
        fatal_unreachable: Callable[[], bool] | None = None,
    ) -> Any:
        """One logical request with bounded retries; the response, or ``None`` if ``prepare`` declined.

        ``prepare`` runs under ``semaphore`` before each attempt and returns the body to send (or
        ``None`` to send nothing), so a request that waited for its turn uses what the requests
        before it learned. A 400 about ``temperature`` is sent again without it; ``adapt`` may
        claim other 400s (it is given the error and the body; ``True``: prepare and send again,
        not counted as an attempt). When the endpoint cannot be reached after the last attempt
        and ``fatal_unreachable()`` is true, the run stops with a
        :class:`~pytest_novelty.errors.HarnessError`. Raises :class:`RequestFailed` otherwise.
        """
        import openai

        attempt = 0
        while True:
            attempt += 1
            body: dict[str, Any] = {}
            try:
                async with semaphore:
                    prepared = prepare()
                    if prepared is None:
                        return None
                    body = prepared
                    self.requests_sent += 1
                    return await client.chat.completions.create(**body)
            except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
                raise HarnessError(
                    f"the {self.what} at {safe_url(self.base_url)} refused the API key "
                    f"({error.status_code}); check OPENAI_API_KEY"
                ) from None
            except openai.NotFoundError:
                raise HarnessError(
                    f"the {self.what} at {safe_url(self.base_url)} has no model {self.model!r} "
                    "(404); check the spec and the base URL"
                ) from None
            except openai.BadRequestError as error:
                if "temperature" in body and is_about(error, "temperature"):
                    self.send_temperature = False  # a model that only runs at its default temperature
                    attempt -= 1
                    continue
                if adapt is not None and adapt(error, body):
                    attempt -= 1
                    continue
                raise RequestFailed(f"the request was rejected: {self._describe(error)}") from None
            except (openai.APIStatusError, openai.APIConnectionError) as error:
                status = getattr(error, "status_code", None)
                if status is not None and status not in RETRYABLE_STATUS and status < 500:
                    raise RequestFailed(f"the request was rejected: {self._describe(error)}") from None
                if attempt >= self.max_attempts:
                    unreachable = isinstance(error, openai.APIConnectionError) and not isinstance(
                        error, openai.APITimeoutError
                    )
                    if unreachable and fatal_unreachable is not None and fatal_unreachable():
                        raise HarnessError(
                            self._scrub(
                                f"cannot reach the {self.what} at {safe_url(self.base_url)} ({_cause(error)}, "
                                f"{attempt} attempts); is the server running and the URL right?"
                            )
                        ) from None
                    raise RequestFailed(f"gave up after {attempt} attempts: {self._describe(error)}") from None
                await asyncio.sleep(self._delay(attempt, error))

    def _delay(self, attempt: int, error: Exception) -> float:
        """Seconds before the next attempt: ``Retry-After`` if given (capped), else backoff; both jittered."""
        wait = retry_after(error)
        if wait is not None:
            return min(wait, MAX_RETRY_AFTER) * random.uniform(1.0, 1.1)
        return min(self.max_backoff, self.backoff * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)

    def _describe(self, error: Exception) -> str:
        """A one-line reason for ``error``, with the key and anything resembling one removed."""
        import openai

        if isinstance(error, openai.APITimeoutError):
            text = f"timed out after {self.timeout:g} s"
        elif isinstance(error, openai.APIConnectionError):
            text = f"cannot reach {safe_url(self.base_url)} ({_cause(error)})"
        elif isinstance(error, openai.APIStatusError):
            body = error.body
            message = body.get("message") if isinstance(body, dict) else None
            text = f"HTTP {error.status_code}" + (f": {message}" if message else "")
        else:
            text = str(error)
        return self._scrub(text)[:300]

    def _scrub(self, text: str) -> str:
        """``text`` with the key, and anything that looks like a key, replaced by ``***``."""
        key = self._api_key.reveal()
        if key:
            text = text.replace(key, "***")
        return _KEY_LIKE.sub("***", text)


def _cause(error: BaseException) -> str:
    """The name of what made a connection fail (``ConnectError``, ...)."""
    cause = error.__cause__
    return type(cause).__name__ if cause else "unknown error"


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

    thread = threading.Thread(target=target, name="novelty-llm")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


# -- hf: ----------------------------------------------------------------------------------------


def checked_fingerprint(spec: str, path: str, *, trust_remote_code: bool, field: str | None = None) -> str:
    """Check the checkpoint folder ``path`` cheaply and return its fingerprint (for cache keys).

    A bad folder raises :class:`~pytest_novelty.errors.ConfigError` prefixed with ``spec``
    (``hf:PATH``, ``reward:PATH``) and, when given, ``field``.
    """
    from pytest_novelty.generation.hf import check_checkpoint, checkpoint_fingerprint

    try:
        check_checkpoint(path, trust_remote_code=trust_remote_code)
    except ConfigError as exc:
        raise ConfigError(f"{spec}: {exc}", field=field) from None
    return checkpoint_fingerprint(path)


class LocalChatModel:
    """A local causal LM, asked through the generation layer's backend; loaded on first use.

    The checkpoint is checked and fingerprinted at once (so a bad path fails when the component
    is opened, and cache keys can name the exact weights); ``field`` is where such a
    :class:`~pytest_novelty.errors.ConfigError` points.
    """

    def __init__(
        self,
        path: str,
        *,
        field: str | None,
        temperature: float,
        batch_size: int,
        max_new_tokens: int,
        seed: int,
        device: str,
        trust_remote_code: bool,
    ) -> None:
        self.fingerprint = checked_fingerprint(f"hf:{path}", path, trust_remote_code=trust_remote_code, field=field)
        self.path = path
        self.spec = f"hf:{path}"
        self.temperature = temperature
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.device = device
        self.trust_remote_code = trust_remote_code
        self.sequences_generated = 0
        """Replies generated over the life of this component (re-asks included)."""
        self._field = field
        self._generator: Any = None

    def _load(self) -> Any:
        """The generator, loaded on the first call."""
        if self._generator is None:
            from pytest_novelty.generation import open_generator

            try:
                self._generator = open_generator(
                    self.path, device=self.device, trust_remote_code=self.trust_remote_code
                )
            except ConfigError as exc:
                raise ConfigError(f"{self.spec}: {exc}", field=self._field) from None
        return self._generator

    def _chat_text(self, messages: list[Message], plain: Callable[[list[Message]], str]) -> tuple[str, bool]:
        """The text the model sees for ``messages``, and whether it is ``plain(messages)`` because the
        checkpoint has no chat template (a base model)."""
        from pytest_novelty.generation.hf import NoChatTemplate

        generator = self._load()
        try:
            return str(generator.render(messages)), False
        except NoChatTemplate:  # not a failure to load the tokenizer: that one must surface
            return plain(messages), True

    def _sample(
        self, texts: Sequence[str], *, samples: int, attempt: int, on_batch: Callable[[Any], None] | None = None
    ) -> list[list[str]]:
        """``samples`` replies per text, batched by length; attempt ``k`` samples with its own seed."""
        from pytest_novelty.generation import generate
        from pytest_novelty.suites.schema import GenerationSettings

        settings = GenerationSettings(
            samples=samples,
            temperature=self.temperature,
            top_p=1.0,
            top_k=0,
            max_new_tokens=self.max_new_tokens,
            seed=self.seed + 7919 * attempt,
            batch_size=self.batch_size,
        )
        replies, _ = generate(self._load(), texts, settings, on_batch=on_batch)
        self.sequences_generated += sum(len(r) for r in replies)
        return replies
