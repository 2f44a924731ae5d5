"""Shards of one gate: which shard this run is, and which units of work are its own.

A gate's work is a set of *units*: one prompt of one suite run (a sweep value, a repeat), done by
every checkpoint the run generates with (the candidate, a baseline, a series' earlier
checkpoints). A denial-prompting suite is one unit of all its prompts and rounds: each round's
inputs are built from the answers of the round before, so its rounds cannot be split.
``--novelty-shard K/N`` gives a run shard K's units only (:class:`ShardPlan`); the merge run
(:mod:`pytest_novelty.pipeline.shard_work`) decides every case over the shards' caches.

Shards are numbered from 1 to N, as ``pytest-shard``'s users and ``sbatch --array=1-N`` count them;
``--novelty-shard auto`` reads the number from the scheduler (:func:`shard_from_environment`).

The split (:func:`split_units`) is a greedy longest-processing-time assignment over a stable order:
units by declared cost, largest first, ties by a SHA-256 of the unit's suite run and prompt id
(never Python's salted ``hash``), each to the shard with the least work so far (the lowest number on
a tie), so every shard on any machine computes the same split. Graham's bound (1969) keeps the
largest shard within 4/3 of the optimum, and a gate's many units of few sizes far closer (within one
size the units are dealt out in turn). A hash modulo N, as pytest-shard does, leaves the shards as
uneven as chance makes them and ignores that one suite's prompts cost ten times another's.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.storage import stable_hash
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.schema import Suite

__all__ = [
    "AUTO", "DEFERRED", "DEFERRED_REASON", "MAX_SHARDS", "Shard", "ShardPlan", "Unit", "gate_units", "parse_shard",
    "shard_from_environment", "split_units",
]

AUTO = "auto"
"""``--novelty-shard auto``: the shard from the scheduler's variables."""
MAX_SHARDS = 4096
"""The most shards a gate may be split into."""
DEFERRED = "deferred"
"""The outcome of every case of a shard run: neither passed nor failed, decided by the merge run."""
DEFERRED_REASON = "decided by the merge run"
"""What a shard run says of each case (under pytest, the reason of its skip)."""
COUNT_VARIABLE = "PYTEST_NOVELTY_SHARD_COUNT"
"""The number of shards, for schedulers that give a job its index but not the count (a Kubernetes
Indexed Job: set it to the Job's ``spec.completions``)."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based), and where the run learnt it (for messages)."""

    index: int
    count: int
    source: str = ""

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str, *, option: str = "--novelty-shard", environ: Mapping[str, str] | None = None) -> Shard:
    """The shard ``K/N`` (or ``auto``: :func:`shard_from_environment`) a run was given with ``option``;
    a :class:`ConfigError` naming ``option`` for anything else (``K`` outside 1..N, over :data:`MAX_SHARDS`
    shards, ``auto`` where no scheduler says which shard this is)."""
    value = text.strip()
    if value.lower() == AUTO:
        found = shard_from_environment(os.environ if environ is None else environ, option=option)
        if found is None:
            raise ConfigError(
                "auto found no scheduler's shard: none of SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX, CI_NODE_INDEX, "
                "CIRCLE_NODE_INDEX, BUILDKITE_PARALLEL_JOB is set; give the shard as K/N (e.g. 2/4)",
                field=option,
            )
        return found
    index, slash, count = value.partition("/")
    if not slash or not index.strip().isdigit() or not count.strip().isdigit():
        raise ConfigError(f"expected K/N (shard K of N, e.g. 2/4) or auto, got {text!r}", field=option)
    return _checked(int(index), int(count), option, f"{option} {value}")


def _checked(index: int, count: int, option: str, source: str) -> Shard:
    if count < 1 or count > MAX_SHARDS:
        raise ConfigError(f"{source}: the number of shards must be 1 to {MAX_SHARDS}, not {count}", field=option)
    if not 1 <= index <= count:
        zero = " (shards are numbered from 1, as in sbatch --array=1-N)" if index == 0 else ""
        raise ConfigError(f"{source}: shard {index} is not one of 1 to {count}{zero}", field=option)
    return Shard(index, count, source)


# The schedulers --novelty-shard auto reads, in this order: (index variable, count variable, index
# base). Slurm is read by _slurm (its array may start anywhere and step).
_SCHEDULERS = (
    ("JOB_COMPLETION_INDEX", COUNT_VARIABLE, 0),  # a Kubernetes Indexed Job
    ("CI_NODE_INDEX", "CI_NODE_TOTAL", 1),  # GitLab CI, `parallel: N`
    ("CIRCLE_NODE_INDEX", "CIRCLE_NODE_TOTAL", 0),  # CircleCI, `parallelism: N`
    ("BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", 0),  # Buildkite, `parallelism: N`
)


def shard_from_environment(environ: Mapping[str, str], *, option: str = "--novelty-shard") -> Shard | None:
    """The shard a scheduler gave this job (:data:`_SCHEDULERS`), or None when none says. A Slurm job
    array is numbered from ``SLURM_ARRAY_TASK_MIN`` in steps of ``SLURM_ARRAY_TASK_STEP`` (1 when
    unset): ``--array=0-3`` and ``--array=1-4`` both make shards 1 to 4, an array with gaps
    (``--array=1,4,9``) is refused. GitHub Actions sets no such variable: pass
    ``--novelty-shard ${{ matrix.shard }}/N``.
    """
    if environ.get("SLURM_ARRAY_TASK_ID"):
        return _slurm(environ, option)
    for index_name, count_name, base in _SCHEDULERS:
        if not environ.get(index_name):
            continue
        index = _number(environ, index_name, option)
        if not environ.get(count_name):
            raise ConfigError(
                f"auto: {index_name} is set but {count_name} is not; set {count_name} to the number of shards "
                "(for a Kubernetes Indexed Job: the Job's spec.completions) or give the shard as K/N",
                field=option,
            )
        count = _number(environ, count_name, option)
        return _checked(index - base + 1, count, option, f"{index_name}={index} of {count_name}={count}")
    return None


