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
- requests run concurrently under a semaphore of ``concurrency``. 429, 5xx, 408/409, timeouts and
  connection errors are retried with exponential backoff and jitter, honouring ``Retry-After``
  (capped at two minutes), for at most ``max_attempts`` attempts per request; the client's own
  retries are switched off so that these are the only ones;
- every answer (scored, or failed after all re-asks) is committed to the cache at once, keyed by
  (judge spec, temperature, rubric version, task, prompt, response, sample index). A rerun makes no
  requests; an interrupted run resumes where it stopped. Transport failures and budget refusals are
  not cached, so the next run tries those samples again.

``budget`` caps the HTTP requests one :meth:`OpenAIJudge.score` call may send (every attempt
counts, retries included). Samples that would need a request beyond it are left unscored with the
error ``call budget of N exhausted``; nothing is raised, so a partial run keeps what it got.
:meth:`OpenAIJudge.planned_calls` is the dry run: the requests a run would make from the current
cache if nothing failed.

An item is unscored (``quality=None``, with the reasons in ``error``) when none of its samples
produced a valid score. The run raises :class:`~pytest_novelty.errors.HarnessError` when the
endpoint cannot be reached at all, rejects the key, or does not know the model.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import re
import threading
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pytest_novelty.errors import HarnessError
from pytest_novelty.scoring.judges.base import JudgeItem, JudgeResult, rubric_result
from pytest_novelty.scoring.judges.cache import AnswerCache, answer_key
from pytest_novelty.scoring.judges.parsing import UnparsableScore, parse_score
from pytest_novelty.scoring.judges.rubrics import Rubric, rubric_for

T = TypeVar("T")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_RETRY_AFTER = 120.0
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_KEY_LIKE = re.compile(r"\b(sk|key|token)-[A-Za-z0-9_\-*.]{6,}", re.IGNORECASE)


