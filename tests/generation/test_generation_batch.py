"""The plain data a generator backend receives: a :class:`Batch` per sampling call, and the
:class:`LoadSettings` a local checkpoint is opened with."""

from __future__ import annotations

import pytest

from pytest_novelty.generation import Batch, LoadSettings
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.suites.schema import GenerationSettings

SETTINGS = GenerationSettings(max_new_tokens=4)


def test_a_part_reports_in_the_whole_batchs_numbering() -> None:
    steps: list[tuple[int, int]] = []
    rows: dict[int, str] = {}
    progress = lambda done, tokens: steps.append((done, tokens))  # noqa: E731
    batch = Batch(["a", "b", "c", "d", "e"], [1, 2, 3, 4, 5], SETTINGS, progress, rows.__setitem__)
    later = batch.part(2, 5, tokens_before=7)
    assert list(later.texts) == ["c", "d", "e"] and list(later.seeds) == [3, 4, 5] and len(later) == 3
    later.finished(0, "C")
    later.finished(2, "E")
    later.step(1, 3)
    assert rows == {2: "C", 4: "E"}
    assert steps == [(3, 10)]  # 2 rows and 7 tokens before the part, plus its own 1 row and 3 tokens
    first = batch.part(0, 2)
    first.finished(1, "B")
    first.step(2, 5)
    assert rows[1] == "B" and steps[-1] == (2, 5)


def test_a_batch_without_callbacks_ignores_progress() -> None:
    batch = Batch(["a", "b"], [1, 2], SETTINGS)
    batch.step(1, 1)
    batch.finished(0, "x")
    part = batch.part(1, 2, tokens_before=3)
    assert part.on_step is None and part.on_row is None


def test_every_row_needs_its_seed() -> None:
    with pytest.raises(ValueError, match="one seed per row: 2 texts, 1 seeds"):
        Batch(["a", "b"], [1], SETTINGS)


def test_an_unknown_dtype_is_one_line_naming_the_choices() -> None:
    assert LoadSettings(dtype="bf16").dtype == "bf16"
    with pytest.raises(ConfigError, match=r"--dtype: unknown dtype 'fp8'; use one of auto, bf16, fp16, fp32"):
        LoadSettings(dtype="fp8")