def _slurm(environ: Mapping[str, str], option: str) -> Shard:
    task = _number(environ, "SLURM_ARRAY_TASK_ID", option)
    names = ("SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_COUNT")
    absent = [name for name in names if not environ.get(name)]
    if absent:
        raise ConfigError(f"auto: SLURM_ARRAY_TASK_ID is set but {absent[0]} is not (not a job array?); give "
                          "the shard as K/N", field=option)
    low, high, count = (_number(environ, name, option) for name in names)
    step = _number(environ, "SLURM_ARRAY_TASK_STEP", option) if environ.get("SLURM_ARRAY_TASK_STEP") else 1
    source = f"SLURM_ARRAY_TASK_ID={task} of --array={low}-{high}" + (f":{step}" if step != 1 else "")
    if step < 1 or high - low != (count - 1) * step or (task - low) % step or not low <= task <= high:
        raise ConfigError(
            f"auto: the Slurm array ({source}, {count} tasks) is not one evenly spaced range; submit it as "
            "--array=1-N (or 0-N-1) or give the shard as K/N",
            field=option,
        )
    return _checked((task - low) // step + 1, count, option, source)


def _number(environ: Mapping[str, str], name: str, option: str) -> int:
    text = environ[name].strip()
    if not text.isdigit():
        raise ConfigError(f"auto: {name}={text!r} is not a whole number", field=option)
    return int(text)


# -- the split ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """One unit of a gate's work: prompt ``prompt`` of the suite run ``group`` (its run key), or a whole
    denial-prompting suite (``group`` its family, ``prompt`` empty); ``cost`` its declared work."""

    group: str
    prompt: str
    cost: int

    @property
    def digest(self) -> str:
        """The unit's place in the stable order: a SHA-256 of its group and prompt."""
        return stable_hash("shard unit", self.group, self.prompt)


@dataclass(frozen=True)
class ShardPlan:
    """Which shard does each unit (see the module doc)."""

    count: int
    owners: Mapping[tuple[str, str], int]
    """(group, prompt) -> the shard (1-based) that does it."""
    loads: tuple[int, ...]
    """Each shard's declared work, shard 1 first."""
    units: tuple[int, ...] = field(default=())
    """How many units each shard does, shard 1 first."""

    def owner(self, group: str, prompt: str = "") -> int:
        """The shard that does the unit (``KeyError`` for a unit the plan does not know)."""
        return self.owners[(group, prompt)]

    def prompts(self, group: str, shard: int) -> frozenset[str]:
        """The ids of the prompts of suite run ``group`` that shard ``shard`` does."""
        return frozenset(p for (g, p), k in self.owners.items() if g == group and k == shard)

    def total(self, group: str) -> int:
        """How many units the suite run ``group`` has, over every shard."""
        return sum(1 for g, _ in self.owners if g == group)

    @property
    def imbalance(self) -> float:
        """The largest shard's work over the mean shard's (1.0: perfectly even)."""
        mean = sum(self.loads) / len(self.loads)
        return max(self.loads) / mean if mean else 1.0


def split_units(units: Iterable[Unit], count: int) -> ShardPlan:
    """Split ``units`` over ``count`` shards by the greedy longest-processing-time rule over their
    stable order (see the module doc). A unit listed twice is one unit."""
    if count < 1:
        raise ValueError(f"a gate splits into at least one shard, not {count}")
    distinct = {(u.group, u.prompt): u for u in units}
    order = sorted(distinct.values(), key=lambda u: (-u.cost, u.digest))
    heap = [(0, shard) for shard in range(1, count + 1)]
    loads = [0] * count
    done = [0] * count
    owners: dict[tuple[str, str], int] = {}
    for unit in order:
        load, shard = heapq.heappop(heap)
        owners[(unit.group, unit.prompt)] = shard
        loads[shard - 1] = load + unit.cost
        done[shard - 1] += 1
        heapq.heappush(heap, (load + unit.cost, shard))
    return ShardPlan(count, owners, tuple(loads), tuple(done))


def gate_units(
    runs: Sequence[Suite],
    *,
    prompts_of: Callable[[Suite], Sequence[Prompt]],
    repeats: int = 1,
    checkpoints: int = 1,
) -> list[Unit]:
    """The units of a gate over ``runs`` (each suite run once, whatever its cases), each costing
    ``generation.samples × generation.max_new_tokens`` per checkpoint that generates it (``checkpoints``:
    candidate, baseline, a series' earlier ones; ``--novelty-repeat``'s repeats are the candidate's
    alone, units of their own); a denial suite is one unit of its prompts × rounds."""
    units: list[Unit] = []
    families: set[str] = set()
    for run in {r.run_key: r for r in runs}.values():
        declared = run.generation.samples * run.generation.max_new_tokens
        if run.denial_round is not None:  # every round and repeat of the suite, by its every checkpoint
            if run.family not in families:
                families.add(run.family)
                rounds = max(1, run.prompting.rounds)
                cost = declared * rounds * len(prompts_of(run)) * (checkpoints + repeats - 1)
                units.append(Unit(run.family, "", cost))
            continue
        ids = [p.id for p in prompts_of(run)]
        units.extend(Unit(run.run_key, i, declared * checkpoints) for i in ids)
        for index in range(1, repeats):
            units.extend(Unit(run.repeated(index).run_key, i, declared) for i in ids)
    return units
