"""Checkpoint discovery and the series report parts, without models (the pytester tests run them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.pipeline.series import find_checkpoints
from pytest_novelty.pipeline.suite_data import GenerationArrays, SuiteData, SuiteInfo
from pytest_novelty.report.json_report import build_report
from pytest_novelty.report.series import series_report, series_tables, write_series_plots


def make(run: Path, *names: str) -> Path:
    for name in names:
        (run / name).mkdir(parents=True)
    return run


def test_run_folder_checkpoints_in_step_order(tmp_path: Path) -> None:
    run = make(tmp_path / "run", "checkpoint-1000", "checkpoint-60", "checkpoint-200", "runs", "checkpoint-x")
    (run / "checkpoint-5.txt").write_text("not a folder")
    found = find_checkpoints(str(run))
    assert [(c.step, Path(c.path).name) for c in found] == [
        (60, "checkpoint-60"), (200, "checkpoint-200"), (1000, "checkpoint-1000")
    ]


def test_glob_takes_the_trailing_number(tmp_path: Path) -> None:
    make(tmp_path, "step_10", "step_9", "other_3")
    assert [c.step for c in find_checkpoints(str(tmp_path / "step_*"))] == [9, 10]


@pytest.mark.parametrize(
    ("names", "pattern", "message"),
    [
        ((), "", "no checkpoint-<step> subfolders"),
        (("final",), "*", "cannot read a step from 'final'"),
        (("a-5", "b-5"), "*", "step 5 is both a-5 and b-5"),
        ((), "step_*", "matches no folder; quote it"),
    ],
)
def test_bad_series(tmp_path: Path, names: tuple[str, ...], pattern: str, message: str) -> None:
    make(tmp_path, *names)
    with pytest.raises(ConfigError, match=message):
        find_checkpoints(str(tmp_path / pattern) if pattern else str(tmp_path))
    with pytest.raises(ConfigError, match="run folder not found"):
        find_checkpoints(str(tmp_path / "absent"))


def test_a_series_of_answers_takes_one_file_or_folder_per_checkpoint(tmp_path: Path) -> None:
    run = make(tmp_path / "answers", "checkpoint-20", "notes")
    (run / "checkpoint-100.jsonl").write_text("")
    (run / "checkpoint-5.txt").write_text("")  # neither a checkpoint-<step>.jsonl nor a folder
    found = find_checkpoints(f"answers:{run}?accept_prompt_text=true")
    assert [(c.step, c.path, c.name) for c in found] == [
        (20, f"answers:{run / 'checkpoint-20'}?accept_prompt_text=true", "checkpoint-20"),
        (100, f"answers:{run / 'checkpoint-100.jsonl'}?accept_prompt_text=true", "checkpoint-100.jsonl"),
    ]
    assert all(c.answers for c in found)
    assert [c.step for c in find_checkpoints(f"answers:{run}/checkpoint-?00.jsonl")] == [100]  # a glob's "?"
    (run / "checkpoint-20.jsonl").write_text("")
    with pytest.raises(ConfigError, match=r"step 20 is both checkpoint-20 and checkpoint-20\.jsonl"):
        find_checkpoints(f"answers:{run}")
    with pytest.raises(ConfigError, match=r"no checkpoint-<step>\.jsonl files or checkpoint-<step> folders"):
        find_checkpoints(f"answers:{make(tmp_path / 'empty', 'runs')}")


def entry(step: int, quality: float, change: dict | None) -> dict:
    return {
        "step": step, "model": f"/run/checkpoint-{step}", "metrics": {"quality": quality},
        "means": {"quality": quality, "originality@5": 1 - quality, "novelty@5": 0.3}, "change": change,
        "generated_rows": 4, "cached_rows": 0,
    }


def data(series: list[dict] | None = None) -> SuiteData:
    """A suite's exported data with one answer and, given, a series."""
    arrays = GenerationArrays([[0.5]], [[0.5]], [[0.5]])
    return SuiteData(4, arrays, SuiteInfo(), series=tuple(series or ()))


SUITES = {
    "story": data([entry(200, 0.5, {"quality": {"delta": 0.1, "delta_ci": [0.05, 0.15]}}), entry(60, 0.4, None)]),
    "poem": data([entry(60, 0.2, None)]),
    "plain": data(),
}


def test_report_series_is_per_checkpoint_in_step_order() -> None:
    series = series_report(SUITES)
    assert [e["step"] for e in series] == [60, 200]
    assert set(series[0]["suites"]) == {"story", "poem"} and set(series[1]["suites"]) == {"story"}
    assert build_report([], SUITES)["series"] == series
    assert "series" not in build_report([], {"plain": SUITES["plain"]})


def test_tables_show_values_and_paired_changes() -> None:
    text = "\n".join(series_tables(SUITES))
    assert "| 60 | 0.4000 | checkpoint-60 |" in text
    assert "| 200 | 0.5000 (+0.1000 [+0.0500, +0.1500]) | checkpoint-200 |" in text
    assert series_tables({"plain": SUITES["plain"]}) == []
    top = {"s": data([
        {"step": 1, "model": "c-1", "metrics": {"top10_novelty@5": 0.8}, "change": None},
        {"step": 2, "model": "c-2", "metrics": {"top10_novelty@5": 0.7},
         "change": {"top10_novelty@5": {"delta": -0.1, "delta_ci": [-0.3, -0.2], "status": "regressed"}}},
    ])}
    # The interval is the gated statistic's own (the top-10 % bootstrap): no "on novelty@5" aside.
    assert "0.7000 (-0.1000 [-0.3000, -0.2000], regression)" in "\n".join(series_tables(top))


def test_series_plot_is_drawn(tmp_path: Path) -> None:
    from matplotlib.image import imread

    plots = write_series_plots(tmp_path, SUITES)
    assert set(plots) == {"story", "poem"} and plots["story"]["series"].name == "story-series.png"
    pixels = imread(plots["story"]["series"])
    assert pixels.shape[1] > pixels.shape[0] > 100 and float(pixels.std()) > 0.01
