"""The ``index build`` and ``originality`` commands."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from pytest_novelty.cli.originality import add_commands
from pytest_novelty.infra.errors import ConfigError


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="pytest-novelty")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("orig-cli")
    corpus = tmp / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in ["the cat sat on the mat", "a dog sat on a log"]))
    assert run(["index", "build", str(corpus), "--out", str(tmp / "idx"), "--quiet"]) == 0
    return tmp / "idx"


def test_index_build_prints_the_facts(index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = index.parent / "more.txt"
    corpus.write_text("one two three")
    assert run(["index", "build", str(corpus), "--out", str(index.parent / "idx2"), "--quiet"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["docs"] == 1 and facts["tokens"] == 3 and facts["tokenizer"] == "words"


@pytest.mark.parametrize("kind", ["infini-gram", "ngram-set"])
def test_originality_writes_one_line_per_input(
    index: Path, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = tmp_path / "in.jsonl"
    inputs.write_text(
        json.dumps({"id": "a", "text": "the cat sat on a log"})
        + "\n\n"
        + json.dumps({"id": 7, "text": "purple"})
        + "\n"
        + json.dumps({"text": "a dog sat on the mat today"})
        + "\n"
    )
    assert run(["originality", "--index", f"{kind}:{index}", "--n", "2", "4", str(inputs)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["id"] for line in lines] == ["a", 7, 4]
    assert lines[0]["originality"] == {"2": 0.0, "4": 1 / 3} and lines[0]["ngrams"] == {"2": 5, "4": 3}
    assert lines[1]["originality"] == {"2": None, "4": None} and lines[1]["ngrams"] == {"2": 0, "4": 0}
    assert lines[2]["originality"] == {"2": 1 / 6, "4": 0.5}
    assert lines[0]["longest_span"] == 4 and lines[0]["longest_span_doc"] in (0, 1)


def test_originality_reads_stdin(
    index: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"id": 1, "text": "the cat sat"}) + "\n"))
    assert run(["originality", "--index", f"infini-gram:{index}", "--n", "3", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["originality"] == {"3": 0.0}


def test_bad_input_is_a_config_error(index: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    with pytest.raises(ConfigError, match="line 1 has no string field 'text'"):
        run(["originality", "--index", f"infini-gram:{index}", str(bad)])
    with pytest.raises(ConfigError, match=r"missing\.jsonl: INPUT: no such file"):  # refused as argparse reads it
        run(["originality", "--index", f"infini-gram:{index}", str(tmp_path / "missing.jsonl")])


def test_wired_into_the_main_command(index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_novelty.cli import main

    inputs = tmp_path / "in.jsonl"
    inputs.write_text(json.dumps({"id": "x", "text": "the cat"}) + "\n")
    assert main(["originality", "--index", f"ngram-set:{index}", "--n", "1", str(inputs)]) == 0
    assert json.loads(capsys.readouterr().out)["originality"] == {"1": 0.0}
    # Bad input: exit 4, the status pytest gives it too.
    assert main(["originality", "--index", f"ngramset:{index}", str(inputs)]) == 4
    assert "did you mean 'ngram-set'" in capsys.readouterr().err
