"""``--novelty-log wandb:PROJECT`` offline, read back from W&B's own offline run files."""

from __future__ import annotations

import json

import pytest

from tests.integrations.conftest import DEMO_METRICS, FAKE_KEY, SERIES_METRICS, STANDARD, LoggedRun
from tests.integrations.wandb_files import offline_run

pytestmark = pytest.mark.slow

pytest.importorskip("wandb", reason="needs the wandb extra")


def _by_step(history: list[dict]) -> dict[int, dict]:
    steps: dict[int, dict] = {}
    for entry in history:
        steps.setdefault(int(entry["_step"]), {}).update(entry)
    return steps


def test_a_single_checkpoint_logs_metrics_cases_spans_plots_and_identity(demo_logged: LoggedRun) -> None:
    folder, run = offline_run(demo_logged.wandb_dir)
    assert run["run"]["project"] == "novelty-tests" and run["run"]["name"] == "gate" and run["run"]["group"] == "ci"
    report = json.loads((demo_logged.report / "report.json").read_text())
    assert run["config"]["model"].endswith("checkpoint-400")
    assert run["config"]["identity"] == report["suites"]["story"]["info"]["identity"]
    assert run["config"]["index"] == report["versions"]["index"] and run["config"]["suites"] == "story"
    steps = _by_step(run["history"])
    assert list(steps) == [400]
    logged = steps[400]
    rows = {r["metric"]: r["value"] for r in report["rows"]}
    for metric in (*DEMO_METRICS, *STANDARD):
        assert f"novelty/story/{metric}" in logged, metric
    for metric, value in rows.items():
        assert logged[f"novelty/story/{metric}"] == pytest.approx(value, abs=1e-6)
    assert logged["novelty/passed"] == 1 and run["summary"]["novelty/passed"] == 1
    cases = json.loads((folder / "files" / logged["novelty/cases/path"]).read_text())
    assert cases["columns"][:5] == ["suite", "metric", "value", "bound", "outcome"]
    assert {(row[1], row[3]) for row in cases["data"]} >= {("novelty@5", ">= 0.3"), ("quality", ">= 0.45")}
    spans = json.loads((folder / "files" / logged["novelty/copied_spans/path"]).read_text())
    longest = report["suites"]["story"]["info"]["longest_copied"][0]
    assert spans["data"][0][1] == longest["longest_span"] and spans["data"][0][3] == longest["longest_span_text"]
    assert logged["novelty/story/quality_originality/_type"] == "image-file"
    assert (folder / "files" / logged["novelty/story/quality_originality/path"]).is_file()


def test_a_series_logs_every_checkpoint_at_its_own_step(series_logged: LoggedRun) -> None:
    _, run = offline_run(series_logged.wandb_dir)
    report = json.loads((series_logged.report / "report.json").read_text())
    expected = {e["step"]: e["suites"]["story"]["metrics"] for e in report["series"]}
    steps = _by_step(run["history"])
    assert sorted(steps) == [60, 200, 400]
    for step, values in expected.items():
        for metric in SERIES_METRICS:
            assert steps[step][f"novelty/story/{metric}"] == pytest.approx(values[metric], abs=1e-6)
    assert "novelty/passed" in steps[400] and "novelty/passed" not in steps[60]


def test_no_credential_reaches_the_output_or_any_file_the_trackers_wrote(demo_logged: LoggedRun) -> None:
    assert FAKE_KEY not in demo_logged.output
    for path in demo_logged.folder.rglob("*"):
        if path.is_file():
            assert FAKE_KEY.encode() not in path.read_bytes(), path
