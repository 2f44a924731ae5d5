"""How many extra samples the sequential rule spends to decide the demo's unsure cases, against --novelty-repeat.

    python benchmarks/adaptive_demo.py [--model demo] [--looks 5] [--suite story] [--cache DIR]

Decides every case of the bundled suites on ``--model`` as a run does (the first pass), then applies
the sequential rule of ``pytest_novelty.metrics.sequential`` (Pocock-type Lan-DeMets boundaries
over ``--looks`` looks at the suite's alpha) to each case: a case the rule does not decide at its
first look draws its suite's next repeat (``Suite.repeated(k)``: its own derived seed, cached like
any run) and is looked at again, until it is decided or its looks are spent. Nothing here is wired
into the case loop: the rounds are read from the results session as ``--novelty-repeat`` would
generate them. Prints per case the first pass's verdict, the looks the rule took and its decision,
then the extra samples the rule generated (only the suites of undecided cases, only as many rounds
as their slowest case needed) against ``--novelty-repeat N`` with N the most looks any case used
(every suite repeated N - 1 times).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_novelty.gate.case import decide_in  # noqa: E402
from pytest_novelty.infra.storage import default_cache_dir  # noqa: E402
from pytest_novelty.metrics.sequential import SequentialPlan, sequential_decision  # noqa: E402
from pytest_novelty.metrics.table import family, values_of  # noqa: E402
from pytest_novelty.pipeline.config import RunConfig  # noqa: E402
from pytest_novelty.pipeline.session import ResultsSession  # noqa: E402
from pytest_novelty.suites.suite_file import load_suites  # noqa: E402


def case_values(result: Any, metric: str, subset: list[str] | None) -> tuple[Any, float | None, bool]:
    """What the rule reads of one case in one round: the (prompts × samples) values its statistic
    averages (the subset's rows for q@Tail and Novelty at Peak, per-prompt values for NoveltyBench's),
    the top fraction of a top-10 % metric, and whether it is a share."""
    fam = family(metric)
    if fam.per_prompt_only:
        return np.asarray(result.per_prompt[metric], dtype=float), None, False
    values = np.asarray(values_of(metric, result.quality, result.originality), dtype=float)
    if fam.subset is not None:
        index = {p.id: i for i, p in enumerate(result.prompts)}
        values = values[[index[i] for i in (subset or []) if i in index]]
    return values, fam.top_fraction, fam.share


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo")
    parser.add_argument("--looks", type=int, default=5, help="looks a case may take, the first pass included")
    parser.add_argument("--suite", action="append", help="only these suites (repeatable)")
    parser.add_argument("--cache", type=Path, help="cache folder (default: pytest-novelty's)")
    args = parser.parse_args()
    cache = args.cache or default_cache_dir()
    suites = [s for s in load_suites(REPO / "suites") if not args.suite or s.name in args.suite]
    session = ResultsSession(lambda m: RunConfig(model=m, cache_dir=cache), model=args.model)
    start = time.perf_counter()
    used: dict[str, int] = {}
    samples: dict[str, int] = {}
    for suite in (run for s in suites for run in s.runs()):
        plan = SequentialPlan(suite.gate.alpha, args.looks)
        first = session.result(suite)
        samples[suite.name] = len(first.prompts) * suite.generation.samples
        for threshold in suite.thresholds:
            outcome = decide_in(session, suite, threshold)
            subset = list(outcome.tail_ids) if outcome.tail_ids is not None else first.measured.tail_ids.get(
                threshold.metric)  # fmt: skip
            rounds, decision = [], None
            for look in range(args.looks):
                result = first if look == 0 else session.result(suite.repeated(look))
                values, top, share = case_values(result, threshold.metric, subset)
                rounds.append(values)
                decision = sequential_decision(rounds, threshold.value, higher_is_better=threshold.op == ">=",
                                               plan=plan, top_fraction=top, share=share)  # fmt: skip
                if decision.decision != "continue":
                    break
            assert decision is not None
            used[suite.name] = max(used.get(suite.name, 1), decision.rounds)
            first_pass = ("pass" if outcome.passed else "FAIL") + (" (within noise)" if outcome.within_noise else "")
            z = ", ".join(f"{look.z:+.2f}/{look.boundary:.2f}" for look in decision.looks)
            print(f"{suite.name} {threshold.metric} {threshold.op} {threshold.value:g}: first pass {first_pass}; "
                  f"rule: {decision.decision} after {decision.rounds} looks (Z/boundary {z})")  # fmt: skip
    extra = sum((used[name] - 1) * samples[name] for name in used)
    most = max(used.values(), default=1)
    repeat = sum((most - 1) * samples[name] for name in samples)
    rounds = ", ".join(f"{name}: {used[name] - 1} rounds" for name in used)
    print(f"\nthe rule generated {extra} extra samples ({rounds}); --novelty-repeat {most} generates {repeat} "
          f"({most - 1} rounds of every suite); {time.perf_counter() - start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
