"""Wall time of the demo suites: cold (empty generation/score caches), warm, and with -n 2.

    python benchmarks/e2e.py

The demo assets themselves are built once beforehand (`pytest-novelty demo build`) and shared;
"cold" means a fresh cache for generations and scores, which is what a new checkpoint costs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_novelty import demo
from pytest_novelty.storage import default_cache_dir

REPO = Path(__file__).resolve().parents[1]


def run(cache: Path, *extra: str) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "pytest", "--model", "demo", f"--novelty-cache={cache}", "-p", "no:cacheprovider"]
    cmd += extra
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=dict(os.environ))
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-2000:])
        raise SystemExit(f"pytest exited {proc.returncode}")
    return seconds, proc.stdout


def main() -> None:
    shared = demo.ensure_demo(default_cache_dir())
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        # Share the built demo assets; everything else starts empty.
        shutil.copytree(shared, demo.demo_dir(cache))
        cold, _ = run(cache)
        warm, out = run(cache)
        for name in ("generations",):
            shutil.rmtree(cache / name, ignore_errors=True)
        parallel, parallel_out = run(cache, "-n", "2")
    print(f"demo suites, cold: {cold:6.1f} s")
    print(f"demo suites, warm: {warm:6.1f} s ({warm / cold:.0%} of cold)")
    print(f"demo suites, -n 2 (generation cache cleared): {parallel:6.1f} s")
    summary = [line for line in out.splitlines() if "work done" in line]
    if summary:
        print("warm run:", summary[-1].strip())
    print("-n 2 run log (one line per suite, from the worker that generated it):")
    for line in parallel_out.splitlines():
        if line.lstrip(".").startswith("[novelty gw") or "work done" in line:
            print("  ", line.lstrip(".").strip())


if __name__ == "__main__":
    main()
