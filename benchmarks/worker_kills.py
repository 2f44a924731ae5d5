"""A killed pytest-xdist worker ends the gate with the harness status (8), whatever the moment and the load.

Runs ``pytest --model demo -n 2`` (answers from a warm cache) ``--tries`` times per moment, each time
killing one worker (``os._exit``, as the out-of-memory killer would) at a chosen moment, with a busy
process on one core beside it (``--no-load`` to leave it out); prints each moment's exit statuses
and whether any run printed INTERNALERROR.

    python benchmarks/worker_kills.py --tries 20          # before collection, during a case, at the end
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

KILLER = """
import os, random
from pathlib import Path

import pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER")
HERE = Path(__file__).parent
WHEN = {when!r}


def die(where):
    if WORKER and where == WHEN and not (HERE / "killed").exists():
        (HERE / "killed").write_text(WORKER)
        os._exit(9)


def pytest_collection(session):
    die("before collection")


CASES = [0, random.randint(1, 6)]  # cases run, and the one a worker dies in


def pytest_runtest_call(item):
    CASES[0] += 1
    if CASES[0] == CASES[1]:
        die("during a case")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    die("at the end")
"""

MOMENTS = ("before collection", "during a case", "at the end")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--no-load", action="store_true", help="no busy process beside the runs")
    args = parser.parse_args()
    load = None if args.no_load else subprocess.Popen([sys.executable, "-c", "while True: pass"])
    found: dict[str, collections.Counter[int]] = {}
    internal = 0
    try:
        with tempfile.TemporaryDirectory(prefix="novelty-kills-") as scratch:
            cache = Path(scratch) / "cache"
            subprocess.run([sys.executable, "-m", "pytest", "--model", "demo", "-q", "-p", "no:cacheprovider",
                            f"--novelty-cache={cache}"], cwd=scratch, capture_output=True, check=False)  # warm
            for when in MOMENTS:
                found[when] = collections.Counter()
                for _ in range(args.tries):
                    run = Path(tempfile.mkdtemp(dir=scratch))
                    (run / "conftest.py").write_text(KILLER.format(when=when))
                    # the suites inside the run's folder: a conftest's per-case hooks reach only
                    # the cases collected under it
                    shutil.copytree(REPO / "suites", run / "suites")
                    done = subprocess.run(
                        [sys.executable, "-m", "pytest", "--model", "demo", "-n", "2", "-q", "-p", "no:cacheprovider",
                         f"--novelty-cache={cache}", f"--novelty-suites={run / 'suites'}"],
                        cwd=run, capture_output=True, text=True, check=False, timeout=600,
                    )  # fmt: skip
                    # a run whose worker was never killed says so, rather than counting as a kill
                    found[when][done.returncode if (run / "killed").exists() else -1] += 1
                    internal += "INTERNALERROR" in done.stdout + done.stderr
                statuses = ", ".join(
                    f"exit {code}: {n}" if code >= 0 else f"no worker killed: {n}"
                    for code, n in sorted(found[when].items())
                )
                print(f"{when}: {statuses}", flush=True)
    finally:
        if load is not None:
            load.kill()
    print(f"INTERNALERROR in {internal} of {args.tries * len(MOMENTS)} runs (load average {os.getloadavg()[0]:.1f})")
    return 0 if internal == 0 and all(set(c) == {8} for c in found.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
