"""``infini-gram-api:INDEX`` and ``infini-gram-mini:INDEX``: the public infini-gram web services.

Both answer one ``count`` query per POST (``{"index", "query_type": "count", ...}`` → ``{"count"}``)
and have no longest-match query, so n-grams are decided by :mod:`.search` with as few questions as
the answers allow, each distinct question asked once and kept in the persistent
:class:`~.cache.CountCache`.

- The infini-gram API indexes token ids: n-grams go as ``query_ids`` in the index's tokenizer,
  Llama-2 for the ``v4_*_llama`` indexes (the OLMo-2 ones included), GPT-2 for ``*_gpt2``, OLMo for
  ``*_olmo``; option ``tokenizer`` overrides it (a local folder avoids the hub, where Llama-2 is gated).
- infini-gram mini matches raw characters, case-sensitive. Word n-grams (:mod:`pytest_novelty.scoring.text`)
  go as the generation's own text, whitespace collapsed, with a space added at each end that is a
  letter or digit (``" the cat sat "`` cannot match inside ``"bathe cat satin"``). The corpus is not
  re-tokenised, so an n-gram at a line's start or beside punctuation there can be missed:
  originality from mini is a slight over-estimate.

The Creativity Index's spans are settled by the same count questions for every L of its range
(:func:`~.matching.match_lengths`; ``infgram_prob``'s ``suffix_len`` would take a request per
token), so these backends have no :class:`~.backend.MatchingStatistics` ability.

Endpoints: the ``url`` option, else ``$PYTEST_NOVELTY_INFINIGRAM_API_URL`` /
``$PYTEST_NOVELTY_INFINIGRAM_MINI_URL``, else the public addresses, which document about
:data:`PUBLIC_RATE` requests per second per client address: requests to them keep that rate (every
attempt counts) unless the ``rate`` option says otherwise. Before its first request a run says how
many count queries it will send and how long that takes (:meth:`~_CountApiBackend.announce`), from
the fewest (every position's first question) to the most (every order at every position). The
preflight (:meth:`_CountApiBackend.check`) asks one real count within 10 seconds, so an
unreachable service, a refused query or an unknown index stops the run before anything is generated.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack
from urllib.parse import urlsplit

from pytest_novelty.infra.errors import ConfigError, HarnessError, PreflightError
from pytest_novelty.infra.http import CONNECTION_OPTIONS, Connection, ConnectionOptions
from pytest_novelty.infra.progress import notice
from pytest_novelty.infra.redact import echo
from pytest_novelty.scoring.originality.backend import BACKENDS, MatchBounds, Span, check_ns
from pytest_novelty.scoring.originality.cache import CountCache, is_count
from pytest_novelty.scoring.originality.client import PREFLIGHT_TIMEOUT, JsonClient
from pytest_novelty.scoring.originality.search import decide_thresholds
from pytest_novelty.scoring.originality.tokenization import Encoding, SurfaceWords, Tokenizer, load_hf_tokenizer

__all__ = [
    "API_URL", "MINI_URL", "PUBLIC_RATE", "InfiniGramApiBackend", "InfiniGramMiniBackend", "QueryPlan",
    "default_api_tokenizer",
]

API_URL = "https://api.infini-gram.io/"
MINI_URL = "https://api-mini.infini-gram.io/"

PUBLIC_RATE = 5.0
"""Requests per second the public services allow one client address (their documentation)."""
_PUBLIC_HOSTS = frozenset({"api.infini-gram.io", "api-mini.infini-gram.io"})

_TOKENIZERS = {"llama": "meta-llama/Llama-2-7b-hf", "gpt2": "gpt2", "olmo": "allenai/OLMo-7B-hf"}
_WORD_CHAR = re.compile(r"\w")


def default_api_tokenizer(index: str) -> str:
    """The tokenizer of a public index, from its name's suffix (``v4_piletrain_llama`` → Llama-2)."""
    suffix = index.rsplit("_", 1)[-1]
    if suffix not in _TOKENIZERS:
        raise ConfigError(
            f"cannot tell the tokenizer of index {index!r} from its name; pass tokenizer=PATH_OR_ID",
            field="tokenizer",
        )
    return _TOKENIZERS[suffix]


