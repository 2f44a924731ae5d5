"""A denial-prompting suite in a sharded gate: one unit (each round is built from the answers of the
round before), done whole by the shard that owns it, beside a sweep suite whose prompts are split.
The shards, the merge and the merge run are the command line's ``main`` in the test process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pytest_novelty.pipeline.answers import load_prompts
from pytest_novelty.pipeline.shards import gate_units, split_units
from pytest_novelty.suites.suite_file import load_suites
from tests.cli_in_process import run_cli
from tests.servers.openai_api import FakeOpenAI
from tests.test_denial import SUITE, chat_checkpoint, concepts_or_score, write_suite

__all__ = ["chat_checkpoint"]  # the fixture, from the denial tests

pytestmark = pytest.mark.slow


def test_a_denial_suite_is_done_whole_by_one_shard(chat_checkpoint: Path, tiny_index: Path, tmp_path: Path) -> None:
    suites = tmp_path / "suites"
    suites.mkdir()
    write_suite(suites, rounds=2)
    sweep = '[sweep]\nparameter = "generation.temperature"\nvalues = [0.5, 1.0]\n'
    (suites / "story-sweep.toml").write_text(SUITE.format(method="chat", rounds=1) + sweep)
    runs = [run for suite in load_suites(suites) for run in suite.runs()]
    plan = split_units(gate_units(runs, prompts_of=load_prompts), 2)
    owner = plan.owner("story-denial")
    with FakeOpenAI(reply=concepts_or_score) as server:

        def gate(cache: Path, *extra: str) -> subprocess.CompletedProcess[str]:
            args = ["run", "--model", str(chat_checkpoint), "--suites", str(suites), "--device", "cpu",
                    "--cache", str(cache), "--originality", f"infini-gram:{tiny_index}", "--judge",
                    "openai:judge-model", "--judge-base-url", server.url, *extra]
            return run_cli(*args)

        parts = []
        for index in (1, 2):
            done = gate(tmp_path / f"shard{index}", "--shard", f"{index}/2")
            assert done.returncode == 0, done.stderr
            parts.append(done.stderr)
        # The owner generated both rounds of the denial suite; the other shard none of it.
        assert "story-denial[round=1]: 2 of 2 prompts" in parts[owner - 1]
        assert "story-denial[round=1]: 0 of 2 prompts, 0 samples" in parts[2 - owner]
        merged = tmp_path / "merged"
        joined = run_cli("cache", "merge", str(tmp_path / "shard1"), str(tmp_path / "shard2"), "--into", str(merged))
        assert joined.returncode == 0, joined.stderr
        requests = server.request_count
        decided = gate(merged, "--output", str(tmp_path / "out.json"))
        assert decided.returncode == 0, decided.stderr
        assert server.request_count == requests  # every judge answer and concept list came from the shards
    assert "novelty work done: 0 samples generated" in decided.stdout
    assert sorted(json.loads((tmp_path / "out.json").read_text())) == [
        "story-denial[round=1]", "story-denial[round=2]", "story-sweep[temperature=0.5]", "story-sweep[temperature=1]",
    ]  # fmt: skip
