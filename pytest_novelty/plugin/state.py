"""The plugin's per-session state: suite results, the baseline, rows for the table and the report.

Registered as a pytest plugin object while ``--model`` is in use (see ``plugin.py``). Under
pytest-xdist each worker computes its suites; the per-case rows reach the controller in the
reports' ``user_properties`` and the per-suite arrays through ``workeroutput``, so the controller
prints one table and writes one report.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

import pytest

from pytest_novelty.infra.cache import repaired
from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS, ConfigError, HarnessError, NoveltyError, last_line
from pytest_novelty.infra.progress import ProgressSink
from pytest_novelty.suites.schema import Suite

if TYPE_CHECKING:
    from pytest_novelty.pipeline.config import RunConfig
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.pipeline.runner import Runner
    from pytest_novelty.pipeline.session import Baseline


_WORKER_KEY = "novelty_suites"
_REPAIRS_KEY = "novelty_cache_repairs"
HARNESS_PROPERTY = "novelty_harness"
"""The user property that carries a harness error's message to the controller (and JUnit)."""
SERIES_PROPERTY = "novelty_series"
"""The user property that carries one earlier checkpoint's part of a series to the controller."""


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
        self._outcomes: dict[str, tuple[str, str]] = {}  # node id -> (passed | failed | error, message)
        self._node_rows: dict[str, dict[str, Any]] = {}
        self._announced: set[str] = set()
        self._series_parts: dict[str, dict[int, dict[str, Any]]] = {}  # suite -> step -> a checkpoint's part
        self.series_gaps: dict[str, str] = {}  # suite -> why its series could not be put together
        self._series_failed: set[str] = set()  # "suite@step" of each series checkpoint whose item failed
        self.suite_data: dict[str, dict[str, Any]] = {}
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
        self.comparisons = 1
        """How many regression tests the run's selected cases make (set when collection ends)."""
        self.worker_crashes: list[str] = []
        """One line per xdist worker that crashed, for the summary and the report."""
        self._said = False

    # -- running suites -------------------------------------------------------------------------

    @property
    def baseline_model(self) -> str | None:
        model = self.config.option.novelty_baseline_model
        return None if model is None else str(model)

    def _run_config(self, model: str) -> RunConfig:
        from pytest_novelty.pipeline.config import RunConfig

        return RunConfig.from_options(
            self.config.option, model=model, cache_dir=self.cache_dir, worker=self.worker or "main",
            log=self.log, progress=self.progress_sink(),
        )

    def runner(self, model: str) -> Runner:
        """The session's runner of ``model`` (see :meth:`ResultsSession.runner`)."""
        return self.session.runner(model)

    @property
    def worker(self) -> str | None:
        """This process's pytest-xdist worker id, None on the controller or without xdist."""
        workerinput = getattr(self.config, "workerinput", None)
        return None if workerinput is None else str(workerinput.get("workerid"))

    def progress_sink(self) -> ProgressSink:
        """Progress bars on the terminal, past pytest's output capture; none on xdist workers."""
        if self.worker or self.config.option.verbose < 0:
            return ProgressSink(enabled=False)
        return ProgressSink(stream=_TerminalStream(self.config))

    def log(self, line: str) -> None:
        """Progress lines, on their own line even in the middle of a verbose test line (redacted)."""
        if self.worker:
            return  # a worker's output never reaches the terminal; the controller logs for it
        terminal_line(self.config, line)

    def baseline(self, suite: Suite) -> Baseline | None:
        """What the candidate is compared with (see :meth:`ResultsSession.baseline`)."""
        return self.session.baseline(suite)

    def result(self, suite: Suite) -> SuiteResult:
        """The candidate's result (computed once per suite); its report data is kept, with its part
        of the series (the earlier checkpoints are ``test_checkpoint`` items of their own, and the
        series is put together when the session ends, on the tails the cases were judged on)."""
        result = self.session.result(suite)
        if suite.name not in self.suite_data:
            from pytest_novelty.pipeline.export import suite_data

            base = self.session.baseline(suite)
            self.suite_data[suite.name] = suite_data(
                result, None if base is None else base.result, alpha=suite.gate.alpha / self.comparisons
            )
            if self.series:
                from pytest_novelty.gate.series import series_part

                data = self.suite_data[suite.name]
                data["series_part"] = series_part(result)
                if spread_series(suite) is False:  # its cases need the earlier checkpoints: scored here
                    steps = [c.step for c in self.series[:-1]]
                    data["earlier_parts"] = dict(zip(steps, map(series_part, self.earlier(suite)), strict=True))
        return result

    def earlier(self, suite: Suite) -> list[SuiteResult]:
        """With --model-series, every earlier checkpoint's result on ``suite``, in step order."""
        return self.session.earlier(suite)

    def note_repeats(self, suite: Suite, repeats: int) -> None:
        """Keep, once per suite, what its ``--novelty-repeat`` runs generated (for the work line)."""
        data = self.suite_data.get(suite.name)
        if repeats > 1 and data is not None and "repeats" not in data:
            from pytest_novelty.pipeline.export import repeats_json

            data["repeats"] = repeats_json(self.session, suite, repeats)

    def _assemble_series(self, rows: list[dict[str, Any]]) -> None:
        """Each suite's series, on the controller (or the one process): the candidate's part from its
        suite's data, every earlier checkpoint's from its ``test_checkpoint`` item, compared on the
        tails the cases were judged on (see :mod:`pytest_novelty.gate.series`)."""
        if not self.series:
            return
        from pytest_novelty.gate.series import series_entries

        newest = self.series[-1]
        for name in sorted({*self.suite_data, *self._series_parts}):  # a crashed worker's suite has no data
            data = self.suite_data.get(name, {})
            # the parts are read once, here: the report and its writers never walk their records again
            candidate = data.pop("series_part", None)
            parts = data.pop("earlier_parts", None) or self._series_parts.get(name, {})
            missing = [c.step for c in self.series[:-1] if c.step not in parts]
            missing += [] if candidate is not None else [newest.step]
            if missing:
                steps = ", ".join(map(str, missing))
                failed = any(f"{name}@{step}" in self._series_failed for step in missing) or any(
                    r.get("suite") == name and r.get("outcome") == "error" for r in rows
                )
                why = "harness error" if failed else "not selected: a series needs the suite's cases and checkpoints"
                self.series_gaps[name] = f"no series for suite {name}: no result for step {steps} ({why})"
                continue
            tails = {str(r["metric"]): list(r["tail_ids"]) for r in rows
                     if r.get("suite") == name and r.get("tail_ids")}
            ordered = [(c, parts[c.step]) for c in self.series[:-1]] + [(newest, candidate)]
            data["series"] = series_entries(ordered, tails)

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
                preflight(self.runner(model), suites)
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
        from pytest_novelty.gate.snapshot import snapshot_settings

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
        self.comparisons = max(1, counted)
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
            workeroutput[_WORKER_KEY] = self.suite_data
            workeroutput[_REPAIRS_KEY] = repaired()
        else:  # before pytest-html writes its page (its own sessionfinish runs after this one)
            self._assemble_series(self.final_rows())
        no_verdict = any(outcome == "error" for outcome, _ in self._outcomes.values())
        decided = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED)
        if self.bad_input and session.exitstatus in decided:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        else:
            harness = (self.harness_errors or no_verdict or self.stopped) and session.exitstatus in decided
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
                    self._series_parts.setdefault(str(value["suite"]), {})[int(value["step"])] = value["part"]
                if name == "novelty" and isinstance(value, dict) and case:
                    self._node_rows[report.nodeid] = value
                elif name == "novelty_work" and getattr(report, "node", None) is not None:
                    self.log(str(value))  # from an xdist worker: its own output never reaches the terminal
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
            self._outcomes[report.nodeid] = ("skipped", last_line(report.longreprtext))

    def final_rows(self) -> list[dict[str, Any]]:
        """One row per case pytest ran, with pytest's outcome: the rows the cases recorded, and a row
        for every case that errored or crashed before it could record one."""
        rows = []
        for nodeid, (outcome, message) in self._outcomes.items():
            recorded = self._node_rows.get(nodeid)
            row = dict(recorded) if recorded else self._error_row(nodeid)
            row["outcome"] = outcome
            row["passed"] = outcome in ("passed", "skipped")
            if message and (outcome == "error" or not recorded):
                row["message"] = message
            rows.append(row)
        return rows

    def _error_row(self, nodeid: str) -> dict[str, Any]:
        """A row for a case that never recorded one: its suite and threshold from the node id."""
        key = _case_key(nodeid)
        for suite in self.suites.values():
            for run in suite.runs():
                for threshold in run.thresholds:
                    if f"{run.name}-{threshold.label}" == key:
                        return {
                            "suite": run.name,
                            "metric": threshold.metric,
                            "op": threshold.op,
                            "threshold": threshold.value,
                            "value": None,
                        }
        suite_name, _, metric = key.rpartition("-")
        return {"suite": suite_name or key, "metric": metric, "op": None, "threshold": None, "value": None}

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist controller: merge the suites' arrays that a worker computed. A worker that went down
        with an error (killed, out of memory) is a harness error whenever it happened: before its
        first case, during one (xdist also reports that case as crashed), between two, or after its
        last, when the arrays of its suites never arrive (the report would lack them)."""
        output = getattr(node, "workeroutput", None) or {}
        self.suite_data.update(output.get(_WORKER_KEY, {}))
        self.worker_repairs += int(output.get(_REPAIRS_KEY, 0))
        if error is not None and error != "keyboard-interrupt":  # an interrupt is the user's, not a crash
            worker = getattr(getattr(node, "gateway", None), "id", None) or "?"
            line = f"harness error: the xdist worker {worker} crashed ({error}); work it finished is cached"
            self.harness_errors.setdefault(line, "worker")
            self.worker_crashes.append(line)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput"):
            return
        rows = self.final_rows()
        if rows:
            from pytest_novelty.report.terminal import gate_summary

            terminalreporter.section("novelty gate")
            # Every damaged entry this run met, wherever it was read: the suites' runs, the preflight,
            # the checkpoint and index memos, in this process and in every xdist worker.
            for line in gate_summary(rows, self.suite_data, repaired() + self.worker_repairs):
                terminalreporter.line(line)
            for line in self.series_gaps.values():
                terminalreporter.line(line)
        for line in self.worker_crashes:
            terminalreporter.line(f"novelty: {line}", red=True, bold=True)
        folder = self.config.option.novelty_report
        status = self.exit_status if self.exit_status is not None else int(exitstatus)
        if folder:
            # Written on every run, from pytest's outcomes: errors and crashes included.
            from pytest_novelty.report.json_report import record_no_verdict

            self._say_stopped()
            if self.stopped is not None and not rows:  # no case ran: no verdict, why, and the exit status
                record_no_verdict(folder, self.stopped, status)
                terminalreporter.line(f"novelty report: {folder} (no verdict)")
                return
            files = self._write_report(folder, rows, status)
            terminalreporter.line(f"novelty report: {files.json.parent}")
        if self.config.option.novelty_log and rows:  # --novelty-log: the trackers read the report
            from pytest_novelty.integrations import log_session

            logged = log_session(
                self.config.option.novelty_log, rows, self.suite_data, {**self.versions(), "exit status": status},
                report_dir=folder or None, write=terminalreporter.line,
            )  # fmt: skip
            session = self.pytest_session
            if logged.status and session and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
                session.exitstatus = self.exit_status = logged.status
                if folder:  # the report records the status the run exits with: the tracker's
                    self._write_report(folder, rows, logged.status)

    def _write_report(self, folder: str, rows: list[dict[str, Any]], status: int) -> Any:
        """The report folder of ``--novelty-report``, recording ``status`` as the run's exit status."""
        from pytest_novelty.report import write_report

        versions = {**self.versions(), "exit status": status}
        if self.worker_crashes:  # why a run whose cases all decided exits with the harness status
            versions["status"] = "; ".join(self.worker_crashes)
        return write_report(Path(folder), rows, cast(Any, self.suite_data), versions)

    def versions(self) -> dict[str, Any]:
        """What produced the numbers, for report.json."""
        from importlib import metadata

        infos = [d.get("info", {}) for d in self.suite_data.values()]
        return {
            "pytest-novelty": metadata.version("pytest-novelty"),
            "model": self.config.option.novelty_model,
            "fingerprint": ", ".join(sorted({str(i.get("fingerprint")) for i in infos if i.get("fingerprint")})),
            "baseline_model": self.baseline_model,
            "model_series": self.config.option.novelty_model_series,
            "suites": {s.name: str(p) for p, s in self.suites.items()},
            "judge": ", ".join(sorted({str(i.get("judge")) for i in infos if i.get("judge")})),
            "index": ", ".join(sorted({str(i.get("originality")) for i in infos if i.get("originality")})),
            "originality units": ", ".join(sorted({str(i.get("units")) for i in infos if i.get("units")})),
        }


