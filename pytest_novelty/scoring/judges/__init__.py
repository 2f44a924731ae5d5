"""Quality judges: score (task, prompt, response) items on a 0-1 quality scale.

A judge is chosen by a spec: ``rules`` (the offline heuristic of :mod:`.rules`, the demo's),
``openai:MODEL`` (:mod:`.openai`), ``hf:PATH`` (:mod:`.hf`) or ``reward:PATH`` (:mod:`.reward`);
:mod:`.base` says how their scores become quality.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.scoring.judges.base import JUDGES, Judge, JudgeItem, JudgeResult, PlansCalls
from pytest_novelty.scoring.judges.hf import HFJudge
from pytest_novelty.scoring.judges.openai import OpenAIJudge
from pytest_novelty.scoring.judges.parsing import UnparsableScore, parse_score
from pytest_novelty.scoring.judges.reward import DEFAULT_THRESHOLDS, RewardJudge
from pytest_novelty.scoring.judges.rubrics import RUBRICS, Rubric
from pytest_novelty.scoring.judges.rules import RulesJudge

__all__ = ["DEFAULT_THRESHOLDS", "JUDGES", "RUBRICS", "HFJudge", "Judge", "JudgeItem", "JudgeResult",
           "OpenAIJudge", "PlansCalls", "RewardJudge", "Rubric", "RulesJudge", "UnparsableScore", "dry_run",
           "open_judge", "parse_score"]

def open_judge(
    spec: str, *, cache_dir: Path | None = None, samples: int = 5, temperature: float = 0.7,
    base_url: str | None = None, budget: int | None = None, concurrency: int = 32, **options: Any,
) -> Judge:
    """Open the judge named by ``spec`` with its ``?`` and keyword ``options`` (checked against what it
    registered); ``cache_dir`` keeps answers on disk (in memory without it), and a judge ignores the
    settings it has no use for (``base_url``, ``budget`` and ``concurrency`` are ``openai:``'s)."""
    parsed = JUDGES.parse(spec)
    if samples < 1:
        raise ConfigError(f"samples must be at least 1, got {samples}", field="samples")
    if budget is not None and budget < 0:
        raise ConfigError(f"budget must be 0 or more, got {budget}", field="budget")
    return JUDGES.call(
        parsed, options=options, cache_dir=cache_dir, samples=samples, temperature=temperature, base_url=base_url,
        budget=budget, concurrency=concurrency,
    )


def dry_run(judge: Judge, items: Sequence[JudgeItem]) -> int:
    """How many calls scoring ``items`` would make now, given what is cached (requests for ``openai:``,
    replies for ``hf:``, items for ``reward:``, 0 for ``rules``; one per item for a judge that cannot plan)."""
    return int(judge.planned_calls(items)) if isinstance(judge, PlansCalls) else len(items)
