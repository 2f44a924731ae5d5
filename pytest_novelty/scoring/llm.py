"""Plumbing shared by the components that ask a chat model: the ``openai:`` and ``hf:`` judges
(:mod:`.judges`) and concept extractors (:mod:`.concepts`), which differ only in what they ask
and how they read the reply.

- :class:`OpenAIChat`: a client of an OpenAI-compatible chat endpoint on the one
  :class:`~pytest_novelty.infra.endpoint.Endpoint` the served model uses too (URL, key, the
  retrying HTTP client, notices), sending through the ``openai`` package (:class:`ChatClient`), with
  what each failure means (:meth:`OpenAIChat._create`) and the preflight (:meth:`OpenAIChat.check`).
- :class:`LocalChatModel`: a local causal LM through the generation layer, checked and
  fingerprinted when opened, loaded on first use, sampled with a seed per attempt.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast, get_type_hints

from pytest_novelty.infra.concurrency import Held, run_coroutine
from pytest_novelty.infra.endpoint import Endpoint
from pytest_novelty.infra.errors import ConfigError, HarnessError, PreflightError
from pytest_novelty.infra.hashing import Memo, identity_memo
from pytest_novelty.infra.http import PREFLIGHT_TIMEOUT, Connection, ConnectionOptions, Reply, Traffic, attempts_of
from pytest_novelty.infra.identity import checkpoint_identity
from pytest_novelty.infra.redact import echo
from pytest_novelty.infra.retry import failure_reason, is_retryable
from pytest_novelty.suites.prompting import Message

if TYPE_CHECKING:
    import httpx

__all__ = ["DEFAULT_BASE_URL", "LOCAL_CHAT_OPTIONS", "ChatClient", "EndpointOptions", "LocalChatModel",
           "LocalChatOptions", "OpenAIChat", "RequestFailed", "checked_identity_id", "is_about"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def is_about(error: Mapping[str, Any] | None, param: str, text: str = "") -> bool:
    """Whether a 400 answer complains about the request parameter ``param``: its error object names
    it, or its message (else ``text``, the answer as it came) speaks of it."""
    found = dict(error or {})
    if found.get("param") == param:
        return True
    message = str(found.get("message") or text or "")
    if param == "n":
        return bool(re.search(r"(?<![\w'])'?n'?\s+(must|should|is|>|=)|\bparameter 'n'|`n`", message))
    return param in message.lower()


class RequestFailed(Exception):
    """A request that yielded no reply; the message says why (a countable reason) and holds no key."""


class EndpointOptions(ConnectionOptions, total=False):
    """Where and how an ``openai:`` judge or concept extractor reaches its chat endpoint."""

    base_url: str | None
    """``OPENAI_BASE_URL``, else OpenAI's own endpoint, when None."""
    api_key: str | None
    """``OPENAI_API_KEY`` when None."""
    max_tokens: int | None
    """The longest reply asked for (None: the server's default)."""


