"""The value every integration reads (``TrackedRun``), the checkpoint step, the ``--novelty-log`` specs,
and what a missing extra or a tracker that fails does to a run (exit 4 / exit 8, one line each)."""

from __future__ import annotations

import json
import socket
import textwrap
from pathlib import Path

import pytest

from pytest_novelty.gate.comparison import Comparison
from pytest_novelty.gate.record import CaseRecord
from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS, ConfigError
from pytest_novelty.integrations import TRACKERS, TrackedRun, checkpoint_step
from pytest_novelty.integrations.mlflow import metric_key
from pytest_novelty.report.json_report import REPORT_FORMAT
from tests.spec_errors import check_unknown_kind
from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder


def test_the_step_comes_from_the_folder_name_then_trainer_state_else_zero(tmp_path: Path) -> None:
    assert checkpoint_step(str(tmp_path / "run" / "checkpoint-300")) == 300
    saved = tmp_path / "final"
    saved.mkdir()
    (saved / "trainer_state.json").write_text(json.dumps({"global_step": 77, "epoch": 1.0}))
    assert checkpoint_step(str(saved)) == 77
    (saved / "trainer_state.json").write_text("{not json")
    assert checkpoint_step(str(saved)) == 0
    for other in ("demo", "org/name@main", "openai:gpt-4o", "", None):
        assert checkpoint_step(other) == 0


def _report() -> dict:
    """A report.json as the plugin writes it for a two-checkpoint series with a compared case."""
    regression = Comparison(
        status="regressed", accepted_value=0.44, candidate_value=0.31, tolerance=0.02, delta_ci=(-0.159, -0.101),
        p_value=0.00002, n_pairs=20, message="story novelty@5: regression", against="baseline",
    )  # fmt: skip
    rows = [
        CaseRecord("story", "q_at_tail@0.1", ">=", 0.4, 0.61, "passed"),
        CaseRecord("story", "novelty@5", ">=", 0.3, 0.31, "failed", message="story novelty@5: regression",
                   comparison=regression),
    ]  # fmt: skip
    return {
        "format": REPORT_FORMAT,
        "versions": {"model": "/runs/r/checkpoint-400", "judge": "rules", "index": "infini-gram:/idx",
                     "originality units": "words", "pytest-novelty": "0.1.0", "suites": {"story": "s.toml"}},
        "rows": [r.to_json() for r in rows],
        "suites": {"story": {
            "metrics": {"quality": 0.5, "unscored": 0.0, "originality@5": 0.7, "coverage@5": 0.9,
                        "novelty@5": 0.31, "q_at_tail@0.1": 0.55, "novelty_overall@0.1": 0.2},
            "info": {"units": "words", "identity": "ckpt @ 01d791a0", "longest_copied": [
                {"generation": "A long answer.", "prompt": "p3", "sample": 1, "longest_span": 1,
                 "longest_span_doc": None, "longest_span_text": "long"},
                {"generation": "Lily went to the park and saw a kite.", "prompt": "p1", "sample": 0,
                 "longest_span": 6, "longest_span_doc": 42, "longest_span_text": "went to the park and saw"},
                {"generation": "", "longest_span": 0, "longest_span_text": ""},
            ]}}},
        "series": [
            {"step": 400, "model": "/runs/r/checkpoint-400", "suites": {"story": {"metrics": {"novelty@5": 0.31}}}},
            {"step": 100, "model": "/runs/r/checkpoint-100",
             "suites": {"story": {"metrics": {"novelty@5": 0.5}, "means": {"quality": 0.45, "novelty@5": 0.49}}}},
        ],
    }  # fmt: skip


def test_a_report_becomes_points_cases_and_spans_without_new_numbers() -> None:
    run = TrackedRun.from_report(_report())
    assert [p.step for p in run.points] == [100, 400]
    assert run.points[0].flat() == {"novelty/story/novelty@5": 0.5, "novelty/story/quality": 0.45}
    gated = run.gated.flat()
    # The gated metrics as their cases decided them (q@Tail on its frozen tail, not the metrics step's
    # own ranking), the standard values beside them, and nothing else the metrics step computed.
    assert gated == {
        "novelty/story/q_at_tail@0.1": 0.61, "novelty/story/novelty@5": 0.31, "novelty/story/quality": 0.5,
        "novelty/story/unscored": 0.0, "novelty/story/originality@5": 0.7, "novelty/story/coverage@5": 0.9,
    }  # fmt: skip
    assert run.gated.model == "/runs/r/checkpoint-400" and run.step == 400
    assert not run.passed and run.summary_scalars() == {
        "novelty/passed": 0.0, "novelty/cases_failed": 1.0, "novelty/cases_errored": 0.0}
    failed = run.cases_of("story")[0]
    assert (failed.metric, failed.bound, failed.outcome) == ("novelty@5", ">= 0.3", "failed")
    assert failed.comparison_text() == "baseline 0.4400, delta -0.1300, CI [-0.1590, -0.1010], p < 0.0001, regression"
    assert run.cases_of("story")[1].comparison_text() == ""
    spans = run.spans["story"]
    assert [(s.length, s.document, s.source) for s in spans] == [(6, 42, "prompt p1, sample 0"),
                                                                 (1, None, "prompt p3, sample 1")]
    assert spans[1].size == "1 word" and spans[0].size == "6 words"
    assert "| 6 words | went to the park and saw | 42 | prompt p1, sample 0: Lily went" in run.spans_markdown("story")
    assert run.identity["identity"] == "ckpt @ 01d791a0" and run.identity["suites"] == "story"


