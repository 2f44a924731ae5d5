"""Generation through a served model: ``--model openai:NAME --model-base-url URL``.

Any OpenAI-protocol server works (vLLM, SGLang, TGI, ``transformers serve``, OpenAI); for a model
larger than one machine the serving engine is the distributed engine and the gate its client.
``docs/models.md`` says what a user sees: the routes, the preflight, which replies are answers,
timeouts, retries, notices, the key and the cache key. Two things a reader of the code must know:
each row is one request with its row seed cut to 31 bits (every server accepts that), and a reply
is checked (:func:`read_reply`) before its row is handed on, so only answers reach the cache. The
URL, key, client, preflight request and notices are the :class:`~pytest_novelty.infra.endpoint.Endpoint`
the judges use too.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Unpack
from urllib.parse import urlsplit

from pytest_novelty.generation import Reproducibility
from pytest_novelty.generation.backends import MODEL_SOURCES
from pytest_novelty.infra.concurrency import fan_out, run_coroutine
from pytest_novelty.infra.endpoint import NOTIFY_EVERY, Endpoint, bare_url
from pytest_novelty.infra.errors import ConfigError, HarnessError, PreflightError, did_you_mean
from pytest_novelty.infra.http import (
    CONNECTION_OPTIONS,
    PREFLIGHT_TIMEOUT,
    Connection,
    ConnectionOptions,
    Traffic,
    post_json,
)
from pytest_novelty.infra.progress import notice
from pytest_novelty.infra.redact import echo
from pytest_novelty.infra.retry import is_retryable
from pytest_novelty.infra.storage import stable_hash
from pytest_novelty.suites.schema import GenerationSettings

if TYPE_CHECKING:
    import httpx

    from pytest_novelty.generation import Batch, ModelInput

PREFIX = "openai:"
API_KEY_VARIABLES = ("NOVELTY_MODEL_API_KEY", "OPENAI_API_KEY")
"""Where the key is read from, first one set wins."""
_SET_KEY = f"set {API_KEY_VARIABLES[0]} (or {API_KEY_VARIABLES[1]})"
CHAT = "\x00chat\x00"
"""Marks a rendered chat input: the message list as JSON after it (sent to the chat endpoint)."""
ROWS_PER_BATCH = 256
"""Rows handed over per call: the server batches them itself; this size keeps the cache written often."""
CONCURRENCY = 64
"""Requests in flight by default: enough to keep a serving engine's batch full."""
TIMEOUT = 60.0
"""Seconds one request may take by default (the judges' figure): a row's answer, generated whole."""
MAX_RETRY_TIME = 120.0
"""Seconds one row may spend on attempts and waits by default (the judges' figure)."""
REPLY_CHECK = 2
"""Part of the cache identity_id: answers cached before replies were checked (:func:`read_reply`)
might be a broken server's empty replies, so they are not reused."""
ERROR_FINISH = frozenset({"error", "abort", "aborted", "cancelled", "canceled"})
"""``finish_reason`` values that say the server failed the request (vLLM and SGLang say ``abort``):
the text that comes with them is not an answer. Other reasons (``stop``, ``length``) are answers."""


class BadReply(ValueError):
    """An HTTP 200 reply that holds no answer; the message says what is wrong with it."""


