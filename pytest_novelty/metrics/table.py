"""The metric table: what every gated metric is, declared once, for every layer that asks.

A metric name is ``FAMILY`` or ``FAMILY@ARG`` (``novelty@5``, ``q_at_tail@0.1``). Each family says

* its argument: an n-gram order (``n``), a span length (``L``), a tail fraction (``alpha``) or none;
* whether it is computed from the judge's quality scores (``uses_quality``: then a judge that does
  not agree with people makes it meaningless, :mod:`pytest_novelty.gate.agreement`);
* the per-prompt series its paired comparison pairs on (``per_prompt``: its own, ``novelty@n``
  for the top-10 % mean, which has no per-prompt form, ``quality`` for q@Tail, on the tail,
  ``originality@4`` for Novelty Overall and Novelty at Peak, the paper's output novelty);
* the prompts its value averages over (``subset``: every prompt, or the ``"tail"`` or the
  ``"peak"`` of the suite's ranking, whose ids the metrics step records beside the value);
* its top fraction (0.1 for ``top10_novelty``: the comparison resamples that statistic itself);
* whether it is a share (``coverage``, ``unscored``: Wilson intervals) and its range.

:func:`values_of` gives the per-generation array a metric averages (what its interval resamples and
what the power of a comparison is computed from), so that knowledge also lives here once.
The suite file's validation (:mod:`pytest_novelty.suites.schema`, a layer to the left) keeps its own
list of names; a test checks that the two agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics.creativity import uniqueness_counting_short
from pytest_novelty.metrics.novelty import gated_novelty, originality_counting_short
from pytest_novelty.metrics.tail import NGRAM_ORDER


@dataclass(frozen=True)
class MetricFamily:
    """One family of gated metrics (see the module doc)."""

    name: str
    argument: str | None
    uses_quality: bool
    per_prompt: str
    top_fraction: float | None = None
    share: bool = False
    low: float = 0.0
    high: float | None = 1.0
    """The largest value; None where it depends on the suite (distinct_k: its samples per prompt)."""
    per_prompt_only: bool = False
    """One value per prompt (NoveltyBench's), not a mean over generations."""
    subset: str | None = None
    """``"tail"`` or ``"peak"``: the value averages over those prompts only (None: over every prompt)."""

    def paired_on(self, metric: str) -> str:
        """The per-prompt series ``metric``'s paired comparison pairs on."""
        arg = metric.partition("@")[2]
        return self.per_prompt.format(arg=arg, metric=metric)


FAMILIES: dict[str, MetricFamily] = {
    f.name: f
    for f in (
        MetricFamily("novelty", "n", True, "{metric}"),
        MetricFamily("top10_novelty", "n", True, "novelty@{arg}", top_fraction=0.1),
        MetricFamily("originality", "n", False, "{metric}"),
        MetricFamily("coverage", "n", False, "{metric}", share=True),
        MetricFamily("quality", None, True, "quality"),
        MetricFamily("unscored", None, False, "unscored", share=True),
        MetricFamily("q_at_tail", "alpha", True, "quality", subset="tail"),
        MetricFamily("novelty_overall", None, False, "originality@4"),
        MetricFamily("novelty_at_peak", "alpha", False, "originality@4", subset="peak"),
        MetricFamily("distinct_k", None, False, "distinct_k", low=1.0, high=None, per_prompt_only=True),
        MetricFamily("utility_k", None, True, "utility_k", high=10.0, per_prompt_only=True),
        MetricFamily("uniqueness", "L", False, "{metric}"),
        MetricFamily("creativity_index", None, False, "creativity_index", high=None),
    )
}


def family(metric: str) -> MetricFamily:
    """The family of ``metric`` (``novelty@5`` → novelty); ``KeyError`` for an unknown one."""
    return FAMILIES[metric.partition("@")[0]]


def values_of(
    metric: str,
    quality: ArrayLike,
    originality: Mapping[int, ArrayLike],
    uniqueness: Mapping[int, ArrayLike] | None = None,
) -> NDArray[np.float64] | None:
    """The (prompts × samples) per-generation values ``metric`` averages, as the gate counts them:
    quality (NaN unscored), originality, novelty and uniqueness with too-short answers at 0, the
    Creativity Index (the sum of ``uniqueness`` over its lengths L), the 0/1 indicator of a share.
    None for the per-prompt families (their values are the per-prompt series). A family with a
    ``subset`` averages the rows of its subset only (the caller picks them: the ids are the metrics
    step's): q@Tail's values are quality, Novelty at Peak's output originality at n = 4."""
    fam = family(metric)
    q = np.asarray(quality, dtype=float)
    if fam.name in ("uniqueness", "creativity_index"):
        if not uniqueness:
            raise ValueError(f"{metric} needs the uniqueness of every generation at each L")
        counted = {length: uniqueness_counting_short(np.asarray(u, dtype=float)) for length, u in uniqueness.items()}
        if fam.name == "creativity_index":
            return np.sum(list(counted.values()), axis=0)
        return counted[int(metric.partition("@")[2])]
    if fam.name in ("quality", "q_at_tail"):
        return q
    if fam.name in ("novelty_overall", "novelty_at_peak"):
        return originality_counting_short(np.asarray(originality[NGRAM_ORDER], dtype=float))
    if fam.name == "unscored":
        return np.isnan(q).astype(float)
    if fam.argument != "n":
        return None
    orig = np.asarray(originality[int(metric.partition("@")[2])], dtype=float)
    if fam.name == "coverage":
        return (~np.isnan(orig)).astype(float)
    if fam.name == "originality":
        return originality_counting_short(orig)
    return gated_novelty(q, orig)  # novelty and the top-10 % of it
