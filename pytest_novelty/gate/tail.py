"""The frozen tail a q@Tail case is judged on (:func:`choose_tail`: where it comes from) and the one
value on it (:func:`tail_value`), which the case's threshold and its comparison share."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_novelty.suites.tail_file import read_tail_ids

if TYPE_CHECKING:
    from pytest_novelty.pipeline.results import SuiteResult


@dataclass(frozen=True)
class FrozenTail:
    """The tail prompts a q@Tail case is judged on, and where they came from.

    ``source`` is one of "baseline" (the baseline checkpoint's tail, ranked by its outputs),
    "snapshot" (the tail stored with the accepted snapshot), "suite file" (``[gate] tail``) or
    "candidate" (the candidate's own ranking: nothing froze it yet); ``file`` names the suite's tail
    file for "suite file".
    """

    ids: list[str]
    source: str
    file: str = ""

    def describe(self, used: int) -> str:
        """``snapshot's tail, 10 prompts``: for the table and the report."""
        where = {
            "baseline": "baseline's tail",
            "snapshot": "snapshot's tail",
            "suite file": f"tail file {self.file}",
            "candidate": "candidate's own tail",
        }[self.source]
        counted = f"{used} prompts" if used == len(self.ids) else f"{used} of {len(self.ids)} prompts"
        return f"{where}, {counted}"


def choose_tail(
    metric: str,
    *,
    baseline: Sequence[str] | None = None,
    snapshot: Sequence[str] | None = None,
    tail_file: Path | None = None,
    candidate: Sequence[str] = (),
) -> FrozenTail:
    """The one tail both the q@Tail threshold and the regression use, first found of:
    the baseline checkpoint's tail, the snapshot's stored tail, the suite's tail file (a JSON list,
    or an object mapping ``q_at_tail@α`` to a list: :mod:`pytest_novelty.suites.tail_file`), the
    candidate's own. Judging the threshold on the candidate's own tail while the regression compares
    on the snapshot's would gate two different prompt sets under one name."""
    if baseline:
        return FrozenTail(list(baseline), "baseline")
    if snapshot:
        return FrozenTail(list(snapshot), "snapshot")
    if tail_file is not None:
        return FrozenTail(read_tail_ids(tail_file, metric), "suite file", tail_file.name)
    return FrozenTail(list(candidate), "candidate")


def tail_value(per_prompt: Mapping[str, float], ids: Sequence[str]) -> tuple[float, list[str]]:
    """The mean of ``per_prompt`` over the tail ids it has (NaN left out), and those ids: the rule
    :func:`~pytest_novelty.gate.regression.compare` applies to a candidate on a stored tail too, so
    the threshold's value and the comparison's are one number."""
    known = [i for i in dict.fromkeys(ids) if i in per_prompt]
    chosen = np.array([per_prompt[i] for i in known], dtype=float)
    present = chosen[~np.isnan(chosen)]
    return (float(present.mean()) if present.size else math.nan), known


def gated_metrics(
    result: SuiteResult, metric: str, tail: FrozenTail, metrics: Mapping[str, float] | None = None
) -> tuple[dict[str, float], list[str]]:
    """``metrics`` (default: the result's) with ``q_at_tail@α`` recomputed on ``tail`` from the result's
    per-prompt quality, and the tail ids the suite has: what a q@Tail threshold is checked on."""
    quality = dict(zip([p.id for p in result.prompts], result.per_prompt["quality"], strict=True))
    value, used = tail_value(quality, tail.ids)
    return {**(result.metrics if metrics is None else metrics), metric: value}, used