class _CountApiBackend:
    """Shared machinery: cache, client, rounds of count questions."""

    service = ""
    prefix = ""
    url_env = ""
    default_url = ""
    tokenizer: Tokenizer

    def __init__(
        self,
        index: str,
        *,
        spec: str | None = None,
        cache_dir: Path | None = None,
        url: str | None = None,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        """``connection``: :class:`~pytest_novelty.infra.http.ConnectionOptions` (by default 8 queries in
        flight, 30 s each, 6 attempts within 120 s, the public hosts at :data:`PUBLIC_RATE` a second)."""
        if not index.strip():
            raise ConfigError(f"{self.prefix} needs an index name, as in {self.prefix}:INDEX", field="originality")
        self.spec = spec or f"{self.prefix}:{index}"
        self.index = index
        self.url = url or os.environ.get(self.url_env) or self.default_url
        public = {"rate": PUBLIC_RATE} if urlsplit(self.url).hostname in _PUBLIC_HOSTS else {}
        self.client = JsonClient(self.url, name=f"the {self.service} API",
                                 hint=f"check the address (option url= or ${self.url_env}) and the network; ",
                                 connection=Connection.of(connection, timeout=30.0, concurrency=8, **public))
        self.cache = CountCache(cache_dir, self.service, index)
        self.questions = 0
        """Distinct questions sent over the network (cache misses)."""
        self._lock = threading.Lock()

    @property
    def requests(self) -> int:
        """HTTP requests sent, retries included."""
        return self.client.traffic.requests

    def _key(self, enc: Encoding, i: int, n: int) -> str:
        """The count query of the n-gram at unit ``i``, as the cache keys it."""
        raise NotImplementedError

    def _payload(self, query: str) -> dict[str, Any]:
        raise NotImplementedError

    def _probe(self) -> str:
        """The query the preflight asks: a common one, cheap for the service."""
        raise NotImplementedError

    def check(self, *, timeout: float = PREFLIGHT_TIMEOUT) -> None:
        """Preflight: one real count query (module doc); a one-line ``PreflightError`` when the service
        cannot answer it, names no count, or knows no such index."""
        answer = self.client.check(self._payload(self._probe()), timeout=timeout)
        if not is_count(answer.get("count")):
            raise PreflightError(
                f"the {self.service} API at {self.url} answered a test query for index {self.index!r} "
                f"without a count: {echo(str(answer))}"
            )

    def _ask(self, queries: list[str], progress: bool) -> dict[str, bool]:
        cached = self.cache.get_many(queries)
        answers = {q: cached[q] > 0 for q in queries if q in cached}
        missing = [q for q in queries if q not in cached]
        if not missing:
            return answers
        from tqdm import tqdm

        bar = tqdm(total=len(missing), desc=f"[novelty] {self.service}", unit=" queries", disable=not progress)

        def record(i: int, answer: dict[str, Any]) -> None:
            count = answer.get("count")
            if not is_count(count):
                raise HarnessError(f"the {self.service} API at {self.url} answered without a count: {answer!r}")
            self.cache.put(missing[i], count)
            with self._lock:
                answers[missing[i]] = count > 0
                self.questions += 1

        try:
            self.client.post_all([self._payload(q) for q in missing], record, bar.update)
        finally:
            bar.close()
        return answers

    def plan(self, texts: Sequence[str], ns: Sequence[int]) -> QueryPlan:
        """The count queries scoring ``texts`` at ``ns`` takes given the cache now: the fewest (every
        position's first question, its smallest fitting order) and the most (every order at every position)."""
        orders = check_ns(ns)
        first: set[str] = set()
        every: set[str] = set()
        for enc in self.tokenizer.encode(list(texts)):
            k = len(enc)
            for i in range(k):
                fitting = [n for n in orders if i + n <= k]
                if fitting:
                    first.add(self._key(enc, i, fitting[0]))
                    every.update(self._key(enc, i, n) for n in fitting)
        cached = self.cache.get_many(every)
        return QueryPlan(self.prefix, len(texts), fewest=len(first - cached.keys()), most=len(every - cached.keys()),
                         reused=len(cached),
                         rate=self.client.connection.rate, concurrency=self.client.connection.concurrency)

    def announce(self, texts: Sequence[str], ns: Sequence[int]) -> QueryPlan:
        """Before the first request: say (:func:`~pytest_novelty.infra.progress.notice`) how many count
        queries scoring ``texts`` sends and how long that takes at the rate (:meth:`plan`)."""
        plan = self.plan(texts, ns)
        notice(plan.line())
        return plan

    def match_bounds(
        self, encodings: Sequence[Encoding], ns: Sequence[int], *, progress: bool = False
    ) -> list[MatchBounds]:
        """Decide every n-gram with count questions (see :mod:`.search`)."""
        return decide_thresholds(encodings, ns, lambda t, i, n: self._key(encodings[t], i, n),
                                 lambda queries: self._ask(queries, progress))

    def locate(self, spans: Sequence[Span]) -> list[int | None]:
        """Not asked of the web APIs (it would cost two more requests per text)."""
        return [None] * len(spans)

    def close(self) -> None:
        """Close connections and the cache."""
        self.cache.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.index!r}, url={self.url!r})"


