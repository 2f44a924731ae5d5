"""``infini-gram:DIR``: a local infini-gram index (one folder or several shards), queried exactly.

Two query methods give the same, exact answers:

- ``suffix-array`` (the default): the whole batch is looked up at once in the index's own suffix
  array (:mod:`.suffixarray`), every position capped at the largest n; the longest copied span is
  then completed exactly (below). On this kind of machine it is two orders of magnitude faster
  than the engine's calls, which start an operating-system thread per call and per position.
- ``creativity``: one longest-match (``creativity``) call per distinct text gives, for every token
  position ``i``, the end ``rs[i]`` of the longest corpus match starting there, so
  ``L_i = rs[i] - i`` answers every n at once. Calls run on a thread pool (the engine releases
  the GIL).

Longest span with ``suffix-array``: matches capped at ``c = max(n)`` are exact where they are
below ``c``. For a run of positions ``a..b`` that all reach ``c``, no match starting in the run can
cover the unmatched stretch after ``b + 1``, so they all end by ``e = b + 1 + L_{b+1}``. One more
lookup checks whether units ``a..e-1`` occur: if they do (the usual case, a copied passage), every
``L_i`` in the run is exactly ``e - i``; if not, a ``creativity`` call on that stretch settles it.

The engine has a rare bug: for a suffix that sorts before everything in a shard ``creativity`` can
return ``rs[i] == i`` although the token at ``i`` occurs. Every position reported as 0 whose token
can occur is therefore rechecked with ``count`` (which is not affected), searching the true length
between 1 and ``L_{i+1} + 1`` (a match at ``i`` minus its first token is a match at ``i + 1``).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pytest_novelty.errors import ConfigError, HarnessError
from pytest_novelty.scoring.originality.backend import MatchBounds, check_ns
from pytest_novelty.scoring.originality.index import IndexInfo
from pytest_novelty.scoring.originality.suffixarray import byte_keys, longest_prefixes, open_shards
from pytest_novelty.scoring.originality.tokenization import UNKNOWN_TOKEN, Encoding, Tokenizer, load_hf_tokenizer

__all__ = ["METHODS", "InfiniGramBackend", "check_same_tokenizer", "unit_lengths"]

METHODS = ("suffix-array", "creativity")


def check_same_tokenizer(infos: Sequence[IndexInfo], tokenizer: str | None) -> Tokenizer:
    """The shared tokenizer of ``infos``; refuse shards that disagree, or a ``tokenizer`` that differs."""
    first = infos[0]
    for other in infos[1:]:
        if other.fingerprint != first.fingerprint or other.dtype != first.dtype:
            raise ConfigError(
                f"shards disagree: {first.path} uses {first.tokenizer_spec} ({first.fingerprint}), "
                f"{other.path} uses {other.tokenizer_spec} ({other.fingerprint}); shards must be built with "
                "the same tokenizer (in words mode: indexed together, as one corpus)",
            )
    if tokenizer is not None:
        wanted = "words" if tokenizer == "words" else load_hf_tokenizer(tokenizer).fingerprint
        actual = "words" if first.tokenizer_spec == "words" else first.fingerprint
        if wanted != actual:
            raise ConfigError(
                f"the index was built with tokenizer {first.tokenizer_spec!r}, not {tokenizer!r}; query it "
                "without a tokenizer option (it knows its own) or rebuild it with the one you want",
                path=first.path,
            )
    return first.load_tokenizer()


def unit_lengths(token_lengths: np.ndarray, unit_pos: np.ndarray) -> np.ndarray:
    """Longest match in whole units at each unit start, from longest matches in tokens."""
    starts = unit_pos[:-1]
    if len(starts) == 0:
        return np.zeros(0, dtype=np.int64)
    ends = starts + token_lengths[starts]
    return np.searchsorted(unit_pos, ends, side="right") - 1 - np.arange(len(starts))


class InfiniGramBackend:
    """Exact longest matches from one or more local index folders (shards of one corpus)."""

    def __init__(
        self,
        infos: Sequence[IndexInfo],
        *,
        spec: str,
        tokenizer: str | None = None,
        workers: int | None = None,
        load_to_ram: bool = False,
        method: str = "suffix-array",
    ) -> None:
        from infini_gram.engine import InfiniGramEngine

        if method not in METHODS:
            raise ConfigError(f"method must be one of {', '.join(METHODS)}, got {method!r}", field="method")
        self.spec = spec
        self.method = method
        self.infos = list(infos)
        self.tokenizer = check_same_tokenizer(self.infos, tokenizer)
        dtype = self.infos[0].dtype
        separator = 0xFFFF if dtype == "u16" else 0xFFFFFFFF
        self._engine = InfiniGramEngine(
            index_dir=[str(info.path) for info in self.infos],
            eos_token_id=0,
            vocab_size=separator,
            token_dtype=dtype,
            load_to_ram=bool(load_to_ram),
        )
        self._unknown = UNKNOWN_TOKEN if self.infos[0].tokenizer_spec == "words" else None
        self.workers = max(1, int(workers) if workers else min(4, os.cpu_count() or 1))
        self._lock = threading.Lock()
        self.rechecked = 0
        """Positions the engine reported as unmatched and ``count`` found to match (the bug guard)."""
        self.engine_calls = 0
        self.fallbacks = 0
        """Stretches of long matches the suffix-array method handed to ``creativity``."""
        self.width = self.infos[0].token_width
        self._shards = open_shards(self.infos) if method == "suffix-array" else []
        if self._shards and not self._self_check():
            warnings.warn(
                f"{spec}: the suffix array does not read as expected (a different infini-gram version?); "
                "using the engine's creativity query instead",
                RuntimeWarning,
                stacklevel=2,
            )
            self.method, self._shards = "creativity", []

    # -- engine calls ------------------------------------------------------------------------

    def _call(self, method: str, **kwargs: Any) -> dict[str, Any]:
        answer = getattr(self._engine, method)(**kwargs)
        with self._lock:
            self.engine_calls += 1
        if "error" in answer:
            raise HarnessError(f"infini-gram engine refused a {method} query: {answer['error']}")
        return answer

    def _count(self, ids: list[int]) -> int:
        return int(self._call("count", input_ids=ids)["count"])

    def token_lengths(self, ids: list[int]) -> np.ndarray:
        """``L_i`` for every token position of ``ids`` (creativity, with the bug guard)."""
        m = len(ids)
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        rs = self._call("creativity", input_ids=ids)["rs"]
        lengths = np.asarray(rs, dtype=np.int64) - np.arange(m)
        suspects = np.flatnonzero(lengths == 0)
        if self._unknown is not None and len(suspects):
            suspects = suspects[np.asarray(ids)[suspects] != self._unknown]
        fixed = 0
        for i in suspects[::-1]:
            i = int(i)
            if self._count(ids[i : i + 1]) == 0:
                continue
            lo, hi = 1, (int(lengths[i + 1]) + 1 if i + 1 < m else 1)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if self._count(ids[i : i + mid]) > 0:
                    lo = mid
                else:
                    hi = mid - 1
            lengths[i] = lo
            fixed += 1
        if fixed:
            with self._lock:
                self.rechecked += fixed
        return lengths

    # -- the suffix-array method -------------------------------------------------------------

    def _self_check(self) -> bool:
        """Runs of the corpus itself must be found whole: a cheap check of the file format."""
        shard = self._shards[0]
        separator = 0xFFFF if self.width == 2 else 0xFFFFFFFF
        rng = np.random.default_rng(shard.size)
        starts = rng.integers(0, max(shard.size - 4, 1), size=min(16, shard.size))
        runs = [np.asarray(shard.stream[s : s + 4]) for s in starts]
        runs = [r[: int(np.argmax(r == separator))] if (r == separator).any() else r for r in runs]
        runs = [r for r in runs if len(r)]
        if not runs:
            return True
        found, _, _ = self._lookup(runs)
        return bool((found == np.array([len(r) for r in runs])).all())

    def _lookup(self, runs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Longest found prefix (in tokens) of each token run, with a shard and rank of a match."""
        lengths = np.array([len(r) for r in runs], dtype=np.int64)
        columns = int(lengths.max()) if len(runs) else 0
        queries = np.zeros((len(runs), max(columns, 1)), dtype=np.int64)
        if len(runs) and columns:
            flat = np.concatenate([np.asarray(r, dtype=np.int64) for r in runs])
            rows = np.repeat(np.arange(len(runs)), lengths)
            cols = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            queries[rows, cols] = byte_keys(flat, self.width)
        return longest_prefixes(self._shards, queries, lengths)

    def _capped(self, encodings: Sequence[Encoding], cap: int) -> list[np.ndarray]:
        """``min(L_i, cap)`` per unit, one batched lookup for every position of every text."""
        runs: list[np.ndarray] = []
        for enc in encodings:
            k = len(enc)
            starts = enc.unit_pos[:-1]
            ends = enc.unit_pos[np.minimum(np.arange(k) + cap, k)]
            runs.extend(enc.ids[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True))
        found = self._lookup(runs)[0] if runs else np.zeros(0, dtype=np.int64)
        out, at = [], 0
        for enc in encodings:
            k = len(enc)
            starts = enc.unit_pos[:-1]
            out.append(np.searchsorted(enc.unit_pos, starts + found[at : at + k], side="right") - 1 - np.arange(k))
            at += k
        return out

    def _by_suffix_array(self, encodings: Sequence[Encoding], cap: int) -> list[MatchBounds]:
        lengths = self._capped(encodings, cap)
        stretches: list[tuple[int, int, int, int]] = []  # (text, a, b, e): a run a..b, all ending by e
        for t, (enc, length) in enumerate(zip(encodings, lengths, strict=True)):
            k = len(enc)
            full = (length >= cap) & (np.arange(k) + cap <= k)
            if not full.any():
                continue
            edges = np.diff(np.concatenate([[0], full.astype(np.int8), [0]]))
            starts, stops = np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()
            for a, after in zip(starts, stops, strict=True):
                e = k if after >= k else after + int(length[after])
                stretches.append((t, a, after - 1, e))
        if stretches:
            runs = [encodings[t].ids[encodings[t].unit_pos[a] : encodings[t].unit_pos[e]] for t, a, _, e in stretches]
            found = self._lookup(runs)[0]
            for (t, a, b, e), run, got in zip(stretches, runs, found.tolist(), strict=True):
                if got == len(run):
                    lengths[t][a : b + 1] = e - np.arange(a, b + 1)
                else:
                    self.fallbacks += 1
                    enc = encodings[t]
                    ids = [int(x) for x in run]
                    sub_pos = enc.unit_pos[a : e + 1] - enc.unit_pos[a]
                    lengths[t][a : b + 1] = unit_lengths(self.token_lengths(ids), sub_pos)[: b + 1 - a]
        return [MatchBounds.exact(length) for length in lengths]

    # -- the Protocol --------------------------------------------------------------------------

    def match_bounds(
        self, encodings: Sequence[Encoding], ns: Sequence[int], *, progress: bool = False
    ) -> list[MatchBounds]:
        """Exact ``L_i`` per unit (see the module docstring for the two methods)."""
        if self.method == "suffix-array":
            return self._by_suffix_array(encodings, check_ns(ns)[-1])
        return self._by_creativity(encodings, progress)

    def _by_creativity(self, encodings: Sequence[Encoding], progress: bool) -> list[MatchBounds]:
        slots: dict[bytes, int] = {}
        jobs: list[list[int]] = []
        which = []
        for enc in encodings:
            ids = np.asarray(enc.ids, dtype=np.int64)
            key = ids.tobytes()
            if key not in slots:
                slots[key] = len(jobs)
                jobs.append(ids.tolist())
            which.append(slots[key])
        from tqdm import tqdm

        with ThreadPoolExecutor(self.workers, thread_name_prefix="infini-gram") as pool:
            bar = tqdm(total=len(jobs), desc="[novelty] originality", unit=" texts", disable=not progress)
            results: list[np.ndarray] = []
            for lengths in pool.map(self.token_lengths, jobs):
                results.append(lengths)
                bar.update()
            bar.close()
        return [
            MatchBounds.exact(unit_lengths(results[w], enc.unit_pos)) for w, enc in zip(which, encodings, strict=True)
        ]

    def locate(self, encoding: Encoding, start: int, length: int) -> int | None:
        """The document of the first suffix-array match of the run, in the first shard that has one."""
        if length <= 0:
            return None
        run = encoding.ids[encoding.unit_pos[start] : encoding.unit_pos[start + length]]
        if self._shards:
            found, shard, rank = self._lookup([run])
            if int(found[0]) < len(run):
                return None
            return self._shards[int(shard[0])].document(int(rank[0]))
        answer = self._call("find", input_ids=[int(t) for t in run])
        for index, (lo, hi) in enumerate(answer["segment_by_shard"]):
            if hi > lo:
                return int(self._call("get_doc_by_rank", s=index, rank=int(lo), max_disp_len=1)["doc_ix"])
        return None

    def close(self) -> None:
        """Drop the engine (its memory maps close with it)."""
        self._engine = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"InfiniGramBackend({self.spec!r})"