class OpenAIChat:
    """A client of an OpenAI-compatible chat endpoint (``openai:MODEL``); ``what`` names the component
    in errors. A subclass opens a client per run with :meth:`_client` and sends through :meth:`_create`."""

    def __init__(
        self, what: str, model: str, *, temperature: float | None, endpoint: EndpointOptions, **defaults: Any
    ) -> None:
        """``defaults`` fill the connection options ``endpoint`` leaves out."""
        given: dict[str, Any] = dict(endpoint)
        base_url, api_key, max_tokens = (given.pop(name, None) for name in ("base_url", "api_key", "max_tokens"))
        self.what = what
        self.model = model
        self.spec = f"openai:{model}"
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.endpoint = Endpoint(self.base_url, api_key=api_key, variables=("OPENAI_API_KEY",))
        self.shown_url = self.endpoint.shown
        self.temperature = temperature
        self.send_temperature = temperature is not None
        """Whether requests carry ``temperature``: not for ``None``, nor once the model rejected it."""
        self.max_tokens = max_tokens
        self.connection = Connection.of(cast(ConnectionOptions, given), **defaults)
        self.traffic = Traffic()

    @property
    def requests_sent(self) -> int:
        """HTTP requests sent over the life of this client (all attempts)."""
        return self.traffic.requests

    def _client(self, connection: Connection | None = None) -> ChatClient:
        """A fresh client for one run (bound to its event loop); a 200 that is not JSON is retried."""
        connection = connection or self.connection
        waiting = self.endpoint.on_wait(f"{self.what} at {self.shown_url}", connection.retry)
        return ChatClient(self.endpoint.client(connection, self.traffic, accept=_not_json, on_wait=waiting),
                          self.endpoint)  # fmt: skip

    def check(self, *, timeout: float = PREFLIGHT_TIMEOUT) -> None:
        """One ``GET /models``: a :class:`~pytest_novelty.infra.errors.PreflightError` when the endpoint is
        unreachable or silent or refuses the key (a missing key for OpenAI's own is named without a
        request). Any other answer passes, even 404 (not every server lists its models)."""
        where = f"the {self.what} {self.spec} at {self.shown_url}"
        if self.endpoint.needs_key:
            raise PreflightError(f"OPENAI_API_KEY is not set; {where} needs it")
        response = run_coroutine(self.endpoint.get_models(timeout, where=where))
        if response.status_code in (401, 403):
            raise PreflightError(self._refused(response))

    def _refused(self, response: httpx.Response) -> str:
        """The one line for a 401/403: the status, the server's message, and what to check."""
        hint = "OPENAI_API_KEY is not set" if not self.endpoint.key else "check OPENAI_API_KEY"
        return f"the {self.what} at {self.shown_url} refused the API key ({self._status(response)}); {hint}"

    def _body(self, messages: list[Message], **extra: Any) -> dict[str, Any]:
        """The request body: model, messages, ``extra``, and the sampling settings in force now."""
        body: dict[str, Any] = {"model": self.model, "messages": messages, **extra}
        if self.send_temperature:
            body["temperature"] = self.temperature
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    async def _create(
        self, client: ChatClient, semaphore: asyncio.Semaphore, prepare: Callable[[], dict[str, Any] | None], *,
        adapt: Callable[[dict[str, Any] | None, str, dict[str, Any]], bool] | None = None,
        fatal_unreachable: Callable[[], bool] | None = None,
    ) -> list[str] | None:
        """One logical request (the HTTP client retries it): the texts of the reply's choices, or None
        when ``prepare`` (run under ``semaphore`` before each sending, so a request that waited uses
        what those before it learned) returns no body.

        A 400 about ``temperature`` is sent again without it, for the client's life; ``adapt(error,
        text, body)`` may claim other 400s (True: send again). A rejected key or an unknown model is a
        ``HarnessError``, and so is a request still failing after its last attempt when
        ``fatal_unreachable()`` says nothing has worked yet in the run; any other failure is a
        :class:`RequestFailed` with a short, redacted, countable reason."""
        while True:
            async with Held(semaphore):  # given up while the request waits to be retried
                body = prepare()
                if body is None:
                    return None
                reply = await client.post(body)
            response = reply.response
            if response is not None:
                status = response.status_code
                if 200 <= status < 300:
                    return _choice_texts(response)
                if status in (401, 403):
                    raise HarnessError(self._refused(response))
                if status == 404:
                    raise HarnessError(
                        f"the {self.what} at {self.shown_url} has no model {self.model!r} "
                        "(404); check the spec and the base URL"
                    )
                if status == 400:
                    error = self.endpoint.error_of(response)
                    if "temperature" in body and is_about(error, "temperature", response.text):
                        self.send_temperature = False  # a model that only runs at its default temperature
                        continue
                    if adapt is not None and adapt(error, response.text, body):
                        continue
                if not is_retryable(status):
                    raise RequestFailed(f"the request was rejected: {self._describe(reply)}")
            if fatal_unreachable is not None and fatal_unreachable():
                # Nothing has worked yet in this run: the endpoint is down, not one request.
                raise HarnessError(self._down(reply))
            raise RequestFailed(f"gave up after {reply.attempts} attempts: {self._describe(reply)}")

    def _down(self, reply: Reply) -> str:
        """The one line for an endpoint that failed the first request of a run after every retry."""
        tried = f"{reply.attempts} attempts over {reply.seconds:.0f} s"
        if reply.response is None and reply.problem != "timed out":
            return (
                f"cannot reach the {self.what} at {self.shown_url} ({reply.problem}, {tried}); "
                "is the server running and the URL right?"
            )
        return f"the {self.what} at {self.shown_url} failed every request: {self._describe(reply)} ({tried})"

    def _status(self, response: httpx.Response) -> str:
        """``HTTP 503: message`` (the server's message, when it gives one), without the key."""
        message = self.endpoint.error_message(response)
        return echo(f"HTTP {response.status_code}" + (f": {message}" if message else ""), self.endpoint.key, limit=300)

    def _describe(self, reply: Reply) -> str:
        """A one-line reason for a request that got no reply, with the key and anything resembling one removed."""
        if reply.response is not None:
            return self._status(reply.response)
        if reply.problem == "timed out":
            text = f"timed out after {self.connection.timeout:g} s"
        else:
            text = f"cannot reach {self.shown_url} ({reply.problem})"
        return echo(text, self.endpoint.key, limit=300)


