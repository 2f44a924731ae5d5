"""The plugin's per-session state: suite results, the baseline, the case records for the table and the report.

Registered as a pytest plugin object while ``--model`` is in use (see ``plugin.py``). Under
pytest-xdist each worker computes its suites; the case records reach the controller in the
reports' ``user_properties`` and the per-suite arrays through ``workeroutput``, so the controller
prints one table and writes one report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import pytest

from pytest_novelty.gate.cases import CaseLoop, CaseSettings
from pytest_novelty.gate.record import CaseRecord
from pytest_novelty.infra.cache import repaired
from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS, ConfigError, HarnessError, NoveltyError, last_line
from pytest_novelty.infra.progress import ProgressSink
from pytest_novelty.pipeline.config import MAIN
from pytest_novelty.pipeline.suite_data import SuiteData
from pytest_novelty.plugin.notices import TerminalStream, terminal_line
from pytest_novelty.plugin.series import spread_series
from pytest_novelty.suites.schema import Suite

if TYPE_CHECKING:
    from pytest_novelty.pipeline.config import RunConfig
    from pytest_novelty.pipeline.results import SuiteResult


T = TypeVar("T")
_WORKER_KEY = "novelty_suites"
_PARTS_KEY = "novelty_series_parts"
_EARLIER_KEY = "novelty_series_earlier"
_REPAIRS_KEY = "novelty_cache_repairs"
_STOPPED_KEY = "novelty_stopped"
HARNESS_PROPERTY = "novelty_harness"
"""The user property that carries a harness error's message to the controller (and JUnit)."""
SERIES_PROPERTY = "novelty_series"
"""The user property that carries one earlier checkpoint's part of a series to the controller."""
_DECIDED = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED)
"""The exit statuses of a run that reached its verdicts (a harness error or bad input overrides them)."""


