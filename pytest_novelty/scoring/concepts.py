"""Concept extractors: which high-level concepts does each answer use?

Denial prompting (:mod:`pytest_novelty.denial`) forbids, in each round, the concepts that earlier
answers used: the characters, plot arc and themes of a story, the literary device and rhyme of a
poem line, how the items serve a tool-use plan (each task names its own, ``Task.concepts``). An
extractor lists them. It gets :class:`ConceptItem` records and returns one list of concepts per
item, in order, and is chosen by a spec string like the judges:

- ``openai:MODEL``: a chat model behind an OpenAI-compatible endpoint (``base_url`` or
  ``OPENAI_BASE_URL``; key from ``OPENAI_API_KEY``). Requests run concurrently; 408, 409, 429, 5xx,
  timeouts and connection errors are retried with exponential backoff (``Retry-After`` honoured,
  capped), at most ``max_attempts`` times. A rejected key or an unknown model stops the run at once.
  The key is never printed, stored or repeated in an error;
- ``hf:PATH``: a local chat model through transformers, batched by the generation layer
  (greedy by default). A checkpoint without a chat template gets the request as plain text.

Both send :func:`~pytest_novelty.suites.prompting.concept_prompt` and read the reply with
:func:`~pytest_novelty.suites.prompting.parse_concepts`. A reply that names no concept is asked
again, at most ``max_reasks`` times (every answer uses some concept; a greedy local model is not
asked again, it would repeat itself); after that the answer has no concepts. Each reply is
committed to an on-disk cache (:class:`~pytest_novelty.scoring.judges.cache.AnswerCache`) keyed by
the extractor, its settings and the request text, so a rerun asks nothing and an interrupted
run resumes. Requests that failed are not cached; when any failed, :meth:`ConceptExtractor.concepts`
raises :class:`~pytest_novelty.errors.HarnessError` after caching the rest.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pytest_novelty.errors import ConfigError, HarnessError, did_you_mean
from pytest_novelty.scoring.judges.cache import AnswerCache, answer_key
from pytest_novelty.suites.prompting import Message, concept_prompt, parse_concepts
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.tasks import get_task

__all__ = [
    "KINDS",
    "ConceptExtractor",
    "ConceptItem",
    "HFConceptExtractor",
    "OpenAIConceptExtractor",
    "open_concept_extractor",
]

KINDS = ("openai", "hf")
_OPTIONS = {
    "openai": {
        "api_key", "temperature", "concurrency", "timeout", "max_attempts", "max_reasks", "backoff", "max_backoff",
        "max_tokens",
    },
    "hf": {"temperature", "batch_size", "max_new_tokens", "seed", "max_reasks", "device", "trust_remote_code"},
}
DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_RETRY_AFTER = 120.0
PLAIN_CUE = "Concepts:\n-"
"""Where a plain-text request (no chat template) ends; the model continues the first bullet."""
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_KEY_LIKE = re.compile(r"\b(sk|key|token)-[A-Za-z0-9_\-*.]{6,}", re.IGNORECASE)


@dataclass(frozen=True)
class ConceptItem:
    """One answer whose concepts are wanted: ``task`` is a task name, ``prompt`` the task input."""

    task: str
    prompt: Prompt
    answer: str

    def messages(self) -> list[Message]:
        """The request for this answer's concepts (:func:`concept_prompt`)."""
        return concept_prompt(get_task(self.task), self.prompt, self.answer)


@runtime_checkable
class ConceptExtractor(Protocol):
    """Lists the high-level concepts of answers; chosen by a spec such as ``openai:MODEL``."""

    spec: str

    def concepts(self, items: Sequence[ConceptItem]) -> list[list[str]]:
        """The concepts of each item's answer, in the order given (``[]`` when none were named)."""
        ...


@dataclass(frozen=True)
class _Failed:
    """A request that produced no reply; ``reason`` is safe to show."""

    reason: str


