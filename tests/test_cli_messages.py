"""``pytest-novelty run`` names its own options in its messages, and never leaves an old report behind.

The option table declares each option once with both spellings; a message the layers write with
pytest's spelling (``--novelty-log``) reaches the command line's user with theirs (``--log``). Each
case was reproduced on the code before this change: ``run --log tensorbaord:x`` was told about
``--novelty-log``, and ``run --suites FILE`` to "pass --novelty-suites DIR or set novelty_suites in
your pytest ini"; a run stopped by bad input left the previous run's report as it was.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_novelty.cli import main
from pytest_novelty.infra.errors import USAGE_EXIT_STATUS
from pytest_novelty.pipeline.options import CLI, OPTIONS, PYTEST, spelled


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.splitlines()
    (line,) = [line for line in lines if line.startswith("pytest-novelty") and ": error: " in line]
    return line


def test_each_option_is_spelled_as_its_front_end_spells_it() -> None:
    for option in OPTIONS:
        for given in (option.long, option.cli_flag):
            assert spelled(given, CLI) == option.cli_flag
            assert spelled(given, PYTEST) == (option.short or option.long)
    assert spelled("--novelty-log", CLI) == "--log" and spelled("--log", PYTEST) == "--novelty-log"
    assert spelled("scoring.judge", CLI) == "scoring.judge"  # a suite key stays as it is


def test_a_tracker_typo_names_the_command_lines_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--model", "demo", "--log", "tensorbaord:x"]) == USAGE_EXIT_STATUS
    line = _error(capsys)
    assert line.startswith("pytest-novelty: error: --log: unknown tracker 'tensorbaord:x' (did you mean 'tensorboard'")
    assert "--novelty-" not in line


def test_a_suites_option_that_is_no_folder_says_so_in_the_command_lines_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "story.toml"
    file.write_text("[prompts]\n")
    assert main(["run", "--model", "demo", "--suites", str(file)]) == USAGE_EXIT_STATUS
    line = _error(capsys)
    assert line == f"pytest-novelty: error: {file}: --suites: a file, not a folder; give the folder of suite files " \
        "(*.toml)"
    assert main(["run", "--model", "demo", "--suites", str(tmp_path / "missing")]) == USAGE_EXIT_STATUS
    line = _error(capsys)
    assert line.endswith(str(tmp_path / "missing") + ": --suites: no such folder; check the path, or give the folder "
                         "of suite files (*.toml)")
    assert "--novelty-suites" not in line and "pytest ini" not in line


def test_bad_input_replaces_the_previous_report_with_no_verdict_and_its_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report"
    report.mkdir()
    (report / "report.json").write_text(json.dumps({"summary": {"passed": 3, "complete": True}}))
    assert main(["run", "--model", "demo", "--log", "tensorbaord:x", "--report", str(report)]) == USAGE_EXIT_STATUS
    capsys.readouterr()
    data = json.loads((report / "report.json").read_text())
    assert data["versions"]["exit status"] == USAGE_EXIT_STATUS and not data["summary"]["complete"]
    assert data["versions"]["status"].startswith("bad input: --log: unknown tracker 'tensorbaord:x'")
    assert f"exit status: `{USAGE_EXIT_STATUS}`" in (report / "report.md").read_text()