def test_a_single_checkpoint_is_one_point_at_its_folders_step() -> None:
    report = _report()
    del report["series"]
    run = TrackedRun.from_report(report)
    assert [(p.step, p.model) for p in run.points] == [(400, "/runs/r/checkpoint-400")]


def test_mlflow_keys_keep_only_what_mlflow_allows() -> None:
    assert metric_key("novelty/story[temperature=0.7]/q_at_tail@0.1") == "novelty/story_temperature_0.7_/q_at_tail_0.1"


def test_specs_fail_in_one_line_naming_the_option() -> None:
    check_unknown_kind(TRACKERS.open, "tensorbord:runs", "tensorboard:DIR, wandb:PROJECT or mlflow:URI", "tensorboard")
    with pytest.raises(ConfigError, match=r"^--novelty-log: tracker wandb has no option 'team'.*entity, group, name"):
        TRACKERS.open("wandb:proj?team=x")
    with pytest.raises(ConfigError, match=r"tracker mlflow needs a tracking URI, as in mlflow:URI"):
        TRACKERS.open("mlflow:")
    tracker = TRACKERS.open("wandb:proj?entity=me&name=run-1&group=nightly")
    assert (tracker.entity, tracker.name, tracker.group) == ("me", "run-1", "nightly")  # type: ignore[attr-defined]


@pytest.fixture
def gate_args(tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path) -> list[str]:
    suites = write_story_suite_folder(tmp_path / "suites", story_prompts(2), suite_toml(samples=1))
    return [f"--novelty-model={tiny_checkpoint}", f"--novelty-suites={suites}", f"--novelty-cache={tmp_path / 'c'}",
            f"--novelty-originality=infini-gram:{tiny_index}", "-p", "no:cacheprovider"]


def _hide(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *packages: str) -> None:
    """Make ``packages`` look uninstalled to the run's subprocess (an import finder that refuses them)."""
    folder = pytester.path / "hide"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import sys
        class _Hidden:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {set(packages)!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None
        sys.meta_path.insert(0, _Hidden())
    """))
    import os

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])))


@pytest.mark.parametrize(("spec", "extra"), [("tensorboard:tb", "tensorboard"), ("wandb:proj", "wandb"),
                                             ("mlflow:mlruns", "mlflow")])
def test_a_missing_extra_is_one_line_naming_it_before_anything_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, gate_args: list[str], spec: str, extra: str
) -> None:
    _hide(pytester, monkeypatch, extra)
    result = pytester.runpytest_subprocess(*gate_args, f"--novelty-log={spec}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    hint = f'pip install "pytest-novelty[{extra}]"'
    result.stderr.fnmatch_lines([f"ERROR: --novelty-log: {spec} needs the {extra} extra: {hint}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_a_tracker_that_cannot_be_reached_is_a_harness_error_in_one_line_without_its_credentials(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, gate_args: list[str], tmp_path: Path
) -> None:
    """Found by the preflight, before any case (the old run gated first, then failed to log; a
    tracker that fails while the run logs: tests/integrations/test_integrations_edges.py)."""
    pytest.importorskip("mlflow", reason="needs the mlflow extra")
    pytest.importorskip("tensorboard", reason="needs the tensorboard extra")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # the user's own settings are kept
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    down = f"mlflow:http://gate:hunter2secret@127.0.0.1:{_closed_port()}"
    report = tmp_path / "report"
    result = pytester.runpytest_subprocess(
        *gate_args, f"--novelty-log=tensorboard:{tmp_path / 'tb'}", f"--novelty-log={down}",
        f"--novelty-report={report}",
    )  # fmt: skip
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == HARNESS_EXIT_STATUS, out[-3000:]
    result.assert_outcomes(deselected=1)  # no case ran: no verdict
    (line,) = [line for line in out.splitlines() if "harness error" in line]
    assert line.startswith("novelty: harness error before any case ran: mlflow:http://127.0.0.1:"), line
    assert line.endswith("cannot reach the tracking server (connection refused)"), line
    assert "hunter2secret" not in out
    data = json.loads((report / "report.json").read_text())
    assert data["versions"]["exit status"] == HARNESS_EXIT_STATUS and not data["summary"]["complete"]