class _CachedExtractor:
    """The cache, de-duplication and re-asking both extractors share.

    A subclass sets ``spec`` and ``max_reasks`` and implements :meth:`_replies` (one reply per
    request, or :class:`_Failed`) and :meth:`_identity` (what else its replies depend on).
    """

    spec: str
    max_reasks: int

    def __init__(self, cache_dir: Path | str | None) -> None:
        self.cache = AnswerCache(cache_dir)

    def concepts(self, items: Sequence[ConceptItem]) -> list[list[str]]:
        """See :class:`ConceptExtractor`; the module doc says how replies are cached and re-asked."""
        requests = [item.messages() for item in items]
        keys = [answer_key("concepts", self.spec, *self._identity(), messages) for messages in requests]
        found = {key: list(value["concepts"]) for key, value in self.cache.get_many(keys).items()}
        todo = {key: messages for key, messages in zip(keys, requests, strict=True) if key not in found}
        failures: list[str] = []
        for attempt in range(1 + self._reasks()):
            if not todo:
                break
            last = attempt == self._reasks()
            replies = self._replies(list(todo.values()), attempt)
            for key, reply in zip(list(todo), replies, strict=True):
                if isinstance(reply, _Failed):
                    failures.append(reply.reason)
                    del todo[key]
                    continue
                concepts = parse_concepts(reply)
                if concepts or last:
                    self.cache.put(key, {"concepts": concepts, "reply": reply})
                    found[key] = concepts
                    del todo[key]
        if failures:
            raise HarnessError(
                f"the concept extractor {self.spec} failed on {len(failures)} of {len(set(keys))} answers "
                f"({failures[0]}); the others are cached, run again to retry"
            )
        return [list(found[key]) for key in keys]

    def _reasks(self) -> int:
        return self.max_reasks

    def _identity(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def _replies(self, requests: list[list[Message]], attempt: int) -> list[str | _Failed]:
        raise NotImplementedError


# -- openai: ------------------------------------------------------------------------------------


class _Key:
    """Holds the API key so that reprs and ``vars()`` show ``***``."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "***" if self.value else "''"


class OpenAIConceptExtractor(_CachedExtractor):
    """Lists concepts with a chat model behind an OpenAI-compatible endpoint (see the module doc)."""

    def __init__(
        self,
        model: str,
        *,
        cache_dir: Path | str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float | None = 0.0,
        concurrency: int = 8,
        timeout: float = 120.0,
        max_attempts: int = 6,
        max_reasks: int = 1,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        max_tokens: int | None = None,
    ) -> None:
        if concurrency < 1 or max_attempts < 1 or max_reasks < 0:
            raise ValueError("concurrency and max_attempts must be >= 1, max_reasks >= 0")
        super().__init__(cache_dir)
        self.model = model
        self.spec = f"openai:{model}"
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.temperature = temperature
        """``None`` sends none (the model's default), as does a model that rejected it once."""
        self.send_temperature = temperature is not None
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.max_reasks = max_reasks
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_tokens = max_tokens
        self.requests_sent = 0
        """HTTP requests sent over the life of this extractor (all attempts)."""
        self._key = _Key(api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", ""))

    def __repr__(self) -> str:
        return f"OpenAIConceptExtractor(spec={self.spec!r}, base_url={_safe_url(self.base_url)!r})"

    def _identity(self) -> tuple[Any, ...]:
        return (self.temperature, self.max_tokens)

    def _replies(self, requests: list[list[Message]], attempt: int) -> list[str | _Failed]:
        # A fresh event loop in a helper thread: works whether or not the caller runs one.
        with ThreadPoolExecutor(1, thread_name_prefix="novelty-concepts") as pool:
            return pool.submit(asyncio.run, self._ask_all(requests)).result()

    async def _ask_all(self, requests: list[list[Message]]) -> list[str | _Failed]:
        import openai

        client = openai.AsyncOpenAI(
            api_key=self._key.value or "no-key", base_url=self.base_url, max_retries=0, timeout=self.timeout
        )
        semaphore = asyncio.Semaphore(self.concurrency)
        try:
            outcomes = await asyncio.gather(
                *(self._ask(client, semaphore, messages) for messages in requests), return_exceptions=True
            )
        finally:
            await client.close()
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]

    async def _ask(self, client: Any, semaphore: asyncio.Semaphore, messages: list[Message]) -> str | _Failed:
        """One request with bounded retries: the reply's text, or why there is none."""
        import openai

        attempt = 0
        while True:
            body: dict[str, Any] = {"model": self.model, "messages": messages}
            if self.send_temperature:
                body["temperature"] = self.temperature
            if self.max_tokens is not None:
                body["max_tokens"] = self.max_tokens
            attempt += 1
            try:
                async with semaphore:
                    self.requests_sent += 1
                    response = await client.chat.completions.create(**body)
            except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
                raise HarnessError(
                    f"the concept extractor at {_safe_url(self.base_url)} refused the API key "
                    f"({error.status_code}); check OPENAI_API_KEY"
                ) from None
            except openai.NotFoundError:
                raise HarnessError(
                    f"the concept extractor at {_safe_url(self.base_url)} has no model {self.model!r} (404)"
                ) from None
            except openai.BadRequestError as error:
                if "temperature" in body and "temperature" in self._describe(error).lower():
                    self.send_temperature = False  # a model that only runs at its default temperature
                    attempt -= 1
                    continue
                return _Failed(f"the request was rejected: {self._describe(error)}")
            except (openai.APIStatusError, openai.APIConnectionError) as error:
                status = getattr(error, "status_code", None)
                if status is not None and status not in _RETRYABLE_STATUS and status < 500:
                    return _Failed(self._describe(error))
                if attempt >= self.max_attempts:
                    return _Failed(f"gave up after {attempt} attempts: {self._describe(error)}")
                await asyncio.sleep(self._delay(attempt, error))
                continue
            choices = response.choices or []
            return (choices[0].message.content or "") if choices else ""

    def _delay(self, attempt: int, error: Exception) -> float:
        """``Retry-After`` when the server sends one (capped), else exponential backoff with jitter."""
        headers = getattr(getattr(error, "response", None), "headers", None)
        value = None if headers is None else headers.get("retry-after")
        try:
            return min(max(0.0, float(value)), MAX_RETRY_AFTER) if value is not None else self._backoff(attempt)
        except ValueError:
            return self._backoff(attempt)

    def _backoff(self, attempt: int) -> float:
        return min(self.max_backoff, self.backoff * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)

    def _describe(self, error: Exception) -> str:
        """A one-line reason for ``error``, with the key and anything like one removed."""
        import openai

        if isinstance(error, openai.APITimeoutError):
            text = f"timed out after {self.timeout:g} s"
        elif isinstance(error, openai.APIConnectionError):
            text = f"cannot reach {_safe_url(self.base_url)}"
        elif isinstance(error, openai.APIStatusError):
            body = error.body
            message = body.get("message") if isinstance(body, dict) else None
            text = f"HTTP {error.status_code}" + (f": {message}" if message else "")
        else:
            text = str(error)
        if self._key.value:
            text = text.replace(self._key.value, "***")
        return _KEY_LIKE.sub("***", text)[:300]


def _safe_url(url: str) -> str:
    """``url`` without a user:password part."""
    return re.sub(r"//[^/@]*@", "//", url)


# -- hf: ----------------------------------------------------------------------------------------


class HFConceptExtractor(_CachedExtractor):
    """Lists concepts with a local causal LM; the model is loaded on first use (see the module doc)."""

    def __init__(
        self,
        path: str,
        *,
        cache_dir: Path | str | None = None,
        temperature: float = 0.0,
        batch_size: int = 0,
        max_new_tokens: int = 128,
        seed: int = 0,
        max_reasks: int = 1,
        device: str = "auto",
        trust_remote_code: bool = False,
    ) -> None:
        from pytest_novelty.generation.hf import check_checkpoint, checkpoint_fingerprint

        if batch_size < 0 or max_new_tokens < 1 or max_reasks < 0:
            raise ValueError("max_new_tokens must be >= 1, batch_size (0: auto) and max_reasks >= 0")
        try:
            check_checkpoint(path, trust_remote_code=trust_remote_code)
        except ConfigError as exc:
            raise ConfigError(f"hf:{path}: {exc}") from None
        super().__init__(cache_dir)
        self.path = path
        self.spec = f"hf:{path}"
        self.temperature = temperature
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.max_reasks = max_reasks
        self.device = device
        self.trust_remote_code = trust_remote_code
        self.fingerprint = checkpoint_fingerprint(path)
        self.sequences_generated = 0
        """Replies generated over the life of this extractor (re-asks included)."""
        self._generator: Any = None

    def __repr__(self) -> str:
        return f"HFConceptExtractor(spec={self.spec!r}, temperature={self.temperature})"

    def _identity(self) -> tuple[Any, ...]:
        return (self.fingerprint, self.temperature, self.seed, self.max_new_tokens)

    def _reasks(self) -> int:
        return self.max_reasks if self.temperature > 0 else 0

    def _load(self) -> Any:
        if self._generator is None:
            from pytest_novelty.generation import open_generator

            self._generator = open_generator(self.path, device=self.device, trust_remote_code=self.trust_remote_code)
        return self._generator

    def _replies(self, requests: list[list[Message]], attempt: int) -> list[str | _Failed]:
        """One reply per request, batched by length; each attempt samples with its own seed."""
        from pytest_novelty.generation import generate
        from pytest_novelty.suites.schema import GenerationSettings

        generator = self._load()
        try:
            texts, plain = [str(generator.render(messages)) for messages in requests], False
        except ConfigError:  # no chat template: the request as plain text, the first bullet begun
            texts, plain = [f"{messages[-1]['content']}\n\n{PLAIN_CUE}" for messages in requests], True
        settings = GenerationSettings(
            samples=1,
            temperature=self.temperature,
            top_p=1.0,
            top_k=0,
            max_new_tokens=self.max_new_tokens,
            seed=self.seed + 7919 * attempt,
            batch_size=self.batch_size,
        )
        replies, _ = generate(generator, texts, settings)
        self.sequences_generated += len(replies)
        return [f"- {samples[0].lstrip()}" if plain else samples[0] for samples in replies]


# -- choosing one -------------------------------------------------------------------------------


def open_concept_extractor(
    spec: str, *, cache_dir: Path | str | None = None, base_url: str | None = None, **options: Any
) -> ConceptExtractor:
    """Open the extractor named by ``spec``: ``openai:MODEL`` or ``hf:PATH``.

    ``cache_dir`` keeps replies on disk (in memory without it); ``base_url`` applies to
    ``openai:`` only. ``openai:`` takes the options api_key, temperature, concurrency, timeout,
    max_attempts, max_reasks, backoff, max_backoff, max_tokens; ``hf:`` takes temperature,
    batch_size, max_new_tokens, seed, max_reasks, device, trust_remote_code. A bad spec or option
    raises :class:`~pytest_novelty.errors.ConfigError`.
    """
    kind, _, target = spec.strip().partition(":")
    if kind not in KINDS:
        raise ConfigError(
            f"unknown concept extractor {spec!r}{did_you_mean(kind, KINDS)}; use openai:MODEL or hf:PATH "
            "(a chat model lists the concepts)"
        )
    unknown = sorted(set(options) - _OPTIONS[kind])
    if unknown:
        raise ConfigError(
            f"the {kind} concept extractor has no option {unknown[0]!r}{did_you_mean(unknown[0], _OPTIONS[kind])}; "
            f"its options: {', '.join(sorted(_OPTIONS[kind]))}"
        )
    if not target.strip():
        what = "MODEL" if kind == "openai" else "PATH"
        raise ConfigError(f"the {kind} concept extractor needs a {what}, as in {kind}:{what}")
    if kind == "openai":
        return OpenAIConceptExtractor(target.strip(), cache_dir=cache_dir, base_url=base_url, **options)
    return HFConceptExtractor(target.strip(), cache_dir=cache_dir, **options)