def read_reply(data: Any, *, chat: bool) -> tuple[str, int | None]:
    """The text (``choices[0].message.content`` when ``chat``, else ``choices[0].text``) and completion
    tokens (None when not said) of an OpenAI-style reply. Raises :class:`BadReply` when it holds no
    answer: no choices, a text null, left out or not a string, a ``finish_reason`` in
    :data:`ERROR_FINISH`, or an empty text with no ``finish_reason`` (``""`` with ``"stop"`` is an answer).
    """
    if not isinstance(data, dict):
        raise BadReply(f"the reply is not a JSON object: {_short(data)}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        error = data.get("error")
        message = error.get("message", error) if isinstance(error, dict) else error
        said = f" (it reports an error: {_short(message)})" if error else ""
        what = "an empty choices list" if isinstance(choices, list) else "no choices"
        raise BadReply(f"the reply has {what}{said}")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise BadReply(f"the reply's choice is not an object: {_short(choice)}")
    finish = choice.get("finish_reason")
    reason = finish.get("type") if isinstance(finish, dict) else finish
    if isinstance(reason, str) and reason.strip().lower() in ERROR_FINISH:
        detail = finish.get("message") if isinstance(finish, dict) else None
        raise BadReply(f'the reply ends with finish_reason "{reason}"' + (f": {_short(detail)}" if detail else ""))
    if chat:
        message = choice.get("message")
        if not isinstance(message, dict):
            raise BadReply("the reply's choice has no message")
        holder, field = message, "message content"
    else:
        holder, field = choice, "text"
    key = "content" if chat else "text"
    if key not in holder:
        raise BadReply(f"the reply has no {field}")
    text = holder[key]
    if text is None:
        refusal = holder.get("refusal") if chat else None
        raise BadReply(f"the reply's {field} is null" + (f" (refusal: {_short(refusal)})" if refusal else ""))
    if not isinstance(text, str):
        raise BadReply(f"the reply's {field} is not a string: {_short(text)}")
    if not text and reason is None:
        raise BadReply(f"the reply's {field} is empty and it gives no finish_reason")
    usage = data.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return text, tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None


def _short(value: Any, limit: int = 120) -> str:
    """A part of a reply, quoted printable and short (:func:`~pytest_novelty.infra.redact.echo`)."""
    text = value if isinstance(value, (str, bytes)) else json.dumps(value, ensure_ascii=False, default=str)
    return echo(text, limit=limit)


def silent_server_bound(connection: Connection) -> tuple[int, float]:
    """The attempts and the most seconds a request takes against a server that accepts the
    connection and never answers: each attempt waits the whole ``timeout``, and another follows
    while :meth:`~pytest_novelty.infra.retry.Attempts.next_wait` allows it (the worst case of the
    policy's jitter, so a run may stop a little sooner)."""
    policy = connection.retry
    spent, attempts = 0.0, 0
    while True:
        attempts += 1
        spent += connection.timeout
        if attempts >= policy.max_attempts:
            return attempts, spent
        wait = min(policy.max_backoff, policy.backoff * 2 ** (attempts - 1))
        if spent + wait > policy.max_retry_time:
            return attempts, spent
        spent += wait


def _name(model: str) -> str:
    """The served name in ``openai:NAME[?options]``."""
    return model[len(PREFIX) :].partition("?")[0].strip() if model.startswith(PREFIX) else ""


def check_served(model: str, base_url: str | None) -> None:
    """One clear line when ``openai:NAME`` lacks its name or its endpoint, or has an unknown option."""
    if not _name(model):
        raise ConfigError("a served model is openai:NAME, the name the server knows it by", field="--model")
    source = MODEL_SOURCES.find(model)
    if source is not None:
        MODEL_SOURCES.options(source, {})  # an unknown or mistyped ?option, named before anything runs
    if not base_url:
        raise ConfigError(
            f"{model} is served: pass its endpoint with --model-base-url http://HOST:PORT/v1", field="--model-base-url"
        )
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"{bare_url(base_url)!r} is not an http(s) URL; pass e.g. http://HOST:PORT/v1", field="--model-base-url"
        )


@MODEL_SOURCES.register(
    "openai",
    argument="NAME",
    check=check_served,
    options=CONNECTION_OPTIONS,
    summary="a model behind an OpenAI-compatible endpoint",
)
def open_served(
    name: str,
    *,
    base_url: str | None = None,
    revision: str | None = None,
    memo: object = None,
    **connection: Unpack[ConnectionOptions],
) -> OpenAIGenerator:
    """``--model openai:NAME[?option=value&...]`` at ``base_url``, reached as the options say; ``memo``
    does not apply (a served model has no files)."""
    return OpenAIGenerator(PREFIX + name, base_url=base_url, revision=revision, **connection)


