"""The report folder (report.json, report.md, plots) and the terminal table with comparison columns."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pytest_novelty.gate.comparison import Comparison
from pytest_novelty.gate.record import CaseRecord
from pytest_novelty.metrics import gated_novelty
from pytest_novelty.pipeline.suite_data import GenerationArrays, SuiteData, SuiteInfo
from pytest_novelty.report import (
    ReportFiles,
    build_report,
    render_markdown,
    render_table,
    write_markdown_report,
    write_report,
)
from pytest_novelty.report.json_report import read_records
from pytest_novelty.report.plots import SIZE

VERSIONS = {"model": "ckpt-b", "suites": "suites@abc123", "judge": "rules", "index": "infini-gram:/idx"}


def rows() -> list[CaseRecord]:
    regression = Comparison(
        status="regressed", accepted_value=0.612, candidate_value=0.544, tolerance=0.02, delta_ci=(-0.09, -0.05),
        p_value=0.0004, n_pairs=12, message="poetry quality: 0.6120 -> 0.5440 (-0.0680, ...): regression",
        suite="poetry", metric="quality", against="baseline",
    )  # fmt: skip
    drift = Comparison(
        status="within_tolerance", accepted_value=0.42, candidate_value=0.41, tolerance=0.02, delta_ci=None,
        p_value=None, n_pairs=0, message="poetry novelty@5: 0.4200 -> 0.4100 (-0.0100): within tolerance",
        suite="poetry", metric="novelty@5", against="baseline",
    )  # fmt: skip
    return [
        CaseRecord("poetry", "quality", ">=", 0.3, 0.544, "failed", message="poetry: quality = 0.5440 meets >= 0.3",
                   threshold_passed=True, comparison=regression, failures=("regression",)),
        CaseRecord("poetry", "novelty@5", ">=", 0.3, 0.41, "passed", message="poetry: novelty@5 = 0.4100 meets >= 0.3",
                   threshold_passed=True, comparison=drift),
        CaseRecord("story", "originality@4", ">=", 0.2, None, "failed", threshold_passed=False,
                   message="story: originality@4 could not be computed"),
    ]  # fmt: skip


def test_a_record_is_read_back_from_report_json_as_it_was_written(report: ReportFiles) -> None:
    """report.json is written from the records and read back into the same records."""
    data = json.loads(report.json.read_text())
    assert sorted(read_records(data), key=lambda r: r.metric) == sorted(rows(), key=lambda r: r.metric)
    data["format"] = 1
    with pytest.raises(ValueError, match="report format 1"):
        read_records(data)


def test_a_malformed_record_is_named() -> None:
    with pytest.raises(ValueError, match="malformed case record"):
        CaseRecord.from_json({"suite": "s"})
    with pytest.raises(ValueError, match="outcome is one of"):
        CaseRecord.from_json({**rows()[0].to_json(), "outcome": "maybe"})


def generations(seed: int, shift: float = 0.0, model: str = "") -> GenerationArrays:
    rng = np.random.default_rng(seed)
    quality = np.clip(rng.normal(0.6 + shift, 0.15, size=(12, 4)), 0, 1)
    originality = np.clip(rng.normal(0.5, 0.2, size=(12, 4)), 0, 1)
    quality[0, 0] = math.nan
    novelty = gated_novelty(quality, originality)  # the metrics step's values, which the report shows as given
    grids = [[[None if math.isnan(v) else float(v) for v in row] for row in a] for a in (quality, originality, novelty)]
    return GenerationArrays(*grids, model=model)


def suites_data() -> dict[str, SuiteData]:
    poetry = SuiteData(5, generations(0), SuiteInfo(prompts=12), baseline=generations(1, shift=0.1, model="ckpt-a"))
    story = SuiteData(4, generations(2), SuiteInfo())
    return {"poetry": poetry, "story": story}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReportFiles]:
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GITHUB_STEP_SUMMARY", raising=False)
        yield write_report(tmp_path_factory.mktemp("report"), rows(), suites_data(), VERSIONS)


# report.json


def test_report_json_holds_everything(report: ReportFiles) -> None:
    assert report.json.name == "report.json"
    data = json.loads(report.json.read_text())  # strict JSON: NaN was written as null
    assert data["versions"]["model"] == "ckpt-b" and data["versions"]["index"] == "infini-gram:/idx"
    assert "pytest_novelty" in data["versions"]
    assert data["summary"] == {
        "cases": 3,
        "passed": 1,
        "failed": 2,
        "threshold_failures": 1,
        "regressions": 1,
        "warnings": 1,
        "improvements": 0,
        "errors": 0,
        "complete": True,
    }
    by_metric = {r["metric"]: r for r in data["rows"]}
    assert by_metric["quality"]["comparison"]["delta_ci"] == [-0.09, -0.05]
    assert by_metric["quality"]["comparison"]["against"] == "baseline"
    assert by_metric["originality@4"]["value"] is None
    poetry = data["suites"]["poetry"]
    assert poetry["n"] == 5 and poetry["info"]["prompts"] == 12
    assert SuiteInfo.from_json(poetry["info"]) == SuiteInfo(prompts=12)  # read back as written
    assert len(poetry["candidate"]["quality"]) == 12 and poetry["candidate"]["quality"][0][0] is None
    assert poetry["candidate"]["summary"]["quality"]["unscored"] == 1
    assert poetry["baseline"]["summary"]["novelty"]["mean"] > 0
    assert "baseline" not in data["suites"]["story"]
    assert data["plots"]["poetry"] == {
        "novelty_histogram": "poetry-novelty-histogram.png",
        "quality_originality": "poetry-quality-originality.png",
    }


def test_build_report_is_json_safe_for_numpy_input() -> None:
    data = build_report(
        [CaseRecord("s", "quality", ">=", 0.3, float(np.float64(np.nan)), "passed")],
        {"s": SuiteData(4, GenerationArrays([[0.5, np.nan]], [[0.1, 0.2]], [[1 / 6, np.nan]]), SuiteInfo())},
    )
    text = json.dumps(data, allow_nan=False)
    assert '"value": null' in text
    assert data["suites"]["s"]["candidate"]["quality"] == [[0.5, None]]
    assert data["suites"]["s"]["candidate"]["summary"]["novelty"]["count"] == 1


# report.md


def test_report_md_has_a_short_table(report: ReportFiles) -> None:
    text = report.markdown.read_text()
    assert text.startswith("## Novelty gate\n")
    assert "**2 of 3 cases failed** (1 regression, 1 drift warning)" in text
    assert "| suite | metric | value | threshold | compared with | delta | CI | p | pairs | verdict |" in text
    assert (
        "| poetry | `quality` | 0.5440 | >= 0.3 | baseline 0.6120 | -0.0680 | [-0.090, -0.050] | 0.0004 | 12 "
        "| **FAIL regression** |" in text
    )
    assert ("| poetry | `novelty@5` | 0.4100 | >= 0.3 | baseline 0.4200 | -0.0100 | n/a | n/a |  "
            "| within tolerance |") in text
    assert "| story | `originality@4` | n/a | >= 0.2 | n/a | n/a | n/a | n/a |  | **FAIL >= 0.2** |" in text
    assert "- model: `ckpt-b`" in text
    assert "- poetry quality: 0.6120 -> 0.5440" in text  # the regression's own message
    assert "- story: originality@4 could not be computed" in text
    assert "quality = 0.5440 meets" not in text  # a threshold that held is not a reason
    assert "![poetry quality originality](poetry-quality-originality.png)" in text


def test_threshold_only_rows_keep_the_short_layout() -> None:
    plain = [CaseRecord("s", "quality", ">=", 0.3, 0.5, "passed", threshold_passed=True)]
    text = render_markdown(plain)
    assert "| suite | metric | value | threshold | result |" in text
    assert "| s | `quality` | 0.5000 | >= 0.3 | pass |" in text
    assert "**the 1 case passed**" in text


def test_step_summary_is_appended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    plots = {"poetry": {"novelty_histogram": tmp_path / "poetry-novelty-histogram.png"}}
    path = write_markdown_report(tmp_path / "out", rows(), VERSIONS, plots=plots)
    text = summary.read_text()
    assert text.startswith("# earlier step\n## Novelty gate\n")
    assert "| poetry | `quality` |" in text
    assert "](poetry-novelty-histogram.png)" not in text  # images only resolve inside the folder
    assert "](poetry-novelty-histogram.png)" in path.read_text()
    write_markdown_report(tmp_path / "out", rows(), VERSIONS, step_summary=False)
    assert summary.read_text() == text


# plots


@pytest.mark.parametrize("name", ["poetry-quality-originality.png", "poetry-novelty-histogram.png"])
def test_plots_are_real_pictures(report: ReportFiles, name: str) -> None:
    from matplotlib.image import imread

    path = report.json.parent / name
    pixels = imread(str(path))
    assert pixels.shape[:2] == (SIZE[1], SIZE[0])
    assert float(pixels[..., :3].var()) > 0.0
    rgb = (pixels[..., :3] * 255).astype(np.uint32)
    colours = np.unique(rgb[..., 0] << 16 | rgb[..., 1] << 8 | rgb[..., 2])
    assert colours.size > 20  # axes, labels, two series: far from a blank or flat image
    assert not list(report.json.parent.glob(".*.tmp"))  # no leftover temporary files


def test_a_suite_without_baseline_gets_its_plots(report: ReportFiles) -> None:
    assert sorted(report.plots["story"]) == ["novelty_histogram", "quality_originality"]
    assert all(p.is_file() for p in report.plots["story"].values())


# the terminal table


def test_terminal_table_shows_comparison_columns() -> None:
    lines = render_table(rows(), {"poetry": "model ckpt-b, judge rules"})
    text = "\n".join(lines)
    assert lines[0] == "suite poetry: model ckpt-b, judge rules"
    header = next(line for line in lines if "metric" in line).split()
    assert header == ["suite", "metric", "value", "CI", "threshold", "compared", "with", "delta", "delta", "CI", "p",
                      "pairs", "verdict"]  # fmt: skip
    quality = next(line for line in lines if "quality" in line)
    for cell in ("poetry", "0.5440", ">= 0.3", "baseline 0.6120", "-0.0680", "[-0.090, -0.050]", "FAIL regression"):
        assert cell in quality, cell
    assert "within tolerance" in text
    story = next(line for line in lines if "story" in line)
    assert "FAIL >= 0.2" in story and "n/a" in story


def test_terminal_table_keeps_its_layout_without_comparisons() -> None:
    plain = [
        CaseRecord("s", "quality", ">=", 0.3, 0.5, "passed", ci=(0.25, 0.75), confidence=0.95, within_noise=True),
        CaseRecord("s", "novelty@4", ">=", 0.3, 0.1, "failed"),
    ]
    lines = render_table(plain, {"s": "model m"})
    assert lines[0] == "suite s  (model m)"
    assert lines[1].split() == ["metric", "value", "95%", "CI", "threshold", "result"]
    assert lines[3].split() == ["novelty@4", "0.1000", ">=", "0.3", "FAIL"]  # no interval given: none shown
    assert lines[4].split() == ["quality", "0.5000", "[0.250,", "0.750]", ">=", "0.3", "pass", "(within", "noise)"]
