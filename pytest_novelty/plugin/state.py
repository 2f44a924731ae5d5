"""The plugin's per-session state: suite results, the baseline, rows for the table and the report.

Registered as a pytest plugin object while ``--model`` is in use (see ``plugin.py``). Under
pytest-xdist each worker computes its suites; the per-case rows reach the controller in the
reports' ``user_properties`` and the per-suite arrays through ``workeroutput``, so the controller
prints one table and writes one report.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import pytest

from pytest_novelty.infra.cache import repaired
from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS, ConfigError, HarnessError, NoveltyError
from pytest_novelty.infra.progress import ProgressSink
from pytest_novelty.suites.schema import Suite

if TYPE_CHECKING:
    from pytest_novelty.pipeline.runner import Runner, SessionModels, SuiteResult

T = TypeVar("T")

_WORKER_KEY = "novelty_suites"
_REPAIRS_KEY = "novelty_cache_repairs"
HARNESS_PROPERTY = "novelty_harness"
"""The user property that carries a harness error's message to the controller (and JUnit)."""


class NoveltyState:
    """What one pytest session knows about the checkpoint(s) it gates."""

    def __init__(self, config: pytest.Config, suites: list[Suite], cache_dir: Path) -> None:
        self.config = config
        self.suites = {s.path.resolve(): s for s in suites}
        self.cache_dir = cache_dir
        self._runners: dict[str, Runner] = {}
        self._models: SessionModels | None = None
        self._results: dict[tuple[str, str], SuiteResult | NoveltyError] = {}
        self._rounds: dict[tuple[str, str], list[SuiteResult] | NoveltyError] = {}
        self._outcomes: dict[str, tuple[str, str]] = {}  # node id -> (passed | failed | error, message)
        self._node_rows: dict[str, dict[str, Any]] = {}
        self._announced: set[str] = set()
        self.suite_data: dict[str, dict[str, Any]] = {}
        self.stopped: str | None = None
        """Why the run stopped before any case ran (a preflight failure), for the report."""
        self.worker_repairs = 0
        """Damaged cache entries the xdist workers dropped (each process counts its own)."""
        self.harness_errors: dict[str, str] = {}
        """Each distinct harness error's message, and the first case (node id) it stopped."""
        from pytest_novelty.plugin.series import SERIES

        self.series = config.stash.get(SERIES, None)  # --model-series: the checkpoints, newest last

    # -- running suites -------------------------------------------------------------------------

    @property
    def baseline_model(self) -> str | None:
        model = self.config.option.novelty_baseline_model
        return None if model is None else str(model)

    def runner(self, model: str) -> Runner:
        """One runner per checkpoint (candidate, and baseline when given); all share the session's
        scoring models (judges, equivalence checks, indexes), so each loads once."""
        if model not in self._runners:
            from pytest_novelty.pipeline.runner import RunConfig, Runner, SessionModels

            config = RunConfig.from_options(
                self.config.option, model=model, cache_dir=self.cache_dir, worker=self.worker or "main",
                log=self.log, progress=self.progress_sink(),
            )
            if self._models is None:
                self._models = SessionModels(config)
            self._runners[model] = Runner(config, self._models)
        return self._runners[model]

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
        from pytest_novelty.infra.redact import redact

        line = redact(line)
        if self.worker:
            return  # a worker's output never reaches the terminal; the controller logs for it
        reporter = self.config.pluginmanager.getplugin("terminalreporter")
        if reporter is None:
            return
        capman = self.config.pluginmanager.getplugin("capturemanager")
        if capman is not None:
            with capman.global_and_fixture_disabled():
                reporter.write_line(line)
        else:
            reporter.write_line(line)

    @staticmethod
    def _memo(store: dict[tuple[str, str], T | NoveltyError], key: tuple[str, str], compute: Callable[[], T]) -> T:
        """Compute once per key; an error is remembered and raised again for the other cases."""
        if key not in store:
            try:
                store[key] = compute()
            except NoveltyError as exc:
                store[key] = exc
        value = store[key]
        if isinstance(value, NoveltyError):
            raise value
        return value

    def _denial_rounds(self, model: str, suite: Suite) -> list[SuiteResult]:
        """All rounds of a denial-prompting suite, run once (each round depends on the one before)."""
        from pytest_novelty.pipeline.denial import open_extractor_for, run_denial

        def rounds() -> list[SuiteResult]:
            runner = self.runner(model)
            return run_denial(runner, suite, open_extractor_for(runner.config, suite))

        return self._memo(self._rounds, (model, suite.name.rsplit("[round=", 1)[0]), rounds)

    def baseline_result(self, suite: Suite) -> SuiteResult | None:
        """What the candidate is compared with, paired: the baseline checkpoint on the same prompts
        and settings when one is given, else the dataset's human references when the suite asks
        for them (``[gate] reference = true``), else nothing."""
        if self.baseline_model is not None:
            return self.model_result(self.baseline_model, suite)  # a denial round: the baseline's same round
        if suite.gate.reference:
            runner = self.runner(self.config.option.novelty_model)
            return self._memo(self._results, ("human references", suite.name), lambda: runner.references(suite))
        return None

    def result(self, suite: Suite) -> SuiteResult:
        """The candidate's result (computed once per suite); with a baseline, its outputs rank q@Tail."""
        baseline = self.baseline_result(suite)
        pool = None if baseline is None else baseline.originality.get(4)
        model = self.config.option.novelty_model
        result = self.model_result(model, suite, pool)
        if suite.scoring.calibration is not None and result.judge_agreement is None:
            from dataclasses import replace

            result = replace(result, judge_agreement=self.runner(model).judge_agreement(suite))
        if suite.name not in self.suite_data:
            from pytest_novelty.pipeline.export import suite_data

            self.suite_data[suite.name] = suite_data(result, baseline)
            if self.series:
                from pytest_novelty.gate.series import suite_series

                earlier = zip(self.series[:-1], self.earlier_results(suite), strict=True)
                self.suite_data[suite.name]["series"] = suite_series([*earlier, (self.series[-1], result)])
        return result

    def model_result(self, model: str, suite: Suite, pool: Any = None) -> SuiteResult:
        """One checkpoint's result on a suite (computed once; denial rounds run together)."""
        if suite.denial_round is not None:
            return self._denial_rounds(model, suite)[suite.denial_round - 1]
        return self._memo(self._results, (model, suite.name), lambda: self.runner(model).run(suite, pool_novelty=pool))

    def earlier_results(self, suite: Suite) -> list[SuiteResult]:
        """With --model-series, the results of every checkpoint before the candidate, in step order.
        Their runners are let go after each use (a model loads only when a generation is not cached)."""
        results = []
        for checkpoint in (self.series or [])[:-1]:
            results.append(self.model_result(checkpoint.path, suite))
            self._runners.pop(checkpoint.path, None)
        return results

    def announce(self, suite: Suite, result: SuiteResult) -> str | None:
        """The line saying where and how a suite ran, once per suite (None after the first time)."""
        if suite.name in self._announced:
            return None
        self._announced.add(suite.name)
        from pytest_novelty.pipeline.export import work_line

        return work_line(suite.name, result)

    # -- harness errors -------------------------------------------------------------------------

    def preflight(self, suites: list[Suite]) -> None:
        """Check the services the run needs once (see :mod:`pytest_novelty.pipeline.preflight`); a failure
        ends the run at once with one line: a usage error for bad configuration, else the
        harness exit status."""
        if not suites:
            return
        from pytest_novelty.pipeline.preflight import preflight

        models = [self.config.option.novelty_model, self.baseline_model]
        try:
            for model in filter(None, models):
                preflight(self.runner(model), suites)
        except ConfigError as exc:
            self.stopped = f"configuration error: {exc}"
            pytest.exit(f"novelty: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
        except HarnessError as exc:
            self.harness_errors.setdefault(str(exc), "preflight")
            self.stopped = f"harness error before any case ran: {exc}"
            pytest.exit(f"novelty harness error: {exc}", returncode=HARNESS_EXIT_STATUS)

    def harness_failure(self, exc: NoveltyError, item: pytest.Item, what: str = "") -> NoReturn:
        """Stop a case on a harness error: the cause in full once, later cases point to the first.

        The case is an error (raised in its fixture), not a failed gate; the message reaches the
        controller and the JUnit file as a user property; ``--tb=long`` shows the full trace.
        """
        message = str(exc)
        first = self.harness_errors.setdefault(message, item.nodeid)
        item.user_properties.append((HARNESS_PROPERTY, message))
        if self.config.option.tbstyle == "long":
            raise exc
        if first == item.nodeid:
            pytest.fail(f"harness error{what} (not a gate failure): {message}", pytrace=False)
        pytest.fail(f"harness error{what} (not a gate failure): the same as in {first}", pytrace=False)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Preflight for the suites of the selected cases (one process, no xdist)."""
        if self.worker or _distributed(self.config) or self.config.option.collectonly:
            return
        suites: dict[str, Suite] = {}
        for item in session.items:
            callspec = getattr(item, "callspec", None)
            suite = callspec.params.get("novelty_suite") if callspec is not None else None
            if isinstance(suite, Suite):
                suites.setdefault(suite.name, suite)
        self.preflight(list(suites.values()))

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        """Preflight on the xdist controller, which collects nothing itself: every suite it knows of."""
        if not self.worker and _distributed(self.config) and not self.config.option.collectonly:
            self.preflight([run for suite in self.suites.values() for run in suite.runs()])

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A run with a harness error exits with :data:`HARNESS_EXIT_STATUS`, not as a gate verdict."""
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[_WORKER_KEY] = self.suite_data
            workeroutput[_REPAIRS_KEY] = repaired()
        if self.harness_errors and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = HARNESS_EXIT_STATUS

    # -- hooks ----------------------------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect each case's numbers and pytest's outcome for it, on the controller too under xdist.

        The outcome is pytest's own: a failed setup or teardown (a harness error) and a crashed
        xdist worker (reported with ``when == "???"``) are errors, whatever the case's row said.
        """
        for name, value in report.user_properties:
            if name == HARNESS_PROPERTY and report.failed:
                self.harness_errors.setdefault(str(value), report.nodeid)
        case = _case_key(report.nodeid)
        if report.when == "call":
            for name, value in report.user_properties:
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
            self._outcomes[report.nodeid] = ("error", f"{what}: {_last_line(report.longreprtext)}")
        elif report.skipped and report.nodeid not in self._outcomes:
            self._outcomes[report.nodeid] = ("skipped", _last_line(report.longreprtext))

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
        """xdist controller: merge the suites' arrays that a worker computed."""
        output = getattr(node, "workeroutput", {})
        self.suite_data.update(output.get(_WORKER_KEY, {}))
        self.worker_repairs += int(output.get(_REPAIRS_KEY, 0))

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput"):
            return
        rows = self.final_rows()
        if rows:
            from pytest_novelty.report.terminal import SHARES_LEGEND, render_table, shares_note

            terminalreporter.section("novelty gate")
            headers = {str(r["suite"]): str(r["header"]) for r in rows if r.get("header")}
            notes = {name: shares_note(data) for name, data in self.suite_data.items()}
            for line in render_table(rows, headers, notes):
                terminalreporter.line(line)
            if any(notes.values()):
                terminalreporter.line(SHARES_LEGEND)
            from pytest_novelty.report.series import series_tables

            for line in series_tables(self.suite_data):  # --model-series
                terminalreporter.line(line)
            # Every damaged entry this run met, wherever it was read: the suites' runs, the preflight,
            # the checkpoint and index memos, in this process and in every xdist worker.
            work = _work_summary(self.suite_data, repaired() + self.worker_repairs)
            if work:
                terminalreporter.line(work)
        folder = self.config.option.novelty_report
        if folder:
            # Written on every run, from pytest's outcomes: errors and crashes included.
            from pytest_novelty.report import write_report

            if self.stopped is not None and not rows:  # no case ran: no verdict, and why
                from pytest_novelty.report.json_report import write_placeholder

                write_placeholder(Path(folder), self.stopped)
                terminalreporter.line(f"novelty report: {folder} (no verdict)")
                return
            versions = {**self.versions(), "pytest exit status": int(exitstatus)}
            files = write_report(Path(folder), rows, cast(Any, self.suite_data), versions)
            terminalreporter.line(f"novelty report: {files.json.parent}")

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


def _case_key(nodeid: str) -> str:
    """The parametrize id of a suite case (``story-novelty@5>=0.3``), '' for any other test."""
    path, _, rest = nodeid.partition("::")
    if not path.endswith(".toml") or not rest.startswith("test_metric[") or not rest.endswith("]"):
        return ""
    return rest[len("test_metric[") : -1]


def _last_line(text: str) -> str:
    """The last non-empty line of a failure's text (pytest puts the message there)."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _work_summary(suite_data: dict[str, dict[str, Any]], repairs: int = 0) -> str:
    """One line with the work a run did: what a warm rerun should show as zeros."""
    infos = [d.get("info", {}) for d in suite_data.values()]
    if not infos:
        return ""
    from pytest_novelty.pipeline.export import batches_text

    generated = sum(int(i.get("generated_rows", 0)) for i in infos)
    batches = sum(int(i.get("generated_batches", 0)) for i in infos)
    cached = sum(int(i.get("cached_rows", 0)) for i in infos)
    lookups = sum(int(i.get("originality_lookups", 0)) for i in infos)
    judged = sum(int(i.get("judge_requests", 0)) for i in infos)
    warning = f"; warning: {repairs} damaged cache entries dropped and recomputed" if repairs else ""
    line = (
        f"novelty work done: {generated} samples generated in {batches_text(batches)} ({cached} from cache), "
        f"{lookups} originality lookups, {judged} judge requests{warning}"
    )
    earlier = [e for d in suite_data.values() for e in (d.get("series") or [])[:-1]]
    if earlier:  # --model-series: the checkpoints before the candidate
        made, kept = sum(int(e["generated_rows"]) for e in earlier), sum(int(e["cached_rows"]) for e in earlier)
        line += f"; earlier checkpoints: {made} samples generated ({kept} from cache)"
    return line
