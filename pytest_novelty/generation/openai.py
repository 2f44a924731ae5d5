"""Generation through a served model: ``--model openai:NAME --model-base-url URL``.

Any server that speaks the OpenAI protocol works: vLLM (``vllm serve``), SGLang, TGI,
``transformers serve``, or OpenAI itself. For a model larger than one machine the serving engine
is the distributed engine (tensor and pipeline parallelism across its nodes); the gate is only
its client. The plain-text inputs (base models, few-shot prompting) go to ``/v1/completions``;
chat inputs (message lists) go to ``/v1/chat/completions``, so the server applies the model's own
chat template.

How a call goes:

- every row is one request carrying its own seed (the row seed, cut to 31 bits, which every
  server accepts) and the suite's sampling settings (``temperature``, ``top_p``, ``max_tokens``,
  ``stop``; ``top_k`` only when the suite sets one, since OpenAI itself does not know it);
- requests run concurrently (``concurrency`` in flight) through the harness's one HTTP client
  (:meth:`pytest_novelty.infra.http.Connection.client`): 408, 409, 425, 429, 5xx, timeouts and dropped
  connections are retried with exponential backoff and jitter, honouring ``Retry-After`` (capped
  at two minutes), for at most ``max_attempts`` attempts and ``max_retry_time`` seconds;
  a rejected key, an unknown model or a request the server refuses stops the run with one line
  (:class:`~pytest_novelty.infra.errors.HarnessError`); so does a row still failing after its last
  attempt (the batches done before it stay cached);
- answers are cached per prompt like local generation (:func:`pytest_novelty.generation.generate`);
  the fingerprint in their key is the endpoint URL (without credentials), the model name and the
  ``--model-revision`` the user pins. A server cannot prove which weights it runs: without a
  pinned revision, cached answers are trusted to come from the same weights (said once, when the
  generator opens).

The key comes from ``NOVELTY_MODEL_API_KEY``, else ``OPENAI_API_KEY`` (a local server may need
none); it is sent in the ``Authorization`` header only, and never appears in output, caches or
errors.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Unpack
from urllib.parse import urlsplit, urlunsplit

from pytest_novelty.generation import MODEL_SOURCES
from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.infra.http import (
    Connection,
    ConnectionOptions,
    Secret,
    Traffic,
    fan_out,
    is_retryable,
    post_json,
    run_coroutine,
)
from pytest_novelty.infra.storage import stable_hash
from pytest_novelty.suites.schema import GenerationSettings

if TYPE_CHECKING:
    import httpx

    from pytest_novelty.generation import Batch, ModelInput

PREFIX = "openai:"
API_KEY_VARIABLES = ("NOVELTY_MODEL_API_KEY", "OPENAI_API_KEY")
"""Where the key is read from, first one set wins."""
CHAT = "\x00chat\x00"
"""Marks a rendered chat input: the message list as JSON after it (sent to the chat endpoint)."""
ROWS_PER_BATCH = 256
"""Rows handed over per call: the server batches them itself; this size keeps the cache written often."""


def check_served(model: str, base_url: str | None) -> None:
    """One clear line when ``openai:NAME`` lacks its name or its endpoint."""
    if not model.startswith(PREFIX) or not model[len(PREFIX) :]:
        raise ConfigError("a served model is openai:NAME, the name the server knows it by", field="--model")
    if not base_url:
        raise ConfigError(
            f"{model} is served: pass its endpoint with --model-base-url http://HOST:PORT/v1", field="--model-base-url"
        )
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"{endpoint(base_url)!r} is not an http(s) URL; pass e.g. http://HOST:PORT/v1", field="--model-base-url"
        )


def endpoint(base_url: str) -> str:
    """The endpoint as shown and keyed: no user:password part, no query, no trailing slash."""
    parts = urlsplit(base_url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


@MODEL_SOURCES.register(
    "openai", argument="NAME", check=check_served, summary="a model behind an OpenAI-compatible endpoint"
)
def open_served(
    name: str, *, base_url: str | None = None, revision: str | None = None, log: Callable[[str], None] | None = None
) -> OpenAIGenerator:
    """``--model openai:NAME``: the served model ``NAME`` at ``base_url``."""
    return OpenAIGenerator(PREFIX + name, base_url=base_url, revision=revision, log=log)


class OpenAIGenerator:
    """Samples continuations from a served model (see the module doc)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        revision: str | None = None,
        api_key: str | None = None,
        log: Callable[[str], None] | None = None,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        """``connection``: by default 64 requests in flight, 600 s each, 6 attempts within 900 s."""
        check_served(model, base_url)
        assert base_url is not None
        self.name = model
        self.model = model[len(PREFIX) :]
        self.base_url = endpoint(base_url)
        self._send_to = base_url.rstrip("/")  # credentials in the URL, if any, are the user's to send
        self.revision = revision
        self.fingerprint = "served:" + stable_hash(self.base_url, self.model, revision or "")[:16]
        self.device = self.base_url
        self.tokens_generated = 0
        self.connection = Connection.of(connection, concurrency=64, timeout=600.0, max_retry_time=900.0)
        """How the server is reached: requests in flight, timeout, retries (:class:`~.http.Connection`)."""
        self.traffic = Traffic()
        if api_key is None:
            api_key = next((os.environ[v] for v in API_KEY_VARIABLES if os.environ.get(v)), "")
        self._key = Secret(api_key)
        if revision is None and log is not None:
            log(
                f"[novelty] {model}: no --model-revision pinned; cached answers from {self.base_url} are trusted "
                "to come from the same weights (pin one whenever the served weights change)"
            )

    def __repr__(self) -> str:
        return f"OpenAIGenerator({self.name!r}, base_url={self.base_url!r}, revision={self.revision!r})"

    # -- the Generator protocol ----------------------------------------------------------------------

    def render(self, model_input: ModelInput) -> str:
        """Plain text as is; a message list as a marked JSON string, so that the cache key holds the
        exact messages and :meth:`sample` sends them to the chat endpoint (the server applies the
        template)."""
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
        """One request per row, ``concurrency`` in flight; ``on_step`` hears of each answer as it comes,
        ``on_row(i, text)`` receives it (so the cache keeps it at once)."""
        return run_coroutine(self._sample_all(batch))

    @property
    def requests_sent(self) -> int:
        """HTTP requests sent over the generator's life (every attempt counts)."""
        return self.traffic.requests

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
        headers = {"Authorization": f"Bearer {self._key.reveal()}"} if self._key.reveal() else {}
        done = [0, 0]  # rows answered, tokens

        async with self.connection.client(self._send_to, self.traffic, headers=headers) as client:

            async def row(i: int) -> str:
                text, tokens = await self._request(client, *self.body(batch.texts[i], batch.seeds[i], batch.settings))
                done[0] += 1
                done[1] += tokens
                self.tokens_generated += tokens
                batch.finished(i, text)
                batch.step(done[0], done[1])
                return text

            return await fan_out(len(batch), row, concurrency=self.connection.concurrency)

    async def _request(self, client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> tuple[str, int]:
        """One row's answer and its token count (the client retries; see the module doc)."""
        where = f"{self.name} at {self.base_url}{path}"
        reply = await post_json(client, self._send_to + path, body)
        if reply.response is not None:
            if reply.status == 200:
                return self._answer(reply.response, path)
            reason = f"{reply.problem}: {self._message(reply.response)}"
            if reply.status in (401, 403):
                raise HarnessError(f"{where}: the endpoint refused the key ({reason}); set {API_KEY_VARIABLES[0]}")
            if reply.status == 404:
                raise HarnessError(
                    f"{where}: not found ({reason}); check --model-base-url "
                    "(usually ending in /v1) and the model name the server lists at /v1/models"
                )
            if not is_retryable(reply.response.status_code):
                raise HarnessError(f"{where}: the server refused the request ({reason})")
        else:
            reason = reply.problem
        tried = f"after {reply.attempts} attempts"
        raise HarnessError(f"{self.name}: no answer from {self.base_url}{path} {tried} ({reason})")

    def _answer(self, response: httpx.Response, path: str) -> tuple[str, int]:
        try:
            data = response.json()
            choice = data["choices"][0]
            text = choice["message"]["content"] if path == "/chat/completions" else choice["text"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise HarnessError(
                f"{self.name} at {self.base_url}{path}: not an OpenAI-style answer: {response.text[:200]!r}"
            ) from None
        usage = data.get("usage") if isinstance(data, dict) else None
        tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
        return str(text or ""), int(tokens) if isinstance(tokens, int) else len(str(text or "").split())

    def _message(self, response: httpx.Response) -> str:
        """The server's error message, short and without the key."""
        try:
            data = response.json()
            error = data.get("error", data) if isinstance(data, dict) else data
            message = error.get("message", error) if isinstance(error, dict) else error
        except ValueError:
            message = response.text
        return self._scrub(" ".join(str(message).split()))[:200] or response.reason_phrase

    def _scrub(self, text: str) -> str:
        return self._key.hide(text)
