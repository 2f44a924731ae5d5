"""Equivalence checks that decide whether two generations say the same thing (NoveltyBench partitioning).

A check is chosen by a spec (``unigram``, ``classifier:PATH``, ``embedding:PATH``), applies
:func:`prefilter_equivalence` first and scores only the pairs it leaves open. Thresholds and the
classifier's input layout follow NoveltyBench's ``src/partition.py`` (Zhang et al. 2025); where we
differ it is said below. The partition itself is :func:`pytest_novelty.metrics.partition`. torch
and transformers are imported only when a model check is opened.
"""

from __future__ import annotations

import inspect
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pytest_novelty.generation.devices import resolve_device
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.registry import Registry

#: Default decision thresholds per check kind. unigram and classifier are NoveltyBench's values
#: (``src/partition.py``); the embedding threshold is our uncalibrated choice (only near-paraphrases
#: merge).
DEFAULT_THRESHOLDS = {"unigram": 0.458, "classifier": 0.102, "embedding": 0.9}

#: Longest text, in words, that the pre-filter decides on its own.
PREFILTER_MAX_WORDS = 5

#: Tokens kept from each generation in the classifier's input (NoveltyBench: 128).
CLASSIFIER_MAX_TOKENS = 128

#: Upper bound on tokens per text for the embedding model (its own limit applies when smaller).
EMBEDDING_MAX_TOKENS = 512

_NOT_ALPHANUMERIC = re.compile(r"[^a-z0-9]+")


def prefilter_equivalence(first: str, second: str) -> bool | None:
    """Decide equivalence of short texts by shared words; None (the model decides) when too long.

    Both texts are lower-cased and split on whitespace; when the longer has at most
    :data:`PREFILTER_MAX_WORDS` (5) words, they are equivalent iff 2 × (distinct words shared) ≥ the
    longer length. Two empty texts are equivalent; an empty and a non-empty one are not. Source:
    ``maybe_test_equality`` in NoveltyBench's ``src/partition.py``.
    """
    words_first = first.strip().lower().split()
    words_second = second.strip().lower().split()
    longer = max(len(words_first), len(words_second))
    if longer > PREFILTER_MAX_WORDS:
        return None
    shared = set(words_first) & set(words_second)
    return 2 * len(shared) >= longer


def _rouge_tokens(text: str) -> list[str]:
    """ROUGE's default tokenisation: lower-case, non-[a-z0-9] runs become spaces, split, no stemming."""
    return [token for token in _NOT_ALPHANUMERIC.sub(" ", text.lower()).split() if token]


def rouge1_f1(first: str, second: str) -> float:
    """ROUGE-1 F1 of two texts: the F-measure of their unigram overlap, symmetric in its arguments.

    overlap = Σ_w min(count_first(w), count_second(w)); precision = overlap / |second|,
    recall = overlap / |first| (each denominator at least 1); F1 = 2PR / (P + R), 0 when both are 0.
    Tokens as in the ``rouge-score`` package with its defaults (what NoveltyBench calls): lower-cased
    runs of ASCII letters and digits, no stemming, so non-ASCII letters split words.
    """
    counts_first = Counter(_rouge_tokens(first))
    counts_second = Counter(_rouge_tokens(second))
    overlap = sum((counts_first & counts_second).values())
    precision = overlap / max(sum(counts_second.values()), 1)
    recall = overlap / max(sum(counts_first.values()), 1)
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


@runtime_checkable
class Equivalence(Protocol):
    """What the partition reads from an equivalence check (:func:`pytest_novelty.metrics.partition`)."""

    kind: str
    threshold: float

    def matches(self, representative: str, candidates: Sequence[str]) -> list[bool]:
        """For each candidate, whether it says the same thing as ``representative``."""
        ...

    def __call__(self, representative: str, candidate: str) -> bool:
        """Whether the two generations are equivalent."""
        ...


EQUIVALENCE_CHECKS: Registry[Equivalence] = Registry(
    "equivalence check", settings=("threshold", "device", "batch_size", "trust_remote_code")
)
"""Equivalence checks by spec prefix."""


