"""Prompts and generation: a suite's prompts, the model inputs built from them, and the answers
one checkpoint gives (prompts × samples), as :class:`~pytest_novelty.pipeline.results.SuiteAnswers`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.progress import notice
from pytest_novelty.pipeline.config import RunConfig
from pytest_novelty.pipeline.results import GenerationWork, SuiteAnswers, Sweep
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.schema import GenerationSettings, Suite

if TYPE_CHECKING:
    from pytest_novelty.generation import GenerationStats, Generator
    from pytest_novelty.suites.prompting import ModelInput


def load_prompts(suite: Suite) -> list[Prompt]:
    """The suite's prompts (only those with a human reference when ``[gate] reference`` is on)."""
    from pytest_novelty.suites.loaders import load_prompts as load

    src = suite.prompts
    options = {"task": suite.task, **dict(src.options)}
    prompts = load(src.source, base_dir=suite.base_dir, limit=src.limit, seed=src.seed, **options)
    if suite.gate.reference:
        # Compared with the human references, so only prompts that have one take part.
        prompts = [p for p in prompts if p.reference]
    if not prompts:
        raise ConfigError("the prompt source yielded no prompts", path=suite.path, field="prompts.source")
    return prompts


def build_model_inputs(
    suite: Suite, prompts: list[Prompt], example_scores: Mapping[str, float] | None = None
) -> list[ModelInput]:
    """The model input of each prompt under the suite's prompting settings."""
    from pytest_novelty.suites.prompting import build_inputs

    return build_inputs(suite, prompts, example_scores=example_scores)


def sweep_of(suite: Suite) -> Sweep | None:
    """The swept parameter and value of a suite run (its name reads ``story[temperature=0.7]``)."""
    if suite.sweep_value is None:
        return None
    name = suite.name
    parameter = name[name.rindex("[") + 1 : name.rindex("=")] if "[" in name else ""
    return Sweep(suite.path.stem, parameter, suite.sweep_value)


def run_settings(config: RunConfig, suite: Suite) -> GenerationSettings:
    """The settings ``suite`` is sampled with in this run: the suite's, with ``--novelty-seed`` (and
    each repeat's seed derived from it) and the task's stop strings; part of every answer's key."""
    from pytest_novelty.suites.tasks import get_task

    settings = suite.generation
    if config.seed is not None:  # --novelty-seed, and each repeat's own seed derived from it
        from pytest_novelty.suites.schema import repeat_seed

        settings = replace(settings, seed=repeat_seed(config.seed, suite.repeat))
    task = get_task(suite.task)
    if not settings.stop and task.stop:
        settings = replace(settings, stop=tuple(task.stop))
    return settings


def model_texts(
    config: RunConfig, gen: Generator, suite: Suite, inputs: list[ModelInput]
) -> tuple[list[str], GenerationSettings]:
    """The exact text ``gen`` is given for each input, and the run's sampling settings as the model
    is sampled (:func:`run_settings`)."""
    return [gen.render(x) for x in inputs], run_settings(config, suite)


def check_recorded(
    gen: Generator, suite: Suite, prompts: list[Prompt], texts: list[str], settings: GenerationSettings
) -> str:
    """For a source whose answers exist already (:class:`~pytest_novelty.generation.RecordedAnswers`),
    its check that it answers every prompt of the run (``texts`` and ``settings`` from
    :func:`model_texts`) as the suite would have them generated: bad input otherwise, naming the
    prompt and the file. Returns its note for the report; '' for a model, which is not asked."""
    from pytest_novelty.generation import PromptRequest, RecordedAnswers

    if not isinstance(gen, RecordedAnswers):
        return ""
    request = PromptRequest(suite.run_key, suite.repeat, [p.id for p in prompts], texts, settings)
    return gen.check_prompts(request)


def generate_answers(
    config: RunConfig,
    gen: Generator,
    suite: Suite,
    prompts: list[Prompt],
    inputs: list[ModelInput],
    model_path: str,
    *,
    on_work: Callable[[int], None] | None = None,
    merge_check: bool = True,
) -> SuiteAnswers:
    """Generate ``suite.generation.samples`` answers per input and cut each out of the raw output.

    ``on_work(rows)`` hears, before anything is generated, how many rows will be (never when every
    answer is cached): where a runner says that its model loads. A source whose answers exist
    already is checked first and read (:func:`check_recorded`). Over a cache that holds a sharded
    gate's parts, answers the shards should have brought are not generated unless
    ``--novelty-fill-missing-shards`` says so (:func:`pytest_novelty.pipeline.shard_records.merge_check`);
    a shard run (``--novelty-shard``) generates what it lacks, as does ``merge_check=False``.
    """
    from pytest_novelty.generation import RecordedAnswers, identity_description
    from pytest_novelty.generation.hf import PromptTooLong
    from pytest_novelty.suites.prompting import extract_answer
    from pytest_novelty.suites.tasks import get_task

    if len(inputs) != len(prompts):
        raise ValueError(f"{len(inputs)} inputs for {len(prompts)} prompts")
    start = time.perf_counter()
    texts, settings = model_texts(config, gen, suite, inputs)
    note = check_recorded(gen, suite, prompts, texts, settings)
    if isinstance(gen, RecordedAnswers) and len(gen.answered.get(suite.run_key, ())) < len(prompts):
        kept = [i for i, p in enumerate(prompts) if p.id in gen.answered[suite.run_key]]  # ?only_answered=true
        prompts, texts = [prompts[i] for i in kept], [texts[i] for i in kept]
    on_missing = None
    if merge_check and not config.shard:
        from pytest_novelty.pipeline.shard_records import merge_check as check

        on_missing = check(config, suite.name, prompts, identity_description(gen) or "")
    try:
        raw, stats = _generate(config, suite.name, gen, texts, settings, on_work, on_missing)
    except PromptTooLong as exc:  # name the prompt that does not fit the context
        raise too_long(suite, prompts, gen.token_counts(texts), exc.context) from None
    task, method = get_task(suite.task), suite.prompting.method
    answers = [[extract_answer(method, task, p, r) for r in rows] for p, rows in zip(prompts, raw, strict=True)]
    work = _work(config, gen, settings, stats, time.perf_counter() - start, note)
    identity = identity_description(gen) or gen.identity_id
    return SuiteAnswers(suite, config.model, prompts, answers, model_path=model_path, identity_id=gen.identity_id,
                        identity=identity, work=work, sweep=sweep_of(suite))


