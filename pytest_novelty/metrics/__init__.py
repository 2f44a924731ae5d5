"""Pure metric functions: numpy arrays in, numbers out.

Nothing here imports pytest, torch, transformers or an HTTP client, so the metrics can be used (and
tested to the last digit) on their own. Each function documents its formula and its source:

* :mod:`.novelty`: per-generation novelty, the harmonic mean of quality and originality, with
  too-short generations at 0, and the coverage and unscored shares;
* :mod:`.stats`: NaN-aware means, the top-fraction mean and a paired bootstrap / t-test comparison;
* :mod:`.noveltybench`: NoveltyBench's greedy partition, distinct_k and utility_k;
* :mod:`.tail`: q@Tail(α) with Novelty Overall and Novelty at Peak.
"""

from pytest_novelty.metrics.novelty import (
    coverage,
    gated_novelty,
    novelty,
    originality_counting_short,
    unscored_share,
)
from pytest_novelty.metrics.noveltybench import (
    DEFAULT_PATIENCE,
    NOVELTYBENCH_K,
    NOVELTYBENCH_MAX_NEW_TOKENS,
    NOVELTYBENCH_TEMPERATURE,
    BatchEquivalence,
    Equivalence,
    distinct_k,
    partition,
    utility_k,
)
from pytest_novelty.metrics.stats import (
    DEFAULT_BOOTSTRAP_RESAMPLES,
    MeanSummary,
    PairedTest,
    mean_excluding_nan,
    paired_test,
    top_fraction_mean,
)
from pytest_novelty.metrics.tail import (
    PerPrompt,
    peak_prompts,
    prompt_scores,
    q_at_tail,
    tail_prompts,
)

__all__ = [
    "DEFAULT_BOOTSTRAP_RESAMPLES",
    "DEFAULT_PATIENCE",
    "NOVELTYBENCH_K",
    "NOVELTYBENCH_MAX_NEW_TOKENS",
    "NOVELTYBENCH_TEMPERATURE",
    "BatchEquivalence",
    "Equivalence",
    "MeanSummary",
    "PairedTest",
    "PerPrompt",
    "coverage",
    "distinct_k",
    "gated_novelty",
    "mean_excluding_nan",
    "novelty",
    "originality_counting_short",
    "paired_test",
    "partition",
    "peak_prompts",
    "prompt_scores",
    "q_at_tail",
    "tail_prompts",
    "top_fraction_mean",
    "unscored_share",
    "utility_k",
]
