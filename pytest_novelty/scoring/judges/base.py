"""The records a judge reads and writes, and the Protocol every judge implements.

``quality`` is on a 0-1 scale, so the metrics never need to know which judge produced it: rubric
judges (``rules``, ``openai:``, ``hf:``) award 0-5 additive points per sample, and quality is the
mean over the samples with a valid score over 5; reward judges (``reward:``) map a reward to
NoveltyBench's 1-10 scale, over 10. An item that could not be scored has ``quality=None`` and says
why in ``error``; it is never reported as 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pytest_novelty.infra.registry import Registry

RUBRIC_POINTS = 5
"""Rubric judges award between 0 and this many points per sample."""
NO_SCORE = "no score in reply"
"""The reason recorded for a sample whose replies held no valid score after every re-ask."""
REASON_SEPARATOR = "; "
"""Joins the distinct reasons of an unscored item in :attr:`JudgeResult.error`."""


@dataclass(frozen=True)
class JudgeItem:
    """One (prompt, response) pair to grade: ``task`` is ``story``, ``poetry``, ``tool`` or ``open``;
    ``meta`` carries what task checks need (``characters``; ``contains`` / ``ends_with`` /
    ``rhymes_with``; ``items``)."""

    task: str
    prompt: str
    response: str
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JudgeResult:
    """The verdict on one item by the judge ``judge`` (its spec): a valid score per sample that gave
    one, in order, and their mean normalised to 0-1; with none, ``quality`` None and ``error`` the
    distinct reasons joined by :data:`REASON_SEPARATOR` (``HTTP 503: message``, ``no score in reply``)."""

    quality: float | None
    scores: tuple[float, ...]
    judge: str
    error: str | None = None


@runtime_checkable
class Judge(Protocol):
    """Scores (task, prompt, response) items; chosen by a spec string such as ``openai:MODEL``."""

    spec: str

    def score(self, items: Sequence[JudgeItem], *, progress: bool = False) -> list[JudgeResult]:
        """Return one result per item, in the order given."""
        ...


@runtime_checkable
class PlansCalls(Protocol):
    """A judge that can tell, before scoring, how many calls scoring items would make (its dry run)."""

    def planned_calls(self, items: Sequence[JudgeItem]) -> int:
        """The calls :meth:`Judge.score` would make for ``items`` now, given what is cached."""
        ...


JUDGES: Registry[Judge] = Registry(
    "judge", field="judge",
    builtins=("pytest_novelty.scoring.judges.rules", "pytest_novelty.scoring.judges.openai",
              "pytest_novelty.scoring.judges.hf", "pytest_novelty.scoring.judges.reward"),
    settings=("cache_dir", "samples", "temperature", "base_url", "budget", "concurrency"),
)
"""Judges by spec prefix."""


def rubric_result(scores: Sequence[float], judge: str, errors: Sequence[str] = ()) -> JudgeResult:
    """The result of a rubric judge from the valid per-sample scores (0-5 points) and the failures' reasons."""
    if scores:
        quality = sum(scores) / len(scores) / RUBRIC_POINTS
        return JudgeResult(quality=quality, scores=tuple(scores), judge=judge)
    reasons = REASON_SEPARATOR.join(dict.fromkeys(errors)) or "no sample produced a score"
    return JudgeResult(quality=None, scores=(), judge=judge, error=reasons)
