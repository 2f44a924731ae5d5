"""A shard's part of a gate, the record it leaves in the cache, and the merge run's check.

A shard run (``--novelty-shard K/N``, :mod:`pytest_novelty.pipeline.shards`) generates and scores
its own units of every suite run, for every checkpoint the run generates with, into its cache
(:func:`do_part`), and decides nothing: the metrics need every prompt. The answers and scores
are content-keyed cache entries (a row by its checkpoint, input text, settings and sample; an
originality answer by its index and text), so the union of the shards' caches
(``pytest-novelty cache merge``) holds exactly what one run would have written, and the merge run
(a run without ``--novelty-shard``) finds every answer, generates nothing and decides every case
as a single run does.

When a (checkpoint, suite run) part is done, the shard records it (:class:`ShardRecords`, cache
namespace ``shards``): under the run's identity (a hash of every prompt's row key, so it names the
checkpoint, the inputs and the sampling settings, and nothing a machine or a path changes), that
the run was split into N shards, and which prompts shard K did. A merge run that lacks answers of
a recorded run stops before generating with one line naming the shards whose part is missing
(:func:`merge_check`), unless ``--novelty-fill-missing-shards`` lets it generate them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_novelty.infra.cache import Cache
from pytest_novelty.infra.errors import HarnessError
from pytest_novelty.infra.progress import notice
from pytest_novelty.infra.storage import stable_hash
from pytest_novelty.pipeline.config import RunConfig
from pytest_novelty.pipeline.shards import MAX_SHARDS, Shard, ShardPlan, gate_units, split_units
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.schema import Suite

if TYPE_CHECKING:
    from pytest_novelty.pipeline.results import GenerationWork, SuiteAnswers, SuiteResult, SuiteScores
    from pytest_novelty.pipeline.runner import Runner
    from pytest_novelty.pipeline.session import ResultsSession

__all__ = [
    "NAMESPACE", "Lack", "PartWork", "ShardRecords", "check_merged", "do_part", "merge_check", "plan_gate",
    "run_identity",
]

NAMESPACE = "shards"
"""The cache namespace of the shards' records."""


def run_identity(keys: Iterable[str]) -> str:
    """The identity of one checkpoint's run of a suite: a hash of every prompt's row key
    (:func:`pytest_novelty.generation.prompt_key`), in sorted order."""
    return stable_hash("sharded run", sorted(keys))


def _fits(value: Any) -> bool:
    prompts = value.get("prompts", []) if isinstance(value, dict) else None
    return isinstance(prompts, list) and all(isinstance(p, str) for p in prompts)


class ShardRecords:
    """The shards' records in a cache folder: which runs were split, and what each shard did."""

    def __init__(self, cache_dir: Path) -> None:
        self.store = Cache(cache_dir).namespace(NAMESPACE, validate=_fits)

    def note(self, run: str, shard: Shard, suite: str, prompts: Iterable[str]) -> None:
        """Record that ``shard`` did its part of ``run`` (a suite run of one checkpoint): ``prompts``."""
        self.store.put({"run": run, "of": shard.count}, {"suite": suite})
        self.store.put({"run": run, "of": shard.count, "shard": shard.index},
                       {"suite": suite, "prompts": sorted(set(prompts))})

    def splits(self, run: str) -> dict[int, dict[int, frozenset[str] | None]]:
        """For each number of shards ``run`` was split into: each shard's prompts (None: no record
        of that shard in this cache). Empty when no shard of ``run`` left a record here."""
        found: dict[int, dict[int, frozenset[str] | None]] = {}
        for count in range(1, MAX_SHARDS + 1):
            if self.store.get({"run": run, "of": count}) is None:
                continue
            parts: dict[int, frozenset[str] | None] = {}
            for index in range(1, count + 1):
                value = self.store.get({"run": run, "of": count, "shard": index})
                parts[index] = None if value is None else frozenset(value["prompts"])
            found[count] = parts
        return found


def _shards(numbers: Iterable[int], count: int) -> str:
    """``shard 2 of 3``, ``shards 2 and 4 of 4``, ``shards 1, 2 and 5 of 8``."""
    names = [str(n) for n in sorted(numbers)]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"
    return f"shard{'s' if len(names) > 1 else ''} {listed} of {count}"


