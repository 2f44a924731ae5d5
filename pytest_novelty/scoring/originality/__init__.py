"""Originality: the share of a generation's n-grams that never occur in the training corpus.

Build an index of the corpus once (:func:`build_index`, or ``pytest-novelty index build``), open a
backend by spec (:func:`open_backend`) and score texts in batches (:func:`score_texts`):

- ``infini-gram:DIR``: a local infini-gram suffix-array index; several folders (shards of one
  corpus) separated by commas or ``os.pathsep``. Exact, including the longest copied span.
- ``ngram-set:DIR``: the same folder's corpus loaded as an in-memory n-gram set; exact and the
  fastest, for corpora that fit in memory.
- ``infini-gram-api:INDEX``: the public infini-gram API (token ids; e.g. ``v4_piletrain_llama``).
- ``infini-gram-mini:INDEX``: the public infini-gram mini API (raw text; e.g. ``v2_pileval``).

Options are keyword arguments of :func:`open_backend`, or appended to the spec as
``SPEC?name=value&name=value`` (handy on the command line and in suite files).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pytest_novelty.errors import ConfigError, did_you_mean
from pytest_novelty.scoring.originality.backend import MatchBounds, OriginalityBackend
from pytest_novelty.scoring.originality.build import build_index
from pytest_novelty.scoring.originality.index import INFO_FILE, IndexInfo, is_index, read_index
from pytest_novelty.scoring.originality.score import OriginalityResult, score_texts

__all__ = [
    "INFO_FILE",
    "KINDS",
    "IndexInfo",
    "MatchBounds",
    "OriginalityBackend",
    "OriginalityResult",
    "build_index",
    "is_index",
    "open_backend",
    "read_index",
    "score_texts",
]

KINDS = ("infini-gram", "ngram-set", "infini-gram-api", "infini-gram-mini")
_API_OPTIONS: dict[str, type] = {
    "url": str,
    "concurrency": int,
    "max_retries": int,
    "timeout": float,
    "backoff": float,
    "max_backoff": float,
}
_OPTIONS: dict[str, dict[str, type]] = {
    "infini-gram": {"tokenizer": str, "method": str, "workers": int, "load_to_ram": bool},
    "ngram-set": {"tokenizer": str, "max_n": int, "progress": bool},
    "infini-gram-api": {"tokenizer": str, **_API_OPTIONS},
    "infini-gram-mini": dict(_API_OPTIONS),
}
_USAGE = "use infini-gram:DIR, ngram-set:DIR, infini-gram-api:INDEX or infini-gram-mini:INDEX"


def _convert(kind: str, name: str, value: Any) -> Any:
    wanted = _OPTIONS[kind][name]
    if not isinstance(value, str) or wanted is str:
        return value
    try:
        if wanted is bool:
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        return wanted(value)
    except ValueError:
        raise ConfigError(
            f"option {name} of {kind} takes a {wanted.__name__}, got {value!r}", field="originality"
        ) from None


def _split_options(target: str) -> tuple[str, dict[str, str]]:
    base, sep, query = target.partition("?")
    options: dict[str, str] = {}
    if sep:
        for item in filter(None, query.split("&")):
            name, eq, value = item.partition("=")
            if not eq:
                raise ConfigError(f"option {item!r} needs a value, as in {item}=VALUE", field="originality")
            options[name.strip()] = value.strip()
    return base, options


def _folders(target: str) -> list[Path]:
    parts = [p for p in re.split(f"[,{re.escape(os.pathsep)}]", target) if p.strip()]
    if not parts:
        raise ConfigError("needs an index folder, as in infini-gram:DIR", field="originality")
    return [Path(p.strip()).expanduser() for p in parts]


def open_backend(spec: str, *, cache_dir: Path | None = None, **options: Any) -> OriginalityBackend:
    """Open the originality backend named by ``spec`` (see the module docstring).

    Options: ``infini-gram``: tokenizer (refused if it differs from the index's), method
    (``suffix-array``, the default, or ``creativity``), workers and load_to_ram (for the engine).
    ``ngram-set``: tokenizer, max_n (levels to build now; default: on first use), progress (build
    messages on stderr; default: for corpora over 5 million units).
    ``infini-gram-api``: tokenizer (default from the index name), and like
    ``infini-gram-mini``: url, concurrency (8), max_retries (5), timeout (30 s), backoff (0.5 s),
    max_backoff (30 s). ``cache_dir`` keeps the web APIs' answers on disk (in memory without it), and
remembers which local index files were verified against their build checksums.

    An unknown kind or option raises :class:`~pytest_novelty.errors.ConfigError`; a missing or
    damaged index raises ``ConfigError`` or :class:`~pytest_novelty.errors.HarnessError` naming
    the folder and the fix.
    """
    kind, sep, target = spec.strip().partition(":")
    if kind not in KINDS or not sep:
        raise ConfigError(
            f"unknown originality backend {spec!r}{did_you_mean(kind, KINDS)}; {_USAGE}", field="originality"
        )
    target, inline = _split_options(target)
    merged = {**inline, **options}
    unknown = sorted(set(merged) - set(_OPTIONS[kind]))
    if unknown:
        raise ConfigError(
            f"{kind} has no option {unknown[0]!r}{did_you_mean(unknown[0], _OPTIONS[kind])}; "
            f"its options: {', '.join(sorted(_OPTIONS[kind]))}",
            field="originality",
        )
    values = {name: _convert(kind, name, value) for name, value in merged.items()}
    name = f"{kind}:{target}"
    if kind in ("infini-gram", "ngram-set"):
        from pytest_novelty.identity import memo_at

        memo = None if cache_dir is None else memo_at(Path(cache_dir) / "index-checksums")
        infos = [read_index(folder, memo=memo) for folder in _folders(target)]
        if kind == "infini-gram":
            from pytest_novelty.scoring.originality.local import InfiniGramBackend

            return InfiniGramBackend(infos, spec=name, **values)
        from pytest_novelty.scoring.originality.ngramset import NgramSetBackend

        return NgramSetBackend(infos, spec=name, **values)
    from pytest_novelty.scoring.originality.api import InfiniGramApiBackend, InfiniGramMiniBackend

    cls = InfiniGramApiBackend if kind == "infini-gram-api" else InfiniGramMiniBackend
    return cls(target.strip(), spec=name, cache_dir=None if cache_dir is None else Path(cache_dir), **values)
