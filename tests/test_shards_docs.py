"""docs/shards.md and the workflow's sharded jobs name only what the code has: options, commands,
the scheduler variables ``--novelty-shard auto`` reads; its scripts and manifests parse."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from pytest_novelty.cli import build_parser
from pytest_novelty.pipeline.options import OPTIONS
from pytest_novelty.pipeline.shards import _SCHEDULERS

REPO = Path(__file__).resolve().parents[1]
PAGE = (REPO / "docs" / "shards.md").read_text(encoding="utf-8")
WORKFLOW = (REPO / ".github" / "workflows" / "gate.yml").read_text(encoding="utf-8")
BLOCK = re.compile(r"```(?P<kind>\w*)\n(?P<body>.*?)```", re.S)


def blocks(kind: str) -> list[str]:
    return [m["body"] for m in BLOCK.finditer(PAGE) if m["kind"] == kind]


def cache_commands(text: str) -> list[list[str]]:
    """Every ``pytest-novelty cache ...`` command of ``text``, its shell words with variables filled in."""
    found = []
    for line in text.splitlines():
        at = line.find("pytest-novelty cache ")
        if at < 0 or "SRC..." in line or "─" in line:  # the usage line and the diagram
            continue
        command = re.sub(r"\$\{\{[^}]*\}\}|\$\{[^}]*\}|\$\w+", "X", line[at:]).split(")")[0]
        found.append(shlex.split(command, comments=True)[1:])
    return found


def test_the_options_named_are_options_the_code_has() -> None:
    ours = {o.long for o in OPTIONS} | {o.cli_flag for o in OPTIONS}
    named = set(re.findall(r"(?<![\w-])(--(?:novelty-)?[a-z][a-z-]+)", PAGE))
    others = {"--into", "--out", "--array", "--parsable", "--dependency", "--export", "--gres", "--time", "--output",
              "--job-name", "--junitxml", "--for", "--timeout", "--suite", "--model", "--cache"}
    assert named - others <= ours, sorted(named - others - ours)
    assert {"--novelty-shard", "--shard", "--novelty-fill-missing-shards", "--fill-missing-shards"} <= named


@pytest.mark.parametrize("where", ["docs/shards.md", ".github/workflows/gate.yml"])
def test_every_cache_command_parses(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands' words parse; their values are placeholders (``DIR``, ``$PYTEST_NOVELTY_CACHE``),
    so the check of what each value names is left out here (tests/faults holds every argument to it)."""
    from pytest_novelty.pipeline.values import Takes

    monkeypatch.setattr(Takes, "check", lambda self, value, option, **_: value)
    text = "\n".join(m["body"] for m in BLOCK.finditer(PAGE)) if where.endswith(".md") else WORKFLOW
    commands = cache_commands(text)
    assert {words[1] for words in commands} >= {"merge", "pack"}
    for words in commands:
        args = build_parser().parse_args(["cache", *words[1:]])
        assert args.action == words[1]


def test_the_scripts_are_bash() -> None:
    scripts = blocks("bash")
    assert any("#SBATCH --job-name=novelty-shard" in s for s in scripts)
    assert any("sbatch --dependency=afterany" in s for s in scripts)
    for script in scripts:
        checked = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True, check=False)
        assert checked.returncode == 0, checked.stderr


def test_the_kubernetes_jobs_give_each_pod_the_count() -> None:
    manifests = [yaml.safe_load(text) for text in blocks("yaml")]
    indexed = next(m for m in manifests if m["spec"].get("completionMode") == "Indexed")
    container = indexed["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert int(env["PYTEST_NOVELTY_SHARD_COUNT"]) == indexed["spec"]["completions"]
    assert "--novelty-shard auto" in container["args"][0]
    assert any(m["metadata"]["name"] == "novelty-merge" for m in manifests)


def test_the_variables_named_are_those_auto_reads() -> None:
    for index, count, _ in _SCHEDULERS:
        assert f"`{index}`" in PAGE and f"`{count}`" in PAGE
    for name in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_STEP", "SLURM_ARRAY_TASK_COUNT"):
        assert f"`{name}`" in PAGE


def test_the_workflow_shards_every_checkpoint_and_merges_after_a_failed_shard() -> None:
    jobs = yaml.safe_load(WORKFLOW)["jobs"]
    assert jobs["gate"]["if"] == "inputs.shards <= 1"
    assert set(jobs["shard"]["strategy"]["matrix"]) == {"checkpoint", "shard"}
    assert "!cancelled()" in jobs["merge"]["if"] and set(jobs["merge"]["needs"]) == {"shard-numbers", "shard"}
    steps = " ".join(str(step.get("run", "")) for step in jobs["shard"]["steps"])
    assert '--novelty-shard "$SHARD"' in steps and jobs["shard"]["env"]["SHARD"].startswith("${{ matrix.shard }}/")
