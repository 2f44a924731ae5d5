"""``infini-gram:DIR``: a local infini-gram index (one folder or several shards), queried exactly.

Two query methods give the same exact ``L_i`` (the longest corpus match starting at unit ``i``), to
:meth:`~InfiniGramBackend.match_bounds` (originality) and :meth:`~InfiniGramBackend.matching_statistics`
(the Creativity Index):

- ``suffix-array`` (the default): the whole batch at once in the index's own suffix array
  (:mod:`.suffixarray`). Where starting a thread is slow it is two orders of magnitude faster than
  the engine, which starts an operating-system thread per call and per position. For originality
  each position is capped at the largest n asked, then completed (below); for the matching
  statistics only the positions the neighbours do not settle are searched (:mod:`.matching`).
- ``creativity``: one engine call per distinct text gives the end ``rs[i]`` of the longest match at
  every token, ``L_i = rs[i] - i``; calls run on a thread pool (the engine releases the GIL).

Completing capped matches: below the cap ``c`` they are exact. A run of positions ``a..b`` that all
reach ``c`` cannot reach past the unmatched stretch after ``b + 1``, so its matches end by
``e = b + 1 + L_{b+1}``. One lookup of units ``a..e-1`` settles the usual case, a copied passage
(``L_i = e - i`` throughout); otherwise each position is looked up up to ``e`` (one more batched
lookup for all such runs).

The engine's ``creativity`` misses a match whose range in a shard's suffix array starts at rank 0,
reporting ``rs[i] == i`` (or another shard's shorter match). Such a match begins with the first
token of that shard's smallest suffix, so the positions holding one are rechecked with ``count``
(unaffected) between the engine's answer and ``L_{i+1} + 1``, right to left. Tested against brute
force on random corpora, single and sharded.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.scoring.originality.backend import MatchBounds, Span, check_cap, check_ns
from pytest_novelty.scoring.originality.index import IndexInfo, engine_path, register_local
from pytest_novelty.scoring.originality.matching import matching_statistics
from pytest_novelty.scoring.originality.suffixarray import longest_packed, longest_prefixes, open_shards, pack_windows
from pytest_novelty.scoring.originality.tokenization import Encoding, Tokenizer, load_hf_tokenizer

__all__ = ["METHODS", "InfiniGramBackend", "check_same_tokenizer", "unit_lengths"]

METHODS = ("suffix-array", "creativity")
_WIDTH_GROUPS = np.array([16, 128])  # query widths (tokens) searched together, each group padded to its longest


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


class _Batch:
    """The texts of one call laid end to end: text ``t``'s units are slots ``first[t] ..``, then one
    gap slot, so no run of slots crosses into the next text. ``ids`` is every token, a zero (never
    queried) between texts; ``units`` every slot's unit, -1 for a gap; ``left[s]`` the units of the
    text from slot ``s`` on (0 for a gap)."""

    def __init__(self, encodings: Sequence[Encoding]) -> None:
        units = np.array([len(enc) for enc in encodings], dtype=np.int64)
        tokens = np.array([len(enc.ids) for enc in encodings], dtype=np.int64)
        self.first = np.concatenate([[0], np.cumsum(units + 1)[:-1]]).astype(np.int64)
        token_first = np.concatenate([[0], np.cumsum(tokens + 1)[:-1]]).astype(np.int64)
        slots = int((units + 1).sum())
        self.slot = np.arange(slots, dtype=np.int64)
        # pos[s]: the batch token where slot s starts (a gap slot: the text's end, its zero token)
        self.pos = np.concatenate(
            [np.asarray(enc.unit_pos, dtype=np.int64) + off for enc, off in zip(encodings, token_first, strict=True)]
            or [np.zeros(0, dtype=np.int64)]
        )
        text = np.repeat(np.arange(len(encodings)), units + 1)
        self.left = (self.first + units)[text] - self.slot if slots else np.zeros(0, dtype=np.int64)
        gap = np.zeros(1, dtype=np.int64)
        self.ids = np.concatenate(
            [part for enc in encodings for part in (np.asarray(enc.ids, dtype=np.int64), gap)] + [gap]
        )
        self.units = np.concatenate(
            [part for enc in encodings for part in (np.asarray(enc.units, dtype=np.int64), gap - 1)] + [gap[:0]]
        )
        self.one_token_units = bool((units == tokens).all())

    def units_within(self, slot: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """How many whole units from each slot the first ``tokens`` tokens from it cover."""
        if self.one_token_units:
            return tokens
        return np.searchsorted(self.pos, self.pos[slot] + tokens, side="right") - 1 - slot


@register_local("infini-gram", options={"tokenizer": str, "method": str, "workers": int, "load_to_ram": bool},
                summary="a local infini-gram suffix-array index (several shards: DIR,DIR)")
class InfiniGramBackend:
    """Exact longest matches from one or more local index folders (shards of one corpus)."""

    def __init__(
        self,
        infos: Sequence[IndexInfo],
        *,
        spec: str,
        tokenizer: str | None = None,
        method: str = "suffix-array",
        workers: int | None = None,
        load_to_ram: bool = False,
    ) -> None:
        if method not in METHODS:
            raise ConfigError(f"method must be one of {', '.join(METHODS)}, got {method!r}", field="method")
        self.spec = spec
        self.method = method
        self.infos = list(infos)
        self.tokenizer = check_same_tokenizer(self.infos, tokenizer)
        self.width = self.infos[0].token_width
        self.workers = max(1, int(workers) if workers else min(4, os.cpu_count() or 1))
        self.load_to_ram = bool(load_to_ram)
        self._engine: Any = None
        self._lock = threading.Lock()
        self.rechecked = 0
        """Positions where ``creativity`` was wrong and ``count`` repaired it (the bug guard)."""
        self.engine_calls = 0
        self.split_runs = 0
        """Runs of capped matches that were not one passage of the corpus (looked up position by position)."""
        self.searched = 0
        """Positions the matching statistics searched (the rest their neighbours settled)."""
        self._shards = open_shards(self.infos)
        self._suspects = np.array(sorted({t for t in (s.first_token() for s in self._shards) if t is not None}))
        if method == "suffix-array" and not self._self_check():
            warnings.warn(f"{spec}: the suffix array does not read as expected (a different infini-gram version?); "
                          "using the engine's creativity query instead", RuntimeWarning, stacklevel=2)
            self.method = "creativity"

    # -- the creativity method ---------------------------------------------------------------

    @property
    def engine(self) -> Any:
        """The infini-gram engine over every folder (opened on first use)."""
        if self._engine is None:
            from infini_gram.engine import InfiniGramEngine

            dtype = self.infos[0].dtype
            self._engine = InfiniGramEngine(index_dir=[str(engine_path(info.path)) for info in self.infos],
                                            eos_token_id=0, vocab_size=0xFFFF if dtype == "u16" else 0xFFFFFFFF,
                                            token_dtype=dtype, load_to_ram=self.load_to_ram)
        return self._engine

    def _call(self, method: str, **kwargs: Any) -> dict[str, Any]:
        answer = getattr(self.engine, method)(**kwargs)
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
        fixed = 0
        for i in np.flatnonzero(np.isin(np.asarray(ids), self._suspects))[::-1].tolist():
            lo, hi = int(lengths[i]), (int(lengths[i + 1]) + 1 if i + 1 < m else 1)
            if lo == 0 and self._count(ids[i : i + 1]) > 0:
                lo = 1
            if lo == 0:
                continue
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if self._count(ids[i : i + mid]) > 0:
                    lo = mid
                else:
                    hi = mid - 1
            if lo != int(lengths[i]):
                fixed += 1
                lengths[i] = lo
        if fixed:
            with self._lock:
                self.rechecked += fixed
        return lengths

    def _by_creativity(self, encodings: Sequence[Encoding], progress: bool) -> list[MatchBounds]:
        slots: dict[bytes, int] = {}  # each distinct text asked once
        which = [slots.setdefault(np.asarray(enc.ids, dtype=np.int64).tobytes(), len(slots)) for enc in encodings]
        jobs = [np.frombuffer(key, dtype=np.int64).tolist() for key in slots]
        from tqdm import tqdm

        with ThreadPoolExecutor(self.workers, thread_name_prefix="infini-gram") as pool:
            results = list(tqdm(pool.map(self.token_lengths, jobs), total=len(jobs), desc="[novelty] originality",
                                unit=" texts", disable=not progress))
        return [
            MatchBounds.exact(unit_lengths(results[w], enc.unit_pos)) for w, enc in zip(which, encodings, strict=True)
        ]

    # -- the suffix-array method -------------------------------------------------------------

    def _lookup(self, runs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Longest found prefix (in tokens) of each token run, with a shard and rank of a match."""
        lengths = np.array([len(r) for r in runs], dtype=np.int64)
        ids = np.concatenate([np.asarray(r, dtype=np.int64) for r in runs] + [np.zeros(0, dtype=np.int64)])
        words, nbytes = pack_windows(ids, np.cumsum(lengths) - lengths, lengths, self.width)
        return longest_packed(self._shards, words, nbytes, workers=self.workers)

    def _self_check(self) -> bool:
        """Runs of the corpus itself must be found whole: a cheap check of the file format."""
        shard = self._shards[0]
        separator = 0xFFFF if self.width == 2 else 0xFFFFFFFF
        rng = np.random.default_rng(shard.size)
        runs = []
        for start in rng.integers(0, max(shard.size - 4, 1), size=min(16, shard.size)).tolist():
            run = np.asarray(shard.stream[start : start + 4])
            cut = np.flatnonzero(run == separator)
            run = run[: cut[0]] if len(cut) else run
            if len(run):
                runs.append(run)
        if not runs:
            return True
        found = self._lookup(runs)[0]
        return bool((found == np.array([len(r) for r in runs])).all())

    def _by_suffix_array(self, encodings: Sequence[Encoding], cap: int) -> list[MatchBounds]:
        batch = _Batch(encodings)
        lengths = self._capped(batch, cap)  # min(L_i, cap) per unit, on the batch's layout
        # Runs a..b of positions that reach the cap (and have cap units left), ending by e.
        full = np.zeros(len(lengths) + 1, dtype=bool)
        full[:-1] = (lengths >= cap) & (batch.left >= cap)
        edges = np.diff(np.concatenate([[False], full]).astype(np.int8))
        a, after = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        b = after - 1
        # The slot after a run is a unit of the same text, or the gap after the text's last unit.
        e = np.where(batch.left[after] == 0, after, after + lengths[after])
        whole = self._unit_found(batch, a, e)
        one = whole == e - a
        self.split_runs += int((~one).sum())
        # A run that is one passage: L_i = e - i throughout; else each position is looked up to e.
        counts = b - a + 1
        offset = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        at = np.repeat(a, counts) + offset  # every position of every run
        ends, inside = np.repeat(e, counts), np.repeat(one, counts)
        lengths[at[inside]] = ends[inside] - at[inside]
        lengths[a] = whole
        rest = ~inside & (offset > 0)
        lengths[at[rest]] = self._unit_found(batch, at[rest], ends[rest])
        return [MatchBounds.exact(lengths[lo : lo + len(enc)]) for enc, lo in zip(encodings, batch.first, strict=True)]

    def _unit_found(self, batch: _Batch, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """For each slot ``start``: the longest run of whole units from it, before slot ``end``, that
        occurs in the corpus. Queries are cut from the batch's tokens (:func:`~.suffixarray.pack_windows`)
        in groups of like width (:data:`_WIDTH_GROUPS`), so a few long runs do not lengthen every query."""
        out = np.zeros(len(start), dtype=np.int64)
        if not len(start):
            return out
        first, stop = batch.pos[start], batch.pos[end]
        width = stop - first
        group = np.searchsorted(_WIDTH_GROUPS, width)
        for g in np.unique(group).tolist():
            rows = np.flatnonzero(group == g)
            words, nbytes = pack_windows(batch.ids, first[rows], width[rows], self.width)
            found = longest_packed(self._shards, words, nbytes, workers=self.workers)[0]
            out[rows] = batch.units_within(start[rows], found)
        return out

    def _capped(self, batch: _Batch, cap: int) -> np.ndarray:
        """``min(L_i, cap)`` per unit slot: one batched lookup for every position of every text."""
        if batch.one_token_units:
            # every unit is one token: the queries are sliding windows over the batch's tokens
            ids = np.concatenate([batch.ids, np.zeros(cap, dtype=np.int64)])
            windows = np.lib.stride_tricks.sliding_window_view(ids, cap)[: len(batch.slot)]
            return longest_prefixes(self._shards, windows, np.minimum(batch.left, cap), workers=self.workers)[0]
        stop = batch.slot + np.minimum(batch.left, cap)
        return self._unit_found(batch, batch.slot, stop)

    # -- the Protocol --------------------------------------------------------------------------

    def match_bounds(
        self, encodings: Sequence[Encoding], ns: Sequence[int], *, progress: bool = False
    ) -> list[MatchBounds]:
        """Exact ``L_i`` per unit (see the module docstring for the two methods)."""
        if self.method == "suffix-array":
            return self._by_suffix_array(encodings, check_ns(ns)[-1])
        return self._by_creativity(encodings, progress)

    def matching_statistics(
        self, encodings: Sequence[Encoding], *, cap: int | None = None, floor: int = 1, progress: bool = False
    ) -> list[np.ndarray]:
        """``L_i`` (``min(L_i, cap)``) at every unit position, exact, of any length; ``suffix-array``
        leaves out the positions its neighbours bound outside [``floor``, ``cap``]."""
        limit_to = check_cap(cap)
        lowest = check_cap(floor, "floor") or 1
        if not encodings:
            return []
        if self.method != "suffix-array":
            exact = [bounds.lower for bounds in self._by_creativity(encodings, progress)]
            return [lengths if limit_to is None else np.minimum(lengths, limit_to) for lengths in exact]
        batch = _Batch(encodings)
        found, searched = matching_statistics(batch.slot + batch.left, batch.units < 0,
                                              lambda start, end: self._unit_found(batch, start, end),
                                              shortest=lowest, longest=limit_to)
        with self._lock:
            self.searched += searched
        if limit_to is not None:
            found = np.minimum(found, limit_to)
        return [found[lo : lo + len(enc)] for enc, lo in zip(encodings, batch.first, strict=True)]

    def locate(self, spans: Sequence[Span]) -> list[int | None]:
        """The document of the first suffix-array match of each run, in the first shard that has one."""
        runs = [enc.ids[enc.unit_pos[start] : enc.unit_pos[start + length]] for enc, start, length in spans]
        if self.method == "suffix-array":
            found, shard, rank = self._lookup(runs) if runs else (np.zeros(0, dtype=np.int64),) * 3
            return [
                self._shards[s].document(r) if got == len(run) and len(run) else None
                for run, got, s, r in zip(runs, found.tolist(), shard.tolist(), rank.tolist(), strict=True)
            ]
        return [self._find_document(run) for run in runs]

    def _find_document(self, run: np.ndarray) -> int | None:
        if not len(run):
            return None
        answer = self._call("find", input_ids=[int(t) for t in run])
        for index, (lo, hi) in enumerate(answer["segment_by_shard"]):
            if hi > lo:
                return int(self._call("get_doc_by_rank", s=index, rank=int(lo), max_disp_len=1)["doc_ix"])
        return None

    def close(self) -> None:
        """Drop the engine and the memory maps."""
        self._engine = None
        self._shards = []

    def __repr__(self) -> str:
        return f"InfiniGramBackend({self.spec!r}, method={self.method!r})"
