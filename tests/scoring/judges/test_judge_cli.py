"""The ``judge`` command: JSON Lines in, JSON Lines out."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from pytest_novelty.cli.judge import add_commands
from pytest_novelty.infra.errors import ConfigError
from tests.scoring.judges.judge_helpers import SECRET
from tests.servers.openai_api import FakeOpenAI


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="pytest-novelty")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


def write_input(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


ROWS: list[dict[str, object]] = [
    {"id": "a", "prompt": "Name a hobby for a rainy day.", "response": "Reading is a fine hobby for a rainy day."},
    {"id": 2, "prompt": "Name a hobby for a rainy day.", "response": ""},
]


def test_rules_judge_writes_one_line_per_item(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write_input(tmp_path / "in.jsonl", ROWS)
    assert run(["judge", "--task", "open", "--judge", "rules", "--cache", str(tmp_path / "c"), str(source)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        {"id": "a", "quality": 1.0, "scores": [5], "judge": "rules"},
        {"id": 2, "quality": 0.0, "scores": [0], "judge": "rules"},
    ]


def test_openai_judge_with_unscored_items_dry_run_and_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    source = write_input(tmp_path / "in.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    with FakeOpenAI(api_key=SECRET, reply=lambda prompt, i: f"Fine.\nScore: {3 + i % 2}") as server:
        server.inject("no_score", times=-1, match="Reading")
        base = ["judge", "--task", "open", "--judge", "openai:judge-model", "--base-url", server.url]
        base += ["--cache", str(tmp_path / "c"), "--samples", "4", "--concurrency", "1"]
        assert run([*base, "--dry-run", str(source)]) == 0
        assert capsys.readouterr().out.strip() == "dry run: openai:judge-model would make 2 calls for 2 items"
        assert run([*base, "--budget", "1", "-o", str(out), str(source)]) == 0
        assert server.request_count == 1  # item "a" got a reply without a score; its re-ask was refused
        assert run([*base, "-o", str(out), str(source)]) == 0
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(lines) == 2 and server.request_count == 1 + 3 + 1  # "a" asked 3 times, then 2 once
    assert lines[0]["id"] == "a" and lines[0]["quality"] is None and "Score: N" in lines[0]["error"]
    assert lines[1] == {"id": 2, "quality": 0.7, "scores": [3, 4, 3, 4], "judge": "openai:judge-model"}
    err = capsys.readouterr().err
    assert "1 of 2 items unscored" in err and SECRET not in err + out.read_text()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": 1, "prompt": "p"}\n', "line 1: missing 'response'"),
        ('{"id": 1, "prompt": "p", "response": "r"}\nnot json\n', "line 2: not valid JSON"),
        ("[1, 2]\n", "expected a JSON object"),
    ],
)
def test_bad_input_names_the_line(tmp_path: Path, content: str, message: str) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        run(["judge", "--task", "story", str(source)])
