"""The null study: how often noise alone fails the demo's gate, and how often the weaker checkpoint is caught.

The demo's snapshots are accepted at each of ``--accept`` seeds; the unchanged weights are then
gated against every one of them under every other seed of the pool (``--accept`` + ``--others``
seeds in all), as ``pytest-novelty run --model demo --snapshots --seed S`` decides them: the same
case loop, snapshot files and regression test, in one process. Every seed's answers and scores
are computed once (and cached in ``--cache``, so a second run of the study is quick). Printed, each
with its 95 % Wilson interval:

* against snapshots: the share of runs in which any regression case failed (a run-level false
  alarm), and per case;
* point and lenient mode (``--threshold-mode``, no snapshots): the share of seeds whose thresholds
  failed any case (a threshold near its value fails by noise in point mode, by design);
* power: the share of runs in which ``demo-early`` fails a case against the same snapshots, and
  against the demo as a live ``--baseline-model`` under the same seeds.

    python benchmarks/false_alarms.py                       # 5 accepted seeds, 40 others: 220 runs
    python benchmarks/false_alarms.py --accept 2 --others 6 --cache /tmp/novelty-cache

The answers of the pool are made first by ``--jobs`` processes at once (one thread each), into the
cache the study then reads.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pytest_novelty.gate.case import compared_cases
from pytest_novelty.gate.cases import CaseLoop, CaseSettings
from pytest_novelty.gate.record import CaseRecord
from pytest_novelty.gate.snapshot import SnapshotFile, snapshot_file
from pytest_novelty.infra.progress import notices_to
from pytest_novelty.metrics.stats import wilson
from pytest_novelty.pipeline.config import RunConfig
from pytest_novelty.pipeline.preflight import preflight
from pytest_novelty.pipeline.session import ResultsSession
from pytest_novelty.suites.suite_file import load_suites

REPO = Path(__file__).resolve().parents[1]


def _session(model: str, seed: int, cache: Path, baseline: str | None = None) -> ResultsSession:
    session = ResultsSession(lambda m: RunConfig(model=m, cache_dir=cache, seed=seed, device="cpu", front="cli"),
                             model=model, baseline_model=baseline)  # fmt: skip
    return session


def _decide(session: ResultsSession, runs: list[Any], *, mode: str | None = None, snapshots: Path | None = None,
            update: bool = False) -> list[CaseRecord]:
    """Every case of ``runs`` as the command line decides it: against the snapshot files under
    ``snapshots`` (accepting them with ``update``), or a live baseline, or thresholds alone."""
    cases = [run for run in runs for _ in run.thresholds]
    comparisons = compared_cases(cases, baseline=session.baseline_model is not None, snapshots=snapshots is not None,
                                 series=False)  # fmt: skip
    loop = CaseLoop(session, CaseSettings(mode=mode, comparisons=max(1, comparisons)))

    def store(run: Any, threshold: Any) -> SnapshotFile | None:
        if snapshots is None:
            return None
        return SnapshotFile(snapshot_file(run.path, f"{run.name}-{threshold.label}", snapshots), update=update)

    records, errors = loop.run(runs, store)
    if errors:
        raise SystemExit("\n".join(errors))
    return records


def _regressions(records: list[CaseRecord]) -> set[str]:
    """The cases whose comparison failed (a regression), by name."""
    return {f"{r.suite} {r.metric}" for r in records if r.comparison is not None and not r.comparison.passed}


def _line(label: str, hits: int, runs: int) -> str:
    low, high = wilson(hits, runs)
    return f"{label}: {hits} of {runs} = {100 * hits / runs:.1f} % [95 % Wilson {100 * low:.1f}, {100 * high:.1f}]"


def _warm(seeds: list[int], cache: Path, runs: list[Any]) -> None:
    """Every answer and score of both checkpoints under ``seeds``, into ``cache``."""
    for seed in seeds:
        for model in ("demo", "demo-early"):
            session = _session(model, seed, cache)
            for run in runs:
                session.result(run)


def _warm_in_parallel(pool: list[int], cache: Path, jobs: int) -> None:
    """:func:`_warm` for ``pool`` split over ``jobs`` processes of one thread each."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, __file__, "--cache", str(cache), "--warm",
                               *map(str, pool[job::jobs])], env=env, stderr=subprocess.DEVNULL)
             for job in range(jobs)]  # fmt: skip
    if any(proc.wait() for proc in procs):
        raise SystemExit("a process making the answers failed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accept", type=int, default=5, help="seeds whose snapshots are accepted (default 5)")
    parser.add_argument("--others", type=int, default=40, help="further seeds the gate runs under (default 40)")
    parser.add_argument("--first-seed", type=int, default=1001, help="the pool's first seed (default 1001)")
    parser.add_argument("--cache", type=Path, help="cache folder (default: a temporary one)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes making the answers")
    parser.add_argument("--warm", type=int, nargs="+", help=argparse.SUPPRESS)  # one such process's seeds
    args = parser.parse_args()
    with notices_to(lambda line: None):  # the run log of a thousand runs says nothing the figures do not
        return _study(args)


