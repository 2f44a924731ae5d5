"""``pytest-novelty judge calibration-file``: calibration files from public graded datasets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_novelty.cli import main
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.pipeline.calibration import read_calibration_file
from pytest_novelty.scoring.judges.graded_sets import MACGYVER_GRADES, graded_rows

DATASETS = Path(__file__).resolve().parents[3].parent / "shared" / "datasets"
MACGYVER = DATASETS / "macgyver" / "problem_solution_pair.jsonl"
MACGYVER_XLSX = DATASETS / "macgyver" / "problem_solution_pair.xlsx"
NOVELTYBENCH_HUMANS = DATASETS / "noveltybench" / "sample_data_ff882fd" / "humans.jsonl"


def needs(path: Path) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not path.is_file(), reason=f"dataset file not present: {path}")


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def macgyver_row(ident: str, solvable: str, label: str, solution: str | None = "Step1: Use the cup.") -> dict:
    return {"ID": ident, "Problem": f"Problem {ident}. Tools available: a cup, a towel. How do you do it?",
            "Solvable?": solvable, "Unconventional?": "N/A", "Solution": solution, "Label": label}


def test_macgyver_labels_become_ordinal_grades(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write(tmp_path / "pairs.jsonl", [
        macgyver_row("1", "Yes", "efficient"),
        macgyver_row("2", "Yes", "inefficient"),
        macgyver_row("3", "Yes", "infeasible"),
        macgyver_row("4", "No", "correct_right_reason"),
        macgyver_row("5", "No", "wrong_solution"),
        macgyver_row("6", "Yes", "none"),
        macgyver_row("7", "Yes", "efficient", solution=None),
    ])
    out = tmp_path / "cal.jsonl"
    assert main(["judge", "calibration-file", "--from", f"macgyver:{source}", "--out", str(out)]) == 0
    assert "wrote 5 graded items (task tool)" in capsys.readouterr().out
    items = read_calibration_file(out)
    assert [(i.id, i.human) for i in items] == [
        ("macgyver-1", 2), ("macgyver-2", 1), ("macgyver-3", 0), ("macgyver-4", 2), ("macgyver-5", 0)
    ]
    assert all("label" not in i.meta and i.meta["items"] for i in items)  # the grade never reaches the judge
    assert items[0].response == "Step1: Use the cup."


def test_unlabelled_macgyver_file_is_refused_with_the_fix(tmp_path: Path) -> None:
    rows = [{k: v for k, v in macgyver_row("1", "Yes", "efficient").items() if k != "Label"}]
    with pytest.raises(ConfigError, match="use problem_solution_pair"):
        graded_rows(f"macgyver:{write(tmp_path / 'extra.jsonl', rows)}")


def test_noveltybench_keeps_one_generation_per_class_grouped_by_prompt(tmp_path: Path) -> None:
    source = write(tmp_path / "scored.jsonl", [
        {"id": "curated-1", "prompt": "Name a colour.", "generations": ["red", "Red", "blue"],
         "partition": [0, 0, 1], "generation_scores": [7, 0, 4]},
    ])
    task, rows = graded_rows(f"noveltybench:{source}")
    assert task == "open"
    assert [(r["id"], r["response"], r["human"], r["group"]) for r in rows] == [
        ("curated-1-0", "red", 7, "curated-1"), ("curated-1-2", "blue", 4, "curated-1")
    ]


@pytest.mark.parametrize(
    ("source", "message"),
    [("macgyvr:x.jsonl", "did you mean 'macgyver'"), ("macgyver:/nonexistent/file.jsonl", "file not found")],
)
def test_bad_sources(source: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        graded_rows(source)


def test_noveltybench_prompt_list_is_refused(tmp_path: Path) -> None:
    source = write(tmp_path / "curated.jsonl", [{"id": "curated-1", "prompt": "Name a colour."}])
    with pytest.raises(ConfigError, match="scored-output file"):
        graded_rows(f"noveltybench:{source}")


@needs(MACGYVER)
def test_real_macgyver_file(tmp_path: Path) -> None:
    task, rows = graded_rows(f"macgyver:{MACGYVER}")
    labels = [json.loads(line)["Label"] for line in MACGYVER.read_text(encoding="utf-8").splitlines()]
    assert task == "tool" and len(rows) == sum(label in MACGYVER_GRADES for label in labels)
    assert {r["human"] for r in rows} == {0, 1, 2}


@needs(MACGYVER_XLSX)
def test_real_macgyver_workbook_gives_the_same_grades_as_its_conversion(tmp_path: Path) -> None:
    if not MACGYVER.is_file():
        pytest.skip(f"dataset file not present: {MACGYVER}")
    from_xlsx = graded_rows(f"macgyver:{MACGYVER_XLSX}")[1]
    from_jsonl = graded_rows(f"macgyver:{MACGYVER}")[1]
    assert [(r["id"], r["human"]) for r in from_xlsx] == [(r["id"], r["human"]) for r in from_jsonl]


@needs(NOVELTYBENCH_HUMANS)
def test_real_noveltybench_file_calibrates_the_rules_judge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cal.jsonl"
    assert main(["judge", "calibration-file", "--from", f"noveltybench:{NOVELTYBENCH_HUMANS}", "--out", str(out)]) == 0
    assert "reward-model scores, not human judgements" in capsys.readouterr().out
    items = read_calibration_file(out)
    assert len({i.group for i in items}) == 100 and all(0 <= i.human <= 10 for i in items)
    assert main(["judge", "calibrate", "--task", "open", "--json", "--resamples", "200",
                 "--cache", str(tmp_path / "c"), str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n"] == len(items) and result["groups"] > 1 and result["pairs"] > 0
