"""``pytest-novelty run --shard K/N``: do one shard's part of the gate and decide no case.

The run generates and scores its units of every suite run (:func:`pytest_novelty.pipeline.shard_work.do_part`)
into its cache, prints one line per case saying it is decided by the merge run, and exits 0 when
its part is done, 8 (a harness error) when it is not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS, HarnessError


def run_shard(args: argparse.Namespace, session: Any, runs: list[Any], cache_dir: Path) -> int:
    """Do the part of the shard ``args.novelty_shard`` of the gate over ``runs``; the exit status."""
    from pytest_novelty.pipeline.shard_work import do_part, plan_gate
    from pytest_novelty.pipeline.shards import DEFERRED, DEFERRED_REASON, parse_shard

    shard = parse_shard(args.novelty_shard, option="--shard")
    repeats = int(args.novelty_repeat or 1)
    checkpoints = 1 + bool(session.baseline_model) + max(0, len(session.series) - 1)
    plan = plan_gate(runs, shard, prompts_of=session.candidate.load_prompts, repeats=repeats,
                     checkpoints=checkpoints)
    failed: dict[str, str] = {}
    for run in runs:
        try:
            print(do_part(session, run, plan, shard, repeats=repeats).line(), file=sys.stderr)
        except HarnessError as exc:  # as in a full run: this suite's part is not done, the others go on
            failed[run.name] = str(exc)
            print(f"pytest-novelty: harness error in suite {run.name}: {exc}", file=sys.stderr)
    for run in runs:
        outcome = f"error (harness: {failed[run.name]})" if run.name in failed else f"{DEFERRED} ({DEFERRED_REASON})"
        for threshold in run.thresholds:
            print(f"{run.name}-{threshold.label}: {outcome}")
    cases = sum(len(run.thresholds) for run in runs)
    share = plan.loads[shard.index - 1] / max(1, sum(plan.loads))
    done = "NOT done (harness errors above)" if failed else "done"
    print(f"novelty shard {shard}: its part is {done}: {plan.units[shard.index - 1]} of {sum(plan.units)} units "
          f"({share:.0%} of the gate's declared work) in {cache_dir}; {cases} cases {DEFERRED_REASON}")
    if args.novelty_report:
        from pytest_novelty.report.json_report import write_placeholder

        write_placeholder(args.novelty_report, f"shard {shard} of the gate: every case is {DEFERRED_REASON}")
    return HARNESS_EXIT_STATUS if failed else 0
