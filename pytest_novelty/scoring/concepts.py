"""Concept extractors: which high-level concepts does each answer use?

Denial prompting (:mod:`pytest_novelty.pipeline.denial`) forbids, in each round, the concepts that
earlier answers used (each task names its own, ``Task.concepts``). An extractor (``openai:MODEL``
or ``hf:PATH``, reached as :mod:`pytest_novelty.scoring.llm` reaches a judge's model) sends
:func:`~pytest_novelty.suites.prompting.concept_prompt` and reads the reply with
:func:`~pytest_novelty.suites.prompting.parse_concepts`. A reply that names no concept is asked
again, at most ``max_reasks`` times (not for a greedy local model, which would repeat itself);
after that the answer has none. Replies are cached by extractor, settings and request, so a rerun
asks nothing; failed requests are not cached, and when any failed, :meth:`ConceptExtractor.concepts`
raises :class:`~pytest_novelty.infra.errors.HarnessError` after caching the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Unpack, runtime_checkable

from pytest_novelty.infra.concurrency import fan_out, run_coroutine
from pytest_novelty.infra.errors import HarnessError
from pytest_novelty.infra.http import CONNECTION_OPTIONS
from pytest_novelty.infra.redact import redact
from pytest_novelty.infra.registry import Registry
from pytest_novelty.scoring.judges.cache import AnswerCache, answer_key
from pytest_novelty.scoring.llm import (
    LOCAL_CHAT_OPTIONS,
    EndpointOptions,
    LocalChatModel,
    LocalChatOptions,
    OpenAIChat,
    RequestFailed,
)
from pytest_novelty.suites.prompting import Message, concept_prompt, parse_concepts
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.tasks import get_task

__all__ = ["CONCEPT_EXTRACTORS", "ConceptExtractor", "ConceptItem", "HFConceptExtractor", "OpenAIConceptExtractor",
           "open_concept_extractor"]

CONCEPT_EXTRACTORS: Registry[ConceptExtractor] = Registry("concept extractor", settings=("cache_dir", "base_url"))
"""Concept extractors by spec prefix."""
PLAIN_CUE = "Concepts:\n-"
"""Where a plain-text request (no chat template) ends; the model continues the first bullet."""


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


class _CachedExtractor:
    """The cache, de-duplication and re-asking both extractors share; a subclass sets ``spec`` and
    implements :meth:`_replies` (a reply, or the :class:`~pytest_novelty.scoring.llm.RequestFailed`
    that says why there is none, per request) and :meth:`_identity` (what else its replies depend on)."""

    spec: str

    def __init__(self, cache_dir: Path | str | None, max_reasks: int) -> None:
        if max_reasks < 0:
            raise ValueError(f"max_reasks must be 0 or more, got {max_reasks}")
        self.cache = AnswerCache(cache_dir)
        self.max_reasks = max_reasks

    def concepts(self, items: Sequence[ConceptItem]) -> list[list[str]]:
        requests = [item.messages() for item in items]
        keys = [answer_key("concepts", self.spec, *self._identity(), messages) for messages in requests]
        found = {key: list(value["concepts"]) for key, value in self.cache.get_many(keys).items()}
        todo = {key: messages for key, messages in zip(keys, requests, strict=True) if key not in found}
        failures: list[str] = []
        for attempt in range(1 + self.max_reasks):
            if not todo:
                break
            last = attempt == self.max_reasks
            replies = self._replies(list(todo.values()), attempt)
            for key, reply in zip(list(todo), replies, strict=True):
                if isinstance(reply, RequestFailed):
                    failures.append(str(reply))
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

    def _identity(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def _replies(self, requests: list[list[Message]], attempt: int) -> list[str | RequestFailed]:
        raise NotImplementedError


@CONCEPT_EXTRACTORS.register(
    "openai",
    argument="MODEL",
    options={"api_key": str, "temperature": float, "max_reasks": int, "max_tokens": int, **CONNECTION_OPTIONS},
    summary="a chat model behind an OpenAI-compatible endpoint lists the concepts",
)
class OpenAIConceptExtractor(_CachedExtractor, OpenAIChat):
    """Lists concepts with a chat model behind an OpenAI-compatible endpoint."""

    def __init__(
        self, model: str, *, cache_dir: Path | str | None = None, temperature: float | None = 0.0, max_reasks: int = 1,
        **endpoint: Unpack[EndpointOptions],
    ) -> None:
        """``endpoint``: by default 8 requests in flight, 120 s each, 6 attempts within 120 s."""
        _CachedExtractor.__init__(self, cache_dir, max_reasks)
        OpenAIChat.__init__(
            self, "concept extractor", model, temperature=temperature, endpoint=endpoint, concurrency=8, timeout=120.0
        )

    def __repr__(self) -> str:
        return f"OpenAIConceptExtractor(spec={self.spec!r}, base_url={redact(self.base_url)!r})"

    def _identity(self) -> tuple[Any, ...]:
        return (self.temperature, self.max_tokens)

    def _replies(self, requests: list[list[Message]], attempt: int) -> list[str | RequestFailed]:
        return run_coroutine(self._ask_all(requests))

    async def _ask_all(self, requests: list[list[Message]]) -> list[str | RequestFailed]:
        """All requests over one client, ``concurrency`` sent at a time; a failed one is its
        :class:`~pytest_novelty.scoring.llm.RequestFailed` in its place, and any other error (a refused
        key) stops the batch."""
        client = self._client()
        semaphore = asyncio.Semaphore(self.connection.concurrency)

        async def ask(i: int) -> str:
            choices = await self._create(client, semaphore, lambda: self._body(requests[i]))
            return choices[0] if choices else ""

        try:
            return await fan_out(len(requests), ask, concurrency=None, collect=(RequestFailed,))
        finally:
            await client.aclose()


HF_CONCEPTS = LocalChatOptions(
    temperature=0.0, batch_size=0, max_new_tokens=128, seed=0, device="auto", trust_remote_code=False
)


@CONCEPT_EXTRACTORS.register(
    "hf",
    argument="PATH",
    options={"max_reasks": int, **LOCAL_CHAT_OPTIONS},
    summary="a local chat model lists the concepts",
)
class HFConceptExtractor(_CachedExtractor, LocalChatModel):
    """Lists concepts with a local causal LM, loaded on first use."""

    def __init__(
        self, path: str, *, cache_dir: Path | str | None = None, max_reasks: int = 1, **local: Unpack[LocalChatOptions]
    ) -> None:
        """``local``: by default temperature 0 (greedy), up to 128 new tokens, seed 0, batches as
        large as the memory allows, on the session's device."""
        _CachedExtractor.__init__(self, cache_dir, max_reasks)
        LocalChatModel.__init__(self, path, field=None, options=local, defaults=HF_CONCEPTS, cache_dir=cache_dir)
        if self.sampling.temperature == 0:
            self.max_reasks = 0  # greedy: asked again, the model would say the same

    def __repr__(self) -> str:
        return f"HFConceptExtractor(spec={self.spec!r}, temperature={self.sampling.temperature})"

    def _identity(self) -> tuple[Any, ...]:
        return (self.identity_id, self.sampling.temperature, self.sampling.seed, self.sampling.max_new_tokens)

    def _replies(self, requests: list[list[Message]], attempt: int) -> list[str | RequestFailed]:
        """One reply per request, each attempt with its own seed; without a chat template the request
        is plain text ending in :data:`PLAIN_CUE`, and the reply gets the first bullet's ``- `` back."""
        rendered = [self._chat_text(messages, _plain_request) for messages in requests]
        replies = self._sample([text for text, _ in rendered], samples=1, attempt=attempt)
        return [
            f"- {samples[0].lstrip()}" if plain else samples[0]
            for (_, plain), samples in zip(rendered, replies, strict=True)
        ]


def _plain_request(messages: list[Message]) -> str:
    """The concept request for a model without a chat template: the user text, the list begun."""
    return f"{messages[-1]['content']}\n\n{PLAIN_CUE}"


def open_concept_extractor(
    spec: str, *, cache_dir: Path | str | None = None, base_url: str | None = None, **options: Any
) -> ConceptExtractor:
    """Open the extractor named by ``spec`` (``openai:MODEL``, ``hf:PATH``) with its ``?`` and keyword
    options; ``cache_dir`` keeps replies on disk (in memory without it), ``base_url`` is ``openai:``'s."""
    return CONCEPT_EXTRACTORS.open(spec, options=options, cache_dir=cache_dir, base_url=base_url)
