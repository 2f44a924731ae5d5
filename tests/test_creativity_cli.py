"""``pytest-novelty originality --creativity``: the Creativity Index of a file of texts from the
command line, exactly as the gate computes it (the demo's story answers, both ways)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.cli_in_process import run_cli

pytestmark = pytest.mark.slow


def test_the_command_gives_the_gate_s_index_and_uniqueness_on_the_demo(demo_run_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "story.json"
    gated = run_cli("run", "--model", "demo", "--suite", "story", "--cache", str(demo_run_cache), "--output", str(out))
    assert gated.returncode == 0, gated.stderr
    story = json.loads(out.read_text())["story"]
    texts = tmp_path / "texts.jsonl"
    answers = [a for row in story["answers"] for a in row]
    texts.write_text("".join(json.dumps({"id": i, "text": a}) + "\n" for i, a in enumerate(answers)))
    index = next(demo_run_cache.glob("demo-*/index"))
    done = run_cli("originality", "--index", f"infini-gram:{index}", "--creativity", str(texts))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["id"] for line in lines] == list(range(len(answers)))
    values = story["metrics"]
    assert np.mean([line["creativity_index"] for line in lines]) == pytest.approx(values["creativity_index"], abs=1e-12)
    for length in (5, 12):  # a too-short text counts 0, as in the gate's mean
        found = [line["uniqueness"][str(length)] or 0.0 for line in lines]
        assert np.mean(found) == pytest.approx(values[f"uniqueness@{length}"], abs=1e-12)
    copied = [line for line in lines if line["copied"]]
    assert copied and all(c["units"] >= 5 and c["longest_match"] >= 5 and c["text"] for line in copied
                          for c in line["copied"])  # fmt: skip
    assert all(line["creativity_index"] < 8 for line in copied)  # a copied span costs uniqueness


def test_a_bad_range_is_one_line_naming_the_option(tmp_path: Path, tiny_index: Path) -> None:
    texts = tmp_path / "t.jsonl"
    texts.write_text('{"id": 1, "text": "a b c"}\n')
    done = run_cli("originality", "--index", f"infini-gram:{tiny_index}", "--lengths", "9-3", str(texts))
    assert done.returncode == 4 and done.stderr.strip().splitlines() == [
        "pytest-novelty: error: --lengths: '9-3' is no range: give MIN-MAX, whole numbers from 1 to 64 (5-12)"]
    short = run_cli("originality", "--index", f"infini-gram:{tiny_index}", "--lengths", "2-3", str(texts))
    line = json.loads(short.stdout)
    assert short.returncode == 0 and set(line["uniqueness"]) == {"2", "3"}
