"""Several answer sources on one suite, through one results session: what a tail is built from
(``pytest-novelty tail build``) and what its agreement with people is checked on (``tail agreement``).

Each source is anything ``--model`` takes, one runner of one
:class:`~pytest_novelty.pipeline.session.ResultsSession`, so its answers and scores share a gate's
cache and a source already gated costs nothing here. Every source is checked before anything is
generated (:func:`check_sources`, then each runner's preflight), and all must score against one
index (:func:`shared_index`): novelty against two corpora does not rank prompts on one scale.
:func:`build_tail` turns the pool's results into the tail file's entries and provenance
(:mod:`pytest_novelty.suites.tail_file`), ranked by :func:`pytest_novelty.metrics.tail_pool.rank_pool`.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.redact import redact
from pytest_novelty.infra.storage import json_float
from pytest_novelty.metrics.tail import NGRAM_ORDER
from pytest_novelty.metrics.tail_pool import PoolRanking, disagreements, member_agreement, rank_pool, tail_overlap
from pytest_novelty.pipeline.config import RunConfig
from pytest_novelty.pipeline.results import SuiteResult
from pytest_novelty.pipeline.session import ResultsSession
from pytest_novelty.suites.schema import Suite

__all__ = ["BUILT_BY", "SCORE_RULE", "TailBuild", "build_tail", "check_sources", "shared_index"]

BUILT_BY = "pytest-novelty tail build"

SCORE_RULE = (
    "s_j = (input novelty_j + pool novelty_j) / 2; novelty = share of a text's 4-grams the index never has, "
    "an output too short for a 4-gram counting 0; pool novelty = mean over members of each member's mean over "
    "its samples; prompts with no 4-gram of their own are unranked; ties broken by prompt id"
)
"""How the provenance says the scores were made (the rules of :mod:`pytest_novelty.metrics.tail_pool`)."""


def check_sources(options: Any, sources: Sequence[str], option: str, cache_dir: Path, suite: Suite) -> None:
    """Fail fast, before anything loads, on a source that is not there: one line naming ``option``
    as the user typed it (``--pool``, ``--model``) and the source; the demo is prepared here. A
    served model needs an index given by ``--originality`` (it has no folder to find one in)."""
    from pytest_novelty.pipeline.preflight import check_source

    seen: set[str] = set()
    for source in sources:
        if source in seen:
            raise ConfigError(f"{source!r} is given twice; every member of a pool counts once", field=option)
        seen.add(source)
        check_source(options, source, option, cache_dir, auto=suite.scoring.originality == "auto")


def open_session(make_config: Callable[[str], RunConfig], sources: Sequence[str], suite: Suite) -> ResultsSession:
    """One results session over ``sources``, every runner checked by the preflight before any work."""
    from pytest_novelty.pipeline.preflight import preflight

    session = ResultsSession(make_config, model=sources[0])
    for source in sources:
        preflight(session.runner(source), [suite])
    return session


def shared_index(session: ResultsSession, suite: Suite, sources: Sequence[str]) -> tuple[str, str]:
    """The index every source scores against, as set (``auto``, or the spec) and its content identity;
    ``ConfigError`` naming two sources whose indexes differ (their novelty is on two scales)."""
    found: dict[str, str] = {}
    for source in sources:
        runner = session.runner(source)
        found[source] = runner.models.index_identity(runner.originality_spec(suite))
    identities = set(found.values())
    if len(identities) > 1:
        first, other = sources[0], next(s for s in sources if found[s] != found[sources[0]])
        raise ConfigError(
            f"{first!r} and {other!r} score against different indexes (their own training corpora), so their "
            "novelty is on two scales; pass --originality infini-gram:DIR to score every source on one index",
            field="--originality",
        )
    setting = session.runner(sources[0]).config.originality or suite.scoring.originality
    return setting, identities.pop()


@dataclass(frozen=True)
class TailBuild:
    """A built tail: the ranking, the file's entries (``q_at_tail@α`` and ``novelty_at_peak@α``, ids in
    ranking order), its provenance and what the caller should warn about."""

    ranking: PoolRanking
    entries: dict[str, list[str]]
    provenance: dict[str, Any]
    warnings: list[str]


def _check_aligned(results: Sequence[SuiteResult], sources: Sequence[str]) -> np.ndarray:
    """The prompts' own novelty, which every member must have measured alike (same prompts, one index)."""
    first = results[0]
    ids = [p.id for p in first.prompts]
    own = np.asarray(first.scores.prompt_novelty, dtype=float)
    for source, result in zip(sources, results, strict=True):
        if [p.id for p in result.prompts] != ids:
            raise ConfigError(f"{source!r} answered other prompts than {sources[0]!r}", field="--pool")
        theirs = np.asarray(result.scores.prompt_novelty, dtype=float)
        if not np.allclose(theirs, own, equal_nan=True):
            raise ConfigError(f"{source!r} measured the prompts' own novelty unlike {sources[0]!r}", field="--pool")
    return own


