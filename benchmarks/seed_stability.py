"""How often an unchanged checkpoint fails its own snapshots under other sampling seeds.

The demo's snapshots are accepted with the default seed; the same weights are then gated against
them with other seeds (``--novelty-seed``). Sampling noise alone must not fail the gate: with every
regression test of a run held to alpha / m (the run's m comparisons), an unchanged checkpoint should
fail in at most about alpha of runs. Prints, per seed, the exit status and the failing cases, then
how many runs failed.

    python benchmarks/seed_stability.py                 # seeds 101-108, the bundled suites
    python benchmarks/seed_stability.py --seeds 201 202 --cache /tmp/novelty-cache
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_novelty.report.json_report import read_records

REPO = Path(__file__).resolve().parents[1]


def gate(cache: Path, suites: Path, snapshots: Path, *args: str) -> tuple[int, list[str]]:
    """One ``pytest --model demo`` run against the snapshots; its status and failing cases."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "--model", "demo", f"--novelty-suites={suites}",
             f"--novelty-cache={cache}", f"--novelty-snapshot-dir={snapshots}", f"--novelty-report={report}",
             "-p", "no:cacheprovider", "-q", *args],
            cwd=scratch, capture_output=True, text=True, check=False, env={**os.environ},
        )  # fmt: skip
        written = report / "report.json"
        cases = read_records(json.loads(written.read_text())) if written.is_file() else []
    failed = [f"{c.suite} {c.metric} ({c.status}, delta {None if c.compared is None else c.compared.delta})"
              for c in cases if not c.passed]  # fmt: skip
    return done.returncode, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(101, 109)))
    parser.add_argument("--cache", type=Path, help="cache folder (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="novelty-seeds-") as scratch:
        cache = args.cache or Path(scratch) / "cache"
        suites = Path(scratch) / "suites"
        shutil.copytree(REPO / "suites", suites)
        snapshots = Path(scratch) / "snapshots"
        status, _ = gate(cache, suites, snapshots, "--snapshot-update")
        print(f"snapshots accepted with the default seed (exit {status})")
        failures = 0
        for seed in args.seeds:
            start = time.perf_counter()
            status, failed = gate(cache, suites, snapshots, "--novelty-snapshots", "--novelty-seed", str(seed))
            failures += status != 0
            print(f"seed {seed}: exit {status} in {time.perf_counter() - start:.0f}s; "
                  f"failed: {', '.join(failed) or 'none'}")  # fmt: skip
        print(f"{failures} of {len(args.seeds)} runs failed (load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