class ChatClient:
    """One run's ``openai.AsyncOpenAI`` over the harness's retrying HTTP client ``http`` (its own retries
    off), sending the plain POST of the chat route: no typed request transform and no response models
    (they were a third of a judge's CPU)."""

    def __init__(self, http: httpx.AsyncClient, endpoint: Endpoint) -> None:
        import openai

        self.http = http
        # A local server needs no key, but the package wants one: a placeholder it sends as the bearer.
        # A plain httpx client: openai 1.x and 2.x are built on httpx, 3.x (on httpx2) takes it as a
        # "legacy" one, so its types do not name it.
        self.sdk = openai.AsyncOpenAI(base_url=endpoint.root, api_key=endpoint.key.reveal() or "no-key",
                                      default_query=endpoint.query or None, http_client=cast(Any, http),
                                      max_retries=0)  # fmt: skip

    async def post(self, body: dict[str, Any]) -> Reply:
        """POST ``body`` to ``/chat/completions`` and say how it ended (the retries done below)."""
        import httpx
        import openai

        response: Any
        try:
            response = await self.sdk.post("/chat/completions", cast_to=cast(Any, httpx.Response), body=body)
        except openai.APIStatusError as error:  # the last answer of every attempt, a status the caller reads
            response = error.response
        except openai.APIConnectionError as error:  # timed out, refused, dropped: no answer at all
            cause = error.__cause__ if isinstance(error.__cause__, Exception) else error
            attempts, seconds = attempts_of(cause)
            return Reply(None, attempts, failure_reason(cause), seconds)
        attempts, seconds = attempts_of(response)
        return Reply(response, attempts, "" if response.status_code == 200 else f"HTTP {response.status_code}", seconds)

    async def aclose(self) -> None:
        await self.http.aclose()


def _not_json(response: Any) -> str | None:
    """Why a 200 answer is worth another attempt: it is not JSON (a proxy's error page); else None."""
    try:
        json.loads(response.content)
    except ValueError:
        return "the answer is not JSON"
    return None


def _choice_texts(response: Any) -> list[str]:
    """The message text of each choice of a chat completion answer (``""`` for a missing one)."""
    try:
        answer = json.loads(response.content)
    except ValueError:
        raise RequestFailed(f"the reply is not JSON: {echo(response.content, limit=120)}") from None
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list):
        raise RequestFailed(f"the reply has no choices: {echo(json.dumps(answer, ensure_ascii=False), limit=120)}")
    texts = []
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        texts.append(content if isinstance(content, str) else "")
    return texts


