"""Checkpoint series: every checkpoint of one training run scored on the same suites.

``--model-series RUN_DIR`` (pytest) or ``pytest-novelty run --model-series RUN_DIR`` takes the
subfolders named ``checkpoint-<step>`` (the Hugging Face Trainer layout), or the folders a quoted
glob matches (their step is the number their name ends with). The newest checkpoint is the
candidate and is gated with the usual cases; every earlier one is generated and scored on the
same prompts and settings (each through the usual cache, so a nightly run only scores new
checkpoints), and each suite gets a series: per checkpoint, in step order, the gated metrics, the
suite means of quality, originality and novelty, and the paired change of each gated metric from
the previous checkpoint with its confidence interval (the same paired bootstrap / t-test as a
baseline comparison, :func:`pytest_novelty.gate.regression.compare`).

``[gate] against = "series-best"`` compares the candidate, paired, with the best earlier checkpoint
of the series for each metric (highest for a ``min`` threshold, lowest for a ``max`` one), with the
suite's tolerance and significance level; without ``--model-series`` it compares with nothing.
"""

from __future__ import annotations

import glob
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_novelty.infra.errors import ConfigError, NoveltyError

if TYPE_CHECKING:
    from pytest_novelty.gate.regression import Comparison
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.suites.schema import Threshold

CHECKPOINT_RE = re.compile(r"checkpoint-(\d+)")
_TRAILING_NUMBER = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a series: its training step and its folder."""

    step: int
    path: str


SERIES = pytest.StashKey[list[Checkpoint]]()
"""The session's series, in step order (set by :func:`configure_series`)."""


def find_checkpoints(spec: str) -> list[Checkpoint]:
    """The checkpoints of a run folder (``checkpoint-<step>`` subfolders) or of a glob, in step order.

    Raises ``ConfigError`` naming the folder or pattern when nothing matches, when a matched
    folder's name has no step number, or when two folders share a step.
    """
    expanded = os.path.expanduser(spec)
    if any(ch in expanded for ch in "*?["):
        folders = [Path(p) for p in sorted(glob.glob(expanded)) if Path(p).is_dir()]
        if not folders:
            raise ConfigError("the pattern matches no folder; quote it so the shell leaves it to pytest-novelty",
                              path=spec, field="--model-series")
    else:
        run = Path(expanded)
        if not run.is_dir():
            raise ConfigError("run folder not found", path=spec, field="--model-series")
        folders = sorted(p for p in run.iterdir() if p.is_dir() and CHECKPOINT_RE.fullmatch(p.name))
        if not folders:
            raise ConfigError("no checkpoint-<step> subfolders; give the run folder the trainer wrote, "
                              "or a quoted glob such as 'run/step_*'", path=spec, field="--model-series")
    by_step: dict[int, Path] = {}
    for folder in folders:
        found = _TRAILING_NUMBER.search(folder.name)
        if found is None:
            raise ConfigError(f"cannot read a step from {folder.name!r}: a checkpoint folder's name must end "
                              "with its step number", path=folder, field="--model-series")
        step = int(found.group(1))
        if step in by_step:
            raise ConfigError(f"step {step} is both {by_step[step].name} and {folder.name}", path=spec,
                              field="--model-series")
        by_step[step] = folder
    return [Checkpoint(step, str(by_step[step])) for step in sorted(by_step)]


def _finite(value: Any) -> float | None:
    return None if value is None or not math.isfinite(float(value)) else round(float(value), 6)


def paired_change(before: SuiteResult, after: SuiteResult, threshold: Threshold) -> dict[str, Any]:
    """``after`` against ``before`` on one gated metric, paired by prompt: ``delta`` (after − before;
    q@Tail on ``before``'s tail prompts), the mean per-prompt difference's ``ci`` at the suite's
    1 − α (percentile bootstrap) and the paired t-test's ``p_value``
    (:func:`pytest_novelty.metrics.stats.paired_test`), ``n_pairs``, the ``status`` a regression
    check with the suite's tolerance would give, and ``paired_on``: the per-prompt series the test
    pairs (the metric itself, but ``novelty@n`` for ``top10_novelty@n``, which has no per-prompt
    form, and per-prompt ``quality`` on the tail for q@Tail), as for a baseline comparison."""
    import numpy as np

    from pytest_novelty.gate.regression import compare, result_record
    from pytest_novelty.metrics.stats import paired_test

    base = result_record(before, threshold)
    new = result_record(after, threshold, tail_ids=base.tail_ids)
    comparison = compare(base, new)
    ids = [i for i in (base.tail_ids or base.per_prompt) if i in base.per_prompt and i in new.per_prompt]
    a = np.array([base.per_prompt[i] for i in ids], dtype=float)
    b = np.array([new.per_prompt[i] for i in ids], dtype=float)
    ci: list[float | None] | None = None
    p_value = None
    usable = int(np.sum(~(np.isnan(a) | np.isnan(b)))) if ids else 0
    if usable:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # scipy on near-constant differences
            test = paired_test(a, b, confidence=1.0 - base.alpha)
        ci, p_value = [_finite(test.ci_low), _finite(test.ci_high)], _finite(test.p_value)
    from pytest_novelty.gate.regression import per_prompt_key

    return {"delta": _finite(comparison.delta), "ci": ci, "p_value": p_value, "n_pairs": usable,
            "status": comparison.status, "paired_on": per_prompt_key(threshold.metric)}


