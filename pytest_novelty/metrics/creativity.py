"""The Creativity Index: how much of a text no span found verbatim in the corpus covers.

Source: Lu et al. (ICLR 2025), "AI as Humanity's Salieri: Quantifying Linguistic Creativity of
Language Models via Systematic Attribution of Machine Text against Web Text" (arXiv 2410.04265),
and its code (``DJ_search_exact.py`` in github.com/GXimingLu/creativity_index). A text that can be
pieced together from snippets of existing text is less creative; the index measures how much of it
cannot be, at every snippet length of a range.

Definitions. A text has ``T`` units ``x_0 .. x_{T-1}`` (words by default, see below). Its match
lengths ``L_0 .. L_{T-1}`` are the matching statistics against the corpus: ``L_i`` is the length
of the longest run ``x_i .. x_{i+L_i-1}`` that occurs verbatim in the corpus (the originality
backends give them, :mod:`pytest_novelty.scoring.originality.matching`). For a length ``L``:

- unit ``j`` is *covered* at ``L`` when some span of at least ``L`` units that occurs in the corpus
  contains it: some ``i <= j`` has ``L_i >= L`` and ``j < i + L_i`` (every sub-span of an occurring
  span occurs, so the longest span from each ``i`` is the only one to look at);
- ``uniqueness@L = #{j : j not covered at L} / T``, the share of the text's units that no copied
  span of ``L`` or more units covers (the paper's L-uniqueness);
- ``creativity_index = sum over L in the range of uniqueness@L``; the default range is
  ``L = 5 .. 12`` (:data:`DEFAULT_LENGTHS`), so the index lies in [0, 8]: 8 means no run of five
  units is found in the corpus, 0 that every unit sits in a copied span of twelve or more.

A unit covered by several spans counts once (coverage is a union), and a span longer than the
range's largest ``L`` covers the same units as its overlapping spans of that length, so match
lengths capped at ``max(L)`` give the same values.

The paper and this module side by side, where they differ:

=====================  ==========================================  ==========================================
question               the paper (and its code)                    here
=====================  ==========================================  ==========================================
units                  words: NLTK's ``casual_tokenize`` of the    the originality index's units: words
                       text transliterated to ASCII (``unidecode``) (NFKC, then ``\\w+|[^\\w\\s]``, case kept,
                       so contractions stay whole (``don't``);      nothing transliterated: ``don't`` is three
                       optionally the LM tokenizer's tokens         units), or the tokens of the Hugging Face
                                                                    tokenizer the index was built with
when a span occurs     its words are detokenized (Moses) and the    its units occur consecutively inside one
                       string is counted by the infini-gram API,    corpus document, exactly (case, accents
                       i.e. as the Llama-2 tokens of that string     and punctuation as written)
whitespace,            the detokenizer decides the spacing of the   whitespace is no unit, so spacing never
punctuation            queried string                               matters; each punctuation mark is a unit
range of L             5 to 12, summed (the authors' online demo    5 to 12 by default, summed; configurable
                       averages 5 to 11)
texts of at most       skipped: not scored, left out of every       scored: see the next row
``min(L)`` words       average
a text shorter than L  uniqueness 1 at that L (nothing covered),    ``uniqueness@L`` undefined (NaN) per
(``T < L``)            for texts longer than ``min(L)``             text; the gated values count it as 0
                                                                    (:func:`uniqueness_counting_short`), as
                                                                    ``originality@n`` does: saying little is
                                                                    not creative; ``coverage@n`` says how many
                                                                    texts have at least n units
empty text             skipped                                      index 0 (every L counts 0)
which spans cover      DJ Search's greedy two pointers; the         every maximal copied span
                       union they cover is the same                 (:func:`copied_spans`), the same union
corpus                 web corpora, with exact duplicates of the    the index as it is (a generation copied
                       text (quotations, citations) removed         whole from the corpus scores 0)
=====================  ==========================================  ==========================================

What the index does not say: whether the text is any good. Text that copies nothing scores high,
word salad included (the demo's weaker checkpoint writes it and scores about 5.7 against the demo's
2.3), so gate the index beside a quality floor, as novelty pairs originality with quality
(``docs/suites.md``); a ``max`` threshold on it would reward copying.

Per generation, :func:`uniqueness_table` gives ``uniqueness@L`` for every L of the range and
:func:`creativity_index` their sum; a suite's gated values are their means over its generations
(too-short ones counted as 0), in :func:`pytest_novelty.metrics.suite.suite_metrics`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics._validate import as_float_array, check_count

DEFAULT_LENGTHS: tuple[int, ...] = tuple(range(5, 13))
"""The paper's range of span lengths L: 5 to 12 units."""


def check_lengths(lengths: Sequence[int]) -> tuple[int, ...]:
    """The distinct span lengths of ``lengths``, sorted; each an integer of at least 1."""
    values = list(lengths)
    if not values:
        raise ValueError("give at least one span length L")
    for length in values:
        check_count(length, "a span length L")
    return tuple(sorted({int(length) for length in values}))


