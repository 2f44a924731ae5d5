"""Originality of generations against a corpus: the fraction of their n-grams the corpus never has.

Sources: Padmakumar et al. (2025), "Beyond Memorization: Mapping the Originality-Quality Frontier
of Language Models" (arXiv 2504.09389; later "Measuring LLM Novelty As The Frontier Of Original And
High-Quality Output"), where originality is the share of a generation's n-grams (n = 4, 5, 6)
absent from the training corpus; and the n-gram novelty computed with infini-gram's longest-match
(``creativity``) query, Liu et al. (2024), "Infini-gram: Scaling Unbounded n-gram Language Models to
a Trillion Tokens". For a generation of ``T`` units (words or tokens) there are ``T - n + 1``
n-grams, starting at positions ``i = 0 .. T - n``, and

    originality@n = #{i : units[i : i + n] occurs nowhere in the corpus} / (T - n + 1)

- n-grams are counted with multiplicity, per position (as the longest-match computation does): an
  n-gram a generation repeats counts once per occurrence, seen or unseen, so originality is the
  share of the text's positions that start an unseen n-gram, and repeating a memorised phrase
  costs as much each time;
- the value is ``None`` (``null`` in JSON) when ``T < n``: there is no n-gram to judge. This
  layer reports the fact; the metrics layer decides what it counts as. There such a generation
  counts as originality 0, hence novelty 0, at that order (it cannot be novel at that length, and
  leaving it out of the means would let a checkpoint that says little score as novel), and the
  share of generations long enough for n is reported as ``coverage@n``
  (:func:`pytest_novelty.metrics.novelty.originality_counting_short`);
- an n-gram "occurs" when it appears inside one corpus document (never across a document boundary).

Each result also carries the longest copied span: the longest run of units that occurs in the
corpus, where it starts in the generation, its text, and the number of one corpus document that
contains it.

Asked for a range of span lengths ``L`` (the Creativity Index's, ``lengths``), each result also
carries the match length at every unit position for that range
(:func:`~pytest_novelty.scoring.originality.matching.match_lengths`: ``min(L_i, max L)`` where
``L_i >= min L``), from which :mod:`pytest_novelty.metrics.creativity` computes ``uniqueness@L``,
and the text's *copied passages*: each maximal run of units that corpus matches of at least
``min L`` units cover, with the longest such match inside it (capped at ``max L``). A passage is
pieced together from spans found verbatim in the corpus; it need not occur whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pytest_novelty.scoring.originality.backend import MatchBounds, OriginalityBackend, Span, check_ns
from pytest_novelty.scoring.originality.matching import match_lengths
from pytest_novelty.scoring.originality.tokenization import Encoding

__all__ = ["OriginalityResult", "copied_passages", "score_texts"]


@dataclass(frozen=True)
class OriginalityResult:
    """Originality of one generation.

    ``originality[n]``: fraction of unseen n-grams, ``None`` when the text has fewer than n units.
    ``ngrams[n]`` / ``unseen[n]``: how many n-grams the text has and how many are unseen.
    ``tokens``: units (words or tokens) in the text.
    ``longest_span``: length in units of the longest run found in the corpus (0 if none), starting
    at unit ``longest_span_start``; ``longest_span_text`` is that run as written;
    ``longest_span_doc`` the number of one corpus document containing it (``None`` when the
    backend cannot tell); ``longest_span_exact`` is False when the backend only looked up to some
    length, so the true span may be longer than ``longest_span``.
    """

    originality: dict[int, float | None]
    ngrams: dict[int, int]
    unseen: dict[int, int] = field(default_factory=dict)
    tokens: int = 0
    longest_span: int = 0
    longest_span_doc: int | None = None
    longest_span_start: int = 0
    longest_span_text: str = ""
    longest_span_exact: bool = True
    match_lengths: tuple[int, ...] = ()
    """Per unit, the match length for the range of L asked (empty when none was)."""
    copied: tuple[tuple[str, int, int], ...] = ()
    """The copied passages ``(text, units, longest match)`` for the range of L asked, in order."""


def _longest(bounds: MatchBounds) -> tuple[int, int, bool]:
    """``(length, start, exact)`` of the longest corpus match of one text."""
    if len(bounds.lower) == 0:
        return 0, 0, True
    start = int(np.argmax(bounds.lower))
    length = int(bounds.lower[start])
    return length, start, int(bounds.upper.max()) == length


def copied_passages(encoding: Encoding, lengths: np.ndarray, shortest: int) -> tuple[tuple[str, int, int], ...]:
    """The runs of units that matches of at least ``shortest`` units cover, as ``(text, units,
    longest match)``: where a match reaches past every earlier one, the run goes on."""
    positions = np.arange(len(lengths))
    reach = np.where(lengths >= shortest, positions + lengths, positions)
    inside = np.maximum.accumulate(reach) > positions if len(reach) else np.zeros(0, dtype=bool)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], inside.astype(np.int8), [0]])))
    return tuple((encoding.surface(int(a), int(b - a)), int(b - a), int(lengths[a:b].max()))
                 for a, b in zip(edges[::2], edges[1::2], strict=True))  # fmt: skip


def score_texts(
    backend: OriginalityBackend,
    texts: Sequence[str],
    ns: Sequence[int] = (4, 5, 6),
    *,
    lengths: Sequence[int] = (),
    progress: bool = False,
) -> list[OriginalityResult]:
    """Originality at each n of ``ns`` for every text, in order (see the module docstring), and,
    for a range of span lengths ``lengths``, the match lengths and copied passages of each.

    The backend's own tokenizer turns texts into units. The whole batch goes to the backend at
    once, which looks up each distinct n-gram (or text) only once.
    """
    orders = check_ns(ns)
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is a {type(text).__name__}, not a str")
    encodings = backend.tokenizer.encode(texts)
    all_bounds = backend.match_bounds(encodings, orders, progress=progress)
    longest = [_longest(bounds) for bounds in all_bounds]
    docs = _locate_longest(backend, encodings, longest)
    empty = np.zeros(0, dtype=np.int64)
    matched = match_lengths(backend, encodings, lengths, progress=progress) if lengths else [empty] * len(encodings)
    results = []
    for enc, bounds, (length, start, exact), doc, found in zip(
        encodings, all_bounds, longest, docs, matched, strict=True
    ):
        counts = {n: bounds.ngrams(n) for n in orders}
        results.append(
            OriginalityResult(
                originality={n: missing / count if count else None for n, (count, missing) in counts.items()},
                ngrams={n: count for n, (count, _) in counts.items()},
                unseen={n: missing for n, (_, missing) in counts.items()},
                tokens=len(enc),
                longest_span=length,
                longest_span_doc=doc,
                longest_span_start=start,
                longest_span_text=enc.surface(start, length),
                longest_span_exact=exact,
                match_lengths=tuple(int(v) for v in found),
                copied=copied_passages(enc, found, min(lengths)) if lengths else (),
            )
        )
    return results


def _locate_longest(
    backend: OriginalityBackend, encodings: Sequence[Encoding], longest: Sequence[tuple[int, int, bool]]
) -> list[int | None]:
    """The corpus document of each text's longest match (``None`` for none); the backend locates
    each distinct run of units once."""
    spans: dict[bytes, Span] = {}  # by the units of the run
    keys: list[bytes | None] = []
    for enc, (length, start, _) in zip(encodings, longest, strict=True):
        key = np.asarray(enc.units[start : start + length], dtype=np.int64).tobytes() if length else None
        if key is not None:
            spans.setdefault(key, (enc, start, length))
        keys.append(key)
    docs = dict(zip(spans, backend.locate(list(spans.values())), strict=True)) if spans else {}
    return [None if key is None else docs[key] for key in keys]
