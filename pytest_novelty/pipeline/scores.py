"""Scoring: the originality of every answer against the suite's index and its quality from the
judge, as :class:`~pytest_novelty.pipeline.results.SuiteScores`."""

from __future__ import annotations

import functools
import math
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_novelty.infra.errors import HarnessError
from pytest_novelty.infra.progress import notice
from pytest_novelty.infra.storage import stable_hash
from pytest_novelty.pipeline.config import RunConfig
from pytest_novelty.pipeline.models import SessionModels
from pytest_novelty.pipeline.results import SuiteScores
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.schema import Suite

if TYPE_CHECKING:
    from pytest_novelty.scoring.judges import JudgeResult
    from pytest_novelty.scoring.originality import OriginalityResult

LOOKUP_CHUNK = 512  # texts per originality request to a backend
SCORES_NAMESPACE = "originality-scores"
SCORES_VERSION = 2  # 1 was one entry per chunk of texts; 2 is one entry per text
JUDGE_CHUNK = 256  # answers per call to a judge (a remote judge runs each chunk's requests concurrently)
TOP_REASONS = 3  # reasons named when too many answers are unscored
CREATIVITY_SHOWN = 3  # answers whose copied passages the report shows beside the Creativity Index


def score_answers(
    models: SessionModels, suite: Suite, prompts: list[Prompt], answers: list[list[str]], *, spec: str, units: str,
    limit_unscored: bool = True,
) -> SuiteScores:
    """Originality (by n, and the prompts' own at n = 4), the uniqueness of the suite's Creativity
    Index range when it gates on one of its metrics, and judge quality of ``answers``.

    ``limit_unscored=False`` leaves ``scoring.max_unscored`` to the run that has every answer: a
    shard scores a part of a suite, and a share of its part says nothing about the suite's."""
    start = time.perf_counter()
    flat = [a for samples in answers for a in samples]
    ns = sorted({*suite.scoring.ngrams, 4})
    lengths = suite.scored_lengths
    rows, looked_up = lookup(models, spec, flat, ns, f"{suite.name}: originality", lengths=lengths)
    shape = (len(answers), len(answers[0]) if answers else 0)
    originality = {n: originality_column(rows, n).reshape(shape) for n in ns}
    uniqueness, passages = _creativity(rows, lengths, flat, prompts, shape)
    texts = [p.text for p in prompts]
    prompt_rows, prompts_looked_up = lookup(models, spec, texts, [4], f"{suite.name}: prompt novelty")
    ranked = sorted(range(len(rows)), key=lambda i: -rows[i]["longest_span"])[:3]
    t_orig = time.perf_counter() - start
    quality, judge, requests, reasons, samples = judge_answers(models, suite, prompts, answers,
                                                               limit_unscored=limit_unscored)
    return SuiteScores(
        originality=originality,
        quality=quality,
        prompt_novelty=originality_column(prompt_rows, 4),
        judge=judge,
        index=spec,
        units=units,
        longest_copied=[_copied(i, flat, prompts, shape[1], **rows[i]) for i in ranked],
        uniqueness=uniqueness,
        creativity_copied=passages,
        unscored_reasons=reasons,
        judge_samples=samples,
        lookups=looked_up + prompts_looked_up,
        judge_requests=requests,
        seconds_originality=t_orig,
        seconds_judge=time.perf_counter() - start - t_orig,
    )