class EquivalenceCheck(ABC):
    """Base of the checks: a pre-filter, then a similarity score compared strictly with ``threshold``.
    Subclasses implement :meth:`scores` only; :meth:`matches` and :meth:`__call__` are final."""

    kind: str = ""
    #: Lowest meaningful threshold: scores lie in [lowest_threshold, 1].
    lowest_threshold: float = 0.0

    def __init__(self, threshold: float) -> None:
        low = self.lowest_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not low <= threshold <= 1:
            raise ConfigError(f"the {self.kind} threshold must be a number in [{low:g}, 1], got {threshold!r}")
        self.threshold = float(threshold)

    @abstractmethod
    def scores(self, representative: str, candidates: Sequence[str]) -> list[float]:
        """Similarity of ``representative`` with each candidate (higher means more alike)."""

    def matches(self, representative: str, candidates: Sequence[str]) -> list[bool]:
        """For each candidate, whether it is equivalent to ``representative`` (pre-filter first)."""
        verdicts = [prefilter_equivalence(representative, candidate) for candidate in candidates]
        open_positions = [position for position, verdict in enumerate(verdicts) if verdict is None]
        if open_positions:
            scored = self.scores(representative, [candidates[position] for position in open_positions])
            for position, score in zip(open_positions, scored, strict=True):
                verdicts[position] = score > self.threshold
        return [bool(verdict) for verdict in verdicts]

    def __call__(self, representative: str, candidate: str) -> bool:
        """Whether the two generations are equivalent."""
        return self.matches(representative, [candidate])[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(threshold={self.threshold})"


@EQUIVALENCE_CHECKS.register("unigram", summary="ROUGE-1 F1 above 0.458")
class UnigramEquivalence(EquivalenceCheck):
    """``unigram``: equivalent when ROUGE-1 F1 > threshold (NoveltyBench: 0.458). NoveltyBench applies
    its pre-filter before the classifier only; we apply it before every check, so short answers are
    judged alike whichever check a suite uses."""

    kind = "unigram"

    def __init__(self, threshold: float | None = None) -> None:
        super().__init__(DEFAULT_THRESHOLDS["unigram"] if threshold is None else threshold)

    def scores(self, representative: str, candidates: Sequence[str]) -> list[float]:
        """ROUGE-1 F1 of the representative with each candidate."""
        return [rouge1_f1(representative, candidate) for candidate in candidates]


class _ModelCheck(EquivalenceCheck):
    """A check backed by a local model folder (its tokenizer and ``auto_class`` model); a subclass
    sets ``kind`` and ``auto_class`` and checks what was loaded in :meth:`_prepare`. The class is the
    factory registered for ``KIND:PATH``."""

    auto_class = ""

    def __init__(
        self, path: str | Path, *, threshold: float | None = None, device: str | None = None, batch_size: int = 32,
        trust_remote_code: bool = False,
    ) -> None:
        """Load the folder ``path`` (checked first); ``threshold`` None is the kind's default."""
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise ConfigError(f"the {self.kind} check needs a local model folder; none found", path=folder)
        super().__init__(DEFAULT_THRESHOLDS[self.kind] if threshold is None else threshold)
        import torch
        import transformers

        self.path = folder
        self.batch_size = batch_size
        self.device = resolve_device(device)
        try:
            remote = {"trust_remote_code": trust_remote_code}  # a folder's own code runs only when allowed
            self.tokenizer: Any = transformers.AutoTokenizer.from_pretrained(self.path, **remote)
            self.model: Any = getattr(transformers, self.auto_class).from_pretrained(self.path, **remote)
        except (OSError, ValueError, KeyError) as error:
            raise ConfigError(f"could not load the {self.kind} model folder: {error}", path=self.path) from error
        self._torch = torch
        self._prepare()
        self.model.to(self.device).eval()

    def _prepare(self) -> None:
        """Check the loaded tokenizer and model and set what the kind needs, before the model
        moves to the device; raise :class:`~pytest_novelty.infra.errors.ConfigError` for an unfit folder."""


class ClassifierEquivalence(_ModelCheck):
    """``classifier:PATH``: a two-class sequence-pair classifier; equivalent when P(class 1) > threshold.

    Input layout, as NoveltyBench's ``classifier_score``: each text tokenised without special tokens
    and truncated to 128 tokens, then ``[CLS] first [SEP] second [SEP]``, token type 0 up to and
    including the first ``[SEP]`` and 1 after (when the model takes token types). The reference
    scores one pair at a time; we pad a batch on the right with an attention mask (rounding apart,
    the same). NoveltyBench's ``yimingzhang/deberta-v3-large-generation-similarity`` needs the
    tokenizer of ``microsoft/deberta-v3-large`` saved into its folder.
    """

    kind = "classifier"
    auto_class = "AutoModelForSequenceClassification"

    def __init__(self, path: str | Path, *, max_tokens: int = CLASSIFIER_MAX_TOKENS, **settings: Any) -> None:
        """``max_tokens`` truncates each text of a pair; ``settings`` as :class:`_ModelCheck` takes them."""
        self.max_tokens = max_tokens
        super().__init__(path, **settings)

    def _prepare(self) -> None:
        """A two-class model and a tokenizer with [CLS] and [SEP]; whether the model takes token types."""
        if self.model.config.num_labels != 2:
            raise ConfigError(
                f"expected a two-class pair classifier, the model has {self.model.config.num_labels} labels",
                path=self.path,
            )
        if self.tokenizer.cls_token_id is None or self.tokenizer.sep_token_id is None:
            raise ConfigError("the tokenizer needs a [CLS] and a [SEP] token", path=self.path)
        self._pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self._token_types = "token_type_ids" in inspect.signature(self.model.forward).parameters

    def _token_ids(self, texts: Sequence[str]) -> dict[str, list[int]]:
        unique = list(dict.fromkeys(texts))
        encoded = self.tokenizer(unique, add_special_tokens=False, truncation=True, max_length=self.max_tokens)[
            "input_ids"
        ]
        return dict(zip(unique, encoded, strict=True))

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Softmax probability of class 1 ("equivalent") for each (first, second) pair."""
        torch = self._torch
        results: list[float] = []
        for start in range(0, len(pairs), self.batch_size):
            chunk = pairs[start : start + self.batch_size]
            ids = self._token_ids([text for pair in chunk for text in pair])
            rows, types = [], []
            for first, second in chunk:
                head = [self.tokenizer.cls_token_id, *ids[first], self.tokenizer.sep_token_id]
                tail = [*ids[second], self.tokenizer.sep_token_id]
                rows.append(head + tail)
                types.append([0] * len(head) + [1] * len(tail))
            pad = [max(len(row) for row in rows) - len(row) for row in rows]  # on the right
            inputs = {
                "input_ids": torch.tensor([row + [self._pad_id] * n for row, n in zip(rows, pad, strict=True)]),
                "attention_mask": torch.tensor([[1] * len(row) + [0] * n for row, n in zip(rows, pad, strict=True)]),
            }
            if self._token_types:
                inputs["token_type_ids"] = torch.tensor([kinds + [0] * n for kinds, n in zip(types, pad, strict=True)])
            with torch.inference_mode():
                logits = self.model(**{name: value.to(self.device) for name, value in inputs.items()}).logits
            results.extend(logits.float().softmax(-1)[:, 1].tolist())
        return results

    def scores(self, representative: str, candidates: Sequence[str]) -> list[float]:
        """P(equivalent) for (representative, candidate) pairs, in the reference's argument order."""
        return self.probabilities([(representative, candidate) for candidate in candidates])


class EmbeddingEquivalence(_ModelCheck):
    """``embedding:PATH``: cosine similarity of mean-pooled embeddings above ``threshold``.

    Each text is tokenised with the model's special tokens, truncated to the smaller of 512 tokens and
    the model's limit, and embedded as the mean of the last hidden states over its real tokens. The
    default threshold, 0.9, is our uncalibrated choice. Embeddings are cached per text.
    """

    kind = "embedding"
    auto_class = "AutoModel"
    lowest_threshold = -1.0
    _CACHE_LIMIT = 4096

    def _prepare(self) -> None:
        """A padding token (the end token where there is none) and the token limit; an empty cache."""
        if self.tokenizer.pad_token is None:
            if self.tokenizer.eos_token is None:
                raise ConfigError("the tokenizer has neither a padding nor an end token", path=self.path)
            self.tokenizer.pad_token = self.tokenizer.eos_token
        limits = [EMBEDDING_MAX_TOKENS, int(min(self.tokenizer.model_max_length, 1 << 30))]
        positions = getattr(self.model.config, "max_position_embeddings", None)
        if positions:
            limits.append(int(positions))
        self.max_tokens = min(limits)
        self._cache: dict[str, Any] = {}

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit-length mean-pooled embeddings of ``texts`` as a (len(texts), dim) float32 CPU tensor."""
        torch = self._torch
        missing = [text for text in dict.fromkeys(texts) if text not in self._cache]
        if len(self._cache) + len(missing) > self._CACHE_LIMIT:
            self._cache.clear()
            missing = list(dict.fromkeys(texts))
        for start in range(0, len(missing), self.batch_size):
            chunk = missing[start : start + self.batch_size]
            encoded = self.tokenizer(
                chunk, padding=True, truncation=True, max_length=self.max_tokens, return_tensors="pt"
            )
            encoded = {name: value.to(self.device) for name, value in encoded.items()}
            with torch.inference_mode():
                hidden = self.model(**encoded).last_hidden_state.float()
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
            unit = torch.nn.functional.normalize(pooled, dim=-1).cpu()
            for text, vector in zip(chunk, unit, strict=True):
                self._cache[text] = vector
        return torch.stack([self._cache[text] for text in texts])

    def scores(self, representative: str, candidates: Sequence[str]) -> list[float]:
        """Cosine similarity of the representative's embedding with each candidate's."""
        vectors = self.embed([representative, *candidates])
        return (vectors[1:] @ vectors[0]).tolist()


for _check, _summary in (
    (ClassifierEquivalence, "a sequence-pair classifier folder"),
    (EmbeddingEquivalence, "a sentence-embedding model folder"),
):
    EQUIVALENCE_CHECKS.register(_check.kind, argument="PATH", needs="a model folder", summary=_summary)(_check)


def open_equivalence(
    spec: str, *, threshold: float | None = None, device: str | None = None, batch_size: int = 32,
    trust_remote_code: bool = False,
) -> Equivalence:
    """Open the equivalence check named by ``spec``. ``threshold`` replaces the kind's default and lies
    in [0, 1] ([−1, 1] for ``embedding``); ``device`` and ``trust_remote_code`` apply to model checks.
    Raises :class:`~pytest_novelty.infra.errors.ConfigError` for a bad spec, threshold or folder."""
    return EQUIVALENCE_CHECKS.open(
        spec, threshold=threshold, device=device, batch_size=batch_size, trust_remote_code=trust_remote_code
    )
