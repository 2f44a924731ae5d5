"""Denial prompting: rounds of one suite, each forbidding the concepts the answers before it used.

Round 1 forbids nothing. After each round a concept extractor (:mod:`pytest_novelty.scoring.concepts`)
lists the concepts of every answer; they join the forbidden list of its prompt (all samples, all
earlier rounds), and the next round asks for an answer using none of them
(:func:`~pytest_novelty.suites.prompting.denial`), ``prompting.rounds`` rounds in all. Each round is
a plain run of the suite on the round's inputs (:meth:`pytest_novelty.pipeline.runner.Runner.run`),
so every metric and gate applies per round; its result carries its
:class:`~pytest_novelty.pipeline.results.DenialRound`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.pipeline.models import local_options
from pytest_novelty.pipeline.results import DenialRound
from pytest_novelty.scoring.concepts import ConceptExtractor, ConceptItem, open_concept_extractor
from pytest_novelty.suites.prompting import ModelInput, build_inputs, merge_concepts

if TYPE_CHECKING:
    from pytest_novelty.pipeline.config import RunConfig
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.suites.schema import Suite

__all__ = ["SuiteRunner", "open_extractor_for", "run_denial"]

Forbidden = Mapping[str, Sequence[str]]


class SuiteRunner(Protocol):
    """What denial prompting needs from the runner: one suite run on given model inputs."""

    def run(self, suite: Suite, *, inputs: list[ModelInput] | None = None) -> SuiteResult:
        """Generate, score and summarise ``suite``; ``inputs`` (one per prompt) replace the built ones."""
        ...


def run_denial(runner: SuiteRunner, suite: Suite, extractor: ConceptExtractor) -> list[SuiteResult]:
    """Run ``suite.prompting.rounds`` denial rounds and return one result per round, in order."""
    if suite.prompting.method != "denial":
        raise ConfigError(f'denial rounds need prompting.method = "denial", not {suite.prompting.method!r}',
                          path=suite.path, field="prompting.method")
    rounds = suite.prompting.rounds
    forbidden: dict[str, list[str]] = {}
    results: list[SuiteResult] = []
    for number in range(1, rounds + 1):
        # Round 1 forbids nothing: the suite's own inputs are exactly that round's prompts.
        inputs = build_inputs(suite, results[0].prompts, forbidden=forbidden) if results else None
        result = runner.run(suite, inputs=inputs)
        if results and [p.id for p in result.prompts] != [p.id for p in results[0].prompts]:
            raise HarnessError(f"{suite.name}: the prompts changed between denial rounds 1 and {number}")
        concepts = {p.id: list(forbidden.get(p.id, ())) for p in result.prompts}
        results.append(replace(result, denial=DenialRound(number, concepts)))
        if number < rounds:
            forbidden = forbid_concepts(forbidden, result, extractor)
    return results


def forbid_concepts(forbidden: Forbidden, result: SuiteResult, extractor: ConceptExtractor) -> dict[str, list[str]]:
    """``forbidden`` (concepts by prompt id) plus the concepts of every non-empty answer in ``result``."""
    task = result.suite.task
    items = [ConceptItem(task, prompt, answer) for prompt, samples in zip(result.prompts, result.answers, strict=True)
             for answer in samples if answer.strip()]
    merged = {prompt_id: list(concepts) for prompt_id, concepts in forbidden.items()}
    for item, concepts in zip(items, extractor.concepts(items), strict=True):
        merged[item.prompt.id] = merge_concepts(merged.get(item.prompt.id, ()), concepts)
    return merged


def open_extractor_for(config: RunConfig, suite: Suite) -> ConceptExtractor:
    """The concept extractor of a run, the run's or the suite's judge when it is a chat model (replies
    cached under ``concepts/``); another judge (``rules``, ``reward:``) is a ``ConfigError``."""
    spec = config.judge or suite.scoring.judge
    kind = spec.partition(":")[0]
    if kind not in ("openai", "hf"):
        raise ConfigError(
            f"denial prompting needs a chat model to list the concepts of each answer; the judge {spec!r} "
            "cannot, use openai:MODEL or hf:PATH",
            path=suite.path,
            field="scoring.judge",
        )
    options = local_options(config) if kind == "hf" else {}
    return open_concept_extractor(spec, cache_dir=config.cache_dir / "concepts", base_url=config.judge_base_url,
                                  **options)