def _means(result: SuiteResult) -> dict[str, float | None]:
    import numpy as np

    ngrams = result.suite.scoring.ngrams
    n = 5 if 5 in ngrams else ngrams[0]
    out: dict[str, float | None] = {}
    for name, values in (
        ("quality", np.asarray(result.quality, dtype=float)),
        (f"originality@{n}", np.asarray(result.originality[n], dtype=float)),
        (f"novelty@{n}", np.asarray(result.measured.novelty[n], dtype=float)),
    ):
        present = values[~np.isnan(values)]
        out[name] = _finite(present.mean()) if present.size else None
    return out


def suite_series(results: Sequence[tuple[Checkpoint, SuiteResult]]) -> list[dict[str, Any]]:
    """One JSON-ready entry per checkpoint, in step order: step, model, the gated ``metrics``, the
    ``means`` of quality, originality and novelty, the ``change`` of each gated metric from the
    previous checkpoint (None for the first), and the generation work the checkpoint took."""
    ordered = sorted(results, key=lambda pair: pair[0].step)
    entries = []
    previous: SuiteResult | None = None
    for checkpoint, result in ordered:
        thresholds = result.suite.thresholds
        entries.append(
            {
                "step": checkpoint.step,
                "model": checkpoint.path,
                "metrics": {t.metric: _finite(result.metrics.get(t.metric)) for t in thresholds},
                "means": _means(result),
                "change": None
                if previous is None
                else {t.metric: paired_change(previous, result, t) for t in thresholds},
                "generated_rows": result.generated.work.rows,
                "cached_rows": result.generated.work.cached_rows,
            }
        )
        previous = result
    return entries


def best_earlier(earlier: Sequence[SuiteResult], threshold: Threshold) -> SuiteResult | None:
    """The earlier checkpoint with the best value of ``threshold``'s metric (NaN never best)."""
    best: SuiteResult | None = None
    best_value = math.nan
    for result in earlier:
        value = result.metrics.get(threshold.metric, math.nan)
        if value is None or math.isnan(value):
            continue
        better = value > best_value if threshold.op == ">=" else value < best_value
        if best is None or better:
            best, best_value = result, value
    return best


def compare_with_best(
    earlier: Sequence[SuiteResult], candidate: SuiteResult, threshold: Threshold
) -> tuple[SuiteResult, Comparison] | None:
    """The best earlier checkpoint for this metric and the candidate's paired comparison with it,
    or None when no earlier checkpoint has a value."""
    from pytest_novelty.gate.regression import compare, result_record

    best = best_earlier(earlier, threshold)
    if best is None:
        return None
    base = result_record(best, threshold)
    return best, compare(base, result_record(candidate, threshold, tail_ids=base.tail_ids))


def configure_series(config: pytest.Config) -> None:
    """``--model-series``: find the checkpoints, check each, and make the newest the candidate
    (``--model``); the list goes to ``config.stash[SERIES]``. Bad input is a ``UsageError``."""
    spec = str(config.option.novelty_model_series)
    try:
        checkpoints = find_checkpoints(spec)
    except NoveltyError as exc:
        raise pytest.UsageError(str(exc)) from None
    # An xdist worker receives the controller's options, --model already set to the newest checkpoint.
    if config.option.novelty_model and config.option.novelty_model != checkpoints[-1].path:
        raise pytest.UsageError("give --model or --model-series, not both: the series' newest checkpoint is the model")
    try:
        from pytest_novelty.generation.hf import check_checkpoint

        for checkpoint in checkpoints:
            check_checkpoint(checkpoint.path, trust_remote_code=config.option.novelty_trust_remote_code)
    except NoveltyError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SERIES] = checkpoints
    config.option.novelty_model = checkpoints[-1].path
