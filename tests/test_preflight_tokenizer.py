"""The preflight's prompt lengths read the checkpoint's tokenizer; one that cannot be read is bad
input found there, before the model loads, in one line naming the checkpoint (it used to be
skipped without a word, and found again only once the generation step had started)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder


@pytest.fixture
def cut_tokenizer(tmp_path: Path, tiny_checkpoint: Path) -> Path:
    """The tiny checkpoint with its ``tokenizer.json`` cut off half-way (an interrupted copy): the
    checkpoint checks pass (the file is there), transformers cannot read it."""
    folder = tmp_path / "cut-tokenizer"
    shutil.copytree(tiny_checkpoint, folder)
    data = (folder / "tokenizer.json").read_bytes()
    (folder / "tokenizer.json").write_bytes(data[: len(data) // 2])
    return folder


@pytest.fixture
def suites(tmp_path: Path) -> Path:
    return write_story_suite_folder(tmp_path / "suites", story_prompts(4), suite_toml())


def test_pytest_finds_it_before_any_case(
    pytester: pytest.Pytester, cut_tokenizer: Path, suites: Path, tiny_index: Path, tmp_path: Path
) -> None:
    result = pytester.runpytest_subprocess(
        "--model", str(cut_tokenizer), f"--novelty-suites={suites}", f"--novelty-cache={tmp_path / 'c'}",
        f"--originality=infini-gram:{tiny_index}", "-p", "no:cacheprovider",
    )  # fmt: skip
    text = result.stdout.str() + "\n" + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in text.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: {cut_tokenizer}: --model: cannot load the tokenizer: ")
    assert "[novelty] loading" not in text and "Traceback" not in text  # found before the model loads
    assert "passed" not in text and "error" not in result.parseoutcomes()


def test_the_command_line_finds_it_before_the_model_loads(
    cut_tokenizer: Path, suites: Path, tiny_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_novelty.cli import main

    status = main(["run", "--model", str(cut_tokenizer), "--suites", str(suites), "--cache", str(tmp_path / "c"),
                   "--originality", f"infini-gram:{tiny_index}"])
    err = capsys.readouterr().err
    assert status == 4
    assert f"pytest-novelty: error: {cut_tokenizer}: --model: cannot load the tokenizer: " in err
    assert "[novelty] loading" not in err
