"""``--novelty-log mlflow:URI`` on a local folder store, read back with MLflow's own client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integrations.conftest import DEMO_METRICS, SERIES_METRICS, STANDARD, LoggedRun

pytestmark = pytest.mark.slow

pytest.importorskip("mlflow", reason="needs the mlflow extra")


def _run(run: LoggedRun, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=str(run.mlruns))
    experiment = client.get_experiment_by_name("novelty-tests")
    (found,) = client.search_runs([experiment.experiment_id])
    return client, found


def _key(metric: str) -> str:
    from pytest_novelty.integrations.mlflow import metric_key

    return metric_key(f"novelty/story/{metric}")


def test_a_single_checkpoint_logs_metrics_params_and_artifacts(
    demo_logged: LoggedRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, run = _run(demo_logged, monkeypatch)
    assert run.info.status == "FINISHED"
    report = json.loads((demo_logged.report / "report.json").read_text())
    rows = {r["metric"]: r["value"] for r in report["rows"]}
    assert _key("novelty@5") == "novelty/story/novelty_5"
    for metric in (*DEMO_METRICS, *STANDARD):
        (point,) = client.get_metric_history(run.info.run_id, _key(metric))
        assert point.step == 400, metric
        if metric in rows:
            assert point.value == pytest.approx(rows[metric], abs=1e-6)
    assert run.data.params["model"].endswith("checkpoint-400")
    assert run.data.params["judge"] == report["versions"]["judge"]
    target = demo_logged.folder / "downloaded"
    target.mkdir(exist_ok=True)
    folder = Path(client.download_artifacts(run.info.run_id, "novelty", str(target)))
    cases = json.loads((folder / "cases.json").read_text())
    assert cases["step"] == 400
    assert {(c["metric"], c["bound"], c["outcome"]) for c in cases["cases"]} >= {("novelty@5", ">= 0.3", "passed")}
    spans = json.loads((folder / "copied_spans.json").read_text())["copied_spans"]
    assert spans[0]["length"] == report["suites"]["story"]["info"]["longest_copied"][0]["longest_span"]
    plots = sorted(p.name for p in (folder / "plots").iterdir())
    assert plots == ["story-novelty-histogram.png", "story-quality-originality.png"]


def test_a_series_logs_every_checkpoint_at_its_own_step(
    series_logged: LoggedRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, run = _run(series_logged, monkeypatch)
    report = json.loads((series_logged.report / "report.json").read_text())
    expected = {e["step"]: e["suites"]["story"]["metrics"] for e in report["series"]}
    for metric in SERIES_METRICS:
        history = {p.step: p.value for p in client.get_metric_history(run.info.run_id, _key(metric))}
        assert sorted(history) == [60, 200, 400]
        for step, value in history.items():
            assert value == pytest.approx(expected[step][metric], abs=1e-6)
    assert [p.step for p in client.get_metric_history(run.info.run_id, "novelty/passed")] == [400]
