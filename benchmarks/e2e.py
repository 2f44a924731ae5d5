"""Wall time of the demo suites: cold (empty generation/score caches), warm, their ratio, and -n 2.

    python benchmarks/e2e.py [--repeats 3] [--no-parallel]

The demo assets themselves are built once beforehand (`pytest-novelty demo build`) and shared;
"cold" means a fresh cache for generations and scores, which is what a new checkpoint costs;
"warm" is the same command again, every answer and score cached: it loads no model and imports
neither torch nor transformers (the run says which of them it imported); "startup" is the same
command with --collect-only: Python, pytest, the plugins installed beside ours, no suite run.
The goal is warm / cold <= 10 %.
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


# A plugin loaded into the measured run that says, at its end, which heavy modules the process imported.
WATCH = (
    "import sys\n"
    "def pytest_unconfigure(config):\n"
    "    heavy = [m for m in ('torch', 'transformers') if m in sys.modules]\n"
    "    print('heavy imports:', ', '.join(heavy) or 'none')\n"
)


def run(cache: Path, *extra: str) -> tuple[float, str]:
    return run_pytest("--model", "demo", f"--novelty-cache={cache}", "-p", "no:cacheprovider",
                      "-p", "novelty_bench_watch", *extra)


def run_pytest(*args: str) -> tuple[float, str]:
    """(wall seconds, stdout) of ``python -m pytest ARGS`` in the repository; stops on a failed run."""
    cmd = [sys.executable, "-m", "pytest", *args]
    env = dict(os.environ)
    if "novelty_bench_watch" in args:  # the watch plugin lives in a folder of its own on the path
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_watch_dir()), env.get("PYTHONPATH", "")]))
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-2000:])
        raise SystemExit(f"pytest exited {proc.returncode}")
    return seconds, proc.stdout


_WATCH_DIR: list[Path] = []


def _watch_dir() -> Path:
    """A temporary folder holding the watch plugin (made once per benchmark)."""
    if not _WATCH_DIR:
        folder = Path(tempfile.mkdtemp(prefix="novelty-bench-"))
        (folder / "novelty_bench_watch.py").write_text(WATCH)
        _WATCH_DIR.append(folder)
    return _WATCH_DIR[0]


def heavy(out: str) -> str:
    """What the watch plugin said a run imported."""
    said = [line for line in out.splitlines() if line.startswith("heavy imports:")]
    return said[-1].split(":", 1)[1].strip() if said else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each kind; medians are shown (default 3)")
    parser.add_argument("--no-parallel", action="store_true", help="leave out the -n 2 run")
    args = parser.parse_args()
    shared = demo.ensure_demo(default_cache_dir())
    figures: dict[str, list[float]] = {"startup": [], "cold": [], "warm": [], "parallel": []}
    cold_out = warm_out = parallel_out = ""
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp)
            # Share the built demo assets; everything else starts empty.
            shutil.copytree(shared, demo.demo_dir(cache))
            figures["startup"].append(run(cache, "--collect-only", "-q")[0])
            seconds, cold_out = run(cache)
            figures["cold"].append(seconds)
            seconds, warm_out = run(cache)
            figures["warm"].append(seconds)
            if not args.no_parallel:
                shutil.rmtree(cache / "generations", ignore_errors=True)
                seconds, parallel_out = run(cache, "-n", "2")
                figures["parallel"].append(seconds)
    if args.no_parallel:
        del figures["parallel"]
    median = {k: statistics.median(v) for k, v in figures.items()}
    start, cold, warm = median["startup"], median["cold"], median["warm"]
    ratios = [w / c for w, c in zip(figures["warm"], figures["cold"], strict=True)]
    print(f"cold {cold:.1f} s, warm {warm:.1f} s: warm / cold {warm / cold:.1%} (goal <= 10 %; run by run "
          f"{min(ratios):.1%}-{max(ratios):.1%}); heavy imports: cold {heavy(cold_out)}, warm {heavy(warm_out)}")
    print(f"medians of {args.repeats} runs each (range in brackets)")
    for key, label in (("startup", "startup only (--collect-only)"), ("cold", "demo suites, cold"),
                       ("warm", "demo suites, warm"), ("parallel", "demo suites, -n 2, generations cleared")):
        if key in figures:
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
    if args.no_parallel:
        return
    print("-n 2 run log (one line per suite, from the worker that generated it):")
    for line in parallel_out.splitlines():
        if line.lstrip(".").startswith("[novelty gw") or "work done" in line:
            print("  ", line.lstrip(".").strip())


if __name__ == "__main__":
    main()
