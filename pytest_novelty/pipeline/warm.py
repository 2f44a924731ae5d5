"""What a run still has to generate, found before anything loads: the warm rerun's shortcut.

A rerun whose answers are all cached needs no model: the preflight asks :func:`runs_to_generate`
which suite runs lack answers, and checks prompt lengths (with the checkpoint's tokenizer, which
imports transformers and torch) and lists a served model (``GET /models``) only for those. Answers
are looked up as the generation step will (:func:`pytest_novelty.generation.rows_missing`: the
checkpoint's content identity, the exact input text, the sampling settings), and the generator
remembers each chat input it rendered, so a warm chat suite needs no tokenizer either.

A ``novel-examples`` suite (its examples are chosen by originality, scored later) and a denial round
after the first (its prompts forbid what the round before said) cannot be looked up before the run:
they count as runs to generate, the safe side.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pytest_novelty.suites.schema import Suite

__all__ = ["inputs_known", "model_inputs", "runs_to_generate"]


def inputs_known(suite: Suite) -> bool:
    """Whether a run's model inputs can be built before the run (see the module doc)."""
    return suite.prompting.method != "novel-examples" and (suite.denial_round or 1) == 1


def model_inputs(runner: Any, suites: Iterable[Suite]) -> Iterator[tuple[Suite, tuple[Any, ...] | None]]:
    """Each run of ``suites`` with its prompts, model inputs, exact texts and settings for ``runner``
    (a :class:`~pytest_novelty.pipeline.runner.Runner`), or None where they are not known before it."""
    from pytest_novelty.pipeline.answers import model_texts

    for suite in suites:
        if not inputs_known(suite):
            yield suite, None
            continue
        prompts, inputs = runner.prompts(suite)
        yield suite, (prompts, inputs, *model_texts(runner.config, runner.generator(), suite, inputs))


def runs_to_generate(runner: Any, suites: Iterable[Suite]) -> list[Suite]:
    """The runs of ``suites`` for which ``runner``'s generation step would generate anything. Opening
    the generator loads nothing (an identity comes from bytes); ``answers:FILE`` generates nothing."""
    from pytest_novelty.generation import NAMESPACE, is_recorded, rows_missing

    generator = runner.generator()
    if is_recorded(generator):
        return []
    cache = runner.config.cache_dir / NAMESPACE
    return [suite for suite, known in model_inputs(runner, suites)
            if known is None or rows_missing(generator, known[2], known[3], cache)]  # fmt: skip
