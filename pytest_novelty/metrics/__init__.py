"""Pure metric functions: numpy arrays in, numbers out.

Nothing here imports pytest, torch, transformers or an HTTP client, so the metrics can be used (and
tested to the last digit) on their own. Each function documents its formula and its source:

* :mod:`.novelty`: per-generation novelty, the harmonic mean of quality and originality, with
  too-short generations at 0, and the coverage and unscored shares;
* :mod:`.stats`: NaN-aware means, the top-fraction mean and Holm's step-down over a run's p-values;
* :mod:`.paired`: two checkpoints on the same prompts: the paired statistic, its bootstrap over
  prompts (t interval) and the paired t-test;
* :mod:`.noveltybench`: NoveltyBench's greedy partition, distinct_k and utility_k;
* :mod:`.tail`: q@Tail(α) with Novelty Overall and Novelty at Peak;
* :mod:`.tail_pool`: the benchmark-level prompt ranking built from a pool of models;
* :mod:`.tail_agreement`: Kendall's τ-b with a reference ranking per bin from peak to tail;
* :mod:`.sequential`: verdicts under repeated looks (Lan-DeMets group-sequential boundaries), with a
  futility stop;
* :mod:`.sequential_paired`: the same rule on a regression's paired difference, live or frozen baseline;
* :mod:`.uncertainty`: the confidence interval of every gated statistic, clustered by prompt, on
  the cluster bootstrap of :mod:`.bootstrap`;
* :mod:`.power`: the smallest regression a paired comparison detects, and the prompts it needs;
* :mod:`.consistency`: how consistent a judge is with itself over its samples of one answer.
"""

from pytest_novelty.metrics.bootstrap import Interval
from pytest_novelty.metrics.consistency import JudgeConsistency, judge_consistency
from pytest_novelty.metrics.novelty import (
    coverage,
    gated_novelty,
    novelty,
    originality_counting_short,
    unscored_share,
)
from pytest_novelty.metrics.noveltybench import (
    DEFAULT_PATIENCE,
    BatchEquivalence,
    Equivalence,
    distinct_k,
    partition,
    utility_k,
)
from pytest_novelty.metrics.paired import DEFAULT_BOOTSTRAP_RESAMPLES, PairedTest, paired_test
from pytest_novelty.metrics.power import Detectable, detectable, detectable_effect, prompts_needed
from pytest_novelty.metrics.sign_flip import PairedChange, paired_sign_flip
from pytest_novelty.metrics.stats import (
    MeanSummary,
    holm,
    holm_adjusted,
    mean_excluding_nan,
    top_fraction_mean,
    wilson,
)
from pytest_novelty.metrics.tail import (
    PerPrompt,
    peak_prompts,
    prompt_scores,
    q_at_tail,
    tail_prompts,
)
from pytest_novelty.metrics.uncertainty import suite_intervals

__all__ = [
    "DEFAULT_BOOTSTRAP_RESAMPLES",
    "DEFAULT_PATIENCE",
    "BatchEquivalence",
    "Detectable",
    "Equivalence",
    "Interval",
    "JudgeConsistency",
    "MeanSummary",
    "PairedChange",
    "PairedTest",
    "PerPrompt",
    "coverage",
    "detectable",
    "detectable_effect",
    "distinct_k",
    "gated_novelty",
    "holm",
    "holm_adjusted",
    "judge_consistency",
    "mean_excluding_nan",
    "novelty",
    "originality_counting_short",
    "paired_sign_flip",
    "paired_test",
    "partition",
    "peak_prompts",
    "prompt_scores",
    "prompts_needed",
    "q_at_tail",
    "suite_intervals",
    "tail_prompts",
    "top_fraction_mean",
    "unscored_share",
    "utility_k",
    "wilson",
]