def _study(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    pool = list(range(args.first_seed, args.first_seed + args.accept + args.others))
    accepted = pool[: args.accept]
    runs = [run for suite in load_suites(REPO / "suites") for run in suite.runs()]
    if args.warm:
        _warm(args.warm, args.cache, runs)
        return 0
    with tempfile.TemporaryDirectory(prefix="novelty-null-") as scratch:
        cache = args.cache or Path(scratch) / "cache"
        preflight(_session("demo", pool[0], cache).candidate, runs)  # the demo built once, before the jobs
        if args.jobs > 1:
            _warm_in_parallel(pool, cache, args.jobs)
        demo = {seed: _session("demo", seed, cache) for seed in pool}
        early = {seed: _session("demo-early", seed, cache) for seed in pool}
        snapshots = {seed: Path(scratch) / f"snapshots-{seed}" for seed in accepted}
        for seed in accepted:
            _decide(demo[seed], runs, snapshots=snapshots[seed], update=True)
        print(f"snapshots accepted at seeds {accepted[0]}-{accepted[-1]}; answers of {len(pool)} seeds "
              f"({time.perf_counter() - start:.0f}s so far)", flush=True)  # fmt: skip

        noise, caught, cases = 0, 0, Counter[str]()
        pairs = [(a, g) for a in accepted for g in pool if g != a]
        for a, g in pairs:
            failed = _regressions(_decide(demo[g], runs, snapshots=snapshots[a]))
            noise += bool(failed)
            cases.update(failed)
            caught += any(not r.passed for r in _decide(early[g], runs, snapshots=snapshots[a]))
        print(_line("against snapshots, runs with a false regression", noise, len(pairs)))
        names = sorted({f"{r.name} {t.metric}" for r in runs for t in r.thresholds})
        worst = max(names, key=lambda n: cases[n])
        ranked = ", ".join(f"{n} {cases[n]}" for n in sorted(names, key=lambda n: -cases[n]))
        print(f"  per case (the worst first): {ranked}; worst {_line(worst, cases[worst], len(pairs))}")
        for mode in ("point", "lenient"):
            failed_seeds = sum(any(not r.passed for r in _decide(demo[g], runs, mode=mode)) for g in pool)
            print(_line(f"{mode} mode, seeds whose thresholds failed a case", failed_seeds, len(pool)))
        print(_line("power: demo-early failed a case against the snapshots", caught, len(pairs)))
        live = sum(any(not r.passed for r in _decide(_session("demo-early", g, cache, baseline="demo"), runs))
                   for g in pool)  # fmt: skip
        print(_line("power: demo-early failed a case against --baseline-model demo", live, len(pool)))
    print(f"{time.perf_counter() - start:.0f}s in all (load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
