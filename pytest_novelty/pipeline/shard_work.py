"""A shard's part of a gate, and the merge run's check that every part is in its cache.

A shard run (``--novelty-shard K/N``) generates and scores its own units of every suite run, for
every checkpoint it generates with (:func:`do_part`), and decides nothing: the metrics need every
prompt. Answers and scores are content-keyed cache entries, so the union of the shards' caches
(``pytest-novelty cache merge``) holds what one run would have written, and the merge run (without
``--novelty-shard``) generates nothing and decides every case as a single run does.
:func:`check_merged` makes :mod:`~pytest_novelty.pipeline.shard_records`' check for a whole run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_novelty.infra.errors import HarnessError
from pytest_novelty.pipeline.shard_records import NAMESPACE, Lack, ShardRecords, run_identity, spelled_fill
from pytest_novelty.pipeline.shards import Shard, ShardPlan, gate_units, split_units
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.schema import Suite

if TYPE_CHECKING:
    from pytest_novelty.pipeline.results import GenerationWork, SuiteResult, SuiteScores
    from pytest_novelty.pipeline.runner import Runner
    from pytest_novelty.pipeline.session import ResultsSession

__all__ = ["PartWork", "check_merged", "do_part", "plan_gate"]


def check_merged(runner: Runner, suites: Iterable[Suite]) -> None:
    """Before anything is generated, over a cache with a sharded gate's records: every answer of
    ``runner``'s checkpoint on ``suites`` is there, else one :class:`HarnessError` for the whole run
    (as :func:`~pytest_novelty.pipeline.shard_records.merge_check` says it for one generation).
    Nothing to do in a shard run or with ``--novelty-fill-missing-shards``."""
    from pytest_novelty.generation import NAMESPACE as ANSWERS
    from pytest_novelty.generation import identity_description, prompt_key, uncached_prompts
    from pytest_novelty.pipeline.answers import run_settings

    config = runner.config
    if config.shard or config.fill_missing_shards or not (config.cache_dir / NAMESPACE).is_dir():
        return
    records = ShardRecords(config.cache_dir)
    total: Lack | None = None
    for suite in suites:
        if suite.denial_round not in (None, 1):
            continue  # a denial suite's later rounds follow from its first: its record is the first round's
        prompts, inputs = runner.prompts(suite)
        gen = runner.generator()
        settings = run_settings(config, suite)
        keys = [prompt_key(gen.identity_id, gen.render(x), settings) for x in inputs]
        missing = uncached_prompts(keys, settings.samples, config.cache_dir / ANSWERS)
        lack = Lack.of(records, keys, [prompts[i].id for i in missing]) if missing else None
        if lack is None:
            continue
        if total is None:
            total = Lack(lack.count, set(), set())
        total.add(lack, suite.name)
    if total is not None:
        model = identity_description(runner.generator()) or config.model
        count = f"{total.prompts} prompt{'' if total.prompts == 1 else 's'}"
        what = f"{count} of {model} (in {', '.join(total.suites or [])})"
        raise HarnessError(total.message(config.cache_dir, what, spelled_fill(config.front)))


# -- a shard's part --------------------------------------------------------------------------------


def plan_gate(
    runs: Sequence[Suite], shard: Shard, *, prompts_of: Callable[[Suite], Sequence[Prompt]], repeats: int = 1,
    checkpoints: int = 1,
) -> ShardPlan:
    """The split of the gate over ``runs`` into ``shard.count`` shards (see :func:`gate_units`)."""
    units = gate_units(runs, prompts_of=prompts_of, repeats=repeats, checkpoints=checkpoints)
    return split_units(units, shard.count)


@dataclass(frozen=True)
class PartWork:
    """What a shard did of one suite run: its prompts of the run's, and the work they took."""

    suite: str
    shard: Shard
    prompts: int
    """The shard's prompts of the run (a denial suite: every prompt when it is the shard's, else 0)."""
    total: int
    """The run's prompts, over every shard."""
    rows: int = 0
    """Samples generated, for every checkpoint and repeat."""
    tokens: int = 0
    """Tokens those samples took."""
    cached_rows: int = 0
    lookups: int = 0
    """Texts sent to the originality backend."""

    def line(self) -> str:
        """The work line of the part, for the run's log."""
        return (f"[novelty] shard {self.shard}: {self.suite}: {self.prompts} of {self.total} prompts, "
                f"{self.rows} samples ({self.tokens:,} tokens) generated ({self.cached_rows} from cache), "
                f"{self.lookups} originality lookups")