def _work(
    config: RunConfig, gen: Generator, settings: GenerationSettings, stats: GenerationStats, seconds: float, note: str
) -> GenerationWork:
    """What the generation step did, for the work line and ``report.json``: where (``cache`` when
    nothing was generated or read), the rows generated, cached or read from files, and the source's note."""
    from pytest_novelty.generation import RecordedAnswers, Reproducible

    how = gen.reproducibility if stats.rows and isinstance(gen, Reproducible) else None
    return GenerationWork(
        worker=config.worker,
        device=gen.device if stats.rows or stats.read_rows else "cache",
        samples=settings.samples,
        batches=stats.batches,
        rows=stats.rows,
        cached_rows=stats.cached_rows,
        tokens=stats.tokens,
        tokens_per_second=float(stats.tokens_per_second),
        seconds=seconds,
        read_rows=stats.read_rows,
        read_from=gen.source if stats.read_rows and isinstance(gen, RecordedAnswers) else "",
        note=note,
        reproducibility="" if how is None else how.how,
        varies_with_batch=how is not None and not how.batch_invariant,
    )


def too_long(suite: Suite, prompts: list[Prompt], counts: list[int], context: int) -> ConfigError:
    """The error for the longest of ``prompts`` (their model inputs are ``counts`` tokens long),
    which does not fit a context of ``context`` tokens: its file and line, and what made it long."""
    from pytest_novelty.suites.loaders import locate_prompt

    worst = max(range(len(prompts)), key=lambda i: counts[i])
    where = locate_prompt(suite.prompts.source, prompts[worst].id, base_dir=suite.base_dir)
    examples = suite.prompting.examples if suite.prompting.method in ("few-shot", "novel-examples") else 0
    fix = f"use fewer in-context examples (prompting.examples = {examples})" if examples else (
        "shorten the prompt or leave it out")
    return ConfigError(
        f"{where}: the model input is {counts[worst]} tokens, beyond the model's context of "
        f"{context} tokens; {fix}",
        path=suite.path,
        field="prompting.examples" if examples else "prompts.source",
    )


def _generate(
    config: RunConfig, name: str, gen: Generator, texts: list[str], settings: GenerationSettings,
    on_work: Callable[[int], None] | None = None,
    on_missing: Callable[[Sequence[str], Sequence[int]], None] | None = None,
) -> tuple[list[list[str]], GenerationStats]:
    """The generation step with a progress bar (samples, tokens/s, ETA), or quarter-way log lines;
    a source whose answers exist already is read without either (nothing is generated)."""
    from pytest_novelty import generation

    if generation.is_recorded(gen):
        return generation.generate(gen, texts, settings)
    total = len(texts) * settings.samples
    reported = [0]
    with config.progress.bar(total, f"{name}: generating", unit="sample") as bar:

        def on_batch(p: generation.Progress) -> None:
            # update() redraws at most every tenth of a second: this runs at every decoding step.
            bar.set_postfix_str(f"{p.tokens_per_second:,.0f} tok/s", refresh=False)
            bar.update(total - p.rows_total + p.rows_done - bar.n)
            quarter = 4 * p.rows_done // p.rows_total
            if bar.disable and quarter > reported[0]:
                reported[0] = quarter
                eta = p.seconds / p.rows_done * (p.rows_total - p.rows_done)
                notice(
                    f"[novelty] {name}: generated {p.rows_done}/{p.rows_total} samples "
                    f"({p.batches_done}/{p.batches_total} batches done, {p.tokens_per_second:,.0f} tokens/s, "
                    f"ETA {eta:.0f}s)"
                )

        done = generation.generate(
            gen, texts, settings, cache_dir=config.cache_dir / generation.NAMESPACE, on_batch=on_batch,
            on_work=on_work, on_missing=on_missing,
        )
        bar.refresh()  # the final count, which the rate limit may have held back
        return done
