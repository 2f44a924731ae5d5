"""The one loop that runs a run's cases, for both front ends.

:class:`CaseLoop` holds what a run keeps while its cases are decided: each suite's exported data
(computed once, with the alpha of the run's correction), the parts of a series, what repeats
generated. Its :meth:`CaseLoop.decide` is the one way a case is decided: the snapshot store the
front end hands it, :func:`pytest_novelty.gate.case.decide` on the session's results, then the
repeats of ``--novelty-repeat``. The pytest items call it once per case (``plugin/items.py``); the
command line calls :meth:`CaseLoop.run` for all of them, which also turns a suite's harness error into
error records for its cases, as pytest does. :meth:`CaseLoop.assemble_series` puts each suite's
series together at the end, from the candidate's part and every earlier checkpoint's, on the tails
the cases were judged on, wherever those parts were computed (here, or on xdist workers).

A front end owns only its arguments, its printing and its exit: which store a case's snapshot lives
in (syrupy's under pytest, plain files on the command line) is the one thing it passes in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pytest_novelty.gate.adaptive import Adaptive, AdaptiveBudget, adaptive_verdict, regression_verdict
from pytest_novelty.gate.case import AdaptiveHook, PairedHook, ReadOnlySnapshot, SnapshotStore, decide
from pytest_novelty.gate.record import CaseRecord, Repeats
from pytest_novelty.infra.errors import HarnessError

if TYPE_CHECKING:
    from pytest_novelty.gate.comparison import Comparison
    from pytest_novelty.gate.regression import MetricRecord
    from pytest_novelty.gate.tail import FrozenTail
    from pytest_novelty.gate.thresholds import Verdict
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.pipeline.series import Checkpoint
    from pytest_novelty.pipeline.session import ResultsSession
    from pytest_novelty.pipeline.suite_data import SuiteData
    from pytest_novelty.suites.schema import Suite, Threshold

__all__ = ["CaseLoop", "CaseSettings", "checkpoint_part"]

#: Which store holds a case's snapshot (None: snapshots are off).
StoreFor = Callable[["Suite", "Threshold"], "SnapshotStore | None"]


@dataclass(frozen=True)
class CaseSettings:
    """How a run decides its cases: the threshold mode of ``--novelty-threshold-mode`` (None: each
    suite's own), the ``--novelty-repeat`` count, the number of regression tests the run makes
    (each held to α / that number), and the budget of ``--novelty-adaptive`` (None: no rounds)."""

    mode: str | None = None
    repeats: int = 1
    comparisons: int = 1
    adaptive: AdaptiveBudget | None = None

    @classmethod
    def from_options(cls, options: Any, comparisons: int = 1) -> CaseSettings:
        """The settings a run's options ask for (either front end's parsed options)."""
        samples, minutes = options.novelty_adaptive, options.novelty_adaptive_minutes
        budget = AdaptiveBudget(int(samples), None if minutes is None else float(minutes)) if samples else None
        return cls(options.novelty_threshold_mode, int(options.novelty_repeat or 1), comparisons, budget)


class CaseLoop:
    """A run's cases on one :class:`~pytest_novelty.pipeline.session.ResultsSession`.

    ``series`` lists the checkpoints of ``--model-series`` in step order, the candidate last.
    ``spread(suite)`` says whether a suite's earlier checkpoints are scored elsewhere (as pytest
    items of their own, which hand their parts to :meth:`add_series_part`); otherwise they are
    scored with the suite's first case, from the session.
    """

    def __init__(
        self,
        session: ResultsSession,
        settings: CaseSettings,
        *,
        series: Sequence[Checkpoint] | None = None,
        spread: Callable[[Suite], bool] | None = None,
    ) -> None:
        self.session = session
        self.settings = settings
        self.series = list(series or [])
        self.spread = spread or (lambda suite: False)
        self.suite_data: dict[str, SuiteData] = {}
        """Per suite run: its exported data (:func:`pytest_novelty.pipeline.export.suite_data`)."""
        self.candidate_parts: dict[str, dict[str, Any]] = {}
        """Per suite: the candidate's part of its series (with a series; JSON-ready, it may come from a worker)."""
        self.series_parts: dict[str, dict[int, dict[str, Any]]] = {}
        """Per suite: step → an earlier checkpoint's part, scored here or handed in by the items that scored them."""
        self.series_gaps: dict[str, str] = {}
        """Per suite: why its series could not be put together."""
        self._started: dict[str, float] = {}
        """Per suite run: when its first adaptive look began (the time bound counts from there)."""
        self._rounds: dict[str, tuple[int, int]] = {}
        """Per suite run: the adaptive rounds its cases drew of the candidate and of a live baseline."""

    # -- a suite's results ----------------------------------------------------------------------

    def result(self, suite: Suite) -> SuiteResult:
        """The candidate's result on ``suite`` (computed once), its data exported the first time,
        with its part of the series."""
        result = self.session.result(suite)
        if suite.name not in self.suite_data:
            from pytest_novelty.pipeline.export import suite_data

            base = self.session.baseline(suite)
            alpha = suite.gate.alpha / self.settings.comparisons
            self.suite_data[suite.name] = suite_data(result, None if base is None else base.result, alpha=alpha)
            if self.series:
                from pytest_novelty.gate.series import series_part

                self.candidate_parts[suite.name] = series_part(result)
                if not self.spread(suite):  # its earlier checkpoints are scored here, one after another
                    steps = [c.step for c in self.series[:-1]]
                    for step, earlier in zip(steps, self.earlier(suite), strict=True):
                        self.add_series_part(suite.name, step, series_part(earlier))
        return result

    def earlier(self, suite: Suite) -> list[SuiteResult]:
        """With a series, every earlier checkpoint's result on ``suite``, in step order."""
        return self.session.earlier(suite)

    # -- a case -----------------------------------------------------------------------------------

    def decide(self, suite: Suite, threshold: Threshold, snapshot: SnapshotStore | None = None) -> CaseRecord:
        """Decide one case: on the candidate's result, against the baseline or references, the best
        earlier checkpoint of a series (``[gate] against = "series-best"``) or the snapshot, then on
        every repeat of ``--novelty-repeat``. Each repeat is generated with its own seed
        (:meth:`pytest_novelty.suites.schema.Suite.repeated`) and decided exactly as repeat 0, against
        the same baseline or snapshot (read only); the verdict stays repeat 0's, and the pass rate and
        the spread of the value say how much it owes to the seed."""
        record = self._decide(suite, threshold, snapshot, first=True)
        if self.settings.repeats > 1:
            read_only = None if snapshot is None else ReadOnlySnapshot(snapshot)
            found = [record, *(self._decide(suite.repeated(i), threshold, read_only)
                               for i in range(1, self.settings.repeats))]  # fmt: skip
            record = replace(record, repeats=Repeats(tuple(r.value for r in found), tuple(r.passed for r in found)))
        self._note_repeats(suite)
        baseline, paired = self.session.baseline(suite), record.regression_adaptive
        live = paired.rounds if paired is not None and baseline is not None and baseline.kind == "baseline" else 0
        drawn = max([a.rounds for a in (record.adaptive, paired) if a is not None], default=0)
        self._note_rounds(suite, drawn, live)
        return record

    def _decide(self, suite: Suite, threshold: Threshold, snapshot: SnapshotStore | None, *,
                first: bool = False) -> CaseRecord:  # fmt: skip
        """:func:`~pytest_novelty.gate.case.decide` on the session's results: the candidate's, the
        baseline or references, the earlier checkpoints of a series (only when the suite compares with
        them); the ``first`` pass with the sequential rules of ``--novelty-adaptive`` (repeats without)."""
        result, baseline = self.result(suite), self.session.baseline(suite)
        earlier = self.earlier(suite) if baseline is None and suite.gate.against == "series-best" else []
        adaptive, paired = self._hooks(suite, threshold) if first else (None, None)
        return decide(suite, threshold, result, baseline=baseline, earlier=earlier, snapshot=snapshot,
                      mode=self.settings.mode, comparisons=self.settings.comparisons, adaptive=adaptive,
                      paired=paired)  # fmt: skip

    def _hooks(self, suite: Suite, threshold: Threshold) -> tuple[AdaptiveHook | None, PairedHook | None]:
        """With a budget (else neither): the case's sequential rule over its suite's rounds, and a
        regression case's paired rule, a live baseline checkpoint's rounds drawn with the candidate's."""
        budget, session = self.settings.adaptive, self.session
        if budget is None:
            return None, None
        started = self._started.setdefault(suite.name, time.monotonic())

        def rounds(k: int) -> SuiteResult:
            return session.result(suite if k == 0 else suite.repeated(k))

        def baseline(k: int) -> SuiteResult:
            assert session.baseline_model is not None  # a live baseline is a --baseline-model checkpoint
            return session.model_result(session.baseline_model, suite.repeated(k))

        def threshold_rule(first: Verdict, tail: FrozenTail | None) -> tuple[Verdict, Adaptive]:
            return adaptive_verdict(suite, threshold, first, rounds, tail, budget, started=started)

        def paired_rule(first: Comparison, accepted: MetricRecord, candidate: MetricRecord,
                        live: bool) -> tuple[Comparison, Adaptive] | None:  # fmt: skip
            return regression_verdict(suite, first, accepted, candidate, rounds, baseline if live else None, budget,
                                      started=started)  # fmt: skip

        return threshold_rule, paired_rule

    def _note_rounds(self, suite: Suite, rounds: int, baseline: int = 0) -> None:
        """Keep what the suite's adaptive rounds generated, up to its slowest case's, the rounds a live
        baseline drew with them included (for the work line)."""
        data = self.suite_data.get(suite.name)
        before = self._rounds.get(suite.name, (0, 0))
        now = (max(before[0], rounds), max(before[1], baseline))
        if data is None or now == before:
            return
        from pytest_novelty.pipeline.export import rounds_work

        self._rounds[suite.name] = now
        work = rounds_work(self.session, suite, now[0] + 1, baseline=now[1] + 1)
        self.suite_data[suite.name] = data.with_(adaptive=work)

    def _note_repeats(self, suite: Suite) -> None:
        """Keep, once per suite, what its repeats generated (for the work line)."""
        data = self.suite_data.get(suite.name)
        if self.settings.repeats > 1 and data is not None and not data.repeats:
            from pytest_novelty.pipeline.export import rounds_work

            self.suite_data[suite.name] = data.with_(repeats=rounds_work(self.session, suite, self.settings.repeats))

    def run(self, runs: Sequence[Suite], store_for: StoreFor) -> tuple[list[CaseRecord], list[str]]:
        """Every case of ``runs``, in order: the records, and one line per suite whose harness failed
        (its cases are error records, reached no verdict; the other suites still run), as under pytest."""
        records: list[CaseRecord] = []
        errors: list[str] = []
        for run in runs:
            done = len(records)
            try:
                for threshold in run.thresholds:
                    records.append(self.decide(run, threshold, store_for(run, threshold)))
            except HarnessError as exc:
                errors.append(f"harness error in suite {run.name}: {exc}")
                records += [CaseRecord.error(run.name, t.metric, t.op, t.value, f"harness error: {exc}")
                            for t in run.thresholds[len(records) - done:]]  # fmt: skip
        self.assemble_series(records)
        return records, errors

    # -- a series -----------------------------------------------------------------------------------

    def add_series_part(self, suite: str, step: int, part: Mapping[str, Any]) -> None:
        """An earlier checkpoint's part of ``suite``'s series (:func:`checkpoint_part`)."""
        self.series_parts.setdefault(suite, {})[step] = dict(part)

    def assemble_series(self, records: Sequence[CaseRecord], failed: Callable[[str, int], bool] | None = None) -> None:
        """Each suite's series, from its parts, compared on the tails its cases were judged on; a suite
        missing a checkpoint's part gets no series, and :attr:`series_gaps` says why (``failed(suite,
        step)``: whether that checkpoint's item failed, a harness error, rather than not being selected)."""
        if not self.series:
            return
        from pytest_novelty.gate.series import series_entries

        newest = self.series[-1]
        for name in sorted({*self.suite_data, *self.series_parts}):  # a crashed worker's suite has no data
            candidate = self.candidate_parts.get(name)
            parts = self.series_parts.get(name, {})
            missing = [c.step for c in self.series[:-1] if c.step not in parts]
            missing += [] if candidate is not None else [newest.step]
            if missing or candidate is None:
                steps = ", ".join(map(str, missing))
                harness = any(r.suite == name and r.is_error for r in records) or any(
                    failed is not None and failed(name, step) for step in missing
                )
                why = "harness error" if harness else "not selected: a series needs the suite's cases and checkpoints"
                self.series_gaps[name] = f"no series for suite {name}: no result for step {steps} ({why})"
                continue
            tails = {r.metric: list(r.tail.ids) for r in records if r.suite == name and r.tail is not None}
            ordered = [(c, parts[c.step]) for c in self.series[:-1]] + [(newest, candidate)]
            if name in self.suite_data:
                self.suite_data[name] = self.suite_data[name].with_(series=tuple(series_entries(ordered, tails)))


def checkpoint_part(session: ResultsSession, suite: Suite, checkpoint: Checkpoint) -> tuple[dict[str, Any], str]:
    """One earlier checkpoint of a series on ``suite``, generated and scored as its own unit of work:
    its part of the series (for :meth:`CaseLoop.add_series_part`, JSON-ready so that it may cross
    from an xdist worker) and the work line saying what it took. The checkpoint's model is released
    afterwards (the next unit may load another)."""
    from pytest_novelty.gate.series import series_part
    from pytest_novelty.pipeline.export import work_line

    try:
        result = session.model_result(checkpoint.path, suite.first)
        return series_part(result), work_line(f"{suite.name} @ {checkpoint.name}", result)
    finally:
        session.release(checkpoint.path)
