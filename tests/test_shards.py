"""The shards of one gate: which shard a run is (``--novelty-shard K/N`` or the scheduler's
variables), and the split of the gate's units, the same on every machine and balanced by cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.pipeline.answers import load_prompts
from pytest_novelty.pipeline.shards import Shard, Unit, gate_units, parse_shard, shard_from_environment, split_units
from pytest_novelty.suites.suite_file import load_suites

REPO = Path(__file__).resolve().parents[1]


def demo_runs() -> list:
    return [run for suite in load_suites(REPO / "suites") for run in suite.runs()]


# -- which shard ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "index", "count"), [("1/1", 1, 1), ("2/4", 2, 4), (" 4/4 ", 4, 4)])
def test_a_shard_is_k_of_n_counted_from_1(text: str, index: int, count: int) -> None:
    shard = parse_shard(text)
    assert (shard.index, shard.count, str(shard)) == (index, count, f"{index}/{count}")


@pytest.mark.parametrize(
    ("text", "words"),
    [("0/4", "numbered from 1"), ("5/4", "not one of 1 to 4"), ("2", "expected K/N"), ("a/b", "expected K/N"),
     ("1/0", "must be 1 to"), ("1/99999", "must be 1 to")],
)
def test_a_bad_shard_is_bad_input_naming_the_option(text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as caught:
        parse_shard(text, option="--shard")
    assert str(caught.value).startswith("--shard: ") and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        # sbatch --array=0-3 and --array=1-4: shards 1 to 4 either way
        ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "3",
          "SLURM_ARRAY_TASK_COUNT": "4"}, (1, 4)),
        ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "4",
          "SLURM_ARRAY_TASK_COUNT": "4"}, (4, 4)),
        # --array=10-40:10
        ({"SLURM_ARRAY_TASK_ID": "30", "SLURM_ARRAY_TASK_MIN": "10", "SLURM_ARRAY_TASK_MAX": "40",
          "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_STEP": "10"}, (3, 4)),
        ({"JOB_COMPLETION_INDEX": "2", "PYTEST_NOVELTY_SHARD_COUNT": "3"}, (3, 3)),  # a Kubernetes Indexed Job
        ({"CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "5"}, (2, 5)),  # GitLab CI, parallel: 5
        ({"CIRCLE_NODE_INDEX": "0", "CIRCLE_NODE_TOTAL": "2"}, (1, 2)),  # CircleCI
        ({"BUILDKITE_PARALLEL_JOB": "6", "BUILDKITE_PARALLEL_JOB_COUNT": "7"}, (7, 7)),  # Buildkite
    ],
    ids=["slurm-from-0", "slurm-from-1", "slurm-step", "kubernetes", "gitlab", "circleci", "buildkite"],
)
def test_auto_reads_the_schedulers_variables(environ: dict[str, str], expected: tuple[int, int]) -> None:
    shard = parse_shard("auto", environ=environ)
    assert (shard.index, shard.count) == expected
    assert shard.source  # says where it came from


@pytest.mark.parametrize(
    ("environ", "words"),
    [
        ({}, "no scheduler's shard"),
        ({"JOB_COMPLETION_INDEX": "1"}, "PYTEST_NOVELTY_SHARD_COUNT is not"),  # Kubernetes gives no count
        ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "9",
          "SLURM_ARRAY_TASK_COUNT": "3"}, "not one evenly spaced range"),  # --array=1,4,9
        ({"SLURM_ARRAY_TASK_ID": "3"}, "not a job array"),
        ({"CI_NODE_INDEX": "x", "CI_NODE_TOTAL": "2"}, "not a whole number"),
    ],
    ids=["nothing", "kubernetes-without-count", "slurm-gaps", "slurm-no-array", "garbage"],
)
def test_auto_without_a_usable_scheduler_is_bad_input(environ: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_shard("auto", environ=environ)


def test_no_variables_no_scheduler() -> None:
    assert shard_from_environment({"PATH": "/bin"}) is None


# -- the split ------------------------------------------------------------------------------------


def test_every_unit_goes_to_exactly_one_shard_whatever_their_order() -> None:
    units = [Unit(f"suite{i % 3}", f"p{i}", 10 * (1 + i % 3)) for i in range(200)]
    plan = split_units(units, 4)
    assert set(plan.owners) == {(u.group, u.prompt) for u in units}
    assert set(plan.owners.values()) == {1, 2, 3, 4}
    assert split_units(list(reversed(units)), 4).owners == plan.owners  # the order given does not matter
    assert sum(plan.units) == 200 and sum(plan.loads) == sum(u.cost for u in units)
    # The longest-processing-time rule: no shard ends more than one unit above another.
    assert max(plan.loads) - min(plan.loads) <= max(u.cost for u in units)


def test_one_shard_does_everything() -> None:
    units = [Unit("s", f"p{i}", 3) for i in range(5)]
    plan = split_units(units, 1)
    assert set(plan.owners.values()) == {1} and plan.imbalance == 1.0


def test_the_demo_gate_splits_within_the_goal() -> None:
    """The benchmark's goal: the largest of 4 shards does at most 1.15 x the mean shard's declared work."""
    runs = demo_runs()
    units = gate_units(runs, prompts_of=load_prompts)
    assert len(units) == sum(len(load_prompts(r)) for r in runs) == 300
    for count in (2, 3, 4):
        plan = split_units(units, count)
        assert plan.imbalance <= 1.15, (count, plan.loads)
        for run in runs:  # every suite's prompts are spread over the shards, not one suite per shard
            shares = [len(plan.prompts(run.run_key, k)) for k in range(1, count + 1)]
            assert min(shares) >= 0.8 * len(load_prompts(run)) / count, (run.name, shares)


def test_a_unit_costs_what_its_suite_declares() -> None:
    runs = {run.name: run for run in demo_runs()}
    story = runs["story"]
    units = gate_units([story], prompts_of=load_prompts, repeats=3, checkpoints=2)
    per = story.generation.samples * story.generation.max_new_tokens
    first = [u for u in units if u.group == "story"]
    assert first and {u.cost for u in first} == {2 * per}  # candidate and baseline
    again = [u for u in units if u.group != "story"]  # the candidate's repeats: units of their own
    assert len(again) == 2 * len(first) and {u.cost for u in again} == {per}
    assert {u.group for u in again} == {"story#repeat=1", "story#repeat=2"}


_PLAN = """
import json, sys
from pathlib import Path
from pytest_novelty.pipeline.answers import load_prompts
from pytest_novelty.pipeline.shards import gate_units, split_units
from pytest_novelty.suites.suite_file import load_suites
runs = [r for s in load_suites(Path(sys.argv[1])) for r in s.runs()]
plan = split_units(gate_units(runs, prompts_of=load_prompts), 4)
print(json.dumps(sorted([g, p, k] for (g, p), k in plan.owners.items())))
"""


def test_the_split_is_the_same_under_any_hash_seed() -> None:
    """Two Pythons with other string hashes (as two machines have) compute the same split."""
    plans = []
    for seed in ("0", "12345", "random"):
        env = {"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
        out = subprocess.run([sys.executable, "-c", _PLAN, str(REPO / "suites")], env=env, capture_output=True,
                             text=True, check=True).stdout
        plans.append(json.loads(out))
    here = split_units(gate_units(demo_runs(), prompts_of=load_prompts), 4)
    assert plans[0] == plans[1] == plans[2] == sorted([g, p, k] for (g, p), k in here.owners.items())


def test_a_denial_suite_is_one_unit(tmp_path: Path) -> None:
    text = (REPO / "suites" / "tool.toml").read_text().replace('method = "few-shot"', 'method = "denial"\nrounds = 3')
    (tmp_path / "tool.toml").write_text(text)
    runs = [r for s in load_suites(tmp_path) for r in s.runs()]
    assert len(runs) == 3  # three rounds
    units = gate_units(runs, prompts_of=load_prompts)
    assert [(u.group, u.prompt) for u in units] == [("tool", "")]
    tool = runs[0].generation
    assert units[0].cost == 3 * len(load_prompts(runs[0])) * tool.samples * tool.max_new_tokens
    assert Shard(1, 2).index == 1


@pytest.mark.parametrize("other", ["novelty_fill_missing_shards", "novelty_snapshot_update", "update_snapshots"])
def test_a_shard_refuses_what_belongs_to_the_merge_run(other: str) -> None:
    from argparse import Namespace

    from pytest_novelty.pipeline.preflight import check_options

    options = Namespace(novelty_device="cpu", novelty_generator="hf", novelty_model_base_url=None,
                        novelty_model_revision=None, novelty_shard="1/2", **{other: True})
    with pytest.raises(ConfigError, match="merge run") as caught:
        check_options(options, model="demo", front="cli")
    assert str(caught.value).startswith("--shard: ")
    check_options(Namespace(**{**vars(options), other: False}), model="demo")  # alone, a shard is fine
