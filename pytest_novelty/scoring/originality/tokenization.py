"""How texts become the symbols whose n-grams are looked up: words or a Hugging Face tokenizer.

An n-gram is a run of *units*: words in ``words`` mode, tokens of the tokenizer otherwise. The
index stores *token ids*; a unit is one token, except in ``words`` mode over a vocabulary too large
for 16-bit ids, where rare words take two tokens (see :class:`WordCodec`).

:class:`Encoding` carries both views of one text, so that every backend can work at the level it
needs (the suffix-array engine on token ids, the in-memory set on units, the character-level API on
the surface text).
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.scoring.text import WORD_PATTERN, normalize, word_spans

__all__ = [
    "SEPARATOR_U16", "UNKNOWN_TOKEN", "Encoding", "HFTokenizer", "SurfaceWords", "Tokenizer", "WordCodec",
    "WordsTokenizer", "load_hf_tokenizer",
]

SEPARATOR_U16 = 0xFFFF
"""The document separator of a 16-bit index (the indexer's own convention)."""
UNKNOWN_TOKEN = 0xFFFE
"""The token a word outside the vocabulary becomes: never written to a words-mode index."""
_TOKEN_SPACE = 0xFFFE  # ids 0 .. 0xFFFD are available to words


@dataclass(eq=False)
class Encoding:
    """One text seen as units (n-gram symbols) and as index token ids.

    ``units[k]`` is the symbol of unit ``k`` (a vocabulary rank or a token id; -1 for a word
    outside the vocabulary); unit ``k`` is the token run ``ids[unit_pos[k]:unit_pos[k + 1]]``.
    ``text`` is the string the character spans refer to (NFKC-normalised in ``words`` mode).
    """

    text: str
    units: np.ndarray
    ids: np.ndarray
    unit_pos: np.ndarray
    _spans: list[tuple[int, int]] | None = field(default=None, repr=False)
    _span_fn: Any = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.units)

    @property
    def spans(self) -> list[tuple[int, int]]:
        """``(start, end)`` character span of each unit in :attr:`text` (computed on first use)."""
        if self._spans is None:
            self._spans = self._span_fn(self.text) if self._span_fn is not None else []
        return self._spans

    def surface(self, start: int, length: int) -> str:
        """The text of units ``start .. start + length - 1`` as written (empty for no units)."""
        if length <= 0:
            return ""
        if self._spans is None and self._span_fn is _word_spans_only:
            # only two words are needed: walk the matches in C instead of listing every span
            matches = itertools.islice(WORD_PATTERN.finditer(self.text), start, start + length)
            first = next(matches)
            tail = collections.deque(matches, maxlen=1)
            return self.text[first.start() : (tail[0] if tail else first).end()]
        spans = self.spans
        return self.text[spans[start][0] : spans[start + length - 1][1]]


class Tokenizer(Protocol):
    """Turns texts into :class:`Encoding` objects; ``spec`` and ``fingerprint`` identify it."""

    spec: str
    fingerprint: str

    def encode(self, texts: Sequence[str]) -> list[Encoding]:
        """Encode every text, in order."""
        ...


def _word_spans_only(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in WORD_PATTERN.finditer(text)]


