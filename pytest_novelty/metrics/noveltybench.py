"""NoveltyBench's diversity metrics: partitioning k generations, distinct_k and utility_k.

Source: Zhang et al. (2025), "NoveltyBench: Evaluating Language Models for Humanlike Diversity";
reference code github.com/novelty-bench/novelty-bench (``src/partition.py``, ``src/score.py``,
``src/summarize.py``), whose stored scores in ``sample_data`` these functions reproduce exactly (the
tests check every row). A *partition* is one class id per generation, numbered 0, 1, 2, ... in order
of first appearance ("canonical"). The equivalence checks are in ``pytest_novelty.scoring.equivalence``.
NoveltyBench samples k = 10 answers at temperature 1.0 (512 new tokens); these metrics take any k.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike

from pytest_novelty.metrics._validate import as_vector, check_fraction

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
    """Greedy, order-dependent partition into equivalence classes (the reference's
    ``partition_responses``): each unassigned generation opens a class, and every later unassigned
    one that is ``equivalent`` to it joins. Only a class's first member is compared, so the check
    need not be transitive. A :class:`BatchEquivalence` compares a representative with all the
    waiting candidates in one call, with the same result.
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
                        f"equivalent.matches returned {len(verdicts)} answers for {len(candidates)} candidates"
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
    """Number of equivalence classes among the k generations (NoveltyBench's distinct_k), as the
    summary and the paper report it (the reference's ``partition.py`` stores one less)."""
    return max(_check_partition(labels)) + 1


def utility_k(labels: Sequence[int], scores: ArrayLike, patience: float = DEFAULT_PATIENCE) -> float:
    """Patience-weighted utility of k generations (NoveltyBench's utility_k).

    utility = Σ_i p^i g_i / Σ_i p^i over i = 0 .. k−1, p the patience and g_i the score of generation
    i when it is the first of its class, else 0: a reader gains only from each new class. As in the
    reference's ``score.py`` (first of its class: its id equals the classes seen before it, which a
    canonical partition makes the same), computed as numpy's ``average`` does, so results agree to the
    last bits. k is the generations given (NoveltyBench's human references have 8).

    ``scores`` is on NoveltyBench's 1-10 scale; only first members' are read (others may be 0 or NaN)
    and they must lie in [0, 10] (0 too, so a quality in [0, 1] times 10 passes as it is).
    """
    values = _check_partition(labels)
    graded = as_vector(scores, "scores")
    if graded.size != len(values):
        raise ValueError(f"partition has {len(values)} generations but scores has {graded.size}")
    weight = check_fraction(patience, "patience")
    first = np.zeros(len(values), dtype=bool)
    first[np.unique(values, return_index=True)[1]] = True  # each class's first member
    used = graded[first]
    if np.isnan(used).any() or used.min() < 0.0 or used.max() > 10.0:
        bad = used[np.isnan(used) | (used < 0.0) | (used > 10.0)][0]
        raise ValueError(f"scores of first class members must lie in [0, 10], got {bad!r}")
    gains = np.where(first, graded, 0.0)
    weights = weight ** np.arange(len(values), dtype=np.float64)
    return float(np.multiply(gains, weights).sum() / weights.sum())
