"""``pytest-novelty judge calibrate``: a judge's agreement with human grades, through the real CLI."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from scipy.stats import kendalltau, spearmanr

from pytest_novelty.cli import main
from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS, ConfigError
from pytest_novelty.scoring.judges import JudgeItem, RulesJudge
from tests.scoring.judges.judge_helpers import SECRET
from tests.servers.openai_api import FakeOpenAI

HUMAN = [0, 1, 2, 3, 1, 2, 4, 0, 3, 2, 4, 1]
# What the fake judge will answer per item (rubric points 0-5): related to HUMAN, not equal to it.
POINTS = [1, 1, 3, 2, 0, 4, 5, 2, 3, 1, 4, 2]
SILENT = {3, 8}  # items whose replies carry no score: the judge leaves them unscored


def graded_rows() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for i, (human, points) in enumerate(zip(HUMAN, POINTS, strict=True)):
        marker = "SILENT" if i in SILENT else f"POINTS{points}"
        rows.append({"id": f"r{i}", "prompt": f"Question {i // 3}: name a use for a brick.",
                     "response": f"Answer {i} {marker}: use it as a doorstop.", "human": human,
                     "group": f"q{i // 3}"})
    return rows


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def reply(prompt: str, choice: int) -> str:
    found = re.search(r"POINTS(\d)", prompt)
    return f"Reasoning.\nScore: {found.group(1)}" if found else "I cannot decide."


@pytest.fixture
def judged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeOpenAI, Path]]:
    """A fake OpenAI endpoint holding the key, and the graded calibration file to score with it."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    graded = write(tmp_path / "graded.jsonl", graded_rows())
    with FakeOpenAI(api_key=SECRET, reply=reply) as server:
        yield server, graded


def test_openai_judge_agreement_equals_scipy_on_the_scored_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], judged: tuple[FakeOpenAI, Path]
) -> None:
    server, graded = judged
    base = ["--task", "tool", "--judge", "openai:judge-model", "--base-url", server.url,
            "--cache", str(tmp_path / "cache"), "--samples", "2", "--concurrency", "2"]
    assert main(["judge", "calibrate", *base, "--dry-run", str(graded)]) == 0
    assert capsys.readouterr().out.strip() == "dry run: openai:judge-model would make 12 calls for 12 items"
    assert server.request_count == 0
    assert main(["judge", "calibrate", *base, "--json", "--resamples", "500", str(graded)]) == 0
    result = json.loads(capsys.readouterr().out)
    sent = server.request_count
    # The same judge through the plain `judge` command: every answer comes from the cache.
    assert main(["judge", *base, str(graded)]) == 0
    assert server.request_count == sent
    scores = {row["id"]: row["quality"] for row in map(json.loads, capsys.readouterr().out.splitlines())}
    scored = [(scores[f"r{i}"], HUMAN[i]) for i in range(len(HUMAN)) if scores[f"r{i}"] is not None]
    assert len(scored) == len(HUMAN) - len(SILENT) == result["n"]
    assert result["unscored"] == len(SILENT) and result["items"] == len(HUMAN)
    judge, human = zip(*scored, strict=True)
    assert result["spearman"] == pytest.approx(spearmanr(judge, human).statistic, abs=1e-6)
    assert result["kendall"] == pytest.approx(kendalltau(judge, human).statistic, abs=1e-6)
    for key in ("spearman", "kendall", "pairwise_accuracy"):
        low, high = result[f"{key}_ci"]
        assert low <= result[key] <= high
    assert result["bootstrap"] == {"resamples": 500, "seed": 0, "confidence": 0.95}
    assert sum(row["count"] for row in result["calibration"]) == result["n"]
    assert SECRET not in json.dumps(result)


def test_rules_judge_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = graded_rows()
    rows[0]["response"] = ""  # the rules judge gives an empty answer 0 points
    graded = write(tmp_path / "graded.jsonl", rows)
    args = ["judge", "calibrate", "--task", "open", "--cache", str(tmp_path / "c"), str(graded)]
    assert main([*args, "--json", "--resamples", "200"]) == 0
    result = json.loads(capsys.readouterr().out)
    qualities = [r.quality for r in RulesJudge().score(
        [JudgeItem("open", str(r["prompt"]), str(r["response"])) for r in rows])]
    expected = spearmanr(qualities, [r["human"] for r in rows]).statistic
    assert result["n"] == len(rows) and result["spearman"] == pytest.approx(expected, abs=1e-6)
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Spearman rho" in text and "pairwise accuracy" in text and "human grade" in text
    assert "judge ties count 1/2" in text and "2000 resamples, seed 0" in text


def test_plain_judge_command_still_takes_its_input_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write(tmp_path / "calibrate", graded_rows()[:1])
    assert main(["judge", "--task", "open", "--cache", str(tmp_path / "c"), str(source)]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "r0"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"id": 1, "prompt": "p", "response": "r"}, "line 1: missing 'human'"),
        ({"id": 1, "prompt": "p", "response": "r", "human": "good"}, "line 1: 'human' must be a finite number"),
        ({"id": 1, "prompt": "p", "response": "r", "human": 2, "group": [1]}, "line 1: 'group' must be"),
    ],
)
def test_bad_calibration_file_names_file_line_and_field(
    tmp_path: Path, line: dict[str, object], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    graded = write(tmp_path / "bad.jsonl", [line])
    assert main(["judge", "calibrate", "--task", "open", str(graded)]) == 4  # bad input: the status pytest gives it too
    err = capsys.readouterr().err
    assert str(graded) in err and message in err


def test_missing_file_points_to_the_builder(tmp_path: Path) -> None:
    from pytest_novelty.pipeline.calibration import read_calibration_file

    with pytest.raises(ConfigError, match="judge calibration-file"):
        read_calibration_file(tmp_path / "absent.jsonl")


def test_a_judge_that_scores_nothing_is_a_harness_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], judged: tuple[FakeOpenAI, Path]
) -> None:
    server, graded = judged
    args = ["judge", "calibrate", "--task", "tool", "--judge", "openai:judge-model", "--base-url", server.url,
            "--cache", str(tmp_path / "c"), "--budget", "0", str(graded)]
    assert main(args) == HARNESS_EXIT_STATUS  # a harness error: no verdict (README, "Exit status and harness errors")
    assert "scored none of the 12 items" in capsys.readouterr().err