@dataclass(frozen=True)
class QueryPlan:
    """What scoring a batch will ask a web API: between ``fewest`` and ``most`` count queries (the
    answers decide where), ``reused`` answers already cached, at ``rate`` a second (0: no limit)."""

    service: str
    texts: int
    fewest: int
    most: int
    reused: int
    rate: float
    concurrency: int

    def line(self) -> str:
        """The plan in one line, e.g. ``infini-gram-api: 4,200 to 12,600 count queries for 512
        texts (~14 min to ~42 min at 5/s); 1,200 cached answers reused``."""
        count = f"{self.fewest:,}" if self.fewest == self.most else f"{self.fewest:,} to {self.most:,}"
        if self.rate:
            fewest, most = (_duration(max(0, q - 1) / self.rate) for q in (self.fewest, self.most))
            when = f"~{fewest}" if fewest == most else f"~{fewest} to ~{most}"
            pace = f"{when} at {self.rate:g}/s"
        else:
            pace = f"{self.concurrency} in flight, no rate limit"
        return (
            f"[novelty] {self.service}: {count} count queries for {self.texts:,} texts ({pace}); "
            f"{self.reused:,} cached answers reused"
        )


def _duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``2 h 20 min``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


_API_OPTIONS: dict[str, type | None] = {"url": str, **CONNECTION_OPTIONS}


@BACKENDS.register("infini-gram-api", argument="INDEX", needs="an index name",
                   options={"tokenizer": str, **_API_OPTIONS},
                   summary="the public infini-gram API (token ids; e.g. v4_piletrain_llama)")
class InfiniGramApiBackend(_CountApiBackend):
    """The infini-gram API: token-id n-grams in the index's tokenizer."""

    service = "infini-gram"
    prefix = "infini-gram-api"
    url_env = "PYTEST_NOVELTY_INFINIGRAM_API_URL"
    default_url = API_URL

    def __init__(self, index: str, *, tokenizer: str | None = None, **options: Any) -> None:
        super().__init__(index, **options)
        self.tokenizer = load_hf_tokenizer(tokenizer or default_api_tokenizer(index))

    def _key(self, enc: Encoding, i: int, n: int) -> str:
        return ",".join(str(int(t)) for t in enc.ids[i : i + n])  # the token ids

    def _probe(self) -> str:
        ids = self.tokenizer.encode(["the"])[0].ids
        return str(int(ids[0])) if len(ids) else "0"

    def _payload(self, query: str) -> dict[str, Any]:
        return {"index": self.index, "query_type": "count", "query_ids": [int(t) for t in query.split(",")]}


def mini_query(enc: Encoding, i: int, n: int) -> str:
    """The character query for the word n-gram at ``i``: its text, spaces collapsed, word ends padded."""
    text = " ".join(enc.surface(i, n).split())
    if _WORD_CHAR.match(text[:1]):
        text = " " + text
    if _WORD_CHAR.match(text[-1:]):
        text += " "
    return text


@BACKENDS.register("infini-gram-mini", argument="INDEX", needs="an index name", options=_API_OPTIONS,
                   summary="the public infini-gram mini API (raw text; e.g. v2_pileval)")
class InfiniGramMiniBackend(_CountApiBackend):
    """infini-gram mini: word n-grams matched as raw text (see the module docstring)."""

    service = "infini-gram-mini"
    prefix = "infini-gram-mini"
    url_env = "PYTEST_NOVELTY_INFINIGRAM_MINI_URL"
    default_url = MINI_URL

    def __init__(self, index: str, **options: Any) -> None:
        super().__init__(index, **options)
        self.tokenizer = SurfaceWords()

    def _key(self, enc: Encoding, i: int, n: int) -> str:
        return mini_query(enc, i, n)

    def _probe(self) -> str:
        return " the "

    def _payload(self, query: str) -> dict[str, Any]:
        return {"index": self.index, "query_type": "count", "query": query}
