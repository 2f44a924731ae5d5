"""The exit status matches the report: a harness fault is exit 8 however it shows up, the report
records the status the run really exits with, and JUnit gets the properties without warnings.

Before this round a crashed xdist worker gave exit 1 ("gate failed") while the report called it a
harness error, ``report.json`` recorded pytest's status from before the plugin changed it, a
preflight failure printed pytest's ``_pytest.outcomes.Exit`` banner, and every ``--junitxml`` run
warned four times that ``record_property`` does not suit xunit2.

The runs that gate every case start from a copy of one cache the checkpoint's gate filled
(``warm_story``): what they look at is the exit status, the report and JUnit, not the generation.
"""

from __future__ import annotations

import json
import socket
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.warm_cache import cache_of, copy_warm

pytestmark = pytest.mark.slow


HARNESS = 8

CRASH = """
import os


def pytest_runtest_call(item):
    # A worker that dies in the middle of one case, as an out-of-memory kill would.
    if os.environ.get("PYTEST_XDIST_WORKER") and "quality" in item.nodeid:
        os._exit(3)
"""


def output(result: pytest.RunResult) -> str:
    return "\n".join(result.outlines + result.errlines)


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"  # nothing listens once closed


def test_a_crashed_worker_makes_the_run_a_harness_error(
    pytester: pytest.Pytester, novelty_args: list[str], warm_story: Path
) -> None:
    copy_warm(warm_story, cache_of(novelty_args))
    pytester.makeconftest(CRASH)
    report = pytester.path / "report"
    # On the CPU: the worker and its replacement do not import torch to count GPUs and set threads.
    result = pytester.runpytest_subprocess(
        *novelty_args, "-n", "1", "--novelty-device=cpu", f"--novelty-report={report}"
    )
    assert result.ret == HARNESS, output(result)
    data = json.loads((report / "report.json").read_text())
    assert data["versions"]["exit status"] == HARNESS
    assert "- exit status: `8`" in (report / "report.md").read_text()
    rows = {row["metric"]: row for row in data["rows"]}
    assert rows["quality"]["outcome"] == "error" and rows["quality"]["message"].startswith("worker crashed")


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_a_preflight_failure_is_one_clean_line_and_exit_8(
    pytester: pytest.Pytester, novelty_args: list[str], workers: list[str], warm_story: Path
) -> None:
    copy_warm(warm_story, cache_of(novelty_args))  # the answers are there: no tokenizer loads before the judge's check
    url = dead_url()
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        *novelty_args, *workers, "--judge", "openai:M", "--judge-base-url", url, f"--novelty-report={report}"
    )
    text = output(result)
    assert result.ret == HARNESS, text
    assert "_pytest.outcomes.Exit" not in text and "Traceback" not in text and "INTERNALERROR" not in text
    assert "novelty: harness error before any case ran: --judge-base-url: cannot reach the judge openai:M" in text
    assert "bringing up nodes" not in text and "created: " not in text  # no worker was started
    data = json.loads((report / "report.json").read_text())
    assert data["summary"]["complete"] is False and "cannot reach the judge" in data["versions"]["status"]


def test_a_harness_error_in_a_case_is_exit_8_in_the_report_too(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    (suite_dir / "prompts.jsonl").write_text('{"id": "p0", "text": "Lily went out."}\n{"id": "p0", "text": "again"}\n')
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(*novelty_args, f"--novelty-report={report}")
    assert result.ret in (HARNESS, pytest.ExitCode.USAGE_ERROR), output(result)
    data = json.loads((report / "report.json").read_text())
    assert data["versions"].get("exit status", result.ret) == result.ret


def test_junit_gets_the_case_properties_without_warnings(
    pytester: pytest.Pytester, novelty_args: list[str], warm_story: Path
) -> None:
    copy_warm(warm_story, cache_of(novelty_args))
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(*novelty_args, f"--junitxml={junit}")
    assert result.ret == 0
    assert "record_property is incompatible" not in output(result)
    assert "PytestWarning" not in output(result)
    names = {p.get("name") for p in ET.parse(junit).getroot().iter("property")}
    assert "novelty" in names


INTERNAL = """
import pytest_novelty.pipeline.preflight as preflight


def broken(*args, **kwargs):
    raise RuntimeError("a bug in the plugin")


preflight.preflight = broken  # the plugin's own collection hook now raises: pytest's INTERNALERROR
"""


def test_an_internal_error_of_the_plugin_is_a_harness_error(
    pytester: pytest.Pytester, novelty_args: list[str]
) -> None:
    pytester.makeconftest(INTERNAL)
    result = pytester.runpytest_subprocess(*novelty_args)
    assert "a bug in the plugin" in output(result)
    assert result.ret == HARNESS, output(result)