@dataclass
class Lack:
    """The answers a run over a sharded gate's cache lacks, and whose they were."""

    count: int
    """The number of shards the gate was split into."""
    absent: set[int]
    """Shards with no record in the cache: their part was never merged (or never finished)."""
    lost: set[int]
    """Shards that recorded their part done, whose answers are missing all the same."""
    prompts: int = 0
    """Prompts without every answer."""
    suites: list[str] | None = None

    @classmethod
    def of(cls, records: ShardRecords, keys: Sequence[str], missing: Sequence[str]) -> Lack | None:
        """What is lacking when the run whose row keys are ``keys`` has no answers for the prompts
        ``missing`` (ids); None when no shard recorded that run (a plain run)."""
        splits = records.splits(run_identity(keys))
        if not splits:
            return None
        # The split most shards of which are here (a cache should hold one; a second is a mix-up).
        count, parts = max(splits.items(), key=lambda item: (sum(v is not None for v in item[1].values()), item[0]))
        owner = {prompt: index for index, part in parts.items() for prompt in part or ()}
        absent = {index for index, part in parts.items() if part is None}
        lost = {owner[p] for p in missing if p in owner}
        return cls(count, absent, lost, len(missing))

    def add(self, other: Lack, suite: str) -> None:
        self.absent |= other.absent
        self.lost |= other.lost
        self.prompts += other.prompts
        self.suites = [*(self.suites or []), suite]

    def message(self, cache_dir: Path, what: str, fill: str) -> str:
        """One line: which shards' answers are missing from ``cache_dir`` (``what`` they are), and the fix."""
        fix = f"or pass {fill} to generate them in this run"
        if self.absent:
            return (f"the cache {cache_dir} holds no part of {_shards(self.absent, self.count)} of this gate, so it "
                    f"has no answers for {what}: merge that shard's cache into it (pytest-novelty cache merge "
                    f"SHARD_CACHE --into {cache_dir}), {fix}")
        one = len(self.lost) == 1
        return (f"{_shards(self.lost, self.count)} recorded {'its' if one else 'their'} part done, but the cache "
                f"{cache_dir} has no answers for {what} (entries a merge left out as damaged, or removed since): "
                f"run {'that shard' if one else 'those shards'} again and merge again, {fix}")


def merge_check(
    config: RunConfig, suite: str, prompts: Sequence[Prompt], model: str = ""
) -> Callable[[Sequence[str], Sequence[int]], None]:
    """The check a run makes before it generates answers of ``suite``'s ``prompts`` (the
    ``on_missing`` of :func:`pytest_novelty.generation.generate`).

    Nothing happens when no shard recorded this run in the cache (a plain run generates). Over a
    sharded gate's cache, a missing answer belongs to a shard: the check raises a
    :class:`HarnessError` naming the shards whose part the cache lacks (or, when every shard
    recorded its part, the shards whose answers were lost since: an entry a merge left out as
    damaged), and how to fix it; with ``--novelty-fill-missing-shards`` it says what it is about to
    generate and lets the run go on. :func:`check_merged` makes the same check for every suite at
    once, before the run starts.
    """

    def check(keys: Sequence[str], missing: Sequence[int]) -> None:
        lack = Lack.of(ShardRecords(config.cache_dir), keys, [prompts[i].id for i in missing])
        if lack is None:
            return
        what = f"{len(missing)} of {len(prompts)} prompts" + (f" of {model}" if model else "")
        if config.fill_missing_shards:
            notice(f"[novelty] {suite}: generating the answers of {len(missing)} prompts that "
                   f"{_shards(lack.absent | lack.lost, lack.count)} did not bring "
                   f"({_spelled('fill-missing-shards', config.front)})")
            return
        raise HarnessError(f"{suite}: " + lack.message(config.cache_dir, what, _spelled("fill-missing-shards",
                                                                                    config.front)))

    return check


def check_merged(runner: Runner, suites: Iterable[Suite]) -> None:
    """Before anything is generated: over a cache that holds a sharded gate's records, every answer of
    ``runner``'s checkpoint on ``suites`` is there, else one :class:`HarnessError` for the whole run
    naming the shards whose units are missing (see :func:`merge_check`, which guards each
    generation as well). Nothing to do in a shard run, with ``--novelty-fill-missing-shards``, or
    over a cache without records."""
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
        raise HarnessError(total.message(config.cache_dir, what, _spelled("fill-missing-shards", config.front)))


def _spelled(name: str, front: str) -> str:
    from pytest_novelty.pipeline.options import spelled

    return spelled(name, front)


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
    """Generate and score ``shard``'s units of ``run`` for ``models`` (default: the candidate, with
    its ``repeats``, the baseline and a series' earlier checkpoints) and record each part done.

    A denial suite is one unit: the shard that owns it runs every round; the other shards only
    record that they have no part of it. With ``[gate] reference`` (and no baseline), the shard's
    prompts' human references are scored too. Nothing is measured and nothing decided.
    """
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
        done.scored.append(_score(runner, variant, answers))
    settings = run_settings(runner.config, variant)
    keys = [prompt_key(gen.identity_id, gen.render(x), settings) for x in inputs]
    ShardRecords(runner.config.cache_dir).note(run_identity(keys), shard, variant.name,
                                               [prompts[i].id for i in chosen])


def _score(runner: Runner, variant: Suite, answers: SuiteAnswers) -> SuiteScores:
    """The scores step on a part of a run's answers (the unscored share is the merge run's to judge)."""
    from pytest_novelty.pipeline.models import originality_units
    from pytest_novelty.pipeline.scores import score_answers

    spec = runner.originality_spec(variant)
    units = originality_units(spec, runner.model_path())
    return score_answers(runner.models, variant, answers.prompts, answers.answers, spec=spec, units=units,
                         limit_unscored=False)


def _references(runner: Runner, suite: Suite, ids: frozenset[str]) -> list[SuiteScores]:
    """Score the human references of the prompts ``ids`` (``[gate] reference``), as the merge run will
    (nothing when none of them has a reference)."""
    from pytest_novelty.pipeline.results import SuiteAnswers

    prompts = [p for p in runner.load_prompts(suite) if p.id in ids and p.reference]
    answers = SuiteAnswers(suite, "human references", prompts, [[str(p.reference)] for p in prompts])
    return [_score(runner, suite, answers)] if prompts else []
