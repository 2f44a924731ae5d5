"""``--model PATH`` (a space) and ``--model=PATH`` give the same rootdir and node ids."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def collected_ids(result: pytest.RunResult) -> list[str]:
    return sorted(line for line in result.stdout.lines if re.match(r"^\S+::\S+", line))


@pytest.mark.parametrize("option", ["--model", "--novelty-model"])
def test_space_and_equals_collect_the_same_node_ids(
    pytester: pytest.Pytester, option: str, suite_dir: Path, tiny_checkpoint: Path, tmp_path: Path
) -> None:
    # The project's own config file marks its rootdir; the checkpoint lives outside the project.
    pytester.makeini("[pytest]\nmarkers =\n    project_marker: read only from the project's config file\n")
    assert not tiny_checkpoint.is_relative_to(pytester.path)
    rest = [f"--novelty-suites={suite_dir}", f"--novelty-cache={tmp_path / 'cache'}", "-p", "no:cacheprovider"]

    joined = pytester.runpytest_subprocess(f"{option}={tiny_checkpoint}", "--co", "-q", *rest)
    spaced = pytester.runpytest_subprocess(option, str(tiny_checkpoint), "--co", "-q", *rest)
    assert joined.ret == spaced.ret == 0, spaced.stderr.str()
    ids = collected_ids(joined)
    assert ids == [
        "gate-suites/story.toml::test_metric[story-originality@4>=0]",
        "gate-suites/story.toml::test_metric[story-quality>=0]",
    ]
    assert collected_ids(spaced) == ids

    # The header names the project folder as rootdir and its config file.
    header = pytester.runpytest_subprocess(option, str(tiny_checkpoint), "--co", *rest)
    header.stdout.fnmatch_lines([f"rootdir: {pytester.path}", "configfile: tox.ini"])


def test_a_value_inside_the_project_is_left_as_given(pytester: pytest.Pytester) -> None:
    from pytest_novelty.plugin import attach_path_values

    inside = pytester.mkdir("ckpt")
    outside = pytester.path.parent
    args = ["--model", str(inside), "--novelty-report", str(outside), "-k", str(outside)]
    fixed = attach_path_values(args, {"--model", "--novelty-report"}, pytester.path)
    assert fixed == ["--model", str(inside), f"--novelty-report={outside}", "-k", str(outside)]
    assert attach_path_values(["--model", "demo"], {"--model"}, pytester.path) is None
    assert attach_path_values(["--", "--model", str(outside)], {"--model"}, pytester.path) is None
