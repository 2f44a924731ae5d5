"""One gate spread over shards: how evenly the work splits, what merging costs, and whether the merged
verdict is the single run's.

    python benchmarks/shards.py [--shards 2 4] [--suite story ...]

Runs the demo's gate (its bundled suites) once in one process, then as N shards for each N of
``--shards`` (default 2 and 4), each shard in a cache of its own and one after another, as N
machines that share no disk would run them side by side. Merges each N's caches into a fresh one
(``pytest-novelty cache merge``), runs the merge run there, and prints for each N:

- each shard's share of the work as max / mean over the shards (the goal is at most 1.15 at N = 4),
  by the work the suites declare (samples x max_new_tokens per prompt: what the split balances), by
  the tokens each shard generated, and by its wall time (which includes each process's start and
  model load, a fixed cost that weighs more the smaller the shards);
- the merge's time, the merge run's time, and that the merge run generated nothing;
- whether the merge run's table and report.json rows equal the single run's byte for byte, and if
  not, how many of the answers differ (the same prompt and seed sampled in another batch can round
  its logits differently and so draw another token) and whether every case's verdict is the same.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_novelty.infra.storage import default_cache_dir
from pytest_novelty.pipeline import demo

CLI = [sys.executable, "-m", "pytest_novelty.cli"]
PART = re.compile(r"\[novelty\] shard (\d+)/(\d+): (\S+): .*?, (\d+) samples \(([\d,]+) tokens\) generated")


def cli(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    """``pytest-novelty ARGS`` in its own process: its wall time and result (which must succeed)."""
    start = time.perf_counter()
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"pytest-novelty {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start, done


def fresh_cache(folder: Path, built: Path) -> Path:
    """A cache holding only a copy of the built demo (as a new machine would build it)."""
    folder.mkdir(parents=True)
    shutil.copytree(built, folder / built.name)
    return folder


def table(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if not line.startswith(("novelty work done", "novelty report"))]


def rows(report: Path) -> list[dict[str, Any]]:
    return json.loads((report / "report.json").read_text())["rows"]


def answers(cache: Path) -> dict[str, str]:
    folder = cache / "generations"
    return {str(p.relative_to(folder)): json.loads(p.read_text())["value"] for p in folder.rglob("*.json")}


def declared_loads(count: int, suites: list[str]) -> tuple[int, ...]:
    """Each shard's declared work, as the shards split it."""
    from pytest_novelty.infra.resources import bundled_path
    from pytest_novelty.pipeline.answers import load_prompts
    from pytest_novelty.pipeline.shards import gate_units, split_units
    from pytest_novelty.suites.suite_file import load_suites

    runs = [run for suite in load_suites(bundled_path("suites")) if not suites or suite.name in suites
            for run in suite.runs()]
    return split_units(gate_units(runs, prompts_of=load_prompts), count).loads


def ratio(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return max(values) / mean if mean else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[2, 4], help="the numbers of shards (default 2 4)")
    parser.add_argument("--suite", action="append", default=[], help="only these suites (default: all the demo's)")
    args = parser.parse_args()
    built = demo.ensure_demo(default_cache_dir())
    select = [f"--suite={name}" for name in args.suite]
    with tempfile.TemporaryDirectory(prefix="novelty-shards-") as tmp:
        root = Path(tmp)
        single_cache = fresh_cache(root / "single", built)
        single_s, single = cli("run", "--model", "demo", "--cache", str(single_cache), "--report",
                               str(root / "single-report"), *select)
        reference = answers(single_cache)
        lines = []
        for count in args.shards:
            seconds, tokens = [], [0] * count
            for index in range(1, count + 1):
                cache = fresh_cache(root / f"n{count}" / f"shard{index}", built)
                took, done = cli("run", "--model", "demo", "--cache", str(cache), "--shard", f"{index}/{count}",
                                 *select)
                seconds.append(took)
                for match in PART.finditer(done.stderr):
                    tokens[index - 1] += int(match[5].replace(",", ""))
            merged = fresh_cache(root / f"n{count}" / "merged", built)
            shards = [str(root / f"n{count}" / f"shard{index}") for index in range(1, count + 1)]
            merge_s, _ = cli("cache", "merge", *shards, "--into", str(merged))
            report = root / f"n{count}" / "report"
            decide_s, decided = cli("run", "--model", "demo", "--cache", str(merged), "--report", str(report), *select)
            generated = re.search(r"novelty work done: (\d+) samples generated", decided.stdout)
            same = table(decided.stdout) == table(single.stdout) and rows(report) == rows(root / "single-report")
            differ = sum(1 for key, text in answers(merged).items() if reference.get(key, text) != text)
            verdicts = [(r["suite"], r["metric"], r["passed"]) for r in rows(report)] == [
                (r["suite"], r["metric"], r["passed"]) for r in rows(root / "single-report")]
            equal = "yes, byte for byte" if same else (
                f"no: {differ} of {len(reference)} answers differ; verdicts {'the same' if verdicts else 'DIFFER'}")
            lines.append(f"  {count:>6}  {ratio(list(map(float, declared_loads(count, args.suite)))):>8.3f}"
                         f"  {ratio(list(map(float, tokens))):>8.3f}  {ratio(seconds):>8.3f}  {max(seconds):>8.1f}"
                         f"  {merge_s:>7.2f}  {decide_s:>9.1f}  {generated[1] if generated else '?':>9}  {equal}")
    print(f"demo gate{' (' + ', '.join(args.suite) + ')' if args.suite else ''}: one process {single_s:.1f} s; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print("  max / mean of the shards' work: declared, tokens generated, wall time; the slowest shard's seconds;")
    print("  the merge's and the merge run's seconds, the samples the merge run generated, and its verdict")
    print(f"  {'shards':>6}  {'declared':>8}  {'tokens':>8}  {'seconds':>8}  {'slowest':>8}  {'merge':>7}  "
          f"{'merge run':>9}  {'generated':>9}  verdict = the single run's")
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
