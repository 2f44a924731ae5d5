"""The one place a suite result becomes exported data: its :class:`~pytest_novelty.pipeline.suite_data.SuiteData`
(``report.json``'s per-suite arrays and ``info``, and what crosses from an xdist worker to the
controller), and the run log's work line."""

from __future__ import annotations

import math
from typing import Any

from pytest_novelty.pipeline.results import SuiteResult
from pytest_novelty.pipeline.suite_data import GenerationArrays, RoundWork, SuiteData, SuiteInfo, grid


def batches_text(count: int) -> str:
    """``1 batch``, ``3 batches``."""
    return f"{count} batch" if count == 1 else f"{count} batches"


def suite_info(result: SuiteResult) -> SuiteInfo:
    """The descriptive part of a result: ``report.json``'s ``info`` and the work summary."""
    answers, scores, work = result.generated, result.scores, result.generated.work
    consistency, denial = result.measured.judge_consistency, result.denial
    return SuiteInfo(
        model=answers.model, model_path=answers.model_path, identity_id=answers.identity_id,
        identity=answers.identity,
        samples=work.samples, generated_batches=work.batches, generated_rows=work.rows,
        cached_rows=work.cached_rows, read_rows=work.read_rows, read_from=work.read_from,
        tokens=work.tokens, tokens_per_second=round(work.tokens_per_second, 1), worker=work.worker,
        device=work.device, sweep=None if answers.sweep is None else vars(answers.sweep).copy(),
        judge=scores.judge, originality=scores.index, units=scores.units, prompts=len(answers.prompts),
        seconds={"generation": work.seconds, "originality": scores.seconds_originality,
                 "judge": scores.seconds_judge},
        longest_copied=scores.longest_copied, creativity_copied=scores.creativity_copied,
        originality_lookups=scores.lookups, judge_requests=scores.judge_requests,
        unscored_reasons=scores.unscored_reasons, cache_repaired=result.cache_repaired,
        answers_note="; ".join(part for part in (work.note, work.reproducibility if work.varies_with_batch else "")
                               if part),
        judge_agreement=result.judge_agreement,
        judge_consistency=None if consistency is None else {
            **consistency.as_dict(), "max_spread": result.suite.scoring.max_judge_spread},
        round=None if denial is None else denial.number, forbidden=None if denial is None else denial.counts,
        forbidden_concepts=None if denial is None else denial.forbidden,
    )  # fmt: skip


def _numbers(values: dict[str, float]) -> dict[str, float | None]:
    return {k: None if math.isnan(v) else float(v) for k, v in values.items()}


def _arrays(result: SuiteResult, n: int, model: str = "") -> GenerationArrays:
    """Per-generation arrays at order n: originality as measured (None: too short for an n-gram),
    novelty as the gate counts it (a too-short generation at 0), and the shares the gate reports."""
    return GenerationArrays(quality=grid(result.quality), originality=grid(result.originality[n]),
                            novelty=grid(result.measured.novelty[n]), shares=_numbers(result.measured.shares),
                            model=model)  # fmt: skip


def detectable_json(result: SuiteResult, alpha: float) -> dict[str, Any]:
    """Per gated metric, the smallest drop a regression test at ``alpha`` (the α each of the run's
    tests is held to) finds with 80 % power, from this run's per-prompt variance
    (:func:`pytest_novelty.metrics.power.detectable`), the suite's tolerance beside it and, when the
    tolerance is the smaller, the prompts that would detect it."""
    from pytest_novelty.metrics.power import detectable
    from pytest_novelty.metrics.table import family
    from pytest_novelty.pipeline.measure import metric_values

    suite, measured = result.suite, result.measured
    out: dict[str, Any] = {}
    for threshold in suite.thresholds:
        metric = threshold.metric
        fam = family(metric)
        if fam.per_prompt_only and metric not in measured.per_prompt:
            continue
        # q@Tail on its tail, Novelty at Peak on its peak
        values = metric_values(result, metric, measured.tail_ids.get(metric, []))
        if fam.per_prompt_only:
            values = values.reshape(-1, 1)
        elif fam.subset is not None and not len(values):
            continue
        found = detectable(values, alpha=alpha, top_fraction=fam.top_fraction)
        tolerance = suite.gate.tolerance_abs if threshold.tolerance_abs is None else threshold.tolerance_abs
        entry = {**found.as_dict(), "tolerance": tolerance}
        if found.effect == found.effect and tolerance > 0 and tolerance < found.effect:  # NaN-safe
            entry["prompts_for_tolerance"] = found.prompts_for(tolerance)
        out[metric] = entry
    return out


def suite_data(result: SuiteResult, baseline: SuiteResult | None, *, alpha: float | None = None) -> SuiteData:
    """One suite's exported data for the report (it may cross from an xdist worker); ``alpha`` (the
    α each of the run's regression tests is held to) adds what the suite can detect."""
    n = result.measured.order
    # ``metrics``: every value the metrics step computed (gated or not), for the trackers and report.json.
    return SuiteData(n=n, candidate=_arrays(result, n), info=suite_info(result), metrics=_numbers(result.metrics),
                     detectable={} if alpha is None else detectable_json(result, alpha),
                     baseline=None if baseline is None else _arrays(baseline, n, baseline.model))  # fmt: skip


def work_line(name: str, result: SuiteResult) -> str:
    """The run log's line for one suite: where it ran and what it did (an xdist worker sends it on)."""
    work, scores = result.generated.work, result.scores
    repaired = result.cache_repaired
    warning = f"; warning: {repaired} damaged cache entries dropped and recomputed" if repaired else ""
    if work.read_rows:  # answers generated elsewhere: nothing was generated here
        done = f"{work.read_rows} answers read from {work.read_from} ({work.seconds:.1f}s), nothing generated"
    else:
        done = (f"{work.rows} generated in {batches_text(work.batches)} on {work.device} "
                f"({work.tokens_per_second:,.0f} tokens/s, {work.seconds:.1f}s), {work.cached_rows} from cache")
    note = "".join(f"; {part}" for part in (work.reproducibility, work.note) if part)
    return (
        f"[novelty {work.worker}] {name}: {len(result.prompts)} prompts x {work.samples} samples; {done}; "
        f"originality {scores.seconds_originality:.1f}s, judge {scores.seconds_judge:.1f}s{note}{warning}"
    )


def rounds_work(session: Any, suite: Any, count: int, *, baseline: int = 0) -> tuple[RoundWork, ...]:
    """What each of the ``count - 1`` sets of samples of ``suite`` after the run itself (repeats,
    adaptive rounds) generated, from the session's memo; the first ``baseline - 1`` of them count
    the baseline checkpoint's set of the same round too (the rounds a live baseline draws with the
    candidate's, ``--novelty-adaptive``)."""
    out = []
    for index in range(1, count):
        works = [session.result(suite.repeated(index)).generated.work]
        if index < baseline:
            works.append(session.model_result(session.baseline_model, suite.repeated(index)).generated.work)
        out.append(RoundWork(index, sum(w.rows for w in works), sum(w.cached_rows for w in works)))
    return tuple(out)
