"""Originality: the share of a generation's n-grams that never occur in the training corpus.

Build an index of the corpus once (:func:`build_index`, or ``pytest-novelty index build``), open a
backend by spec (:func:`open_backend`) and score texts in batches (:func:`score_texts`):

- ``infini-gram:DIR``: a local infini-gram suffix-array index; several folders (shards of one
  corpus) separated by commas or ``os.pathsep``. Exact, including the longest copied span.
- ``ngram-set:DIR``: the same folder's corpus loaded as an in-memory n-gram set; exact and the
  fastest, for corpora that fit in memory.
- ``infini-gram-api:INDEX``: the public infini-gram API (token ids; e.g. ``v4_piletrain_llama``).
- ``infini-gram-mini:INDEX``: the public infini-gram mini API (raw text; e.g. ``v2_pileval``).

The Creativity Index's match lengths come from :func:`~.matching.match_lengths`. Options are keyword
arguments of :func:`open_backend`, or appended to the spec as ``SPEC?name=value&name=value``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_novelty.scoring.originality.backend import BACKENDS, MatchBounds, OriginalityBackend
from pytest_novelty.scoring.originality.build import build_index
from pytest_novelty.scoring.originality.index import INFO_FILE, IndexInfo, is_index, read_index
from pytest_novelty.scoring.originality.score import OriginalityResult, score_texts

__all__ = [
    "BACKENDS", "INFO_FILE", "IndexInfo", "MatchBounds", "OriginalityBackend", "OriginalityResult",
    "build_index", "is_index", "open_backend", "read_index", "score_texts",
]

def open_backend(spec: str, *, cache_dir: Path | None = None, **options: Any) -> OriginalityBackend:
    """Open the originality backend named by ``spec`` (module docstring), or one registered in
    :data:`BACKENDS`.

    Options: ``infini-gram``: tokenizer (refused if it differs from the index's), method
    (``suffix-array``, the default, or ``creativity``), workers and load_to_ram (for the engine).
    ``ngram-set``: tokenizer, max_n (levels to build now, and the longest span its matching statistics
    answer; default: on first use), progress (default: for corpora over 5 million units).
    ``infini-gram-api``: tokenizer (default from the index name), and like ``infini-gram-mini``: url,
    concurrency (8), max_attempts (6), timeout (30 s), backoff (0.5 s), max_backoff (30 s),
    max_retry_time (120 s for one query in all). ``cache_dir`` keeps the web APIs' answers on disk and
    remembers which local index files were verified.

    An unknown kind or option is a ``ConfigError``; a missing or damaged index a ``ConfigError`` or
    ``HarnessError`` naming the folder and the fix.
    """
    return BACKENDS.open(spec, options=options, cache_dir=None if cache_dir is None else Path(cache_dir))
