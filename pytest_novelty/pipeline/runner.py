"""One suite end to end for one checkpoint, the steps of :mod:`pytest_novelty.pipeline` chained:
:class:`Runner` resolves the checkpoint and keeps its generator; the scoring models are a
:class:`~pytest_novelty.pipeline.models.SessionModels` that every runner of a session shares.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.progress import notice
from pytest_novelty.pipeline import answers as answer_step
from pytest_novelty.pipeline.config import MAIN, RunConfig
from pytest_novelty.pipeline.export import work_line
from pytest_novelty.pipeline.measure import gated_order, measure, needs_equivalence
from pytest_novelty.pipeline.models import SessionModels, originality_units
from pytest_novelty.pipeline.results import HUMAN_REFERENCES, SuiteAnswers, SuiteResult, SuiteScores
from pytest_novelty.pipeline.scores import lookup, originality_column, score_answers
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.schema import Suite

if TYPE_CHECKING:
    from pytest_novelty.generation import Generator
    from pytest_novelty.suites.prompting import ModelInput

__all__ = ["RunConfig", "Runner", "SessionModels", "SuiteResult"]

SERVED_NEEDS_ORIGINALITY = (
    "a served model has no checkpoint folder to find novelty-index/ in; pass --originality "
    "infini-gram:DIR (an index of its training corpus)"
)
ANSWERS_NEED_ORIGINALITY = (
    "answers read from files have no checkpoint folder to find novelty-index/ in; pass --originality "
    "infini-gram:DIR (an index of the training corpus of the model that wrote them)"
)


def needs_originality(model: str) -> str:
    """Why ``model`` (a served model, or answers read from files) needs ``--originality``."""
    from pytest_novelty.generation.backends import is_answers

    return ANSWERS_NEED_ORIGINALITY if is_answers(model) else SERVED_NEEDS_ORIGINALITY


class Runner:
    """Runs suites against one checkpoint, loading each heavy part once (the scoring models once
    per ``models``, which the runners of one session share)."""

    def __init__(self, config: RunConfig, models: SessionModels | None = None) -> None:
        self.config = config
        self.models = SessionModels(config) if models is None else models
        self._generator: Generator | None = None
        self._model_path: str | None = None
        self._loading_said = False

    def model_path(self) -> str:
        """The checkpoint to load; ``demo`` and ``demo-early`` are built on first use."""
        if self._model_path is None:
            from pytest_novelty.pipeline import demo

            model = self.config.model
            if model in demo.DEMO_MODELS:
                self._model_path = str(demo.ensure_demo(self.config.cache_dir) / model)
            else:
                from pytest_novelty.generation.backends import check_model

                check_model(model, trust_remote_code=self.config.trust_remote_code, base_model=self.config.base_model,
                            base_url=self.config.model_base_url)
                self._model_path = model
        return self._model_path

    def originality_spec(self, suite: Suite) -> str:
        """The originality backend spec, the command line's or the suite file's; ``auto`` is the
        checkpoint's own index (the demo's, or a ``novelty-index/`` folder inside the checkpoint)."""
        spec = self.config.originality or suite.scoring.originality
        if spec != "auto":
            return spec
        from pytest_novelty.generation.backends import is_served
        from pytest_novelty.pipeline import demo
        from pytest_novelty.scoring.originality import is_index

        if self.config.model in demo.DEMO_MODELS:
            return f"infini-gram:{demo.ensure_demo(self.config.cache_dir) / 'index'}"
        if is_served(self.config.model):
            raise ConfigError(needs_originality(self.config.model), path=suite.path, field="scoring.originality")
        local = Path(self.model_path()) / "novelty-index"
        if is_index(local):
            return f"infini-gram:{local}"
        raise ConfigError("scoring.originality is 'auto' but the checkpoint has no novelty-index/ folder; index its "
                          "training corpus (pytest-novelty index build) and pass --originality infini-gram:DIR",
                          path=suite.path, field="scoring.originality")

    def generator(self) -> Generator:
        """The checkpoint's generator, opened on first use: its identity is known then, while its
        weights load only when something is generated (:meth:`say_loading`)."""
        if self._generator is None:
            from pytest_novelty.generation.backends import open_generator
            from pytest_novelty.infra.hashing import identity_memo

            path, config = self.model_path(), self.config
            self._generator = open_generator(
                path, device=config.device, trust_remote_code=config.trust_remote_code, backend=config.generator,
                gpus=config.gpus_per_worker, base_model=config.base_model, base_url=config.model_base_url,
                revision=config.model_revision, memo=identity_memo(config.cache_dir),
            )
        return self._generator

    def say_loading(self, rows: int) -> None:
        """The run log's "loading" line, once, when the first rows are to be generated (a warm run,
        whose answers are all cached, loads no model and says nothing)."""
        if not self._loading_said:
            self._loading_said = True
            notice(f"[novelty] loading {self.config.model} ({self.model_path()})")

    def load_prompts(self, suite: Suite) -> list[Prompt]:
        """The suite's prompts."""
        return answer_step.load_prompts(suite)

    def prompts(self, suite: Suite) -> tuple[list[Prompt], list[ModelInput]]:
        """The suite's prompts and the model inputs built from them."""
        prompts = self.load_prompts(suite)
        scores = self.example_scores(suite) if suite.prompting.method == "novel-examples" else None
        return prompts, answer_step.build_model_inputs(suite, prompts, scores)

    def example_scores(self, suite: Suite) -> dict[str, float]:
        """``novel-examples``: each held-out example's originality at the suite's gated order, scored
        with the suite's index like any answer (too short for an n-gram: 0)."""
        from pytest_novelty.suites.prompting import load_examples

        examples = load_examples(suite)
        n = gated_order(suite)
        texts = [str(e.reference) for e in examples]
        rows, _ = lookup(self.models, self.originality_spec(suite), texts, [n], f"{suite.name}: example originality")
        values = originality_column(rows, n)
        return {e.id: 0.0 if math.isnan(v) else float(v) for e, v in zip(examples, values, strict=True)}

    def run(
        self, suite: Suite, *, pool_novelty: np.ndarray | None = None, inputs: list[ModelInput] | None = None
    ) -> SuiteResult:
        """Generate, score and summarise one suite. ``pool_novelty`` (prompts × samples originality at
        n = 4 of a frozen pool, e.g. the baseline) ranks the prompts for q@Tail, else the candidate's
        own outputs do; ``inputs`` (one per prompt) replace the built model inputs, as denial rounds do."""
        from pytest_novelty.infra.cache import repaired

        repaired_before = repaired()
        if inputs is None:
            prompts, inputs = self.prompts(suite)
        else:
            prompts = self.load_prompts(suite)
        generated = answer_step.generate_answers(self.config, self.generator(), suite, prompts, inputs,
                                                 self.model_path(), on_work=self.say_loading)
        result = self.score_answers(generated, pool_novelty=pool_novelty)
        result = replace(result, cache_repaired=repaired() - repaired_before)
        if self.config.worker == MAIN:  # an xdist worker's cases carry its work line to the controller
            notice(work_line(suite.name, result))
        return result

    def references(self, suite: Suite) -> SuiteResult:
        """The dataset's human references, scored like a checkpoint's answers (one per prompt)."""
        prompts = self.load_prompts(suite)
        if not suite.gate.reference or not prompts:
            raise ConfigError(
                "gate.reference is on but no prompt has a human reference", path=suite.path, field="gate.reference"
            )
        return self.score(suite, prompts, [[str(p.reference)] for p in prompts], model=HUMAN_REFERENCES)

    def score(self, suite: Suite, prompts: list[Prompt], answers: list[list[str]], *,
              pool_novelty: np.ndarray | None = None, model: str | None = None) -> SuiteResult:
        """Originality, quality and the suite's metrics for given answers (prompts × samples)."""
        generated = SuiteAnswers(suite, model or self.config.model, prompts, answers)
        return self.score_answers(generated, pool_novelty=pool_novelty)

    def score_answers(self, generated: SuiteAnswers, *, pool_novelty: np.ndarray | None = None) -> SuiteResult:
        """The scores and metrics steps for one checkpoint's answers."""
        suite, scores = generated.suite, self.scores(generated)
        equivalent = None
        if needs_equivalence(suite, generated.answers):
            equivalent = self.models.equivalence(suite.scoring.equivalence)
        measured = measure(suite, generated.prompts, generated.answers, scores, equivalent=equivalent,
                           pool_novelty=pool_novelty)
        return SuiteResult(generated, scores, measured)

    def scores(self, generated: SuiteAnswers, *, limit_unscored: bool = True) -> SuiteScores:
        """The scores step on answers (a shard's part of them with ``limit_unscored=False``: see
        :func:`~pytest_novelty.pipeline.scores.score_answers`)."""
        spec = self.originality_spec(generated.suite)
        units = originality_units(spec, self._model_path or self.config.model)
        return score_answers(self.models, generated.suite, generated.prompts, generated.answers, spec=spec, units=units,
                             limit_unscored=limit_unscored)