class OpenAIGenerator:
    """Samples continuations from a served model."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        revision: str | None = None,
        api_key: str | None = None,
        notify_every: float = NOTIFY_EVERY,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        """``connection`` defaults to :data:`CONCURRENCY` requests in flight, :data:`TIMEOUT` s each,
        6 attempts within :data:`MAX_RETRY_TIME` s; notices of waits and retries come at most once
        per kind per ``notify_every`` s. The key: ``api_key``, else the first of :data:`API_KEY_VARIABLES`."""
        check_served(model, base_url)
        assert base_url is not None
        self.name = model
        self.model = model[len(PREFIX) :]
        self.endpoint = Endpoint(base_url, api_key=api_key, variables=API_KEY_VARIABLES, notify_every=notify_every)
        self.base_url = self.endpoint.bare
        self.revision = revision
        self.identity_id = "served:" + stable_hash(self.base_url, self.model, revision or "", REPLY_CHECK)[:16]
        self.device = self.base_url
        self.tokens_generated = 0
        self.connection = Connection.of(
            connection, concurrency=CONCURRENCY, timeout=TIMEOUT, max_retry_time=MAX_RETRY_TIME
        )
        self.traffic = Traffic()
        if revision is None:
            notice(
                f"[novelty] {model}: no --model-revision pinned; cached answers from {self.base_url} are trusted "
                "to come from the same weights (pin one whenever the served weights change)"
            )

    def __repr__(self) -> str:
        return f"OpenAIGenerator({self.name!r}, base_url={self.base_url!r}, revision={self.revision!r})"

    @property
    def reproducibility(self) -> Reproducibility:
        return Reproducibility(False, f"served by {self.base_url}: each request carries its row seed, and the answers "
                                      "are as reproducible as the server makes them (batch-invariant only where it "
                                      "runs so, e.g. vLLM with VLLM_BATCH_INVARIANT=1)")

    # -- the Generator protocol ----------------------------------------------------------------------

    def render(self, model_input: ModelInput) -> str:
        """Plain text as is; a message list as a marked JSON string (the cache key holds the exact
        messages, and :meth:`sample` sends them to the chat endpoint)."""
        if isinstance(model_input, str):
            return model_input
        return CHAT + json.dumps([dict(m) for m in model_input], ensure_ascii=False)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """No tokenizer here: characters / 4, which only orders rows by length for batching."""
        return [len(t) // 4 + 1 for t in texts]

    def max_rows(self, prompt_tokens: int, settings: GenerationSettings) -> int:
        """The server fits rows to its memory; a call hands it :data:`ROWS_PER_BATCH`."""
        return ROWS_PER_BATCH

    def sample(self, batch: Batch) -> list[str]:
        """One request per row, ``concurrency`` in flight; each answer is handed on as it comes."""
        return run_coroutine(self._sample_all(batch))

    @property
    def requests_sent(self) -> int:
        """HTTP requests sent over the generator's life (every attempt counts)."""
        return self.traffic.requests

    # -- the preflight -------------------------------------------------------------------------------

    def check(self, *, timeout: float = PREFLIGHT_TIMEOUT) -> None:
        """One ``GET {base}/models`` within ``timeout`` s: a :class:`~pytest_novelty.infra.errors.PreflightError`
        when the server is unreachable or silent, refuses or lacks the key, or answers anything but a
        model list; a ``ConfigError`` on ``--model`` when it does not list ``NAME``. A 429 passes (the
        server is there; the run's requests wait as it asks)."""
        where = f"{self.name} at {self.base_url}"
        if self.endpoint.needs_key:
            raise PreflightError(f"{where} needs a key and none is set; {_SET_KEY}")
        silent = ": the server accepts connections but does not answer (stuck, overloaded or still starting?)"
        response = run_coroutine(self.endpoint.get_models(timeout, where=where, silent=silent, fix="--model-base-url"))
        status = response.status_code
        if status in (401, 403):
            raise PreflightError(self._refused(f"HTTP {status}: {self._message(response)}"))
        if status == 404:
            raise PreflightError(
                f"{where}: GET /models found nothing (HTTP 404: {self._message(response)}); check --model-base-url "
                "(usually ending in /v1)"
            )
        if status == 429:
            return
        if status != 200:
            raise PreflightError(f"{where} answered GET /models with HTTP {status}: {self._message(response)}")
        names = _listed_models(response)
        if names is None:
            raise PreflightError(f"{where}: GET /models did not answer a model list: {_short(response.content)}")
        if self.model not in names:
            listed = ", ".join(repr(_short(n)) for n in names[:8])
            listed += f" and {len(names) - 8} more" if len(names) > 8 else ""
            raise ConfigError(
                f"{where} does not serve {self.model!r}{did_you_mean(self.model, names)}; "
                f"it lists {listed or 'no models'} (pass the name it lists, as openai:NAME)",
                field="--model",
            )

    # -- requests ------------------------------------------------------------------------------------

    def body(self, text: str, seed: int, settings: GenerationSettings) -> tuple[str, dict[str, Any]]:
        """The path and JSON body of one row's request."""
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": settings.max_new_tokens,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "seed": seed & 0x7FFFFFFF,
        }
        if settings.top_k > 0:
            body["top_k"] = settings.top_k
        if settings.stop:
            body["stop"] = list(settings.stop)
        if text.startswith(CHAT):
            return "/chat/completions", {**body, "messages": json.loads(text[len(CHAT) :])}
        return "/completions", {**body, "prompt": text}

    async def _sample_all(self, batch: Batch) -> list[str]:
        done = [0, 0]  # rows answered, tokens
        waiting: dict[int, float] = {}  # row -> when its request was sent

        retrying = self.endpoint.on_wait(f"{self.name} at {self.base_url}", self.connection.retry)
        async with self.endpoint.client(self.connection, self.traffic, accept=self._reject, on_wait=retrying) as client:

            async def row(i: int) -> str:
                waiting[i] = time.monotonic()
                try:
                    path, body = self.body(batch.texts[i], batch.seeds[i], batch.settings)
                    text, tokens = await self._request(client, path, body)
                finally:
                    del waiting[i]
                done[0] += 1
                done[1] += tokens
                self.tokens_generated += tokens
                batch.finished(i, text)  # only a checked answer reaches the caller's cache
                batch.step(done[0], done[1])
                return text

            watch = asyncio.ensure_future(self._watch(waiting))
            try:
                return await fan_out(len(batch), row, concurrency=self.connection.concurrency)
            finally:
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)

    async def _watch(self, waiting: dict[int, float]) -> None:
        """Say every ``notify_every`` s that the run waits, once the oldest request has waited that long."""
        attempts, bound = silent_server_bound(self.connection)
        every = self.endpoint.notify_every
        while True:
            await asyncio.sleep(every / 5)
            if not waiting:
                continue
            oldest = time.monotonic() - min(waiting.values())
            if oldest >= every:
                self.endpoint.say(
                    "waiting",
                    f"[novelty] {self.name} at {self.base_url}: waiting for {len(waiting)} "
                    f"answer{'s' if len(waiting) != 1 else ''}, the oldest for {oldest:.0f} s (a request times "
                    f"out after {self.connection.timeout:g} s; a row with no answer stops the run after "
                    f"{attempts} attempts, at most {bound:.0f} s)"
                )

    def _reject(self, response: httpx.Response) -> str | None:
        """The ``accept`` check of the HTTP client: why a 200 reply holds no answer, or None."""
        try:
            read_reply(_json(response), chat=response.request.url.path.endswith("/chat/completions"))
        except BadReply as problem:
            return self.endpoint.scrub(str(problem))
        return None

    async def _request(self, client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> tuple[str, int]:
        """One row's answer and its token count (the client retries)."""
        where = f"{self.name} at {self.base_url}{path}"
        reply = await post_json(client, self.endpoint.url(path), body)
        tried = f"after {reply.attempts} attempt{'s' if reply.attempts != 1 else ''}"
        if reply.response is not None:
            if reply.status == 200:
                try:
                    text, tokens = read_reply(_json(reply.response), chat=path == "/chat/completions")
                except BadReply as problem:
                    why, url = self.endpoint.scrub(str(problem)), f"{self.base_url}{path}"
                    raise HarnessError(f"{self.name}: no usable answer from {url} {tried} ({why})") from None
                return text, tokens if tokens is not None else len(text.split())
            reason = f"{reply.problem}: {self._message(reply.response)}"
            if reply.status in (401, 403):
                raise HarnessError(self._refused(reason, path))
            if reply.status == 404:
                raise HarnessError(
                    f"{where}: not found ({reason}); check --model-base-url "
                    "(usually ending in /v1) and the model name the server lists at /v1/models"
                )
            if not is_retryable(reply.response.status_code):
                raise HarnessError(f"{where}: the server refused the request ({reason})")
        hint = ""
        if reply.response is None:
            reason = reply.problem
            if reason == "timed out":
                reason = f"timed out after {self.connection.timeout:g} s each"
                hint = f"; for a server that needs longer per answer, pass --model '{self.name}?timeout=SECONDS'"
        raise HarnessError(f"{self.name}: no answer from {self.base_url}{path} {tried} ({reason}){hint}")

    def _refused(self, reason: str, path: str = "") -> str:
        """The one line for a 401/403: what was refused, and the variable to set."""
        where = f"{self.name} at {self.base_url}{path}"
        if not self.endpoint.key:
            return f"{where}: the endpoint needs a key and none is set ({reason}); {_SET_KEY}"
        return (
            f"{where}: the endpoint refused the key from {self.endpoint.key_from} ({reason}); "
            f"set {API_KEY_VARIABLES[0]} to a key it accepts"
        )

    def _message(self, response: httpx.Response) -> str:
        """The server's error message (else what it answered), quoted printable, short and without the key."""
        said = self.endpoint.error_message(response) or echo(response.content, self.endpoint.key)
        return said or response.reason_phrase


def _json(response: httpx.Response) -> Any:
    """The reply's JSON, or :class:`BadReply` when it is not JSON."""
    try:
        return json.loads(response.content)
    except ValueError:
        raise BadReply(f"the reply is not JSON: {_short(response.content[:400])}") from None


def _listed_models(response: httpx.Response) -> list[str] | None:
    """The model ids of a ``GET /models`` answer (``{"data": [{"id": ...}, ...]}``), or None."""
    try:
        data = json.loads(response.content)
    except ValueError:
        return None
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    return [str(e["id"]) for e in entries if isinstance(e, dict) and "id" in e]