def build_tail(
    suite: Suite,
    sources: Sequence[str],
    results: Sequence[SuiteResult],
    alphas: Sequence[float],
    *,
    index: tuple[str, str],
    date: _dt.datetime | None = None,
) -> TailBuild:
    """Rank the suite's prompts by the pool ``results`` (one per source, in order) and cut a tail and
    a peak at every α: the entries of the suite's tail file, with what they were made from."""
    own = _check_aligned(results, sources)
    ids = [p.id for p in results[0].prompts]
    ranking = rank_pool(ids, own, [np.asarray(r.originality[NGRAM_ORDER], dtype=float) for r in results])
    if not ranking.ranked:
        raise ConfigError(f"no prompt of suite {suite.name} has a {NGRAM_ORDER}-gram of its own, so none can be "
                          "ranked; use longer prompts", path=suite.path, field="prompts.source")  # fmt: skip
    entries: dict[str, list[str]] = {}
    ties: dict[str, int] = {}
    overlap: dict[str, list[float | None]] = {}
    warnings: list[str] = []
    for alpha in sorted(set(alphas)):
        tail, peak = f"q_at_tail@{alpha:g}", f"novelty_at_peak@{alpha:g}"
        entries[tail], entries[peak] = list(ranking.tail(alpha)), list(ranking.peak(alpha))
        ties[tail], ties[peak] = ranking.ties_at_cut(alpha), ranking.ties_at_cut(alpha, end="peak")
        overlap[tail] = [json_float(v) for v in tail_overlap(ranking, alpha)]
        warnings += [w for w in disagreements(ranking, alpha, [redact(s) for s in sources]) if w not in warnings]
        warnings += [f"{m}: {count} prompts share the score at the cut; the cut among them follows prompt ids"
                     for m, count in ((tail, ties[tail]), (peak, ties[peak])) if count]  # fmt: skip
    if ranking.unranked:
        warnings.append(f"{len(ranking.unranked)} prompts have no {NGRAM_ORDER}-gram of their own and are left "
                        f"unranked: {', '.join(ranking.unranked[:5])}{' ...' if len(ranking.unranked) > 5 else ''}")
    if ranking.members == 1:
        warnings.append("a pool of one model: the ranking is that model's own (the paper pools several)")
    provenance = _provenance(suite, sources, results, ranking, index, date, ties, overlap, warnings)
    return TailBuild(ranking, entries, provenance, warnings)


def _provenance(
    suite: Suite, sources: Sequence[str], results: Sequence[SuiteResult], ranking: PoolRanking,
    index: tuple[str, str], date: _dt.datetime | None, ties: dict[str, int], overlap: dict[str, list[float | None]],
    warnings: list[str],
) -> dict[str, Any]:  # fmt: skip
    """What the tail was made from, for the file (every number rounded as stored JSON holds it)."""
    when = (date or _dt.datetime.now(_dt.UTC)).replace(microsecond=0)
    gen = suite.generation
    scores = {prompt_id: {"score": json_float(ranking.scores[j]), "input": json_float(ranking.input_novelty[j]),
                          "members": [json_float(v) for v in ranking.member_novelty[:, j]]}
              for j, prompt_id in enumerate(ranking.prompt_ids)}  # fmt: skip
    return {
        "built_by": BUILT_BY, "date": when.isoformat(), "suite": suite.name, "suite_file": suite.path.name,
        "prompts": {"source": suite.prompts.source, "count": len(ranking.prompt_ids), "ranked": len(ranking.ranked)},
        "generation": {"samples": gen.samples, "temperature": gen.temperature, "max_new_tokens": gen.max_new_tokens,
                       "seed": gen.seed},
        "n": NGRAM_ORDER,
        "index": {"setting": redact(index[0]), "identity": index[1]},
        "pool": [
            {"source": redact(source), "identity": redact(r.generated.identity),
             "identity_id": redact(r.generated.identity_id), "answers": r.generated.work.samples or gen.samples,
             "mean_output_novelty": json_float(float(np.mean(ranking.member_novelty[m])))}
            for m, (source, r) in enumerate(zip(sources, results, strict=True))
        ],
        "score": SCORE_RULE, "scores": scores, "unranked": list(ranking.unranked), "ties_at_cut": ties,
        "agreement": {"kendall_tau_b": [[i, j, json_float(t)] for i, j, t in member_agreement(ranking)],
                      "tail_overlap": overlap},
        "warnings": warnings,
    }  # fmt: skip