@dataclass(frozen=True)
class WordCodec:
    """The mapping from vocabulary ranks (0 = most frequent word) to 16-bit token ids.

    The ``single`` most frequent words are one token each (their rank); every other word is a pair
    ``(high, low)``, ``high`` in ``[single, single + high_count)`` and ``low`` in
    ``[single + high_count, 0xFFFE)``. The ranges are disjoint, so a word starts only at a single or
    high token and ends only at a single or low one: a corpus match of a query's tokens keeps its
    word boundaries, and word n-gram counts stay exact. 0xFFFE stands for unknown words, 0xFFFF is
    the document separator.
    """

    vocab_size: int
    single: int

    @staticmethod
    def for_vocab(vocab_size: int, single: int | None = None) -> WordCodec:
        """The codec for ``vocab_size`` words: one token per word when they fit, else 32,768 singles."""
        if single is None:
            single = vocab_size if vocab_size <= _TOKEN_SPACE else 32768
        single = max(0, min(single, vocab_size, _TOKEN_SPACE))
        codec = WordCodec(vocab_size, single)
        if vocab_size > single and vocab_size - single > codec.high_count * codec.low_count:
            raise ConfigError(f"a vocabulary of {vocab_size:,} words does not fit in 16-bit word ids")
        return codec

    @property
    def high_count(self) -> int:
        return (_TOKEN_SPACE - self.single) // 2

    @property
    def low_start(self) -> int:
        return self.single + self.high_count

    @property
    def low_count(self) -> int:
        return _TOKEN_SPACE - self.low_start

    @property
    def one_token_per_word(self) -> bool:
        return self.vocab_size <= self.single

    def encode_ranks(self, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (uint16) and unit start positions (length ``len(ranks) + 1``) for ``ranks``.

        A rank of -1 (unknown word) becomes :data:`UNKNOWN_TOKEN`.
        """
        ranks = np.asarray(ranks, dtype=np.int64)
        if self.one_token_per_word:
            ids = np.where(ranks < 0, UNKNOWN_TOKEN, ranks).astype(np.uint16)
            return ids, np.arange(len(ranks) + 1, dtype=np.int64)
        pair = ranks >= self.single
        unit_pos = np.zeros(len(ranks) + 1, dtype=np.int64)
        np.cumsum(1 + pair, out=unit_pos[1:])
        ids = np.empty(int(unit_pos[-1]), dtype=np.uint16)
        starts = unit_pos[:-1]
        first = np.where(ranks < 0, UNKNOWN_TOKEN, ranks)
        rest = ranks[pair] - self.single
        first[pair] = self.single + rest // self.low_count
        ids[starts] = first
        ids[starts[pair] + 1] = self.low_start + rest % self.low_count
        return ids, unit_pos

    def decode_tokens(self, tokens: np.ndarray, separator: int = SEPARATOR_U16) -> np.ndarray:
        """Word ranks (uint32) of an index token stream; separators become 0xFFFFFFFF."""
        tokens = np.asarray(tokens)
        if self.one_token_per_word:
            out = tokens.astype(np.uint32)
            out[tokens == separator] = 0xFFFFFFFF
            return out
        low = (tokens >= self.low_start) & (tokens != separator)
        keep = ~low
        heads = tokens[keep].astype(np.int64)
        out = heads.astype(np.uint32)
        out[heads == separator] = 0xFFFFFFFF
        high_at = np.flatnonzero((heads >= self.single) & (heads < self.low_start))
        if len(high_at):
            # the low half of a pair is the token right after its high half
            head_positions = np.flatnonzero(keep)[high_at]
            lows = tokens[head_positions + 1].astype(np.int64) - self.low_start
            out[high_at] = (self.single + (heads[high_at] - self.single) * self.low_count + lows).astype(np.uint32)
        return out


class WordsTokenizer:
    """``words`` mode: NFKC, then ``\\w+|[^\\w\\s]`` (see :mod:`pytest_novelty.scoring.text`), then
    the index's own vocabulary. A word the corpus never contains maps to a token that never occurs,
    so every n-gram containing it is unseen, exactly as it should be."""

    def __init__(self, vocab: Sequence[str], codec: WordCodec) -> None:
        self.vocab = list(vocab)
        self.codec = codec
        self._rank = {w: i for i, w in enumerate(self.vocab)}
        self.spec = "words"
        self.fingerprint = words_fingerprint(self.vocab, codec.single)

    def encode(self, texts: Sequence[str]) -> list[Encoding]:
        """Encode ``texts``; one vectorised pass over the whole batch."""
        get = self._rank.get
        normalized = [normalize(t) for t in texts]
        per_text = [[get(w, -1) for w in WORD_PATTERN.findall(t)] for t in normalized]
        flat = np.fromiter((r for ranks in per_text for r in ranks), dtype=np.int64)
        ids, unit_pos = self.codec.encode_ranks(flat)
        out = []
        u = 0
        for text, ranks in zip(normalized, per_text, strict=True):
            k = len(ranks)
            lo, hi = int(unit_pos[u]), int(unit_pos[u + k])
            out.append(Encoding(text, flat[u : u + k], ids[lo:hi], unit_pos[u : u + k + 1] - lo,
                                _span_fn=_word_spans_only))
            u += k
        return out


def words_fingerprint(vocab: Sequence[str], single: int) -> str:
    """A digest of a words vocabulary and its codec, to tell indexes apart."""
    digest = hashlib.sha256(json.dumps([single, list(vocab)], ensure_ascii=False).encode("utf-8"))
    return "words:" + digest.hexdigest()[:16]


class SurfaceWords:
    """Words without a vocabulary, for backends that match surface text (infini-gram mini)."""

    spec = "words"
    fingerprint = "words:surface"

    def encode(self, texts: Sequence[str]) -> list[Encoding]:
        """Encode ``texts``; units are per-text word numbers (equal words, equal numbers)."""
        out = []
        for text in texts:
            normalized, spans = word_spans(text)
            seen: dict[str, int] = {}
            units = np.array([seen.setdefault(normalized[a:b], len(seen)) for a, b in spans], dtype=np.int64)
            out.append(Encoding(normalized, units, units.astype(np.uint32), np.arange(len(units) + 1, dtype=np.int64),
                                _spans=spans))
        return out


class HFTokenizer:
    """A Hugging Face fast tokenizer: units are its token ids, special tokens are never added."""

    def __init__(self, spec: str, backend: Any) -> None:
        self.spec = spec
        self.backend = backend
        self.json = backend.to_str()
        self.fingerprint = "hf:" + hashlib.sha256(self.json.encode("utf-8")).hexdigest()[:16]
        self.vocab_size = int(backend.get_vocab_size(with_added_tokens=True))

    def encode(self, texts: Sequence[str]) -> list[Encoding]:
        """Encode ``texts`` in one batch call of the tokenizer."""
        out = []
        for text, enc in zip(texts, self.backend.encode_batch(list(texts), add_special_tokens=False), strict=True):
            ids = np.asarray(enc.ids, dtype=np.int64)
            out.append(Encoding(text, ids, ids, np.arange(len(ids) + 1, dtype=np.int64),
                                _spans=[tuple(o) for o in enc.offsets]))
        return out

    def encode_ids(self, texts: list[str]) -> list[list[int]]:
        """Token ids only, for indexing."""
        return [enc.ids for enc in self.backend.encode_batch(texts, add_special_tokens=False)]


_LOCAL_HINT = "pass a local folder holding tokenizer.json (or a tokenizer.json file)"


def load_hf_tokenizer(spec: str) -> HFTokenizer:
    """Load a fast tokenizer from a ``tokenizer.json`` file, a folder holding one, or a hub id."""
    from tokenizers import Tokenizer as RustTokenizer

    path = Path(spec).expanduser()
    file = path if path.suffix == ".json" else path / "tokenizer.json"
    if file.is_file():
        try:
            return HFTokenizer(spec, RustTokenizer.from_file(str(file)))
        except Exception as exc:  # the Rust library raises plain Exception
            raise ConfigError(f"cannot read the tokenizer: {exc}", path=file) from exc
    if path.exists() and not path.is_dir():
        raise ConfigError(f"not a tokenizer folder or tokenizer.json; {_LOCAL_HINT}", path=path)
    return _from_transformers(spec, path)


def _from_transformers(spec: str, path: Path) -> HFTokenizer:
    """A folder, or a hub id: from the hub's cache alone where the hub cannot be reached (told in
    seconds, as for a checkpoint's identity), not after the hub library's retries of a dead network."""
    from pytest_novelty.infra.hub import hub_reachable

    try:
        from transformers import AutoTokenizer

        if path.is_dir():
            hf = AutoTokenizer.from_pretrained(str(path))
        else:
            hf = AutoTokenizer.from_pretrained(spec, local_files_only=not hub_reachable())
    except Exception as exc:
        reason = " ".join(str(exc).split())
        raise ConfigError(f"cannot load the tokenizer {spec!r} ({reason}); {_LOCAL_HINT}", field="tokenizer") from exc
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None:
        raise ConfigError(f"{spec!r} has no fast tokenizer (tokenizer.json); {_LOCAL_HINT}", field="tokenizer")
    return HFTokenizer(spec, backend)