class _Secret:
    """Holds the API key so that reprs, ``vars()`` and debug dumps show ``***``, never the key."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "***" if self._value else "''"


class _RequestFailed(Exception):
    """A request that did not yield choices; the affected samples stay unscored (not cached)."""


@dataclass
class _Run:
    """Per-run state: the semaphore (bound to the run's event loop), budget and request count."""

    semaphore: asyncio.Semaphore
    budget: int | None
    requests: int = 0
    succeeded: bool = False


class OpenAIJudge:
    """Grades items with a chat model behind an OpenAI-compatible endpoint (see the module doc)."""

    def __init__(
        self,
        model: str,
        *,
        cache_dir: Path | str | None = None,
        samples: int = 5,
        temperature: float = 0.7,
        base_url: str | None = None,
        budget: int | None = None,
        concurrency: int = 32,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_attempts: int = 6,
        max_reasks: int = 2,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        max_tokens: int | None = None,
    ) -> None:
        if samples < 1 or concurrency < 1 or max_attempts < 1 or max_reasks < 0:
            raise ValueError("samples, concurrency and max_attempts must be >= 1, max_reasks >= 0")
        self.model = model
        self.spec = f"openai:{model}"
        self.description = f"LLM judge {model!r} behind an OpenAI-compatible endpoint"
        self.samples = samples
        self.temperature = temperature
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.budget = budget
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.max_reasks = max_reasks
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_tokens = max_tokens
        self.cache = AnswerCache(cache_dir)
        self.send_temperature = True
        self.send_n = True
        self.requests_sent = 0
        """HTTP requests sent over the life of this judge (all attempts)."""
        self._api_key = _Secret(api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", ""))

    def __repr__(self) -> str:
        return (
            f"OpenAIJudge(spec={self.spec!r}, base_url={_safe_url(self.base_url)!r}, "
            f"samples={self.samples}, temperature={self.temperature})"
        )

    # -- public -----------------------------------------------------------------------------------

    def score(self, items: Sequence[JudgeItem], *, progress: bool = False) -> list[JudgeResult]:
        """Grade ``items`` (see the module doc); one result per item, in order."""
        return _run_coroutine(self._score_all(list(items), progress))

    def planned_calls(self, items: Sequence[JudgeItem]) -> int:
        """Dry run: the requests :meth:`score` would send from the current cache if nothing failed."""
        calls = 0
        unique = list({self._keys(item)[0]: item for item in items}.values())
        for missing in self._missing(unique):
            if missing:
                calls += 1 if self.send_n else len(missing)
        return calls if self.budget is None else min(calls, self.budget)

    # -- planning ---------------------------------------------------------------------------------

    def _key(self, rubric: Rubric, item: JudgeItem, sample: int) -> str:
        return answer_key(self.spec, self.temperature, rubric.version, item.task, item.prompt, item.response, sample)

    def _keys(self, item: JudgeItem) -> list[str]:
        rubric = rubric_for(item.task)
        return [self._key(rubric, item, sample) for sample in range(self.samples)]

    def _missing(self, items: Sequence[JudgeItem]) -> list[list[int]]:
        keys = [self._keys(item) for item in items]
        cached = self.cache.get_many(key for item_keys in keys for key in item_keys)
        return [[s for s, key in enumerate(item_keys) if key not in cached] for item_keys in keys]

    # -- running ----------------------------------------------------------------------------------

    async def _score_all(self, items: list[JudgeItem], progress: bool) -> list[JudgeResult]:
        import openai
        from tqdm import tqdm

        keys = [self._keys(item) for item in items]
        cached = self.cache.get_many(key for item_keys in keys for key in item_keys)
        run = _Run(asyncio.Semaphore(self.concurrency), self.budget)
        client = openai.AsyncOpenAI(
            api_key=self._api_key.reveal() or "no-key",
            base_url=self.base_url,
            max_retries=0,
            timeout=self.timeout,
        )
        # Identical items (same task, prompt and response) are judged once and share the result.
        first: dict[str, int] = {}
        for i, item_keys in enumerate(keys):
            first.setdefault(item_keys[0], i)
        bar = tqdm(total=len(first), disable=not progress, desc=f"judge {self.spec}", unit="item")
        by_item = {
            key: asyncio.ensure_future(self._score_item(client, run, items[i], keys[i], cached))
            for key, i in first.items()
        }
        tasks = list(by_item.values())
        for task in tasks:
            task.add_done_callback(lambda _task: bar.update(1))
        try:
            if tasks:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in tasks:
                if task.done() and not task.cancelled():
                    error = task.exception()
                    if error is not None:
                        raise error
            return [by_item[item_keys[0]].result() for item_keys in keys]
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            bar.close()
            await client.close()

    async def _score_item(
        self, client: Any, run: _Run, item: JudgeItem, keys: list[str], cached: dict[str, dict[str, Any]]
    ) -> JudgeResult:
        messages = rubric_for(item.task).messages(item)
        answers: dict[int, dict[str, Any]] = {s: cached[key] for s, key in enumerate(keys) if key in cached}
        pending = [s for s in range(self.samples) if s not in answers]
        asks_left = dict.fromkeys(pending, 1 + self.max_reasks)
        errors: list[str] = []
        while pending:
            try:
                replies = await self._complete(client, run, messages, len(pending))
            except _RequestFailed as failure:
                errors.append(str(failure))
                break
            for sample, reply in zip(pending, replies, strict=False):
                asks_left[sample] -= 1
                try:
                    answer: dict[str, Any] = {"score": parse_score(reply), "error": None, "reply": reply}
                except UnparsableScore as unparsable:
                    if asks_left[sample] > 0:
                        continue
                    answer = {"score": None, "error": f"{unparsable} (asked {1 + self.max_reasks} times)"}
                    answer["reply"] = reply
                answers[sample] = answer
                self.cache.put(keys[sample], answer)
            pending = [s for s in pending if s not in answers]
        scores = [answers[s]["score"] for s in sorted(answers) if answers[s]["score"] is not None]
        errors = [answers[s]["error"] for s in sorted(answers) if answers[s]["error"]] + errors
        return rubric_result(scores, self.spec, errors)

    async def _complete(self, client: Any, run: _Run, messages: list[dict[str, str]], n: int) -> list[str]:
        """Get up to ``n`` replies, in one request when the server honours ``n``, else one per sample."""
        if n > 1 and self.send_n:
            replies = await self._request(client, run, messages, n)
            if len(replies) < n:
                self.send_n = False  # the server ignores or rejects ``n``: one request per sample from now on
            if replies:
                return replies
        outcomes = await asyncio.gather(
            *(self._request(client, run, messages, 1) for _ in range(n)), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, _RequestFailed):
                raise outcome
        replies = [reply for outcome in outcomes if isinstance(outcome, list) for reply in outcome]
        if replies:
            return replies
        failures = [outcome for outcome in outcomes if isinstance(outcome, _RequestFailed)]
        raise failures[0] if failures else _RequestFailed("the judge returned no choices")

    async def _request(self, client: Any, run: _Run, messages: list[dict[str, str]], n: int) -> list[str]:
        """One logical request with bounded retries; returns the choices' texts."""
        import openai

        attempt = 0
        while True:
            body: dict[str, Any] = {"model": self.model, "messages": messages}
            try:
                async with run.semaphore:
                    # Decide inside the semaphore, so that a request waiting for its turn uses what
                    # the requests before it learned (no temperature, no ``n``).
                    if n > 1 and not self.send_n:
                        return []
                    if run.budget is not None and run.requests >= run.budget:
                        raise _RequestFailed(f"call budget of {run.budget} exhausted")
                    run.requests += 1
                    self.requests_sent += 1
                    attempt += 1
                    if n > 1:
                        body["n"] = n
                    if self.send_temperature:
                        body["temperature"] = self.temperature
                    if self.max_tokens is not None:
                        body["max_tokens"] = self.max_tokens
                    response = await client.chat.completions.create(**body)
            except openai.BadRequestError as error:
                if "temperature" in body and _is_about(error, "temperature"):
                    self.send_temperature = False  # a reasoning model: resend at its default temperature
                    attempt -= 1
                    continue
                if "n" in body and _is_about(error, "n"):
                    self.send_n = False
                    return []
                reason = self._describe(error)
                raise _RequestFailed(f"the judge rejected the request (400): {reason}") from None
            except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
                raise HarnessError(
                    f"the judge at {_safe_url(self.base_url)} refused the API key "
                    f"({error.status_code}); check OPENAI_API_KEY"
                ) from None
            except openai.NotFoundError:
                raise HarnessError(
                    f"the judge at {_safe_url(self.base_url)} has no model {self.model!r} "
                    "(404); check the spec and the base URL"
                ) from None
            except (openai.APIStatusError, openai.APIConnectionError) as error:
                status = getattr(error, "status_code", None)
                retryable = status is None or status in _RETRYABLE_STATUS or status >= 500
                if not retryable:
                    raise _RequestFailed(f"the judge answered {status}: {self._describe(error)}") from None
                if attempt >= self.max_attempts:
                    reason = self._describe(error)
                    if (
                        isinstance(error, openai.APIConnectionError)
                        and not isinstance(error, openai.APITimeoutError)
                        and not run.succeeded
                    ):
                        raise HarnessError(
                            f"cannot reach the judge at {_safe_url(self.base_url)} "
                            f"({reason}, {attempt} attempts); is the server running and the URL right?"
                        ) from None
                    raise _RequestFailed(f"gave up after {attempt} attempts: {reason}") from None
                await asyncio.sleep(self._delay(attempt, error))
                continue
            run.succeeded = True
            return [choice.message.content or "" for choice in response.choices]

    def _delay(self, attempt: int, error: Exception) -> float:
        """Seconds to wait before the next attempt: ``Retry-After`` if given, else backoff with jitter."""
        retry_after = _retry_after(error)
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER) * random.uniform(1.0, 1.1)
        return min(self.max_backoff, self.backoff * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)

    def _describe(self, error: Exception) -> str:
        """A one-line reason for ``error`` with anything resembling a key removed."""
        import openai

        if isinstance(error, openai.APITimeoutError):
            text = f"timed out after {self.timeout:g} s"
        elif isinstance(error, openai.APIConnectionError):
            cause = error.__cause__
            text = f"connection failed: {type(cause).__name__ if cause else 'unknown error'}"
        elif isinstance(error, openai.APIStatusError):
            body = error.body
            message = body.get("message") if isinstance(body, dict) else None
            text = f"HTTP {error.status_code}" + (f": {message}" if message else "")
        else:
            text = str(error)
        return self._scrub(text)[:300]

    def _scrub(self, text: str) -> str:
        key = self._api_key.reveal()
        if key:
            text = text.replace(key, "***")
        return _KEY_LIKE.sub("***", text)


def _is_about(error: Any, param: str) -> bool:
    """Whether a 400 error complains about request parameter ``param``."""
    body = error.body if isinstance(getattr(error, "body", None), dict) else {}
    if body.get("param") == param:
        return True
    message = str(body.get("message") or getattr(error, "message", "") or "")
    if param == "n":
        return bool(re.search(r"(?<![\w'])'?n'?\s+(must|should|is|>|=)|\bparameter 'n'|`n`", message))
    return param in message.lower()


def _retry_after(error: Exception) -> float | None:
    """The server's requested wait, from ``retry-after-ms`` or ``retry-after`` (seconds or a date)."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
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


def _safe_url(url: str) -> str:
    """``url`` without any user:password part."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = host + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url


def _run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
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

    thread = threading.Thread(target=target, name="novelty-judge")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
