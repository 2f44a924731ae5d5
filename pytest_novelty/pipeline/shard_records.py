"""What a shard leaves in the cache, and what a run over a sharded gate's cache finds missing.

When a (checkpoint, suite run) part is done, the shard records (:class:`ShardRecords`), under the
run's identity (:func:`run_identity`: the checkpoint, inputs and settings, nothing a machine or path
changes), that the run was split into N shards and which prompts shard K did. A merge run lacking
answers of a recorded run stops before generating with one line naming the shards whose part is
missing (:func:`merge_check`), unless ``--novelty-fill-missing-shards`` lets it generate them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_novelty.infra.cache import Cache
from pytest_novelty.infra.errors import HarnessError
from pytest_novelty.infra.progress import notice
from pytest_novelty.infra.storage import stable_hash
from pytest_novelty.pipeline.config import RunConfig
from pytest_novelty.pipeline.shards import MAX_SHARDS, Shard
from pytest_novelty.suites.prompts import Prompt

__all__ = ["NAMESPACE", "Lack", "ShardRecords", "merge_check", "run_identity", "spelled_fill"]

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
    """The check before answers of ``suite``'s ``prompts`` are generated (the ``on_missing`` of
    :func:`pytest_novelty.generation.generate`): over a sharded gate's cache a missing answer is a
    :class:`HarnessError` naming the shards whose part is absent or lost and the fix, or with
    ``--novelty-fill-missing-shards`` a notice before generating; nothing when no shard recorded the run.
    """

    def check(keys: Sequence[str], missing: Sequence[int]) -> None:
        lack = Lack.of(ShardRecords(config.cache_dir), keys, [prompts[i].id for i in missing])
        if lack is None:
            return
        what = f"{len(missing)} of {len(prompts)} prompts" + (f" of {model}" if model else "")
        if config.fill_missing_shards:
            notice(f"[novelty] {suite}: generating the answers of {len(missing)} prompts that "
                   f"{_shards(lack.absent | lack.lost, lack.count)} did not bring "
                   f"({spelled_fill(config.front)})")
            return
        raise HarnessError(f"{suite}: " + lack.message(config.cache_dir, what, spelled_fill(config.front)))

    return check


def spelled_fill(front: str) -> str:
    """How ``front`` spells ``--novelty-fill-missing-shards``."""
    from pytest_novelty.pipeline.options import spelled

    return spelled("fill-missing-shards", front)
