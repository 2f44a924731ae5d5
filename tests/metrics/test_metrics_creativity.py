"""The Creativity Index's definitions: uniqueness@L, the index, copied spans and the suite values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_novelty.metrics.creativity import (
    DEFAULT_LENGTHS,
    check_lengths,
    copied_spans,
    covered,
    creativity_index,
    uniqueness_counting_short,
    uniqueness_table,
)
from pytest_novelty.metrics.suite import suite_metrics
from pytest_novelty.metrics.table import values_of
from pytest_novelty.metrics.uncertainty import suite_intervals

# A copied run of six units, a unit the corpus never holds, a run of three.
EXAMPLE = [6, 5, 4, 3, 2, 1, 0, 3, 2, 1]


def literal_uniqueness(lengths: list[int], length: int) -> float:
    """The definition read word for word: the share of units no found span of >= L units covers."""
    if len(lengths) < length:
        return math.nan
    spans = [(i, i + size) for i, size in enumerate(lengths) if size >= length]
    hidden = [any(start <= j < end for start, end in spans) for j in range(len(lengths))]
    return hidden.count(False) / len(lengths)


def random_lengths(rng: np.random.Generator, size: int) -> list[int]:
    """Any valid match lengths: none runs past the text (not necessarily a corpus's)."""
    room = size - np.arange(size)
    return [int(rng.integers(0, r + 1)) if rng.random() < 0.6 else int(min(r, rng.integers(0, 4))) for r in room]


def test_a_worked_example() -> None:
    assert covered(EXAMPLE, 5).tolist() == [True] * 6 + [False] * 4
    table = uniqueness_table([EXAMPLE], [3, 5, 6, 7])
    assert table.tolist() == [[0.1, 0.4, 0.4, 1.0]]
    assert copied_spans(EXAMPLE, 3) == [(0, 6), (7, 3)]
    assert copied_spans(EXAMPLE, 5) == [(0, 6)]
    assert copied_spans(EXAMPLE, 7) == []
    # Default range 5..12: 0.4 at 5 and 6, then 1.0 at 7..10; the text has 10 units, so 11 and 12
    # are undefined and count 0.
    default = uniqueness_table([EXAMPLE])
    assert np.isnan(default[0, -2:]).all()
    assert creativity_index(default)[0] == pytest.approx(0.4 + 0.4 + 4 * 1.0)


def test_the_vectorised_table_is_the_definition() -> None:
    rng = np.random.default_rng(35)
    texts = [random_lengths(rng, int(rng.integers(0, 30))) for _ in range(300)]
    lengths = (1, 2, 3, 5, 8, 12, 20)
    table = uniqueness_table(texts, lengths)
    expected = np.array([[literal_uniqueness(t, length) for length in lengths] for t in texts])
    assert np.array_equal(table, expected, equal_nan=True)
    for text in texts[:80]:
        for length in (2, 5):
            marks = np.zeros(len(text), dtype=bool)
            for start, size in copied_spans(text, length):
                assert size == text[start] >= length
                marks[start : start + size] = True
            assert marks.tolist() == covered(text, length).tolist()


def test_capping_at_the_largest_length_changes_nothing() -> None:
    """A span longer than max L covers what its overlapping spans of max L cover, so lengths
    capped there give the same table, provided they come from a corpus (a match at i minus its
    first unit is a match at i + 1)."""
    rng = np.random.default_rng(36)
    for _ in range(100):
        size = int(rng.integers(0, 60))
        ends = np.maximum.accumulate(np.arange(size) + rng.integers(0, 20, size))
        lengths = np.minimum(ends, size) - np.arange(size)
        assert np.array_equal(
            uniqueness_table([np.minimum(lengths, 12)]), uniqueness_table([lengths]), equal_nan=True
        )


def test_short_and_empty_texts() -> None:
    table = uniqueness_table([[], [1, 0, 1], list(range(12, 0, -1))])
    assert np.isnan(table[0]).all() and np.isnan(table[1]).all()
    assert table[2].tolist() == [0.0] * 8  # one copied run of twelve covers everything at every L
    assert creativity_index(table).tolist() == [0.0, 0.0, 0.0]
    # A novel text long enough for every L scores the whole range.
    assert creativity_index(uniqueness_table([[1] * 12]))[0] == 8.0


def test_suite_values_count_short_texts_as_zero_with_their_intervals() -> None:
    # Prompts of two samples: a novel text of 12 units, one of 6 (too short from L = 7), an empty one.
    table = uniqueness_table([[0] * 12, [0] * 6, []] * 4)
    uniqueness = {length: table[:, k].reshape(6, 2) for k, length in enumerate(DEFAULT_LENGTHS)}
    quality, ids = np.full((6, 2), 0.5), [f"p{i}" for i in range(6)]
    names = ["creativity_index", "uniqueness@5", "uniqueness@12"]
    values, per_prompt, _ = suite_metrics(quality=quality, originality={}, prompt_ids=ids, metrics=names,
                                          uniqueness=uniqueness)  # fmt: skip
    assert values["uniqueness@5"] == pytest.approx(2 / 3) and values["uniqueness@12"] == pytest.approx(1 / 3)
    assert values["creativity_index"] == pytest.approx((8 + 2 + 0) / 3)
    assert values["creativity_index"] == pytest.approx(sum(values[f"uniqueness@{n}"] for n in DEFAULT_LENGTHS))
    assert per_prompt["creativity_index"] == pytest.approx([5.0, 4.0, 1.0] * 2)  # rows (12, 6), ([], 12), (6, [])
    intervals = suite_intervals(quality=quality, originality={}, metrics=names, per_prompt=per_prompt,
                                prompt_ids=ids, uniqueness=uniqueness)  # fmt: skip
    for name in names:
        assert intervals[name].estimate == pytest.approx(values[name], abs=1e-12), name
    assert 0.0 <= intervals["creativity_index"].low < values["creativity_index"] < intervals["creativity_index"].high
    assert intervals["creativity_index"].high <= 8.0
    with pytest.raises(ValueError, match="needs the uniqueness of every generation"):
        values_of("creativity_index", quality, {})


@pytest.mark.parametrize(
    ("lengths", "message"),
    [
        ([[1, 2]], r"match_lengths\[0\]\[1\] is 2: a match length lies between 0 and the 1 units left"),
        ([[-1]], "lies between 0"),
        ([[1.5]], "whole numbers"),
        ([[[1]]], "one-dimensional"),
    ],
)
def test_bad_match_lengths_are_named(lengths: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        uniqueness_table(lengths)


def test_bad_ranges_and_tables() -> None:
    assert check_lengths([12, 5, 5]) == (5, 12)
    assert tuple(range(5, 13)) == DEFAULT_LENGTHS
    for bad in ([], [0], [True], [2.5]):
        with pytest.raises(ValueError, match="span length"):
            check_lengths(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"lie in \[0, 1\]"):
        uniqueness_counting_short([1.5])
    with pytest.raises(ValueError, match="table"):
        creativity_index([0.5, 0.5])