def checked_identity_id(
    spec: str, path: str, *, trust_remote_code: bool, field: str | None = None, memo: Memo | None = None
) -> str:
    """Check the checkpoint folder ``path`` cheaply and return its identity_id; a bad folder is a
    ``ConfigError`` prefixed with ``spec`` (``hf:PATH``, ``reward:PATH``) on ``field``."""
    from pytest_novelty.generation.checkpoint import check_checkpoint

    try:
        check_checkpoint(path, trust_remote_code=trust_remote_code)
    except ConfigError as exc:
        raise ConfigError(f"{spec}: {exc}", field=field) from None
    return checkpoint_identity(path, memo=memo).id


class LocalChatOptions(TypedDict, total=False):
    """How a local chat model (``hf:PATH`` judges and concept extractors) samples and loads."""

    temperature: float
    batch_size: int
    """Rows per batch; 0: as many as the memory allows."""
    max_new_tokens: int
    seed: int
    """The seed of the first attempt; a re-ask ``k`` samples with ``seed + 7919 k``."""
    device: str
    trust_remote_code: bool


LOCAL_CHAT_OPTIONS: dict[str, type | None] = dict(get_type_hints(LocalChatOptions))
"""The names and types of :class:`LocalChatOptions`, for a backend's registration."""


class LocalChatModel:
    """A local causal LM, asked through the generation layer's backend; loaded on first use, but
    checked and fingerprinted at once (a bad path fails on ``field`` when the component is opened)."""

    def __init__(
        self, path: str, *, field: str | None, options: LocalChatOptions, defaults: LocalChatOptions,
        cache_dir: Path | str | None = None,
    ) -> None:
        from pytest_novelty.suites.schema import GenerationSettings

        given: dict[str, Any] = {**defaults, **options}
        if int(given["batch_size"]) < 0 or int(given["max_new_tokens"]) < 1:
            raise ValueError("max_new_tokens must be >= 1, batch_size (0: auto) >= 0")
        self.trust_remote_code = bool(given["trust_remote_code"])
        # One memo for the check here and the generator's load: an unchanged checkpoint is hashed
        # once, not on every run.
        self._memo = None if cache_dir is None else identity_memo(Path(cache_dir))
        self.identity_id = checked_identity_id(
            f"hf:{path}", path, trust_remote_code=self.trust_remote_code, field=field, memo=self._memo
        )
        self.path = path
        self.spec = f"hf:{path}"
        self.sampling = GenerationSettings(
            temperature=float(given["temperature"]), top_p=1.0, top_k=0, max_new_tokens=int(given["max_new_tokens"]),
            seed=int(given["seed"]), batch_size=int(given["batch_size"]),
        )
        """How replies are sampled (``samples`` and ``seed`` are set per call)."""
        self.device = str(given["device"])
        self.sequences_generated = 0
        """Replies generated over the life of this component (re-asks included)."""
        self._field = field
        self._generator: Any = None

    def _load(self) -> Any:
        if self._generator is None:
            from pytest_novelty.generation.backends import open_generator

            try:
                self._generator = open_generator(
                    self.path, device=self.device, trust_remote_code=self.trust_remote_code, memo=self._memo
                )
            except ConfigError as exc:
                raise ConfigError(f"{self.spec}: {exc}", field=self._field) from None
        return self._generator

    def _chat_text(self, messages: list[Message], plain: Callable[[list[Message]], str]) -> tuple[str, bool]:
        """The text the model sees for ``messages``, and whether it is ``plain(messages)`` because the
        checkpoint has no chat template (a base model)."""
        from pytest_novelty.generation.checkpoint import NoChatTemplate

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

        settings = replace(self.sampling, samples=samples, seed=self.sampling.seed + 7919 * attempt)
        replies, _ = generate(self._load(), texts, settings, on_batch=on_batch)
        self.sequences_generated += sum(len(r) for r in replies)
        return replies
