"""A checkpoint series compared as the gate compares: per checkpoint the gated metrics, and the
paired change of each from the previous checkpoint.

Each suite of a series run (:mod:`pytest_novelty.pipeline.series` finds the checkpoints) gets one
entry per checkpoint, in step order: the gated metrics, the suite means of quality, originality and
novelty, and the paired change of each gated metric from the previous checkpoint with its confidence
interval (the same paired bootstrap as a baseline comparison,
:func:`pytest_novelty.gate.regression.compare`).

``[gate] against = "series-best"`` compares the candidate, paired, with the best earlier checkpoint
of the series for each metric (highest for a ``min`` threshold, lowest for a ``max`` one), with the
suite's tolerance and significance level; without ``--model-series`` it compares with nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_novelty.gate.regression import Comparison
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.pipeline.series import Checkpoint
    from pytest_novelty.suites.schema import Threshold


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
