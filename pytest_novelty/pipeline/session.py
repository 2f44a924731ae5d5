"""The results of one run, computed once and shared: the memo both front ends read.

A :class:`ResultsSession` knows the candidate, the baseline (another checkpoint, or the dataset's
human references when a suite asks for them) and a series' earlier checkpoints, and keeps one
:class:`~pytest_novelty.pipeline.runner.Runner` per checkpoint over one shared set of scoring models.
Every result is computed on first use and kept, an error too (raised again for the suite's other
cases); denial rounds run once, together. The pytest plugin and ``pytest-novelty run`` both hold
one, so they gate on the same numbers; cases are decided in :mod:`pytest_novelty.gate.case`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from pytest_novelty.infra.errors import NoveltyError
from pytest_novelty.pipeline.config import RunConfig
from pytest_novelty.pipeline.models import SessionModels
from pytest_novelty.pipeline.results import HUMAN_REFERENCES, SuiteResult
from pytest_novelty.pipeline.runner import Runner
from pytest_novelty.pipeline.series import Checkpoint
from pytest_novelty.suites.schema import Suite

__all__ = ["HUMAN_REFERENCES", "Baseline", "ResultsSession"]

T = TypeVar("T")


@dataclass(frozen=True)
class Baseline:
    """What a candidate's suite result is compared with, paired, and what it is."""

    result: SuiteResult
    kind: str
    """``"baseline"`` (``--baseline-model``) or ``"references"`` (``[gate] reference = true``)."""


class ResultsSession:
    """The memo of one run's suite results: ``make_config(model)`` gives one checkpoint's run
    configuration, ``series`` the checkpoints of ``--model-series`` in step order, the candidate last."""

    def __init__(
        self,
        make_config: Callable[[str], RunConfig],
        *,
        model: str,
        baseline_model: str | None = None,
        series: Sequence[Checkpoint] | None = None,
    ) -> None:
        self.make_config = make_config
        self.model = model
        self.baseline_model = baseline_model
        self.series = list(series or [])
        self._runners: dict[str, Runner] = {}
        self._models: SessionModels | None = None
        self._results: dict[tuple[str, str], SuiteResult | NoveltyError] = {}
        self._rounds: dict[tuple[str, str], list[SuiteResult] | NoveltyError] = {}

    # -- runners ------------------------------------------------------------------------------------

    def runner(self, model: str) -> Runner:
        """One runner per checkpoint; all share the session's scoring models (each loads once)."""
        if model not in self._runners:
            config = self.make_config(model)
            if self._models is None:
                self._models = SessionModels(config)
            self._runners[model] = Runner(config, self._models)
        return self._runners[model]

    @property
    def candidate(self) -> Runner:
        """The candidate checkpoint's runner."""
        return self.runner(self.model)

    def baseline_runner(self) -> Runner | None:
        """The baseline checkpoint's runner (None without ``--baseline-model``)."""
        return None if self.baseline_model is None else self.runner(self.baseline_model)

    def release(self, model: str) -> None:
        """Let a checkpoint's runner (and its loaded model) go; a later use opens it again."""
        if model != self.model and model != self.baseline_model:
            self._runners.pop(model, None)

    # -- results ------------------------------------------------------------------------------------

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

    def model_result(self, model: str, suite: Suite, pool: object = None) -> SuiteResult:
        """One checkpoint's result on one run of a suite (a denial round: all rounds run once)."""
        if suite.denial_round is not None:
            return self._denial_rounds(model, suite)[suite.denial_round - 1]
        return self._memo(
            self._results, (model, suite.run_key), lambda: self.runner(model).run(suite, pool_novelty=pool)  # type: ignore[arg-type]
        )

    def _denial_rounds(self, model: str, suite: Suite) -> list[SuiteResult]:
        from pytest_novelty.pipeline.denial import open_extractor_for, run_denial

        def rounds() -> list[SuiteResult]:
            runner = self.runner(model)
            return run_denial(runner, suite, open_extractor_for(runner.config, suite))

        return self._memo(self._rounds, (model, f"{suite.family}#{suite.repeat}"), rounds)

    def baseline(self, suite: Suite) -> Baseline | None:
        """What the candidate is compared with, paired: the baseline checkpoint on the same prompts
        and settings when one is given, else the dataset's human references when the suite asks for
        them (``[gate] reference = true``), else nothing."""
        if self.baseline_model is not None:  # the baseline as it is: repeats vary the candidate only
            return Baseline(self.model_result(self.baseline_model, suite.first), "baseline")
        if suite.gate.reference:
            runner = self.candidate
            references = self._memo(
                self._results, (HUMAN_REFERENCES, suite.name), lambda: runner.references(suite.first)
            )
            return Baseline(references, "references")
        return None

    def result(self, suite: Suite) -> SuiteResult:
        """The candidate's result on ``suite``; with a baseline its outputs rank q@Tail, and a suite
        with ``[scoring] calibration`` carries its judge's agreement with the human grades."""
        base = self.baseline(suite)
        pool = None if base is None else base.result.originality.get(4)
        result = self.model_result(self.model, suite, pool)
        if suite.scoring.calibration is not None and result.judge_agreement is None:
            result = replace(result, judge_agreement=self.candidate.models.judge_agreement(suite))
        return result

    def earlier(self, suite: Suite) -> list[SuiteResult]:
        """With a series, the results of every checkpoint before the candidate, in step order."""
        return self.results_of([checkpoint.path for checkpoint in self.series[:-1]], suite.first)

    def results_of(self, models: Sequence[str], suite: Suite) -> list[SuiteResult]:
        """Each of ``models``' result on ``suite``, in order (a series' checkpoints, a tail's pool), each
        runner let go after its use (a model loads only when a generation is not cached)."""
        results = []
        for model in models:
            results.append(self.model_result(model, suite))
            self.release(model)
        return results