class NoveltyState:
    """What one pytest session knows about the checkpoint(s) it gates."""

    def __init__(self, config: pytest.Config, suites: list[Suite], cache_dir: Path) -> None:
        from pytest_novelty.pipeline.session import ResultsSession
        from pytest_novelty.plugin.series import SERIES

        self.config = config
        self.suites = {s.path.resolve(): s for s in suites}
        self.cache_dir = cache_dir
        self.series = config.stash.get(SERIES, None)  # --model-series: the checkpoints, newest last
        self.session = ResultsSession(
            self._run_config,
            model=str(config.option.novelty_model),
            baseline_model=self.baseline_model,
            series=self.series,
        )
        self.cases = CaseLoop(self.session, self._case_settings(), series=self.series, spread=spread_series)
        """The run's one case loop; its settings are final once collection has counted the comparisons."""
        self._outcomes: dict[str, tuple[str, str]] = {}  # node id -> (passed | failed | error, message)
        self._node_records: dict[str, CaseRecord] = {}
        self._announced: set[str] = set()
        self._series_failed: set[str] = set()  # "suite@step" of each series checkpoint whose item failed
        self.pytest_session: pytest.Session | None = None
        self.stopped: str | None = None
        """Why the run stopped before any case ran (a preflight failure), for the report."""
        self.worker_repairs = 0
        """Damaged cache entries the xdist workers dropped (each process counts its own)."""
        self.harness_errors: dict[str, str] = {}
        """Each distinct harness error's message, and the first case (node id) it stopped."""
        self.internal_error = False
        """Whether the plugin itself raised an unexpected error (pytest's INTERNALERROR)."""
        self.bad_input: str | None = None
        """Bad input found only while a case ran (a prompt too long for the context, say)."""
        self.exit_status: int | None = None
        """The status the run exits with, once the session has finished."""
        self.worker_crashes: list[str] = []
        """One line per xdist worker that crashed, for the summary and the report."""
        self._said = False
        from pytest_novelty.plugin.shard import ShardRun

        self.shard = ShardRun.from_config(config)
        """``--novelty-shard``: this session does its shard's part and decides no case (None: it decides)."""

    # -- running suites -------------------------------------------------------------------------

    @property
    def baseline_model(self) -> str | None:
        model = self.config.option.novelty_baseline_model
        return None if model is None else str(model)

    def _run_config(self, model: str) -> RunConfig:
        from pytest_novelty.pipeline.config import RunConfig

        return RunConfig.from_options(
            self.config.option, model=model, cache_dir=self.cache_dir, worker=self.worker or MAIN,
            progress=self.progress_sink(),
        )

    @property
    def worker(self) -> str | None:
        """This process's pytest-xdist worker id, None on the controller or without xdist."""
        workerinput = getattr(self.config, "workerinput", None)
        return None if workerinput is None else str(workerinput.get("workerid"))

    def progress_sink(self) -> ProgressSink:
        """Progress bars on the terminal, past pytest's output capture; none on xdist workers."""
        if self.worker or self.config.option.verbose < 0:
            return ProgressSink(enabled=False)
        return ProgressSink(stream=TerminalStream(self.config))

    def _case_settings(self, comparisons: int = 1) -> CaseSettings:
        return CaseSettings.from_options(self.config.option, comparisons)

    @property
    def suite_data(self) -> dict[str, SuiteData]:
        """Per suite run: its exported data (on the controller, the workers' too)."""
        return self.cases.suite_data

    def announce(self, suite: Suite, result: SuiteResult) -> str | None:
        """The line saying where and how a suite ran, once per suite (None after the first time)."""
        if suite.name in self._announced:
            return None
        self._announced.add(suite.name)
        from pytest_novelty.pipeline.export import work_line

        return work_line(suite.name, result)

    # -- harness errors -------------------------------------------------------------------------

    def preflight(self, suites: list[Suite]) -> None:
        """Check the services the run needs once (see :mod:`pytest_novelty.pipeline.preflight`).

        Bad configuration is a usage error (``ERROR: ...``, exit 4); a broken service stops the run
        before any case with one line (:meth:`stop`), and the run exits with the harness status.
        """
        if not suites:
            return
        from pytest_novelty.pipeline.preflight import preflight

        models = [self.config.option.novelty_model, self.baseline_model]
        try:
            for model in filter(None, models):
                preflight(self.session.runner(model), suites)
        except ConfigError as exc:
            self.stopped = f"configuration error: {exc}"
            raise pytest.UsageError(str(exc)) from None
        except HarnessError as exc:
            self.stop(exc)

    def stop(self, exc: HarnessError) -> None:
        """No case will run: a harness error found before any (a preflight, the demo's preparation)."""
        self.harness_errors.setdefault(str(exc), "preflight")
        self.stopped = f"harness error before any case ran: {exc}"

    def _say_stopped(self) -> None:
        if self.stopped is not None and not self._said:
            self._said = True
            self.config.get_terminal_writer().line(f"novelty: {self.stopped}", red=True, bold=True)

    def shard_case(self, suite: Suite, item: pytest.Item, models: list[str] | None = None) -> NoReturn:
        """``--novelty-shard``: do this shard's part of ``suite`` for the case ``item`` (see
        :meth:`ShardRun.part`), then skip it; a part that failed makes the case a harness error."""
        shard = self.shard
        assert shard is not None
        repeats = int(self.config.option.novelty_repeat or 1)
        part = f" in shard {shard.shard}'s part"
        self.guarded(lambda: shard.part(self.session, suite, item, repeats, models), item, part)

    def guarded(self, step: Callable[[], T], item: pytest.Item, what: str = "") -> T:
        """``step()``'s value; a harness error it raises stops the case ``item`` (:meth:`harness_failure`),
        outside the ``except`` block, so that pytest shows no chained traceback."""
        try:
            return step()
        except NoveltyError as exc:
            error = exc
        self.harness_failure(error, item, what)

    def harness_failure(self, exc: NoveltyError, item: pytest.Item, what: str = "") -> NoReturn:
        """Stop a case on a harness error: the cause in full once, later cases point to the first.

        The case is an error (raised in its fixture), not a failed gate; the message reaches the
        controller and the JUnit file as a user property; ``--tb=long`` shows the full trace.
        """
        message = str(exc)
        if isinstance(exc, ConfigError):
            self.bad_input = self.bad_input or message
        first = self.harness_errors.setdefault(message, item.nodeid)
        item.user_properties.append((HARNESS_PROPERTY, message))
        if self.config.option.tbstyle == "long":
            raise exc
        if first == item.nodeid:
            pytest.fail(f"harness error{what} (not a gate failure): {message}", pytrace=False)
        pytest.fail(f"harness error{what} (not a gate failure): the same as in {first}", pytrace=False)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Count the run's regression tests (each is held to α / their number) and preflight the
        suites of the selected cases (one process, no xdist); a run stopped before any case
        deselects every case, so none runs and none is counted as a verdict."""
        from pytest_novelty.gate.case import compared_cases
        from pytest_novelty.plugin.snapshots import snapshot_settings

        cases: dict[str, Suite] = {}
        suites: dict[str, Suite] = {}
        for item in session.items:
            callspec = getattr(item, "callspec", None)
            suite = callspec.params.get("novelty_suite") if callspec is not None else None
            if isinstance(suite, Suite):
                suites.setdefault(suite.name, suite)
                cases[item.nodeid] = suite
        counted = compared_cases(list(cases.values()), baseline=self.baseline_model is not None,
                                 snapshots=snapshot_settings(self.config).enabled, series=bool(self.series))
        self.cases.settings = self._case_settings(max(1, counted))
        if self.shard is not None:  # the split is made of the selected cases' suite runs, in every process
            self.shard.select(list(cases.values()))
        if self.worker or self.config.option.collectonly:
            return
        if self.stopped is None:
            self.preflight(list(suites.values()))
        if self.stopped is not None:
            self.config.hook.pytest_deselected(items=list(session.items))
            session.items[:] = []
            self._say_stopped()

    def pytest_internalerror(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """An unexpected error inside the plugin is a harness error too (it decides nothing)."""
        if any("pytest_novelty" in str(entry.path) for entry in excinfo.traceback):
            self.internal_error = True

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A run with a harness error exits with :data:`HARNESS_EXIT_STATUS`, not as a gate verdict:
        a case that errored or crashed (no verdict), a run stopped before any case, or an internal
        error of the plugin. Bad input found in a case is the usage status. ``report.json`` and
        ``report.md`` record the status the run exits with (:attr:`exit_status`)."""
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[_WORKER_KEY] = {name: data.to_json() for name, data in self.suite_data.items()}
            workeroutput[_PARTS_KEY] = self.cases.candidate_parts  # the candidates' parts of their series
            # and the earlier checkpoints' parts its suites scored themselves (a suite that is not spread)
            workeroutput[_EARLIER_KEY] = self.cases.series_parts
            workeroutput[_REPAIRS_KEY] = repaired()
            workeroutput[_STOPPED_KEY] = self.stopped
        elif self.shard is None:  # before pytest-html writes its page (its own sessionfinish runs after this one)
            failed = self._series_failed
            self.cases.assemble_series(self.final_records(), failed=lambda name, step: f"{name}@{step}" in failed)
        no_verdict = any(outcome == "error" for outcome, _ in self._outcomes.values())
        if self.bad_input and session.exitstatus in _DECIDED:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        else:
            harness = (self.harness_errors or no_verdict or self.stopped) and session.exitstatus in _DECIDED
            internal = self.internal_error and session.exitstatus == pytest.ExitCode.INTERNAL_ERROR
            if harness or internal:
                session.exitstatus = HARNESS_EXIT_STATUS
        self.exit_status = int(session.exitstatus)

    # -- hooks ----------------------------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.pytest_session = session  # the terminal summary may still change its exit status (--novelty-log)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect each case's numbers and pytest's outcome for it, on the controller too under xdist.

        The outcome is pytest's own: a failed setup or teardown (a harness error) and a crashed
        xdist worker (reported with ``when == "???"``) are errors, whatever the case's row said.
        """
        if self.shard is not None:
            self.shard.note(report)
        told = False  # whether the item said what its harness error was
        for name, value in report.user_properties:
            if name == HARNESS_PROPERTY:
                told = True
                if report.failed:
                    self.harness_errors.setdefault(str(value), report.nodeid)
        checkpoint = checkpoint_key(report.nodeid)
        if report.failed and checkpoint:
            self._series_failed.add(checkpoint)
            if not told:  # a series checkpoint has no verdict of its own: any failure of its item is the harness's
                self.harness_errors.setdefault(f"{report.nodeid}: {last_line(report.longreprtext)}", report.nodeid)
        case = _case_key(report.nodeid)
        if report.when == "call":
            for name, value in report.user_properties:
                if name == SERIES_PROPERTY and isinstance(value, dict) and report.passed:
                    self.cases.add_series_part(str(value["suite"]), int(value["step"]), value["part"])
                if name == "novelty" and isinstance(value, dict) and case:
                    self._node_records[report.nodeid] = CaseRecord.from_json(value)
                elif name == "novelty_work" and getattr(report, "node", None) is not None:
                    terminal_line(self.config, str(value))  # from an xdist worker, whose output never reaches it
        if not case:
            return
        if report.when == "call" and report.nodeid not in self._outcomes:
            self._outcomes[report.nodeid] = ("passed" if report.passed else "failed", "")
        elif report.failed and report.when != "call":
            what = "worker crashed" if report.when not in ("setup", "teardown") else "harness error"
            last = last_line(report.longreprtext)
            message = last if last.startswith(what) else f"{what}: {last}"
            self._outcomes[report.nodeid] = ("error", message)
        elif report.skipped and report.nodeid not in self._outcomes:
            from pytest_novelty.plugin.shard import ShardRun

            outcome = ShardRun.outcome(report) or "skipped"  # a shard's case: "deferred", decided by the merge run
            self._outcomes[report.nodeid] = (outcome, last_line(report.longreprtext))

    def final_records(self) -> list[CaseRecord]:
        """One record per case pytest ran, with pytest's outcome: the records the cases made, and an
        error record for every case that errored or crashed before it could make one."""
        records = []
        for nodeid, (outcome, message) in self._outcomes.items():
            recorded = self._node_records.get(nodeid)
            if recorded is None:
                records.append(self._error_record(nodeid).with_outcome(outcome, message))
            else:
                records.append(recorded.with_outcome(outcome, message if message and outcome == "error" else None))
        return records

    def _error_record(self, nodeid: str) -> CaseRecord:
        """The record of a case that never made one: its suite and threshold from the node id."""
        key = _case_key(nodeid)
        for suite in self.suites.values():
            for run in suite.runs():
                for threshold in run.thresholds:
                    if f"{run.name}-{threshold.label}" == key:
                        return CaseRecord.error(run.name, threshold.metric, threshold.op, threshold.value, "")
        suite_name, _, metric = key.rpartition("-")
        return CaseRecord.error(suite_name or key, metric, None, None, "")

    @pytest.hookimpl(optionalhook=True)  # xdist's hook: declared only where xdist is loaded
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist controller: merge the suites' arrays that a worker computed. A worker that went down
        with an error (killed, out of memory) is a harness error whenever it happened: before its
        first case, during one (xdist also reports that case as crashed), between two, or after its
        last, when the arrays of its suites never arrive (the report would lack them)."""
        output = getattr(node, "workeroutput", None) or {}
        self.suite_data.update({name: SuiteData.from_json(data) for name, data in output.get(_WORKER_KEY, {}).items()})
        self.cases.candidate_parts.update(output.get(_PARTS_KEY, {}))
        for suite, parts in output.get(_EARLIER_KEY, {}).items():
            for step, part in parts.items():
                self.cases.add_series_part(suite, int(step), part)
        self.worker_repairs += int(output.get(_REPAIRS_KEY, 0))
        stopped = output.get(_STOPPED_KEY)
        if stopped:  # a worker that could not start: one line for every worker stopped by the same cause
            line = str(stopped)
            self.harness_errors.setdefault(line, "worker")
            if line not in self.worker_crashes:
                self.worker_crashes.append(line)
        if error is not None and error != "keyboard-interrupt":  # an interrupt is the user's, not a crash
            worker = getattr(getattr(node, "gateway", None), "id", None) or "?"
            line = f"harness error: the xdist worker {worker} crashed ({error}); work it finished is cached"
            self.harness_errors.setdefault(line, "worker")
            self.worker_crashes.append(line)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput"):
            return
        if self.shard is not None:  # no verdict to show: what the shard did, instead of the gate's table
            self.shard.summary(terminalreporter, self._outcomes, failed=bool(self.harness_errors),
                               cache_dir=self.cache_dir, report=self.config.option.novelty_report)
            return
        records = self.final_records()
        if records:
            from pytest_novelty.report.terminal import gate_summary

            terminalreporter.section("novelty gate")
            # Every damaged entry this run met, wherever it was read: the suites' runs, the preflight,
            # the checkpoint and index memos, in this process and in every xdist worker.
            summary = gate_summary(records, self.suite_data, repaired() + self.worker_repairs)
            for line in [*summary, *self.cases.series_gaps.values()]:
                terminalreporter.line(line)
        for line in self.worker_crashes:
            terminalreporter.line(f"novelty: {line}", red=True, bold=True)
        folder = self.config.option.novelty_report
        status = self.exit_status if self.exit_status is not None else int(exitstatus)
        if folder:
            self._say_stopped()
            try:
                if not self._write_report(terminalreporter, Path(folder), records, status):
                    return
            except NoveltyError as exc:  # a full disk: one line, and no verdict from this run
                self._harness_at_the_end(terminalreporter, exc)
                folder = None
        if self.config.option.novelty_log and records:  # --novelty-log: the trackers read the report
            from pytest_novelty.integrations import log_session

            logged = log_session(
                self.config.option.novelty_log, records, self.suite_data, {**self.versions(), "exit status": status},
                report_dir=folder or None, write=terminalreporter.line,
            )  # fmt: skip
            session = self.pytest_session
            if logged.status and session and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
                session.exitstatus = self.exit_status = logged.status
                if folder:  # the report records the status the run exits with: the tracker's
                    self._write_report(terminalreporter, Path(folder), records, logged.status, say=False)

    def _write_report(
        self, terminalreporter: Any, folder: Path, records: list[CaseRecord], status: int, *, say: bool = True
    ) -> bool:
        """Write the report folder, on every run, from pytest's outcomes (errors and crashes
        included), recording ``status`` as the run's exit status; False when no case ran (the folder
        then says there is no verdict, why, and the status)."""
        if self.stopped is not None and not records:
            from pytest_novelty.report.json_report import record_no_verdict

            record_no_verdict(folder, self.stopped, status)
            terminalreporter.line(f"novelty report: {folder} (no verdict)")
            return False
        from pytest_novelty.report import write_report

        versions = {**self.versions(), "exit status": status}
        if self.worker_crashes:  # why a run whose cases all decided exits with the harness status
            versions["status"] = "; ".join(self.worker_crashes)
        files = write_report(folder, records, self.suite_data, versions)
        if say:
            terminalreporter.line(f"novelty report: {files.json.parent}")
        return True

    def _harness_at_the_end(self, terminalreporter: Any, exc: NoveltyError) -> None:
        """A harness error after the cases (the report folder cannot be written): one line, said once
        (the preflight may have said it already), and the run exits with the harness status."""
        if str(exc) not in (self.stopped or ""):
            terminalreporter.line(f"novelty: harness error: {exc}", red=True, bold=True)
        self.harness_errors.setdefault(str(exc), "report")
        session = self.pytest_session
        if session is not None and session.exitstatus in _DECIDED:
            session.exitstatus = HARNESS_EXIT_STATUS
        self.exit_status = HARNESS_EXIT_STATUS

    def versions(self) -> dict[str, Any]:
        """What produced the numbers, for report.json."""
        from importlib import metadata

        infos = [d.info for d in self.suite_data.values()]

        def joined(values: Iterable[str]) -> str:
            return ", ".join(sorted({v for v in values if v}))

        return {
            "pytest-novelty": metadata.version("pytest-novelty"),
            "model": self.config.option.novelty_model,
            "identity_id": joined(i.identity_id for i in infos),
            "baseline_model": self.baseline_model,
            "model_series": self.config.option.novelty_model_series,
            "suites": {s.name: str(p) for p, s in self.suites.items()},
            "judge": joined(i.judge for i in infos),
            "index": joined(i.originality for i in infos),
            "originality units": joined(i.units for i in infos),
        }


STATE = pytest.StashKey[NoveltyState]()
"""The session's state in ``config.stash`` (set at configure, with ``--model``)."""


def _case_key(nodeid: str) -> str:
    """The parametrize id of a suite case (``story-novelty@5>=0.3``), '' for any other test."""
    return _param_id(nodeid, "test_metric")


def checkpoint_key(nodeid: str) -> str:
    """The parametrize id of a series checkpoint's item (``story@200``), '' for any other test."""
    return _param_id(nodeid, "test_checkpoint")


def _param_id(nodeid: str, function: str) -> str:
    """The parametrize id of ``function``'s item of a suite file, '' for any other test."""
    path, _, rest = nodeid.partition("::")
    if not path.endswith(".toml") or not rest.startswith(f"{function}[") or not rest.endswith("]"):
        return ""
    return rest[len(function) + 1 : -1]


