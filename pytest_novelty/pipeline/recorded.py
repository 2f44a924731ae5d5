"""A model's raw answers to suite runs, written as pytest-novelty answers (``answers:FILE``'s format).

What the generation step produced before the task cut each answer out, the rows a run reads from
the cache or generates: gating the file with ``--model answers:FILE`` gives the same table,
intervals and verdicts as gating the model. A model that is itself ``answers:FILE``
(lm-evaluation-harness samples, say) is written in this format, matched to the suites' prompts.
``pytest-novelty answers export`` is the command line's way in.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_novelty.suites.schema import Suite

__all__ = ["answer_records", "export_answers"]


def answer_records(runner: Any, suites: Iterable[Suite]) -> tuple[list[dict[str, Any]], list[Suite]]:
    """One record per prompt of every run of ``suites`` for ``runner``'s model (a
    :class:`~pytest_novelty.pipeline.runner.Runner`), and the runs left out: those whose inputs
    are built during the run (a denial round after the first, ``novel-examples``)."""
    from pytest_novelty import generation
    from pytest_novelty.generation.answer_files import answer_record
    from pytest_novelty.pipeline.answers import check_recorded
    from pytest_novelty.pipeline.warm import model_inputs

    records: list[dict[str, Any]] = []
    skipped: list[Suite] = []
    gen = runner.generator()
    cache = runner.config.cache_dir / generation.NAMESPACE
    for suite, known in model_inputs(runner, suites):
        if known is None:
            skipped.append(suite)
            continue
        prompts, inputs, texts, settings = known
        check_recorded(gen, suite, prompts, texts, settings)  # answers read from files: matched first
        raw, _ = generation.generate(gen, texts, settings, cache_dir=cache, on_work=runner.say_loading)
        for prompt, model_input, rows in zip(prompts, inputs, raw, strict=True):
            records.append(answer_record(suite.run_key, prompt.id, model_input, rows, settings))
    return records, skipped


def export_answers(runner: Any, suites: Iterable[Suite], path: Path) -> tuple[int, list[Suite]]:
    """Write :func:`answer_records` to ``path`` (atomically); the records written and the runs left out."""
    from pytest_novelty.generation.answer_files import write_answer_file

    records, skipped = answer_records(runner, suites)
    write_answer_file(Path(path), records)
    return len(records), skipped