def _copied(i: int, flat: list[str], prompts: list[Prompt], samples: int, **found: Any) -> dict[str, Any]:
    """What the ``i``-th answer copied (``found``), with the answer, its prompt's id and its sample index."""
    return {"generation": flat[i], "prompt": prompts[i // samples].id, "sample": int(i % samples), **found}


def _creativity(
    rows: list[dict[str, Any]], lengths: tuple[int, ...], flat: list[str], prompts: list[Prompt],
    shape: tuple[int, int],
) -> tuple[dict[int, np.ndarray], list[dict[str, Any]]]:
    """``uniqueness@L`` of every answer by L (prompts × samples; NaN: shorter than L), and the
    answers with the lowest Creativity Index that copied anything, with their copied passages
    (:data:`CREATIVITY_SHOWN` of them, lowest first); nothing without a range."""
    if not lengths:
        return {}, []
    from pytest_novelty.metrics.creativity import creativity_index, uniqueness_table

    table = uniqueness_table([row["match_lengths"] for row in rows], lengths)
    index = creativity_index(table)
    shown = [i for i in np.argsort(index, kind="stable") if rows[i]["copied"]][:CREATIVITY_SHOWN]
    passages = [_copied(i, flat, prompts, shape[1], creativity_index=float(index[i]), copied=rows[i]["copied"])
                for i in shown]  # fmt: skip
    return {length: table[:, k].reshape(shape) for k, length in enumerate(lengths)}, passages


def originality_column(rows: list[dict[str, Any]], n: int) -> np.ndarray:
    """Originality at order ``n`` of cached rows (NaN: too short for an n-gram)."""
    return np.array([math.nan if r["originality"][str(n)] is None else r["originality"][str(n)] for r in rows])


def lookup(
    models: SessionModels, spec: str, texts: list[str], ns: list[int], what: str, *, lengths: tuple[int, ...] = ()
) -> tuple[list[Any], int]:
    """Originality of ``texts`` (with the match lengths and copied passages of a Creativity Index
    range ``lengths``), from the score cache or the backend, and how many were looked up.

    Every text's answer is cached on its own (namespace ``originality-scores``), under a key of the
    index's identity, the orders (and the range, when there is one) and the text alone, so it does
    not depend on which texts were scored with it: a shard of a gate
    (:mod:`pytest_novelty.pipeline.shards`) scores its own units and a merge run over the shards'
    caches finds every answer, as a single run would. Texts not found are sent to the backend in
    chunks of ``LOOKUP_CHUNK`` (each distinct text once), and each answer is stored as soon as its
    chunk is done, so an interrupted run keeps the chunks it finished. A cached answer whose layout
    does not fit (:func:`_score_fits`) is dropped and scored again, like any damaged entry.
    """
    from pytest_novelty.infra.cache import Cache
    from pytest_novelty.scoring.originality import score_texts
    from pytest_novelty.scoring.originality.backend import AnnouncesQueries

    config: RunConfig = models.config
    identity = models.index_identity(spec)
    fits = functools.partial(_score_fits, ns=ns, creativity=bool(lengths))
    scores = Cache(config.cache_dir).namespace(SCORES_NAMESPACE, version=SCORES_VERSION, validate=fits)
    asked: tuple[Any, ...] = (ns, [min(lengths), max(lengths)]) if lengths else (ns,)
    keys = [stable_hash(identity, *asked, text) for text in texts]
    uses = Counter(keys)  # a text that occurs twice is looked up once and counted twice
    found = {key: scores.get(key) for key in uses}
    pending = list({key: text for key, text in zip(keys, texts, strict=True) if found[key] is None}.items())
    backend = models.backend(spec) if pending else None
    if isinstance(backend, AnnouncesQueries):  # a web API: how many requests, and how long at its rate
        backend.announce([text for _, text in pending], ns)
    with config.progress.bar(len(texts), what, unit="text") as bar:
        bar.update(len(texts) - sum(uses[key] for key, _ in pending))
        for start in range(0, len(pending), LOOKUP_CHUNK):
            chunk = pending[start : start + LOOKUP_CHUNK]
            fresh = score_texts(models.backend(spec), [text for _, text in chunk], ns, lengths=lengths)
            for (key, _), result in zip(chunk, fresh, strict=True):
                found[key] = scores.put(key, _score_row(result, ns, creativity=bool(lengths)))
            bar.update(sum(uses[key] for key, _ in chunk))
    return [found[key] for key in keys], len(pending)


def judge_answers(
    models: SessionModels, suite: Suite, prompts: list[Prompt], answers: list[list[str]], *,
    limit_unscored: bool = True,
) -> tuple[np.ndarray, str, int, list[list[Any]], list[list[float]]]:
    """Quality per answer (NaN where the judge gave no score), the judge's description, the
    requests it sent, the reasons for unscored answers, most frequent first, and every answer's
    sample scores (on the judge's own scale: how consistent it is with itself).

    More unscored answers than ``scoring.max_unscored`` allows is a harness error naming the
    most frequent reasons: the judge, not the model, failed (unless ``limit_unscored`` is off: see
    :func:`score_answers`).
    """
    from pytest_novelty.infra.abilities import CountsRequests, description_of
    from pytest_novelty.scoring.judges import JudgeItem

    judge = models.judge(suite)
    items = [
        JudgeItem(task=suite.task, prompt=p.text, response=a, meta=dict(p.meta))
        for p, samples in zip(prompts, answers, strict=True)
        for a in samples
    ]
    sent_before = judge.requests_sent if isinstance(judge, CountsRequests) else 0
    results = []
    with models.config.progress.bar(len(items), f"{suite.name}: judging", unit="answer") as bar:
        for start in range(0, len(items), JUDGE_CHUNK):
            chunk = items[start : start + JUDGE_CHUNK]
            results.extend(judge.score(chunk))
            bar.update(len(chunk))
    sent = (judge.requests_sent if isinstance(judge, CountsRequests) else 0) - sent_before
    flat = np.array([math.nan if r.quality is None else r.quality for r in results], dtype=float)
    reasons = unscored_reasons(results)
    unscored = int(np.isnan(flat).sum())
    named = ", ".join(f"{reason} ({count})" for reason, count in reasons[:TOP_REASONS])
    if limit_unscored and items and unscored / len(items) > suite.scoring.max_unscored:
        raise HarnessError(
            f"{suite.name}: the judge {judge.spec} left {unscored} of {len(items)} answers unscored "
            f"({unscored / len(items):.0%}, above scoring.max_unscored = {suite.scoring.max_unscored:g}): {named}"
        )
    if unscored:
        notice(f"[novelty] {suite.name}: {unscored} of {len(items)} answers unscored: {named}")
    samples = [[float(v) for v in (r.scores or [])] for r in results]
    return flat.reshape(len(answers), -1), description_of(judge, judge.spec), sent, reasons, samples


def unscored_reasons(results: list[JudgeResult]) -> list[list[Any]]:
    """``[reason, answers]`` pairs for the judge results without a score, most frequent first.

    An answer counts once under each distinct reason its samples failed with; a "no score in
    reply (...)" reason is counted without its detail, so one cause is one line.
    """
    from pytest_novelty.scoring.judges.base import NO_SCORE, REASON_SEPARATOR

    counts: Counter[str] = Counter()
    for result in results:
        if result.quality is not None:
            continue
        parts = (result.error or "no reason given").split(REASON_SEPARATOR)
        counts.update(list(dict.fromkeys(NO_SCORE if p.startswith(NO_SCORE) else p.strip()[:160] for p in parts)))
    return [[reason, count] for reason, count in counts.most_common()]


def _score_row(result: OriginalityResult, ns: list[int], *, creativity: bool = False) -> dict[str, Any]:
    """One text's originality answer, as cached (with its match lengths and copied passages
    ``[text, units, longest match]`` when a Creativity Index range was asked)."""
    row: dict[str, Any] = {
        "originality": {str(n): result.originality[n] for n in ns},
        "longest_span": result.longest_span,
        "longest_span_doc": result.longest_span_doc,
        "longest_span_text": result.longest_span_text,
    }
    if creativity:
        row["match_lengths"], row["copied"] = list(result.match_lengths), [list(p) for p in result.copied]
    return row


def _score_fits(row: Any, ns: list[int], *, creativity: bool = False) -> bool:
    """Whether a cached originality answer has the layout :func:`_score_row` writes."""
    if not isinstance(row, dict) or not isinstance(row.get("originality"), dict):
        return False
    values = [row["originality"].get(str(n), "missing") for n in ns]
    if any(v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))) for v in values):
        return False
    if creativity and not _creativity_fits(row):
        return False
    return isinstance(row.get("longest_span"), int) and isinstance(row.get("longest_span_text", ""), str)


def _creativity_fits(row: dict[str, Any]) -> bool:
    """Whether a row's match lengths (whole numbers) and copied passages (``[text, units, longest
    match]``) have the layout :func:`_score_row` writes."""
    lengths, copied = row.get("match_lengths"), row.get("copied")
    return (isinstance(lengths, list) and all(type(v) is int for v in lengths) and isinstance(copied, list)
            and all(isinstance(p, list) and [type(v) for v in p] == [str, int, int] for p in copied))  # fmt: skip
