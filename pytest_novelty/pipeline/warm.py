"""What a run still has to generate, found before anything loads: the warm rerun's shortcut.

A rerun whose answers are all in the cache needs no model: nothing is generated, so nothing has
to fit the model's context, and a served model's server has nothing to answer. The preflight
asks :func:`runs_to_generate` which suite runs lack answers, and checks the prompt lengths (with
the checkpoint's tokenizer, which imports transformers and torch) and lists the served model
(``GET /models``) only for those; the judges and indexes are checked as before, where they are
needed. The answers are looked up exactly as the generation step will look them up
(:func:`pytest_novelty.generation.rows_missing`: the checkpoint's content identity, the exact input
text, the sampling settings), so a run the check calls warm reads every answer from the cache. A
chat input's exact text comes from the checkpoint's chat template; the generator remembers each
one it rendered under the checkpoint's identity, so a warm chat suite needs no tokenizer either.

Two kinds of run cannot be looked up before the run: a ``novel-examples`` suite (its examples are
chosen by their originality, scored later) and a denial round after the first (its prompts forbid
what the round before said). They count as runs to generate, which is the safe side: the checks
run for them as for a cold run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pytest_novelty.suites.schema import Suite

__all__ = ["inputs_known", "runs_to_generate"]


def inputs_known(suite: Suite) -> bool:
    """Whether a run's model inputs can be built before the run (see the module doc)."""
    return suite.prompting.method != "novel-examples" and (suite.denial_round or 1) == 1


def runs_to_generate(runner: Any, suites: Iterable[Suite]) -> list[Suite]:
    """The runs of ``suites`` for which the generation step of ``runner`` (a
    :class:`~pytest_novelty.pipeline.runner.Runner`) would generate anything.

    Opens the runner's generator, which loads nothing (a checkpoint's identity comes from its
    bytes; a served model is an endpoint), and reads the answer cache. A source whose answers
    exist already (``answers:FILE``) generates nothing.
    """
    from pytest_novelty.generation import NAMESPACE, is_recorded, rows_missing
    from pytest_novelty.pipeline.answers import model_texts

    suites = list(suites)
    generator = runner.generator()
    if is_recorded(generator):
        return []
    cache = runner.config.cache_dir / NAMESPACE
    pending = []
    for suite in suites:
        if not inputs_known(suite):
            pending.append(suite)
            continue
        _, inputs = runner.prompts(suite)
        texts, settings = model_texts(runner.config, generator, suite, inputs)
        if rows_missing(generator, texts, settings, cache):
            pending.append(suite)
    return pending
