"""Option names: every option has a ``--novelty-`` name; the short ones step aside for the host project."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_novelty.pipeline.options import OPTIONS

# A host project that defines two of the plugin's short names for its own purposes, as many ML
# repositories do.
HOST_CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--model", default="host-default", help="the host project's own model")
    parser.addoption("--device", default="host-cpu", help="the host project's own device")


def pytest_configure(config):
    print(f"HOST model={config.getoption('--model')} device={config.getoption('--device')}")
"""

HOST_TEST = """
def test_host_sees_its_own_values(request):
    assert request.config.getoption("--model") == "resnet-50"
    assert request.config.getoption("--device") == "tpu"
    # The plugin saw neither value: it stays idle.
    assert request.config.getoption("--novelty-model") is None
    assert request.config.getoption("--novelty-device") == "auto"
"""


def test_every_option_has_a_novelty_name_and_destination() -> None:
    longs = [o.long for o in OPTIONS]
    shorts = [o.short for o in OPTIONS if o.short]
    assert all(name.startswith("--novelty-") for name in longs)
    assert all(o.dest == "novelty_" + o.long.removeprefix("--novelty-").replace("-", "_") for o in OPTIONS)
    assert len(set(longs)) == len(longs) and len(set(shorts)) == len(shorts)
    assert {"--model", "--device", "--judge", "--baseline-model"} <= set(shorts)


def test_host_project_keeps_its_own_options(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(HOST_CONFTEST)
    pytester.makepyfile(test_host=HOST_TEST)
    result = pytester.runpytest_subprocess("--model", "resnet-50", "--device", "tpu", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "conflicting option" not in result.stderr.str()


@pytest.mark.slow
def test_long_names_gate_where_the_host_took_the_short_ones(
    pytester: pytest.Pytester, suite_dir: Path, tiny_checkpoint: Path, tiny_index: Path, tmp_path: Path
) -> None:
    pytester.makeconftest(HOST_CONFTEST)
    result = pytester.runpytest_subprocess(
        "--model",
        "resnet-50",
        f"--novelty-model={tiny_checkpoint}",
        "--novelty-device",
        "cpu",
        f"--novelty-suites={suite_dir}",
        f"--novelty-cache={tmp_path / 'cache'}",
        f"--novelty-originality=infini-gram:{tiny_index}",
        "-p",
        "no:cacheprovider",
        "-s",
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["HOST model=resnet-50 device=host-cpu", "*novelty gate*", "suite story*"])


def test_help_shows_the_short_names_only_where_free(pytester: pytest.Pytester) -> None:
    free = pytester.runpytest_subprocess("--help")
    free.stdout.fnmatch_lines(["*--novelty-model=PATH_OR_ID*", "*--model=PATH_OR_ID*short for --novelty-model*"])
    pytester.makeconftest(HOST_CONFTEST)
    taken = pytester.runpytest_subprocess("--help")
    taken.stdout.fnmatch_lines(["*--novelty-model=PATH_OR_ID*", "*--model=MODEL*the host project's own model*"])
    shorts = set(re.findall(r"short for (--novelty-[a-z-]+)", taken.stdout.str()))
    assert "--novelty-model" not in shorts and "--novelty-device" not in shorts
    assert {"--novelty-judge", "--novelty-model-series"} <= shorts  # the names the host left free remain
