"""The judge-agreement gate: quality-based thresholds count only when the judge agrees with people.

A suite that names a calibration file (``[scoring] calibration``) gets its judge's agreement with
the human grades measured on every run (``SuiteResult.judge_agreement``, see
:mod:`pytest_novelty.pipeline.calibration`). With ``[gate] min_judge_agreement = R`` every case
whose metric depends on the judge's quality scores fails, naming the agreement, when Spearman's ρ
is below R (or undefined): a number computed from a judge that does not rank answers as people
do is not evidence either way. The point estimate is compared, not a CI bound, so the setting reads
like the number the report shows; widen the margin yourself when the calibration file is small.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_novelty.metrics.table import FAMILIES
from pytest_novelty.suites.schema import Suite, Threshold

QUALITY_BASED = tuple(name for name, f in FAMILIES.items() if f.uses_quality)
"""Metric families computed from the judge's quality scores (originality and distinct_k are not)."""


def agreement_text(agreement: Mapping[str, Any] | None) -> str | None:
    """``judge agreement: Spearman rho 0.412 [0.301, 0.519], n = 120 (graded.jsonl)``, or None."""
    if not agreement:
        return None
    rho, (low, high) = agreement.get("spearman"), agreement.get("spearman_ci") or (None, None)

    def fmt(value: Any) -> str:
        return "n/a" if value is None or not math.isfinite(float(value)) else f"{float(value):.3f}"

    name = str(agreement.get("file", "")).replace("\\", "/").rsplit("/", 1)[-1]
    return f"judge agreement: Spearman rho {fmt(rho)} [{fmt(low)}, {fmt(high)}], n = {agreement.get('n')} ({name})"


def agreement_failure(suite: Suite, threshold: Threshold, agreement: Mapping[str, Any] | None) -> str | None:
    """Why ``threshold`` does not count for lack of judge agreement (``agreement``: the suite judge's,
    None when unmeasured), or None when it counts."""
    minimum = suite.gate.min_judge_agreement
    if minimum is None or threshold.base not in QUALITY_BASED:
        return None
    agreement = agreement or {}
    rho = agreement.get("spearman")
    if rho is not None and math.isfinite(float(rho)) and float(rho) >= minimum:
        return None
    shown = "undefined" if rho is None else f"{float(rho):.3f}"
    return (
        f"{suite.name}: {threshold.label} does not count: the judge's agreement with human grades, Spearman rho "
        f"{shown} (n = {agreement.get('n', 0)}, {agreement.get('file', 'no calibration file')}), is below "
        f"gate.min_judge_agreement = {minimum:g}; use a judge that ranks answers as people do, or lower the minimum"
    )
