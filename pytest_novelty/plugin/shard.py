"""``pytest --novelty-shard K/N``: each case does its shard's part of its suite, then is skipped as
"decided by the merge run" (pytest's own skip, so JUnit XML and the terminal show it as one).

The split is computed in every process from the selected cases (an xdist worker collects them all),
so every shard and every worker agree on it (:mod:`pytest_novelty.pipeline.shards`). A part that
fails is a harness error of its cases (exit 8); a shard whose every part is done exits 0. The
terminal summary says what the shard did instead of the gate's table; ``--novelty-report`` holds
no verdict, and no tracker is logged to: the merge run does that.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from pytest_novelty.infra.errors import NoveltyError
from pytest_novelty.pipeline.shards import DEFERRED, DEFERRED_REASON, Shard, ShardPlan, parse_shard
from pytest_novelty.plugin.series import spread_series
from pytest_novelty.suites.schema import Suite

if TYPE_CHECKING:
    from pytest_novelty.pipeline.session import ResultsSession
    from pytest_novelty.pipeline.shard_work import PartWork

PART_PROPERTY = "novelty_shard"
"""The user property that carries a part's work line to the controller."""


class ShardRun:
    """One pytest session's shard: which it is, the selected suite runs, and the parts done."""

    def __init__(self, shard: Shard) -> None:
        self.shard = shard
        self.runs: list[Suite] = []
        self._plan: ShardPlan | None = None
        self._parts: dict[tuple[str, str], PartWork | NoveltyError] = {}
        self.lines: dict[str, str] = {}
        """The work line of each part done, by suite run (and checkpoint), in this process or a worker."""

    @classmethod
    def from_config(cls, config: pytest.Config) -> ShardRun | None:
        """The session's shard (None without ``--novelty-shard``); the option was checked at configure."""
        value = config.option.novelty_shard
        return None if not value else cls(parse_shard(str(value)))

    @property
    def reason(self) -> str:
        """The reason every case of the shard is skipped with."""
        return f"{DEFERRED_REASON} (shard {self.shard} did its part of this suite)"

    def select(self, runs: list[Suite]) -> None:
        """The suite runs of the selected cases: what the split is made of."""
        self.runs = list({run.run_key: run for run in runs}.values())
        self._plan = None

    def plan(self, session: ResultsSession, repeats: int) -> ShardPlan:
        if self._plan is None:
            from pytest_novelty.pipeline.shard_work import plan_gate

            checkpoints = 1 + bool(session.baseline_model) + max(0, len(session.series) - 1)
            self._plan = plan_gate(self.runs, self.shard, prompts_of=session.candidate.load_prompts,
                                   repeats=repeats, checkpoints=checkpoints)
        return self._plan

    def part(self, session: ResultsSession, suite: Suite, item: pytest.Item, repeats: int,
             models: list[str] | None = None) -> NoReturn:
        """Do this shard's part of ``suite`` (once per suite run and checkpoints), then skip the case:
        it is decided by the merge run. A part that failed is raised (the same error for every case
        of the part), for the session to make the case a harness error."""
        from pytest_novelty.pipeline.shard_work import do_part

        label = suite.name if models is None else f"{suite.name} @ {', '.join(Path(m).name for m in models)}"
        if models is None:  # the case's checkpoints; a spread series' earlier ones are items of their own
            models = [session.model, *filter(None, [session.baseline_model])]
            if session.series and not spread_series(suite):
                models += [c.path for c in session.series[:-1]]
        key = (suite.run_key, ",".join(models))
        if key not in self._parts:
            try:
                self._parts[key] = replace(do_part(session, suite, self.plan(session, repeats), self.shard,
                                                   repeats=repeats, models=models), suite=label)
            except NoveltyError as exc:
                self._parts[key] = exc
            done = self._parts[key]
            if not isinstance(done, NoveltyError):
                item.user_properties.append((PART_PROPERTY, done.line()))
        done = self._parts[key]
        if isinstance(done, NoveltyError):
            raise done
        pytest.skip(self.reason)

    def note(self, report: pytest.TestReport) -> None:
        """Keep the part lines a report carries (from this process or an xdist worker)."""
        for name, value in report.user_properties:
            if name == PART_PROPERTY:
                self.lines.setdefault(str(value), str(value))

    @staticmethod
    def outcome(report: pytest.TestReport) -> str | None:
        """:data:`DEFERRED` for a case a shard skipped, else None."""
        return DEFERRED if report.skipped and DEFERRED_REASON in report.longreprtext else None

    def summary(self, terminalreporter: Any, outcomes: dict[str, tuple[str, str]], *, failed: bool,
                cache_dir: Path, report: str | None) -> None:
        """The shard's section of the terminal summary (``failed``: the session had harness errors),
        and the placeholder of its report folder ``report``."""
        deferred = sum(1 for outcome, _ in outcomes.values() if outcome == DEFERRED)
        errors = sum(1 for outcome, _ in outcomes.values() if outcome == "error")
        terminalreporter.section("novelty shard")
        for line in self.lines.values():
            terminalreporter.line(line)
        done = "NOT done (harness errors above)" if errors or failed else "done"
        cases = f"{deferred} case{'' if deferred == 1 else 's'}"
        terminalreporter.line(f"shard {self.shard}: its part is {done}; {cases} {DEFERRED_REASON}, "
                              f"whose cache is {cache_dir}")
        if report:
            from pytest_novelty.report.json_report import write_placeholder

            write_placeholder(report, f"shard {self.shard} of the gate: every case is {DEFERRED_REASON}")
            terminalreporter.line(f"novelty report: {report} (no verdict: a shard)")
