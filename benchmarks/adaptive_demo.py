"""Adaptive verdicts on the demo, regressions included: what the rounds cost, and what they decide.

    python benchmarks/adaptive_demo.py [--budget 800] [--seeds 301 ... 312] [--cache DIR]

Runs ``pytest-novelty run`` (the one case loop, in this process) over the bundled suites:

1. the demo's snapshots, accepted at the default seed (``--snapshot-update``, into a temporary folder);
2. the weaker checkpoint, ``demo-early``, against them with ``--novelty-adaptive BUDGET``: its exit
   status, its failing cases (threshold or regression, and how the rule ended each regression), and
   the extra samples its rounds took, beside those ``--novelty-repeat 5`` takes for the same gate
   (run too: four more sets of every suite);
3. the unchanged demo under every ``--seeds`` (``--novelty-seed``) against the same snapshots with
   the same budget: per seed the exit status, its regression failures (there should be none: every
   comparison is held to α over the run's number of comparisons) and the extra samples.

The extra samples are those of the work line (generated, plus found in the cache: what a cold run
would generate). The cache is a copy of ``--cache`` (default: pytest-novelty's), so nothing is added
to it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_novelty.cli import main  # noqa: E402
from pytest_novelty.gate.record import CaseRecord  # noqa: E402
from pytest_novelty.infra.storage import default_cache_dir  # noqa: E402
from pytest_novelty.report.json_report import read_records  # noqa: E402


def run(cache: Path, report: Path, *args: str) -> tuple[int, str, list[CaseRecord]]:
    """``pytest-novelty run`` on the bundled suites: its exit status, what it printed, its case records."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main(["run", "--suites", str(REPO / "suites"), "--cache", str(cache), "--report", str(report), *args])
    written = report / "report.json"
    records = read_records(json.loads(written.read_text())) if written.is_file() else []
    return status, out.getvalue(), records


def extra(text: str, kind: str) -> int:
    """The samples the work line says ``kind`` (``adaptive rounds``, ``repeats``) took: generated and from cache."""
    found = re.search(rf"{kind}: (\d+) samples generated \((\d+) from cache\)", text)
    return 0 if found is None else int(found.group(1)) + int(found.group(2))


def regressions(records: list[CaseRecord]) -> list[str]:
    """The cases that failed as regressions, with how the paired rule ended each."""
    out = []
    for r in records:
        if r.regressed:
            rule = r.regression_adaptive
            why = f" ({rule.stopped})" if rule is not None and rule.stopped else ""
            how = "" if rule is None else f", rule {rule.decision}{why} after {len(rule.looks)} look(s)"
            out.append(f"{r.suite} {r.metric} (delta {r.compared.delta:+.4f}{how})" if r.compared else r.label)
    return out


def failed(records: list[CaseRecord]) -> list[str]:
    """Every failing case: its suite, label and why (threshold, regression or both)."""
    out = []
    for r in records:
        if r.failed:
            why = [word for word, bad in (("threshold", not r.met), ("regression", r.regressed)) if bad]
            out.append(f"{r.suite} {r.label} ({', '.join(why) or r.message})")
    return out


def ruled(records: list[CaseRecord]) -> str:
    """How the paired rule ended the regression cases: decided fail / pass, undecided by reason."""
    counts: dict[str, int] = {}
    for r in records:
        rule = r.regression_adaptive
        if rule is not None:
            key = rule.decision if rule.decided else f"undecided ({rule.stopped})"
            counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def main_() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=800, help="--novelty-adaptive SAMPLES (per suite run)")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(301, 313)))
    parser.add_argument("--cache", type=Path, help="cache folder to copy (default: pytest-novelty's)")
    args = parser.parse_args()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="novelty-adaptive-") as scratch:
        folder = Path(scratch)
        cache = folder / "cache"
        shutil.copytree(args.cache or default_cache_dir(), cache)
        snapshots = ["--snapshot-dir", str(folder / "snapshots")]
        status, _, records = run(cache, folder / "accepted", "--model", "demo", *snapshots, "--snapshot-update")
        print(f"snapshots of demo accepted at the default seed (exit {status}, {len(records)} cases)")
        adaptive = ["--snapshots", *snapshots, "--adaptive", str(args.budget)]
        status, text, records = run(cache, folder / "early", "--model", "demo-early", *adaptive)
        print(f"\ndemo-early against them, --novelty-adaptive {args.budget}: exit {status}")
        print(f"  failing: {'; '.join(failed(records)) or 'none'}")
        print(f"  regressions: {'; '.join(regressions(records)) or 'none'}")
        print(f"  the paired rule on its {sum(r.regression_adaptive is not None for r in records)} regression cases: "
              f"{ruled(records)}")  # fmt: skip
        spent = extra(text, "adaptive rounds")
        status, text, repeated = run(cache, folder / "repeat", "--model", "demo-early", "--snapshots", *snapshots,
                                     "--repeat", "5")  # fmt: skip
        print(f"  extra samples: {spent} with --novelty-adaptive {args.budget}; {extra(text, 'repeats')} with "
              f"--novelty-repeat 5 (exit {status}, regressions: {len(regressions(repeated))})")  # fmt: skip
        print(f"\ndemo, unchanged weights, against the same snapshots under {len(args.seeds)} seeds, "
              f"--novelty-adaptive {args.budget}:")  # fmt: skip
        clean = 0
        for seed in args.seeds:
            status, text, records = run(cache, folder / f"seed-{seed}", "--model", "demo", "--seed", str(seed),
                                        *adaptive)  # fmt: skip
            found = regressions(records)
            clean += not found
            others = [f for f in failed(records) if "regression" not in f]
            print(f"  seed {seed}: exit {status}; regression failures: {'; '.join(found) or 'none'}; other failures: "
                  f"{'; '.join(others) or 'none'}; rule: {ruled(records)}; extra samples "
                  f"{extra(text, 'adaptive rounds')}")  # fmt: skip
        print(f"{clean} of {len(args.seeds)} runs without a regression failure; {time.perf_counter() - start:.0f}s "
              f"(load average {os.getloadavg()[0]:.1f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main_())