def terminal_line(config: pytest.Config, line: str) -> None:
    """``line``, redacted, on the terminal past pytest's output capture, on its own line even in the
    middle of a verbose test line: the session's one channel for progress and notices."""
    from pytest_novelty.infra.redact import redact

    reporter = config.pluginmanager.getplugin("terminalreporter")
    if reporter is None:
        return
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        with capman.global_and_fixture_disabled():
            reporter.write_line(redact(line))
    else:
        reporter.write_line(redact(line))


def _distributed(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist controller (it collects nothing itself)."""
    return config.pluginmanager.has_plugin("dsession")


class _TerminalStream:
    """A text stream to the real terminal while pytest captures output (for progress bars)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def write(self, text: str) -> int:
        import sys

        capman = self.config.pluginmanager.getplugin("capturemanager")
        if capman is None:
            return sys.stderr.write(text)
        with capman.global_and_fixture_disabled():
            written = sys.stderr.write(text)
            sys.stderr.flush()
        return written

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        # pytest's capture has moved file descriptor 2 by now; its terminal writer knows whether the
        # session writes to a terminal (and honours --color / NO_COLOR for it).
        return bool(self.config.get_terminal_writer().hasmarkup)


def spread_series(suite: Suite) -> bool:
    """Whether a series' earlier checkpoints on ``suite`` are units of work of their own
    (``test_checkpoint`` items that xdist spreads over its workers). A suite gated against the
    series' best earlier checkpoint needs them all before its cases decide, so they are scored
    where its cases run, one after another."""
    return suite.gate.against != "series-best"


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


