"""Quality judges: score (task, prompt, response) items on a 0-1 quality scale.

A judge is chosen by a spec string:

- ``rules``: the offline heuristic of :mod:`.rules` (not an LLM judge; the default of the demo);
- ``openai:MODEL``: an LLM judge behind any OpenAI-compatible endpoint (:mod:`.openai`);
- ``hf:PATH``: an LLM judge run locally through transformers (:mod:`.hf`);
- ``reward:PATH``: a local reward model mapped to the 1-10 scale (:mod:`.reward`).

Rubric judges (``rules``, ``openai:``, ``hf:``) award 0-5 points per sample and report
quality = mean points / 5; reward judges report quality = (1-10 score) / 10. An item a judge could
not score has ``quality=None`` and an ``error``, never 0.
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

__all__ = [
    "DEFAULT_THRESHOLDS",
    "JUDGES",
    "KINDS",
    "RUBRICS",
    "HFJudge",
    "Judge",
    "JudgeItem",
    "JudgeResult",
    "OpenAIJudge",
    "PlansCalls",
    "RewardJudge",
    "Rubric",
    "RulesJudge",
    "UnparsableScore",
    "dry_run",
    "open_judge",
    "parse_score",
]

KINDS = ("rules", "openai", "hf", "reward")
"""The built-in judges; :data:`JUDGES` holds these and any registered since."""


def open_judge(
    spec: str,
    *,
    cache_dir: Path | None = None,
    samples: int = 5,
    temperature: float = 0.7,
    base_url: str | None = None,
    budget: int | None = None,
    concurrency: int = 32,
    **options: Any,
) -> Judge:
    """Open the judge named by ``spec``: ``rules``, ``openai:MODEL``, ``hf:PATH``, ``reward:PATH``, or
    one registered in :data:`JUDGES`; options may also follow the spec as ``?name=value&...``.

    ``cache_dir`` keeps answers on disk (in memory without it). ``samples`` and ``temperature``
    apply to the LLM judges; ``base_url``, ``budget`` and ``concurrency`` to ``openai:`` only; the
    judges that do not use a setting ignore it. Judge-specific ``options`` are checked: ``openai:``
    takes api_key, timeout, max_attempts, max_reasks, backoff, max_backoff, max_tokens; ``hf:``
    takes batch_size, max_new_tokens, seed, max_reasks, device, trust_remote_code; ``reward:``
    takes thresholds, batch_size, max_length, device, trust_remote_code.

    A bad spec or option raises :class:`~pytest_novelty.infra.errors.ConfigError`.
    """
    parsed = JUDGES.parse(spec)
    if samples < 1:
        raise ConfigError(f"samples must be at least 1, got {samples}", field="samples")
    if budget is not None and budget < 0:
        raise ConfigError(f"budget must be 0 or more, got {budget}", field="budget")
    return JUDGES.call(
        parsed,
        options=options,
        cache_dir=cache_dir,
        samples=samples,
        temperature=temperature,
        base_url=base_url,
        budget=budget,
        concurrency=concurrency,
    )


def dry_run(judge: Judge, items: Sequence[JudgeItem]) -> int:
    """How many calls scoring ``items`` would make now (requests for ``openai:``, generated replies
    for ``hf:``, items to score for ``reward:``, 0 for ``rules``), given what is already cached; a
    judge that cannot plan (not :class:`PlansCalls`) is taken to make one call per item."""
    return int(judge.planned_calls(items)) if isinstance(judge, PlansCalls) else len(items)
