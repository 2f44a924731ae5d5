"""``infini-gram:DIR``: a local infini-gram index (one folder or several shards), queried exactly.

One ``creativity`` call per distinct text gives, for every token position ``i``, the end ``rs[i]``
of the longest corpus match starting there, so ``L_i = rs[i] - i`` answers every n at once. Calls
run on a thread pool (the engine releases the GIL).

The engine has a rare bug: for a suffix that sorts before everything in a shard it can return
``rs[i] == i`` although the token at ``i`` occurs. Every position reported as 0 whose token can
occur is therefore rechecked with ``count`` (which is not affected), searching the true length
between 1 and ``L_{i+1} + 1`` (a match at ``i`` minus its first token is a match at ``i + 1``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pytest_novelty.errors import ConfigError, HarnessError
from pytest_novelty.scoring.originality.backend import MatchBounds
from pytest_novelty.scoring.originality.index import IndexInfo
from pytest_novelty.scoring.originality.tokenization import UNKNOWN_TOKEN, Encoding, Tokenizer, load_hf_tokenizer

__all__ = ["InfiniGramBackend", "check_same_tokenizer", "unit_lengths"]


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
    ) -> None:
        from infini_gram.engine import InfiniGramEngine

        self.spec = spec
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

    # -- the Protocol --------------------------------------------------------------------------

    def match_bounds(
        self, encodings: Sequence[Encoding], ns: Sequence[int], *, progress: bool = False
    ) -> list[MatchBounds]:
        """Exact ``L_i`` per unit; identical texts are looked up once."""
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
        """The document of the first suffix-array hit of the run (``find`` then ``get_doc_by_rank``)."""
        if length <= 0:
            return None
        ids = [int(t) for t in encoding.ids[encoding.unit_pos[start] : encoding.unit_pos[start + length]]]
        found = self._call("find", input_ids=ids)
        for shard, (lo, hi) in enumerate(found["segment_by_shard"]):
            if hi > lo:
                return int(self._call("get_doc_by_rank", s=shard, rank=int(lo), max_disp_len=1)["doc_ix"])
        return None

    def close(self) -> None:
        """Drop the engine (its memory maps close with it)."""
        self._engine = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"InfiniGramBackend({self.spec!r})"
