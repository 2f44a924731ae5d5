"""A crashed pytest-xdist worker ends the run with the harness status whenever it crashes: before its
first case, during one, after its last; never INTERNALERROR, never a hang, never exit 0.

A host conftest kills one worker (``os._exit``, as an out-of-memory kill would) at a chosen moment,
once per run (a marker file), and makes the other workers wait on files for the order of events
where that matters, so no outcome here depends on timing. Each case was reproduced on the code
before this change: a worker killed after its cases ended the run with exit 0 (its suites' arrays
never reached the report); a replacement worker still collecting when the last original worker
finished collecting was given work (a KeyError in xdist's scheduling: INTERNALERROR, exit 3); a
replacement given a single test (what was left of a crashed worker's suite) waited forever.

What is tried here is the scheduling and the exit status, not the generation: every run starts
from a copy of one cache holding the answers and scores of all three suites (``warm_cache``), so
no worker loads the model; and on the CPU (``--novelty-device=cpu``), so no worker imports torch to
count GPUs and set its threads at start (a warm run on two workers took 18 s instead of 5 s).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS
from tests.plugin.conftest import PROMPTS, SUITE
from tests.suite_text import write_story_suite_folder
from tests.warm_cache import cache_of, copy_warm, fill_cache

pytestmark = pytest.mark.slow

CRASHES = """
import os, time
from pathlib import Path

import pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER")
HERE = Path(__file__).parent
WHEN = {when!r}
SUITE = {suite!r}


def die(where, nodeid=""):
    # The first worker to reach WHEN (in a test of SUITE) dies there, once per run.
    if WORKER and where == WHEN and SUITE in nodeid and not (HERE / "crashed").exists():
        (HERE / "crashed").write_text(WORKER)
        os._exit(3)


def wait_for(name):
    while not (HERE / name).exists():
        time.sleep(0.1)


def pytest_runtest_setup(item):
    die("setup", item.nodeid)


class Late:
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        if session.testscollected and any(HERE.glob("ran-" + str(WORKER))):
            die("after its cases", SUITE)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session):
        # after xdist has sent this worker's collection to the controller
        if WHEN != "while another collects":
            return
        die(WHEN, SUITE)  # gw0 (the first to get here)
        (HERE / ("collected-" + str(WORKER))).write_text("")


def pytest_runtest_logfinish(nodeid, location):
    (HERE / ("ran-" + str(WORKER))).write_text(nodeid)


def pytest_runtest_logreport(report):
    # on the controller: the report of the case before SUITE's is read slowly, so the worker (which
    # dies in the setup of the next) is dead by the time the controller hands it more work
    if WORKER is None and WHEN == "setup" and {slow!r} and {slow!r} in report.nodeid and report.when == "teardown":
        time.sleep(1.5)


def pytest_configure(config):
    config.pluginmanager.register(Late(), "late")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session):
    # before xdist sends the collection: gw1 waits until gw0's replacement is up; the replacement
    # says so, and waits until gw1's collection has gone
    if WHEN != "while another collects" or WORKER in (None, "gw0"):
        return
    if WORKER == "gw1":
        wait_for("replacement-up")
    else:
        (HERE / "replacement-up").write_text(WORKER)
        wait_for("collected-gw1")
"""


def crash_at(pytester: pytest.Pytester, when: str, suite: str = "", slow: str = "") -> None:
    """Kill the first worker to reach ``when`` in a case of ``suite``; the controller reads the
    teardown report of the case ``slow`` (if given) slowly."""
    pytester.makeconftest(CRASHES.format(when=when, suite=suite, slow=slow))


def suites(folder: Path, *names: str) -> None:
    """More suites beside ``story``, each with other settings (so each generates its own answers)."""
    story = (folder / "story.toml").read_text()
    for tokens, name in enumerate(names, start=10):
        (folder / f"{name}.toml").write_text(story.replace("max_new_tokens = 16", f"max_new_tokens = {tokens}"))


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path, tiny_index: Path) -> Path:
    """Every answer and score of the suites ``story``, ``tale`` and ``yarn`` (:func:`suites`), filled
    once for the module by the command line."""
    folder = tmp_path_factory.mktemp("crash-suites")
    gate_suites = write_story_suite_folder(folder / "gate-suites", PROMPTS, SUITE)
    suites(gate_suites, "tale", "yarn")
    return fill_cache(folder / "cache", tiny_checkpoint, tiny_index, gate_suites)


@pytest.fixture
def novelty_args(novelty_args: list[str], warm_cache: Path) -> list[str]:
    """The plugin tests' arguments, over a private copy of :func:`warm_cache`, on the CPU."""
    copy_warm(warm_cache, cache_of(novelty_args))
    return [*novelty_args, "--novelty-device=cpu"]


def _ended_with_the_harness_status(result: pytest.RunResult, report: Path) -> dict[str, object]:
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out, out[-4000:]
    assert result.ret == HARNESS_EXIT_STATUS, out[-4000:]
    data = json.loads((report / "report.json").read_text())
    assert data["versions"]["exit status"] == HARNESS_EXIT_STATUS
    return dict(data)


