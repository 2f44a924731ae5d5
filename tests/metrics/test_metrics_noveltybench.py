"""NoveltyBench's partition, distinct_k and utility_k, checked against its sample data."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_novelty.metrics import (
    distinct_k,
    partition,
    utility_k,
)

REPO = Path(__file__).resolve().parents[2]
SAMPLE_DATA = REPO.parent / "shared" / "datasets" / "noveltybench" / "sample_data_ff882fd"
SAMPLE_FILES = sorted(SAMPLE_DATA.glob("*.jsonl")) if SAMPLE_DATA.is_dir() else []
ABSENT = f"NoveltyBench sample data not found at {SAMPLE_DATA}"
needs_sample_data = pytest.mark.skipif(not SAMPLE_FILES, reason=ABSENT)
SAMPLE_PARAMS = [pytest.param(path, id=path.stem) for path in SAMPLE_FILES] or [
    pytest.param(None, id="absent", marks=pytest.mark.skip(reason=ABSENT))
]


def load_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# Reproduction of the reference scores


@pytest.mark.parametrize("path", SAMPLE_PARAMS)
def test_reproduces_reference_scores(path: Path) -> None:
    rows = load_rows(path)
    assert len(rows) == 100
    for row in rows:
        labels = row["partition"]
        assert distinct_k(labels) == row["distinct"] + 1 == len(row["partition_scores"]), row["id"]
        utility = utility_k(labels, row["generation_scores"])
        assert abs(utility - row["utility"]) <= 1e-12, (row["id"], utility, row["utility"])


@needs_sample_data
def test_reference_partitions_come_back_from_an_oracle() -> None:
    # An equivalence that answers from the stored classes must give back the stored partition.
    for row in load_rows(SAMPLE_FILES[0]):
        labels = row["partition"]
        indices = [str(index) for index in range(len(labels))]

        def same_class(a: str, b: str, labels: list[int] = labels) -> bool:
            return labels[int(a)] == labels[int(b)]

        assert partition(indices, same_class) == labels, row["id"]


@needs_sample_data
def test_scores_of_later_members_are_ignored() -> None:
    rng = np.random.default_rng(0)
    for row in load_rows(SAMPLE_FILES[0]):
        stored = np.array(row["generation_scores"], dtype=float)
        noisy = np.where(stored == 0, rng.choice([math.nan, 3.0, 10.0], size=stored.size), stored)
        assert utility_k(row["partition"], noisy) == utility_k(row["partition"], stored)


# utility_k and distinct_k on hand-made cases


def test_all_distinct_perfect_scores_give_full_utility() -> None:
    assert utility_k(list(range(10)), [10.0] * 10) == pytest.approx(10.0, abs=1e-12)
    assert distinct_k(list(range(10))) == 10


def test_one_class_keeps_only_the_first_score() -> None:
    expected = 10.0 / sum(0.8**i for i in range(10))
    assert utility_k([0] * 10, [10.0] * 10) == pytest.approx(expected, rel=1e-14)
    assert distinct_k([0] * 10) == 1


def test_patience_weights_later_generations_less() -> None:
    # Second class opens at position 1 (weight p) or at position 2 (weight p**2).
    early = utility_k([0, 1, 0], [5.0, 5.0, 5.0], patience=0.5)
    late = utility_k([0, 0, 1], [5.0, 5.0, 5.0], patience=0.5)
    assert early == pytest.approx((5 + 2.5) / 1.75)
    assert late == pytest.approx((5 + 1.25) / 1.75)


@pytest.mark.parametrize(
    ("labels", "scores", "patience", "message"),
    [
        ([], [], 0.8, "empty"),
        ([1, 0], [5.0, 5.0], 0.8, "order of first appearance"),
        ([0, 2, 1], [5.0, 5.0, 5.0], 0.8, "order of first appearance"),
        ([0, -1], [5.0, 5.0], 0.8, "order of first appearance"),
        ([0, 1.5], [5.0, 5.0], 0.8, "integer"),
        ([0, 1], [5.0], 0.8, "scores has 1"),
        ([0, 1], [5.0, -1.0], 0.8, r"\[0, 10\]"),
        ([0, 1], [5.0, 11.0], 0.8, r"\[0, 10\]"),
        ([0, 1], [math.nan, 5.0], 0.8, r"\[0, 10\]"),
        ([0, 1], [5.0, 5.0], 0.0, "patience"),
        ([0, 1], [5.0, 5.0], 1.2, "patience"),
    ],
)
def test_utility_k_rejects(labels: list, scores: list, patience: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        utility_k(labels, scores, patience)


def test_distinct_k_rejects_non_canonical_labels() -> None:
    with pytest.raises(ValueError, match="order of first appearance"):
        distinct_k([1, 1, 2])


# Any list of labels, renumbered in order of first appearance.
canonical_partitions = st.lists(st.integers(0, 9), min_size=1, max_size=12).map(
    lambda raw: [list(dict.fromkeys(raw)).index(value) for value in raw]
)


@given(canonical_partitions, st.data())
def test_utility_bounded_by_scores(labels: list[int], data: st.DataObject) -> None:
    scores = data.draw(st.lists(st.floats(1.0, 10.0), min_size=len(labels), max_size=len(labels)))
    first = [scores[labels.index(label)] for label in range(distinct_k(labels))]
    utility = utility_k(labels, scores)
    assert 0.0 < utility <= max(first) + 1e-12
    assert distinct_k(labels) == len(set(labels))


# partition


def test_partition_compares_with_representatives_only() -> None:
    calls: list[tuple[str, str]] = []

    def within_one(a: str, b: str) -> bool:
        calls.append((a, b))
        return abs(int(a) - int(b)) <= 1

    # Not transitive: 1 joins 0's class, 2 does not (it is compared with 0, not with 1).
    assert partition(["0", "1", "2", "3"], within_one) == [0, 0, 1, 1]
    assert calls == [("0", "1"), ("0", "2"), ("0", "3"), ("2", "3")]


def test_partition_depends_on_order() -> None:
    def within_one(a: str, b: str) -> bool:
        return abs(int(a) - int(b)) <= 1

    assert partition(["1", "0", "2"], within_one) == [0, 0, 0]
    assert partition(["0", "2", "1"], within_one) == [0, 1, 0]


class CountingBatch:
    """An equivalence with a batch method that records each call."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, list[str]]] = []

    def __call__(self, representative: str, candidate: str) -> bool:
        raise AssertionError("the batch method should be used")

    def matches(self, representative: str, candidates: Sequence[str]) -> list[bool]:
        self.batches.append((representative, list(candidates)))
        return [candidate[0] == representative[0] for candidate in candidates]


def test_partition_uses_the_batch_method() -> None:
    check = CountingBatch()
    assert partition(["a1", "b1", "a2", "c1", "b2"], check) == [0, 1, 0, 2, 1]
    # "c1" has no unassigned generation after it, so it needs no call.
    assert check.batches == [("a1", ["b1", "a2", "c1", "b2"]), ("b1", ["c1", "b2"])]


@given(st.lists(st.sampled_from(["x", "y", "z", "w"]), min_size=1, max_size=10))
def test_partition_by_identity_counts_unique_texts(texts: list[str]) -> None:
    labels = partition(texts, lambda a, b: a == b)
    assert distinct_k(labels) == len(set(texts))
    assert labels == [list(dict.fromkeys(texts)).index(text) for text in texts]


@pytest.mark.parametrize(("texts", "message"), [([], "empty"), (["a", 3], "strings")])
def test_partition_rejects(texts: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        partition(texts, lambda a, b: True)
