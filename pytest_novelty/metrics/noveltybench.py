"""NoveltyBench's diversity metrics: partitioning k generations, distinct_k and utility_k.

Source: Zhang et al. (2025), "NoveltyBench: Evaluating Language Models for Humanlike Diversity";
reference code github.com/novelty-bench/novelty-bench, ``src/partition.py`` (greedy partition),
``src/score.py`` (reward thresholds, per-generation scores, utility) and ``src/summarize.py``
(distinct = number of classes). The functions here reproduce the reference's stored scores in its
``sample_data`` exactly (the project's tests check every row).

A *partition* is a list with one class id per generation, numbered 0, 1, 2, ... in order of first
appearance ("canonical" form), as :func:`partition` returns it. The equivalence checks themselves
(pre-filter, ROUGE-1, the trained pair classifier) need models and live in the scoring layer
(``pytest_novelty.scoring.equivalence``); this module only takes a callable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike

from pytest_novelty.metrics._validate import as_vector, check_fraction

# NoveltyBench's own protocol samples k = 10 answers per prompt at temperature 1.0, up to 512 new
# tokens; a suite sets its own (``[generation] samples``), and these metrics take any k.

#: Patience p of utility_k: the weight of the i-th generation is p**i.
DEFAULT_PATIENCE = 0.8

Equivalence = Callable[[str, str], bool]


@runtime_checkable
class BatchEquivalence(Protocol):
    """An equivalence check that can also compare one representative with many candidates at once."""

    def __call__(self, representative: str, candidate: str) -> bool:
        """Return whether the two generations are equivalent."""
        ...

    def matches(self, representative: str, candidates: Sequence[str]) -> Sequence[bool]:
        """Return, for each candidate, whether it is equivalent to ``representative``."""
        ...


def partition(generations: Sequence[str], equivalent: Equivalence | BatchEquivalence) -> list[int]:
    """Greedy, order-dependent partition of generations into equivalence classes.

    Walk the generations in order. An unassigned generation opens a new class (ids 0, 1, 2, ... in
    order of first appearance) and becomes its representative; every later unassigned generation
    joins that class when ``equivalent(representative, generation)`` is true. Equivalence is only
    ever tested against a class's first member, as in the reference's ``partition_responses``, so
    the result depends on the order and the check need not be transitive.

    When ``equivalent`` has a ``matches(representative, candidates)`` method (the
    :class:`BatchEquivalence` protocol), all unassigned later generations are checked against a new
    representative in one call. The result is identical: each comparison involves only the
    representative and one candidate, and a candidate's assignment in this round does not change
    which other candidates are compared.
    """
    texts = list(generations)
    if not texts:
        raise ValueError("generations is empty: nothing to partition")
    if not all(isinstance(text, str) for text in texts):
        raise ValueError("generations must be strings")
    labels = [-1] * len(texts)
    classes = 0
    for index, representative in enumerate(texts):
        if labels[index] >= 0:
            continue
        labels[index] = classes
        waiting = [later for later in range(index + 1, len(texts)) if labels[later] < 0]
        if waiting:
            candidates = [texts[later] for later in waiting]
            if isinstance(equivalent, BatchEquivalence):
                verdicts = list(equivalent.matches(representative, candidates))
                if len(verdicts) != len(candidates):
                    raise ValueError(
                        f"equivalent.matches returned {len(verdicts)} answers "
                        f"for {len(candidates)} candidates"
                    )
            else:
                verdicts = [equivalent(representative, candidate) for candidate in candidates]
            for later, same in zip(waiting, verdicts, strict=True):
                if same:
                    labels[later] = classes
        classes += 1
    return labels


def _check_partition(labels: Sequence[int]) -> list[int]:
    """Return ``labels`` as a list of ints after checking that it is a non-empty canonical partition."""
    values = list(labels)
    if not values:
        raise ValueError("partition is empty")
    seen = 0
    for position, label in enumerate(values):
        if isinstance(label, bool) or not isinstance(label, (int, np.integer)):
            raise ValueError(f"partition must hold integer class ids, got {label!r} at position {position}")
        if label > seen or label < 0:
            raise ValueError(
                f"partition must number classes 0, 1, 2, ... in order of first appearance; "
                f"got {label} at position {position} where at most {seen} can appear "
                f"(relabel the classes in order of first appearance)"
            )
        if label == seen:
            seen += 1
    return [int(label) for label in values]


def distinct_k(labels: Sequence[int]) -> int:
    """Number of equivalence classes among the k generations (NoveltyBench's distinct_k).

    The reference's ``partition.py`` stores ``distinct = max(partition)``, one less than the number
    of classes; its summary (``summarize.py``) counts classes via ``len(partition_scores)``. We
    return the number of classes, which is what the summary and the paper report.
    """
    return max(_check_partition(labels)) + 1


def utility_k(labels: Sequence[int], scores: ArrayLike, patience: float = DEFAULT_PATIENCE) -> float:
    """Patience-weighted utility of k generations (NoveltyBench's utility_k).

    utility = Σ_i p^i g_i / Σ_i p^i over i = 0 .. k−1, where k is the number of generations, p is the
    patience and g_i is the quality score of generation i when it is the first member of its class
    and 0 otherwise: a user reading the generations in order gains only from each new class.

    Matching the reference (``score.py``): generation i counts as the first of its class when its
    class id equals the number of classes seen before it, which for a canonical partition is the
    same as being first; we require a canonical partition so the two readings cannot differ. The
    weighted mean is computed as numpy's ``average`` does (Σ w·g / Σ w), so results agree to the last
    bits. k is the number of generations given, not a fixed 10 (NoveltyBench's human references
    have 8).

    ``scores`` has one value per generation on NoveltyBench's 1-10 scale. Only first members'
    scores are used; the others may be anything, including 0 (the reference stores 0 there) or NaN
    (not scored). First members' scores must lie in [0, 10]: the reference's scores are 1-10, and we
    also accept 0 so that a quality in [0, 1] scaled by 10 can be passed as it is.
    """
    values = _check_partition(labels)
    graded = as_vector(scores, "scores")
    if graded.size != len(values):
        raise ValueError(f"partition has {len(values)} generations but scores has {graded.size}")
    weight = check_fraction(patience, "patience")
    first = np.zeros(len(values), dtype=bool)
    seen = 0
    for position, label in enumerate(values):
        if label == seen:
            first[position] = True
            seen += 1
    used = graded[first]
    if np.isnan(used).any() or used.min() < 0.0 or used.max() > 10.0:
        bad = used[np.isnan(used) | (used < 0.0) | (used > 10.0)][0]
        raise ValueError(f"scores of first class members must lie in [0, 10], got {bad!r}")
    gains = np.where(first, graded, 0.0)
    weights = weight ** np.arange(len(values), dtype=np.float64)
    return float(np.multiply(gains, weights).sum() / weights.sum())


