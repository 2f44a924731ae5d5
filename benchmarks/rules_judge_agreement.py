"""How well the offline rules judge agrees with human judgements on MacGyver (creative tool use).

Two measures, both pairwise accuracies (a win counts 1, a tie 1/2):

1. *Own solution vs an unrelated one.* For every solvable problem with a human-written solution
   (``additional_human_solutions.jsonl``), the human solution should outscore a human solution
   of another problem, both judged as answers to the first problem. The unrelated solution is
   drawn with a fixed seed from the other problems' solutions.
2. *Feasible vs infeasible.* Among the solutions of solvable problems that human annotators
   labelled (``problem_solution_pair.jsonl``, labels efficient / inefficient / infeasible), a
   feasible solution should outscore an infeasible one; every (feasible, infeasible) pair counts.
   The rules judge checks form and item use, not physics, so expect little here.

The data is read from ``../shared/datasets/macgyver/`` beside the repository (or ``--data``); when
it is absent the script says so and exits 0.

    python benchmarks/rules_judge_agreement.py [--data DIR] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_novelty.scoring.judges import JudgeItem, RulesJudge

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "macgyver"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def points(judge: RulesJudge, problem: str, solution: str) -> float:
    [result] = judge.score([JudgeItem("tool", problem, solution)])
    return result.scores[0]


def pairwise(pairs: list[tuple[float, float]]) -> tuple[float, int, int, int]:
    """Accuracy (ties count half), wins, ties, losses of ``better`` over ``worse`` in each pair."""
    wins = sum(better > worse for better, worse in pairs)
    ties = sum(better == worse for better, worse in pairs)
    losses = len(pairs) - wins - ties
    return (wins + ties / 2) / len(pairs), wins, ties, losses


def own_vs_unrelated(judge: RulesJudge, rows: list[dict[str, Any]], seed: int) -> list[tuple[float, float]]:
    solvable = [r for r in rows if r["Solvable?"].strip().lower() == "yes" and r["Solution"].strip()]
    rng = random.Random(seed)
    pairs = []
    for row in solvable:
        others = [r for r in solvable if r["Problem"] != row["Problem"]]
        other = rng.choice(others)
        pairs.append((points(judge, row["Problem"], row["Solution"]), points(judge, row["Problem"], other["Solution"])))
    return pairs


def feasible_vs_infeasible(judge: RulesJudge, rows: list[dict[str, Any]]) -> list[tuple[float, float]]:
    labelled = [r for r in rows if r["Solvable?"].strip().lower() == "yes" and r["Solution"].strip()]
    feasible = [
        points(judge, r["Problem"], r["Solution"]) for r in labelled if r["Label"] in ("efficient", "inefficient")
    ]
    infeasible = [points(judge, r["Problem"], r["Solution"]) for r in labelled if r["Label"] == "infeasible"]
    return [(good, bad) for good in feasible for bad in infeasible]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with the MacGyver jsonl files")
    parser.add_argument("--seed", type=int, default=0, help="seed for drawing the unrelated solutions")
    args = parser.parse_args()
    human = args.data / "additional_human_solutions.jsonl"
    labelled = args.data / "problem_solution_pair.jsonl"
    if not human.is_file() or not labelled.is_file():
        print(f"rules judge agreement: skipped, MacGyver data not found in {args.data}")
        return 0

    judge = RulesJudge()
    print(f"rules judge agreement with human judgements on MacGyver ({judge.description})")
    accuracy, wins, ties, losses = pairwise(own_vs_unrelated(judge, read_jsonl(human), args.seed))
    print(
        f"  human solution vs unrelated solution: pairwise accuracy {accuracy:.3f} "
        f"({wins} wins, {ties} ties, {losses} losses over {wins + ties + losses} human solutions of solvable problems)"
    )
    accuracy, wins, ties, losses = pairwise(feasible_vs_infeasible(judge, read_jsonl(labelled)))
    print(
        f"  feasible vs infeasible (human labels): pairwise accuracy {accuracy:.3f} "
        f"({wins} wins, {ties} ties, {losses} losses over {wins + ties + losses} pairs)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
