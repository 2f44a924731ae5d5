"""Wall time of the demo suites: cold (empty generation/score caches), warm, and with -n 2.

    python benchmarks/e2e.py [--repeats 3]

The demo assets themselves are built once beforehand (`pytest-novelty demo build`) and shared;
"cold" means a fresh cache for generations and scores, which is what a new checkpoint costs;
"startup" is the same command with --collect-only: Python, pytest and the plugin, no suite run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_novelty.infra.storage import default_cache_dir
from pytest_novelty.pipeline import demo

REPO = Path(__file__).resolve().parents[1]


def run(cache: Path, *extra: str) -> tuple[float, str]:
    return run_pytest("--model", "demo", f"--novelty-cache={cache}", "-p", "no:cacheprovider", *extra)


def run_pytest(*args: str) -> tuple[float, str]:
    """(wall seconds, stdout) of ``python -m pytest ARGS`` in the repository; stops on a failed run."""
    cmd = [sys.executable, "-m", "pytest", *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=dict(os.environ))
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-2000:])
        raise SystemExit(f"pytest exited {proc.returncode}")
    return seconds, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each kind; medians are shown (default 3)")
    args = parser.parse_args()
    shared = demo.ensure_demo(default_cache_dir())
    figures: dict[str, list[float]] = {"startup": [], "cold": [], "warm": [], "parallel": []}
    warm_out = parallel_out = ""
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp)
            # Share the built demo assets; everything else starts empty.
            shutil.copytree(shared, demo.demo_dir(cache))
            figures["startup"].append(run(cache, "--collect-only", "-q")[0])
            figures["cold"].append(run(cache)[0])
            seconds, warm_out = run(cache)
            figures["warm"].append(seconds)
            shutil.rmtree(cache / "generations", ignore_errors=True)
            seconds, parallel_out = run(cache, "-n", "2")
            figures["parallel"].append(seconds)
    median = {k: statistics.median(v) for k, v in figures.items()}
    start, cold, warm = median["startup"], median["cold"], median["warm"]
    print(f"medians of {args.repeats} runs each (range in brackets)")
    for key, label in (("startup", "startup only (--collect-only)"), ("cold", "demo suites, cold"),
                       ("warm", "demo suites, warm"), ("parallel", "demo suites, -n 2, generations cleared")):
        print(f"  {label:40s} {median[key]:6.1f} s  [{min(figures[key]):.1f}-{max(figures[key]):.1f}]")
    after = (
        f"{(warm - start) / (cold - start):.0%} after startup ({warm - start:.1f} s vs {cold - start:.1f} s)"
        if warm > start
        else f"the warm run costs no more than startup (the cold run {cold - start:.1f} s more)"
    )
    print(f"  warm / cold: {warm / cold:.0%} of the whole run; {after}")
    summary = [line for line in warm_out.splitlines() if "work done" in line]
    if summary:
        print("warm run:", summary[-1].strip())
    print("-n 2 run log (one line per suite, from the worker that generated it):")
    for line in parallel_out.splitlines():
        if line.lstrip(".").startswith("[novelty gw") or "work done" in line:
            print("  ", line.lstrip(".").strip())


if __name__ == "__main__":
    main()
