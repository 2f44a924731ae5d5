"""``--novelty-log tensorboard:DIR``, read back with TensorBoard's own ``EventAccumulator``."""

from __future__ import annotations

import json

import pytest

from tests.integrations.conftest import DEMO_METRICS, SERIES_METRICS, STANDARD, LoggedRun

pytestmark = pytest.mark.slow

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator", reason="needs the tensorboard extra"
)


def _events(run: LoggedRun) -> object:
    events = event_accumulator.EventAccumulator(str(run.tensorboard), size_guidance={"images": 0, "tensors": 0})
    events.Reload()
    return events


def test_a_single_checkpoint_logs_every_gated_metric_at_its_step(demo_logged: LoggedRun) -> None:
    events = _events(demo_logged)
    scalars = set(events.Tags()["scalars"])
    report = json.loads((demo_logged.report / "report.json").read_text())
    rows = {r["metric"]: r["value"] for r in report["rows"]}
    assert set(rows) == set(DEMO_METRICS)
    for metric in (*DEMO_METRICS, *STANDARD):
        tag = f"novelty/story/{metric}"
        assert tag in scalars, (tag, sorted(scalars))
        (event,) = events.Scalars(tag)
        assert event.step == 400  # the step of the checkpoint-400 folder
        if metric in rows:  # the value the case decided on
            assert event.value == pytest.approx(rows[metric], abs=1e-6)
    (passed,) = events.Scalars("novelty/passed")
    assert (passed.step, passed.value) == (400, 1.0)
    assert report["suites"]["story"]["metrics"]["unscored"] == pytest.approx(
        events.Scalars("novelty/story/unscored")[0].value
    )


def test_cases_copied_spans_and_plots_are_there_as_text_and_images(demo_logged: LoggedRun) -> None:
    events = _events(demo_logged)
    (cases,) = events.Tensors("novelty/story/cases")
    text = cases.tensor_proto.string_val[0].decode()
    assert cases.step == 400
    assert "| novelty@5 |" in text and ">= 0.3" in text and "passed" in text
    (spans,) = events.Tensors("novelty/story/copied_spans")
    report = json.loads((demo_logged.report / "report.json").read_text())
    longest = report["suites"]["story"]["info"]["longest_copied"][0]
    assert f"| {longest['longest_span']} words |" in spans.tensor_proto.string_val[0].decode()
    images = set(events.Tags()["images"])
    assert images == {"novelty/story/quality_originality", "novelty/story/novelty_histogram"}
    (image,) = events.Images("novelty/story/quality_originality")
    assert image.step == 400 and image.width == 720 and image.height == 540


def test_a_series_logs_every_checkpoint_at_its_own_step(series_logged: LoggedRun) -> None:
    events = _events(series_logged)
    report = json.loads((series_logged.report / "report.json").read_text())
    by_step = {e["step"]: e["suites"]["story"]["metrics"] for e in report["series"]}
    assert sorted(by_step) == [60, 200, 400]
    for metric in SERIES_METRICS:
        logged = {e.step: e.value for e in events.Scalars(f"novelty/story/{metric}")}
        assert sorted(logged) == [60, 200, 400], metric
        for step, value in logged.items():
            assert value == pytest.approx(by_step[step][metric], abs=1e-6)
    assert [e.step for e in events.Scalars("novelty/passed")] == [400]
    assert "novelty/story/series" in events.Tags()["images"]