def do_part(
    session: ResultsSession, run: Suite, plan: ShardPlan, shard: Shard, *, repeats: int = 1,
    models: Sequence[str] | None = None,
) -> PartWork:
    """Generate and score ``shard``'s units of ``run`` for ``models`` (default: the candidate with its
    ``repeats``, the baseline, a series' earlier checkpoints) and record each part done. A denial
    suite's owner runs every round, the others record no part; with ``[gate] reference`` (and no
    baseline) the shard's prompts' references are scored too."""
    if models is None:
        models = [session.model, *filter(None, [session.baseline_model]), *(c.path for c in session.series[:-1])]
    family = run.family if run.denial_round is not None else None
    owned = family is not None and plan.owner(family) == shard.index
    mine = plan.prompts(run.first.run_key, shard.index) if family is None else None
    done = _Done()
    for model in models:
        variants = [run.repeated(i) for i in range(repeats)] if model == session.model else [run.first]
        for variant in variants:
            if family is not None:
                ids = None if owned else frozenset[str]()
                if owned:  # every round at once; their work is told with the first round's part
                    rounds = _rounds(session, model, variant)
                    done.generated.extend(r.generated.work for r in rounds if run.denial_round == 1)
            else:
                ids = plan.prompts(variant.run_key, shard.index)
            _part_of(session.runner(model), variant, ids, shard, done)
        session.release(model)
    if run.gate.reference and session.baseline_model is None and mine:
        done.scored.extend(_references(session.candidate, run.first, mine))
    total = len(session.candidate.load_prompts(run))
    prompts = len(mine) if mine is not None else total if owned else 0
    return PartWork(run.name, shard, prompts, total, rows=sum(w.rows for w in done.generated),
                    tokens=sum(w.tokens for w in done.generated),
                    cached_rows=sum(w.cached_rows for w in done.generated),
                    lookups=sum(s.lookups for s in done.scored))


@dataclass
class _Done:
    """The work of a shard's part of one suite run, as it is done: generations and scores."""

    generated: list[GenerationWork] = field(default_factory=list)
    scored: list[SuiteScores] = field(default_factory=list)


def _rounds(session: ResultsSession, model: str, variant: Suite) -> list[SuiteResult]:
    """Every denial round of ``variant`` for ``model`` (the session runs them once, together)."""
    from dataclasses import replace

    return [session.model_result(model, replace(variant, name=f"{variant.family}[round={number}]",
                                                denial_round=number))
            for number in range(1, variant.prompting.rounds + 1)]


def _part_of(runner: Runner, variant: Suite, ids: frozenset[str] | None, shard: Shard, done: _Done) -> None:
    """Generate and score the prompts ``ids`` of ``variant`` with ``runner``'s checkpoint (None: every
    prompt, which the denial rounds did), keep the work in ``done`` and record the part."""
    from pytest_novelty.generation import prompt_key
    from pytest_novelty.pipeline.answers import generate_answers, run_settings

    prompts, inputs = runner.prompts(variant)
    gen = runner.generator()
    chosen = [i for i, p in enumerate(prompts) if ids is None or p.id in ids]
    if chosen and ids is not None:
        answers = generate_answers(runner.config, gen, variant, [prompts[i] for i in chosen],
                                   [inputs[i] for i in chosen], runner.model_path(), merge_check=False)
        done.generated.append(answers.work)
        done.scored.append(runner.scores(answers, limit_unscored=False))  # the unscored share: the merge run's
    settings = run_settings(runner.config, variant)
    keys = [prompt_key(gen.identity_id, gen.render(x), settings) for x in inputs]
    ShardRecords(runner.config.cache_dir).note(run_identity(keys), shard, variant.name,
                                               [prompts[i].id for i in chosen])


def _references(runner: Runner, suite: Suite, ids: frozenset[str]) -> list[SuiteScores]:
    """Score the human references of the prompts ``ids`` (``[gate] reference``), as the merge run will
    (nothing when none of them has a reference)."""
    from pytest_novelty.pipeline.results import SuiteAnswers

    prompts = [p for p in runner.load_prompts(suite) if p.id in ids and p.reference]
    answers = SuiteAnswers(suite, "human references", prompts, [[str(p.reference)] for p in prompts])
    return [runner.scores(answers, limit_unscored=False)] if prompts else []
