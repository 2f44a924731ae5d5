"""What each integration costs in wall time on the demo: ``pytest --model demo`` with and without it.

Runs the demo once to warm the cache (so every timed run generates, looks up and judges nothing
and the difference is the integration's own cost: importing its client library, writing its
files), then ``--repeats`` runs of each variant, interleaved, and prints the median wall time of
each and its difference from the plain run::

    python benchmarks/integrations.py [--repeats 3] [--cache DIR] [-k story]

W&B runs offline and MLflow writes a local folder store, under a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIANTS = {
    "plain": [],
    "--novelty-report": ["--novelty-report={tmp}/report"],
    "tensorboard": ["--novelty-log=tensorboard:{tmp}/tb"],
    "wandb (offline)": ["--novelty-log=wandb:novelty-bench"],
    "mlflow (folder store)": ["--novelty-log=mlflow:{tmp}/mlruns"],
    "pytest-html": ["--html={tmp}/report.html", "--self-contained-html"],
    "all four": ["--novelty-log=tensorboard:{tmp}/tb", "--novelty-log=wandb:novelty-bench",
                 "--novelty-log=mlflow:{tmp}/mlruns", "--html={tmp}/report.html", "--self-contained-html"],
}  # fmt: skip


def run(args: list[str], env: dict[str, str], cwd: Path) -> float:
    cmd = [sys.executable, "-m", "pytest", "--model", "demo", "-p", "no:cacheprovider", "-q", *args]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache", help="cache folder (default: the usual one)")
    parser.add_argument("-k", dest="select", help="pytest -k expression (e.g. story)")
    options = parser.parse_args()
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="novelty-bench-") as folder:
        tmp = Path(folder)
        env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(tmp), "MLFLOW_ALLOW_FILE_STORE": "true",
               "WANDB_CACHE_DIR": str(tmp / "wandb-cache"), "WANDB_CONFIG_DIR": str(tmp / "wandb-config")}
        common = [f"--novelty-suites={repo / 'suites'}"]
        if options.cache:
            common.append(f"--novelty-cache={options.cache}")
        if options.select:
            common += ["-k", options.select]
        run(common, env, tmp)  # warm the cache
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for _ in range(options.repeats):
            for name, extra in VARIANTS.items():
                times[name].append(run(common + [a.format(tmp=tmp) for a in extra], env, tmp))
    base = statistics.median(times["plain"])
    print(f"demo{' -k ' + options.select if options.select else ''}, warm cache, median of {options.repeats} runs")
    for name, values in times.items():
        median = statistics.median(values)
        extra = "" if name == "plain" else f"  ({median - base:+.1f} s)"
        print(f"  {name:<22} {median:5.1f} s{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