def test_a_worker_that_dies_after_its_last_case_is_a_harness_error(
    pytester: pytest.Pytester, novelty_args: list[str]
) -> None:
    """Every case decided, then the worker died before its suite's arrays reached the controller:
    the report would lack them; the old run exited 0."""
    crash_at(pytester, "after its cases", "story")
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(*novelty_args, "-n", "2", f"--novelty-report={report}", timeout=900)
    result.assert_outcomes(passed=2)
    data = _ended_with_the_harness_status(result, report)
    result.stdout.fnmatch_lines(["novelty: harness error: the xdist worker gw? crashed (*); work it finished is *"])
    assert "crashed" in str(data["versions"]["status"])  # type: ignore[index]


def test_a_replacement_worker_still_collecting_gets_its_work_later(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    """gw0 dies right after its collection reached the controller; its replacement is up and still
    collecting when gw1 finishes collecting and the work is first handed out (xdist's loadscope
    gave the replacement work it could not take: INTERNALERROR)."""
    suites(suite_dir, "tale")  # two units of work, one per worker
    crash_at(pytester, "while another collects")
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(*novelty_args, "-n", "2", f"--novelty-report={report}", timeout=900)
    result.assert_outcomes(passed=4)  # every case ran
    _ended_with_the_harness_status(result, report)
    result.stdout.fnmatch_lines(["novelty: harness error: the xdist worker gw0 crashed (*"])


def test_a_replacement_given_a_single_case_runs_it(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    """Three suites on two workers: one takes the first and the third, the other the second, and
    both are told that no more work comes. The first dies in the setup of its first case; the
    replacement was given that suite's other case alone and waited forever to learn what follows
    it, while the third suite waited in the queue."""
    suites(suite_dir, "tale", "yarn")  # files in name order: story, tale, yarn
    crash_at(pytester, "setup", "story.toml::test_metric[story-originality")
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(*novelty_args, "-n", "2", f"--novelty-report={report}", timeout=900)
    result.assert_outcomes(passed=5, failed=1)  # the case the worker died in: crashed, no verdict
    data = _ended_with_the_harness_status(result, report)
    (crashed,) = [r for r in data["rows"] if r["outcome"] == "error"]  # type: ignore[attr-defined]
    assert (crashed["suite"], crashed["metric"]) == ("story", "originality@4")
    assert "worker crashed" in crashed["message"]


def test_a_worker_dead_when_it_is_sent_its_next_case_is_a_harness_error(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    """A worker dies in the setup of its second case while the controller is still reading the
    first one's report; the controller then hands the dead worker more work: execnet's ``OSError: connection already
    closed`` from xdist's scheduler was an INTERNALERROR (exit 3). Now the case goes back to the
    queue, the crash is the harness status, and every other case runs."""
    suites(suite_dir, "tale", "yarn")
    crash_at(pytester, "setup", "story.toml::test_metric[story-quality",
             slow="story.toml::test_metric[story-originality")
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(*novelty_args, "-n", "2", f"--novelty-report={report}", timeout=900)
    _ended_with_the_harness_status(result, report)
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) >= 6  # every case reached an outcome
    result.stdout.fnmatch_lines(["novelty: harness error: the xdist worker gw? crashed (*"])


REMOVES = """
from pathlib import Path


def pytest_configure_node(node):
    # on the controller, after its own checks, before the worker configures: the answers vanish
    Path({path!r}).unlink(missing_ok=True)
"""


def test_a_worker_that_cannot_start_is_one_line_and_is_not_restarted(
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path
) -> None:
    """The file of answers is removed after the controller checked it: every worker finds it gone.
    Each worker used to fail its configuration, be replaced and fail again, ten times, with a full
    traceback each (799 lines); now each starts without suites and says why, in one line."""
    from tests.cli_in_process import run_cli

    args = dict(a.split("=", 1) for a in novelty_args if a.startswith("--novelty-") and "=" in a)
    answers = tmp_path / "answers.jsonl"
    exported = run_cli("answers", "export", "--model", novelty_args[novelty_args.index("--model") + 1], "--suites",
                       args["--novelty-suites"], "--cache", args["--novelty-cache"], "--device", "cpu", "--out",
                       str(answers))  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    pytester.makeconftest(REMOVES.format(path=str(answers)))
    i = novelty_args.index("--model")
    result = pytester.runpytest_subprocess(*novelty_args[:i], f"--model=answers:{answers}", *novelty_args[i + 2:],
                                           "-n", "2")  # fmt: skip
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == HARNESS_EXIT_STATUS, out[-3000:]
    assert "Traceback" not in out and "INTERNALERROR" not in out and "replacing crashed worker" not in out, out
    (line,) = [line for line in out.splitlines() if "could not start" in line]
    assert line == (f"novelty: harness error before any case ran: the xdist worker could not start: {answers}: no "
                    "such file or folder of answers")
    assert len(out.splitlines()) < 40, out
