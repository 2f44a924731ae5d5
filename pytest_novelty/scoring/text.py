"""Word tokenisation shared by the scoring layer (originality, judges, equivalence checks).

A text is NFKC-normalised (so that full-width letters, ligatures and compatibility forms count as
their plain equivalents), then split into the matches of ``\\w+|[^\\w\\s]`` (Python ``re``, Unicode):
runs of letters, digits and underscores, and single punctuation or symbol characters. Whitespace is
dropped and case is kept, so ``"Don't!"`` gives ``["Don", "'", "t", "!"]``.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["WORD_PATTERN", "normalize", "word_spans", "words"]

WORD_PATTERN = re.compile(r"\w+|[^\w\s]")


def normalize(text: str) -> str:
    """NFKC normal form of ``text``, the form every word offset refers to."""
    return unicodedata.normalize("NFKC", text)


def words(text: str) -> list[str]:
    """The words of ``text``: NFKC-normalised, then the matches of ``\\w+|[^\\w\\s]``, case kept."""
    return WORD_PATTERN.findall(normalize(text))


def word_spans(text: str) -> tuple[str, list[tuple[int, int]]]:
    """The normalised text and the ``(start, end)`` span of each of its words:
    ``words(text)[i] == normalized[start_i:end_i]``."""
    normalized = normalize(text)
    return normalized, [m.span() for m in WORD_PATTERN.finditer(normalized)]
