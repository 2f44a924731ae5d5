"""``openai:MODEL``: an LLM judge behind any OpenAI-compatible chat endpoint.

Works against OpenAI itself, a vLLM or llama.cpp server, or any proxy speaking
``/v1/chat/completions``. The base URL comes from the ``base_url`` option or ``OPENAI_BASE_URL``;
the key from ``OPENAI_API_KEY`` (a local server that needs none gets a placeholder). The key is
never printed, stored in the cache, or included in errors and reprs.

How a run goes, per item:

- the rubric of the item's task (:mod:`.rubrics`) is sent once with ``n=samples`` at
  ``temperature`` (default 0.7). If the server returns fewer choices than asked (it ignores ``n``)
  or rejects ``n``, the judge falls back to one request per sample for the rest of its life; a
  model that rejects ``temperature`` (o-series reasoning models) is retried without it, likewise
  remembered;
- each reply is parsed (:mod:`.parsing`); a sample without a valid 0-5 score is asked again, at
  most ``max_reasks`` more times, after which it is recorded as failed;
- requests run concurrently under a semaphore of ``concurrency`` (a request waiting to be retried
  gives its place to the next: :class:`~pytest_novelty.infra.concurrency.Held`). 429, 5xx, 408/409,
  timeouts, connection errors and 200 answers that are not JSON are retried with exponential
  backoff and jitter, honouring ``Retry-After``
  (capped at two minutes), for at most ``max_attempts`` attempts and ``max_retry_time`` seconds
  (default 120) per request; each attempt waits at most ``timeout`` seconds (default 60: a rubric
  reply of a few hundred tokens, with room for a loaded server); the client's own retries are
  switched off so that these are the only ones. While requests wait, a line says so at most
  every ten seconds (a notice, in the run's log);
- every answer (scored, or failed after all re-asks) is committed to the cache at once (by a
  thread of its own, so that writing never stalls the requests in flight), keyed by
  (model, endpoint's scheme, host, port and path, rubric version, temperature, max_tokens,
  max_reasks, samples, task, prompt, response, sample index; see
  :func:`~.cache.judge_key`): answers from one endpoint are never used for another. A rerun makes no
  requests; an interrupted run resumes where it stopped. Transport failures and budget refusals are
  not cached, so the next run tries those samples again.

``budget`` caps the requests one :meth:`OpenAIJudge.score` call may send (each one's retries are
bounded by ``max_attempts``, not by the budget). Samples that would need a request beyond it are left unscored with the
error ``call budget of N exhausted``; nothing is raised, so a partial run keeps what it got.
:meth:`OpenAIJudge.planned_calls` is the dry run: the requests a run would make from the current
cache if nothing failed.

An item is unscored (``quality=None``, with the reasons in ``error``: ``HTTP 503: message``,
``timed out after 60 s``, ``no score in reply (...)``) when none of its samples produced a valid
score. The run raises :class:`~pytest_novelty.infra.errors.HarnessError` when the endpoint rejects the
key, does not know the model, or fails the run's first requests with no success at all
(unreachable, hanging, 5xx), so a dead judge stops the suite after one request's retries.

Reaching the endpoint (key handling, client, retries, error wording) is shared with the concept
extractors (:class:`~pytest_novelty.scoring.llm.OpenAIChat`), and the endpoint itself (its URL,
key, client, preflight and notices) with the served model (:class:`~pytest_novelty.infra.endpoint.Endpoint`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

from pytest_novelty.infra.concurrency import fan_out, run_coroutine
from pytest_novelty.infra.http import CONNECTION_OPTIONS
from pytest_novelty.infra.redact import redact
from pytest_novelty.scoring.judges.base import JUDGES, NO_SCORE, JudgeItem, JudgeResult, rubric_result
from pytest_novelty.scoring.judges.cache import AnswerCache, endpoint_identity, judge_key
from pytest_novelty.scoring.judges.parsing import UnparsableScore, parse_score
from pytest_novelty.scoring.judges.rubrics import rubric_for
from pytest_novelty.scoring.llm import ChatClient, EndpointOptions, OpenAIChat, RequestFailed, is_about

__all__ = ["OpenAIJudge"]


@dataclass
class _Run:
    """Per-run state: the semaphore (bound to the run's event loop), budget and request count,
    and the thread that writes answers to the cache (None: the cache is in memory)."""

    semaphore: asyncio.Semaphore
    budget: int | None
    requests: int = 0
    succeeded: bool = False
    writer: ThreadPoolExecutor | None = None


@JUDGES.register(
    "openai",
    argument="MODEL",
    options={"api_key": str, "max_reasks": int, "max_tokens": int, **CONNECTION_OPTIONS},
    summary="an LLM judge behind an OpenAI-compatible endpoint",
)
class OpenAIJudge(OpenAIChat):
    """Grades items with a chat model behind an OpenAI-compatible endpoint (see the module doc).

    :class:`~pytest_novelty.scoring.llm.OpenAIChat` reaches the endpoint (key, retries, errors);
    this class adds rubric sampling with ``n``, the call budget and the cache.
    """

    def __init__(
        self,
        model: str,
        *,
        cache_dir: Path | str | None = None,
        samples: int = 5,
        temperature: float = 0.7,
        budget: int | None = None,
        max_reasks: int = 2,
        **endpoint: Unpack[EndpointOptions],
    ) -> None:
        """``endpoint``: by default 32 requests in flight, 60 s each, 6 attempts within 120 s."""
        if samples < 1 or max_reasks < 0:
            raise ValueError("samples must be >= 1, max_reasks >= 0")
        super().__init__("judge", model, temperature=temperature, endpoint=endpoint, concurrency=32, timeout=60.0)
        self.description = f"LLM judge {model!r} behind an OpenAI-compatible endpoint"
        self.samples = samples
        self.budget = budget
        self.max_reasks = max_reasks
        self.cache = AnswerCache(cache_dir)
        self.send_n = True

    def __repr__(self) -> str:
        return (
            f"OpenAIJudge(spec={self.spec!r}, base_url={redact(self.base_url)!r}, "
            f"samples={self.samples}, temperature={self.temperature})"
        )

    # -- public -----------------------------------------------------------------------------------

    def score(self, items: Sequence[JudgeItem], *, progress: bool = False) -> list[JudgeResult]:
        """Grade ``items`` (see the module doc); one result per item, in order."""
        return run_coroutine(self._score_all(list(items), progress))

    def planned_calls(self, items: Sequence[JudgeItem]) -> int:
        """Dry run: the requests :meth:`score` would send from the current cache if nothing failed."""
        keys = list({item_keys[0]: item_keys for item_keys in map(self._keys, items)}.values())  # identical items once
        cached = self.cache.get_many(key for item_keys in keys for key in item_keys)
        missing = [sum(key not in cached for key in item_keys) for item_keys in keys]
        calls = sum(1 if self.send_n else count for count in missing if count)
        return calls if self.budget is None else min(calls, self.budget)

    # -- planning ---------------------------------------------------------------------------------

    def _keys(self, item: JudgeItem) -> list[str]:
        """The cache key of each of ``item``'s samples."""
        sampling = {"temperature": self.temperature, "max_tokens": self.max_tokens, "max_reasks": self.max_reasks}
        version = rubric_for(item.task).version
        return [
            judge_key(
                kind="openai",
                model=self.model,
                endpoint=endpoint_identity(self.base_url),
                rubric=version,
                sampling=sampling,
                samples=self.samples,
                task=item.task,
                prompt=item.prompt,
                response=item.response,
                sample=sample,
            )
            for sample in range(self.samples)
        ]

    # -- running ----------------------------------------------------------------------------------

    async def _score_all(self, items: list[JudgeItem], progress: bool) -> list[JudgeResult]:
        from tqdm import tqdm

        keys = [self._keys(item) for item in items]
        cached = self.cache.get_many(key for item_keys in keys for key in item_keys)
        run = _Run(asyncio.Semaphore(self.connection.concurrency), self.budget)
        if self.cache.store is not None:
            # Writing an entry (a few file operations) would stall every request in flight for its
            # duration; a thread of its own writes each answer as it arrives, while the loop goes on.
            run.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="novelty-judge-cache")
        client = self._client()
        # Identical items (same task, prompt and response) are judged once and share the result.
        first: dict[str, int] = {}
        for i, item_keys in enumerate(keys):
            first.setdefault(item_keys[0], i)
        unique = list(first.values())
        bar = tqdm(total=len(unique), disable=not progress, desc=f"judge {self.spec}", unit="item")

        async def judged(slot: int) -> JudgeResult:
            i = unique[slot]
            try:
                return await self._score_item(client, run, items[i], keys[i], cached)
            finally:
                bar.update(1)

        try:
            # Every item under way at once: the run's semaphore bounds the requests, and a request
            # waiting to be retried gives its place to another item's (Held, in _create).
            results = await fan_out(len(unique), judged, concurrency=None)
            by_item = {keys[i][0]: result for i, result in zip(unique, results, strict=True)}
            return [by_item[item_keys[0]] for item_keys in keys]
        finally:
            bar.close()
            await client.aclose()
            if run.writer is not None:
                run.writer.shutdown(wait=True)

    async def _score_item(
        self, client: ChatClient, run: _Run, item: JudgeItem, keys: list[str], cached: dict[str, dict[str, Any]]
    ) -> JudgeResult:
        messages = rubric_for(item.task).messages(item)
        answers: dict[int, dict[str, Any]] = {s: cached[key] for s, key in enumerate(keys) if key in cached}
        pending = [s for s in range(self.samples) if s not in answers]
        asks_left = dict.fromkeys(pending, 1 + self.max_reasks)
        errors: list[str] = []
        while pending:
            try:
                replies = await self._complete(client, run, messages, len(pending))
            except RequestFailed as failure:
                errors.append(str(failure))
                break
            for sample, reply in zip(pending, replies, strict=False):
                asks_left[sample] -= 1
                try:
                    answer: dict[str, Any] = {"score": parse_score(reply), "error": None, "reply": reply}
                except UnparsableScore as unparsable:
                    if asks_left[sample] > 0:
                        continue
                    answer = {"score": None, "error": f"{NO_SCORE} ({unparsable}, asked {1 + self.max_reasks} times)"}
                    answer["reply"] = reply
                answers[sample] = await self._store(run, keys[sample], answer)
            pending = [s for s in pending if s not in answers]
        scores = [answers[s]["score"] for s in sorted(answers) if answers[s]["score"] is not None]
        errors = [answers[s]["error"] for s in sorted(answers) if answers[s]["error"]] + errors
        return rubric_result(scores, self.spec, errors)

    async def _store(self, run: _Run, key: str, answer: dict[str, Any]) -> dict[str, Any]:
        """Commit ``answer`` to the cache (on the run's writer thread); the stored answer, which is
        another run's when it was first."""
        if run.writer is None:
            return self.cache.put(key, answer)
        return await asyncio.get_running_loop().run_in_executor(run.writer, self.cache.put, key, answer)

    async def _complete(
        self, client: ChatClient, run: _Run, messages: list[dict[str, str]], n: int
    ) -> list[str]:
        """Get up to ``n`` replies, in one request when the server honours ``n``, else one per sample."""
        if n > 1 and self.send_n:
            replies = await self._request(client, run, messages, n)
            if len(replies) < n:
                self.send_n = False  # the server ignores or rejects ``n``: one request per sample from now on
            if replies:
                return replies
        outcomes = await fan_out(
            n, lambda _: self._request(client, run, messages, 1), concurrency=None, collect=(RequestFailed,)
        )
        replies = [reply for outcome in outcomes if isinstance(outcome, list) for reply in outcome]
        if replies:
            return replies
        failures = [outcome for outcome in outcomes if isinstance(outcome, RequestFailed)]
        raise failures[0] if failures else RequestFailed("the judge returned no choices")

    async def _request(self, client: ChatClient, run: _Run, messages: list[dict[str, str]], n: int) -> list[str]:
        """One logical request with bounded retries (:meth:`OpenAIChat._create`); the choices' texts.

        Each request counts against the run's budget. A request for ``n`` choices sends nothing once
        the server is known to ignore or reject ``n`` (the caller asks one sample at a time).
        """

        def prepare() -> dict[str, Any] | None:
            if n > 1 and not self.send_n:
                return None
            if run.budget is not None and run.requests >= run.budget:
                raise RequestFailed(f"call budget of {run.budget} exhausted")
            run.requests += 1
            return self._body(messages, n=n) if n > 1 else self._body(messages)

        def adapt(error: dict[str, Any] | None, text: str, body: dict[str, Any]) -> bool:
            if "n" in body and is_about(error, "n", text):
                self.send_n = False  # the next attempt sends nothing: one request per sample from now on
                return True
            return False

        replies = await self._create(
            client, run.semaphore, prepare, adapt=adapt, fatal_unreachable=lambda: not run.succeeded
        )
        if replies is None:
            return []
        run.succeeded = True
        return replies