def _match_lengths(values: ArrayLike, name: str) -> NDArray[np.int64]:
    """One text's match lengths as int64, checked: whole numbers, none running past the text."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        floats = as_float_array(array, name)
        if np.isnan(floats).any() or (floats != np.round(floats)).any():
            raise ValueError(f"{name} must be whole numbers of units")
    lengths = array.astype(np.int64)
    room = len(lengths) - np.arange(len(lengths))
    bad = np.flatnonzero((lengths < 0) | (lengths > room))
    if len(bad):
        i = int(bad[0])
        raise ValueError(
            f"{name}[{i}] is {int(lengths[i])}: a match length lies between 0 and the {int(room[i])} units left"
        )
    return lengths


def covered(match_lengths: ArrayLike, length: int) -> NDArray[np.bool_]:
    """Which units of one text a copied span of at least ``length`` units covers (see the module doc)."""
    (length,) = check_lengths([length])
    return _covered(_match_lengths(match_lengths, "match_lengths"), length)


def _covered(lengths: NDArray[np.int64], length: int) -> NDArray[np.bool_]:
    """:func:`covered` on checked match lengths: unit j is covered when a span of ``length`` or more
    starting at or before it reaches past it, which a running maximum of the reaches tells."""
    positions = np.arange(len(lengths))
    reach = np.where(lengths >= length, positions + lengths, positions)
    return np.maximum.accumulate(reach) > positions if len(reach) else np.zeros(0, dtype=bool)


def copied_spans(match_lengths: ArrayLike, length: int) -> list[tuple[int, int]]:
    """The maximal copied spans of at least ``length`` units of one text, as ``(start, length)``.

    A span from ``i`` is maximal when no earlier span contains it, that is when it reaches past
    every span before it; these are the spans the paper's search reports, and their union is
    exactly what :func:`covered` marks. In order of their start; spans may overlap."""
    (length,) = check_lengths([length])
    lengths = _match_lengths(match_lengths, "match_lengths")
    positions = np.arange(len(lengths))
    reach = np.where(lengths >= length, positions + lengths, 0)
    before = np.concatenate([[0], np.maximum.accumulate(reach)[:-1]]) if len(reach) else reach
    starts = np.flatnonzero((lengths >= length) & (reach > before))
    return [(int(i), int(lengths[i])) for i in starts]


def uniqueness_table(
    match_lengths: Sequence[ArrayLike], lengths: Sequence[int] = DEFAULT_LENGTHS
) -> NDArray[np.float64]:
    """``uniqueness@L`` of every text (rows) at every L of ``lengths`` (columns, ascending).

    NaN where a text has fewer than L units (no span of L units fits in it: undefined, counted
    as 0 by the gated values, see :func:`uniqueness_counting_short`); an empty text is NaN at
    every L. All texts are computed at once over their concatenation.
    """
    orders = check_lengths(lengths)
    texts = [_match_lengths(values, f"match_lengths[{t}]") for t, values in enumerate(match_lengths)]
    table = np.full((len(texts), len(orders)), np.nan)
    if not texts:
        return table
    sizes = np.array([len(values) for values in texts], dtype=np.int64)
    flat = np.concatenate(texts) if sizes.sum() else np.zeros(0, dtype=np.int64)
    owner = np.repeat(np.arange(len(texts)), sizes)
    for column, length in enumerate(orders):
        # A match never runs past its text, so a running maximum over the concatenation never
        # carries one text's coverage into the next.
        uncovered = np.bincount(owner, weights=~_covered(flat, length), minlength=len(texts))
        long_enough = sizes >= length
        table[long_enough, column] = uncovered[long_enough] / sizes[long_enough]
    return table


def uniqueness_counting_short(uniqueness: ArrayLike) -> NDArray[np.float64]:
    """``uniqueness@L`` values with a text too short for L (NaN) counted as 0.

    Leaving such a text out of a suite's mean would reward saying little (as for originality,
    :func:`pytest_novelty.metrics.novelty.originality_counting_short`): a checkpoint whose answers
    shrink to a few words would keep only its long answers in the mean. The paper instead leaves
    out texts of at most ``min(L)`` words and counts a longer text as fully unique at an L above
    its length; the module docstring has both."""
    array = as_float_array(uniqueness, "uniqueness", allow_empty=True)
    present = array[~np.isnan(array)]
    if present.size and (present.min() < 0.0 or present.max() > 1.0):
        raise ValueError("uniqueness values lie in [0, 1]")
    return np.where(np.isnan(array), 0.0, array)


def creativity_index(uniqueness: ArrayLike) -> NDArray[np.float64]:
    """Per text (row of a :func:`uniqueness_table`), the sum of its ``uniqueness@L`` over the
    range, an L the text is too short for counting 0."""
    table = uniqueness_counting_short(uniqueness)
    if table.ndim != 2:
        raise ValueError(f"uniqueness must be a table (texts × lengths), got shape {table.shape}")
    return table.sum(axis=1)
