"""Does a suite's tail mean what q@Tail's paper says it means? Agreement with a reference ranking, bin by bin.

Source: Wang, Huang, Padmakumar and Lee (2026), "Evaluating LLM Creativity through Long-Tail
Performance". Their evidence for q@Tail: split a benchmark's prompts into equal bins from the peak
to the tail by the prompt score s_j, rank the models by mean quality in each bin, and compare with a
human ranking (Kendall's τ): the tail bins agreed with people better. :func:`tail_agreement` does
that for any suite, models and reference:

* **Bins**: the scored prompts from the peak (lowest s_j) to the tail, ties ordered as
  :func:`~pytest_novelty.metrics.tail.peak_prompts` orders them, split by ``numpy.array_split`` into
  B bins whose sizes differ by at most one (the first take the extra prompts). Bin 1 is the peak.
* **A model's quality in a bin**: the mean of its per-prompt mean quality, NaN left out; a model with
  no scored prompt in a bin is left out of that bin's τ.
* **τ**: Kendall's τ-b, τ_b = (n_c − n_d) / √((n_0 − n_x)(n_0 − n_y)), n_0 the pairs of models, n_x
  and n_y the pairs tied in one ranking (ties are neither concordant nor discordant). The point value
  is ``scipy.stats.kendalltau(..., variant="b")``, the resamples use :func:`kendall_tau_b` (checked
  against scipy's in the tests). NaN when either side is constant.
* **Interval**: a bootstrap over prompts stratified by bin (a bin's interval reflects its own
  prompts), the percentile interval of the defined resamples, which stays inside [−1, 1] where a t
  interval need not; widened to contain τ, as the package's other intervals are. Numpy's default
  generator seeded with ``seed``.
* **q@Tail(α)**: the same τ on the tail, the ceil(α·N) highest-scored prompts
  (:func:`~pytest_novelty.metrics.tail.tail_prompts`).
* **The reference**: higher is better (a score, e.g. an arena rating); a rank (1 = best) is negated
  (:func:`reference_scores`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics._validate import as_float_array, as_vector, check_confidence, check_count
from pytest_novelty.metrics.tail import scored, tail_prompts

Array = NDArray[np.float64]

#: Resamples of the bootstrap interval unless told otherwise.
DEFAULT_RESAMPLES = 2000


@dataclass(frozen=True)
class BinAgreement:
    """τ of one set of prompts (a bin, or q@Tail's tail) with the reference, its interval (NaN with too
    few defined resamples), and each model's mean quality on them (NaN: none scored)."""

    label: str
    prompts: int
    score_low: float
    score_high: float
    tau: float
    low: float
    high: float
    means: tuple[float, ...]


@dataclass(frozen=True)
class TailAgreement:
    """Per bin from the peak (first) to the tail (last), and for q@Tail(α): τ with the reference."""

    models: tuple[str, ...]
    reference: tuple[float, ...]
    bins: tuple[BinAgreement, ...]
    tail: BinAgreement
    alpha: float
    confidence: float
    resamples: int


def reference_scores(reference: Mapping[str, float], models: Sequence[str], *, kind: str) -> Array:
    """The reference of ``models`` as scores, higher better: ``kind="score"`` as given, ``"rank"``
    negated (rank 1 the best). ``ValueError`` naming a model the reference lacks."""
    if kind not in ("score", "rank"):
        raise ValueError(f"kind must be 'score' or 'rank', got {kind!r}")
    missing = [m for m in models if m not in reference]
    if missing:
        raise ValueError(f"the reference has no entry for {missing[0]!r}")
    values = as_vector([reference[m] for m in models], "reference")
    if np.isnan(values).any():
        raise ValueError("the reference must give every model a number")
    return -values if kind == "rank" else values


def kendall_tau_b(x: ArrayLike, y: ArrayLike) -> Array:
    """Kendall's τ-b of every row of ``x`` (rows × models) with the vector ``y`` (models), NaN entries of
    a row left out of that row's pairs: (n_c − n_d) / √((n_0 − n_x)(n_0 − n_y)) over the pairs of
    models both present (module doc); NaN for a row with fewer than two models or a constant side."""
    rows = np.atleast_2d(np.asarray(x, dtype=float))
    ref = np.asarray(y, dtype=float)
    i, j = np.triu_indices(ref.size, k=1)
    present = ~np.isnan(rows)
    valid = present[:, i] & present[:, j]
    dx = np.sign(np.nan_to_num(rows[:, i]) - np.nan_to_num(rows[:, j])) * valid
    dy = np.sign(ref[i] - ref[j])[None, :] * valid
    pairs = valid.sum(axis=1)
    tied_x = (valid & (dx == 0)).sum(axis=1)
    tied_y = (valid & (dy == 0)).sum(axis=1)
    denominator = np.sqrt((pairs - tied_x).astype(float) * (pairs - tied_y).astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (dx * dy).sum(axis=1) / np.where(denominator > 0, denominator, 1.0), np.nan)


def _means(quality: Array, weights: Array) -> Array:
    """Each model's weighted mean over prompts (resamples × models), NaN where none is scored."""
    present = ~np.isnan(quality)
    total = weights @ np.where(present, quality, 0.0).T
    count = weights @ present.T.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.where(count > 0, count, 1.0), np.nan)


def _agreement(
    label: str, columns: Array, scores: Array, quality: Array, reference: Array, *, level: float, resamples: int,
    rng: np.random.Generator,
) -> BinAgreement:  # fmt: skip
    """τ of the prompts ``columns`` (indices into ``quality``'s prompts) and its bootstrap interval."""
    from scipy import stats

    chosen = quality[:, columns]
    means = _means(chosen, np.ones((1, columns.size)))[0]
    keep = ~np.isnan(means)
    tau = math.nan
    if keep.sum() >= 2 and np.ptp(means[keep]) > 0 and np.ptp(reference[keep]) > 0:
        tau = float(stats.kendalltau(means[keep], reference[keep], variant="b").statistic)
    drawn = rng.integers(0, columns.size, size=(resamples, columns.size))
    weights = np.zeros((resamples, columns.size))
    np.add.at(weights, (np.arange(resamples)[:, None], drawn), 1.0)
    taus = kendall_tau_b(_means(chosen, weights), reference)
    defined = taus[~np.isnan(taus)]
    low, high = (math.nan, math.nan)
    if defined.size >= 2:
        low, high = (float(v) for v in np.quantile(defined, [(1 - level) / 2, (1 + level) / 2]))
        if not math.isnan(tau):  # widened to hold the value itself, as every interval of the package does
            low, high = min(low, tau), max(high, tau)
    part = scores[columns]
    return BinAgreement(label, int(columns.size), float(part.min()), float(part.max()), tau, low, high,
                        tuple(float(m) for m in means))  # fmt: skip


def tail_agreement(
    prompt_ids: Sequence[str],
    scores: ArrayLike,
    quality: ArrayLike,
    reference: ArrayLike,
    *,
    models: Sequence[str],
    bins: int = 5,
    alpha: float = 0.1,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> TailAgreement:
    """Kendall's τ-b of the models' mean quality with ``reference``, per bin from peak to tail and on
    q@Tail(α)'s tail (module doc). ``scores`` is s_j by prompt (NaN: unranked), ``quality`` (models ×
    prompts) per-prompt mean quality. ``ValueError`` for fewer than three models, fewer than one
    prompt per bin, or misaligned inputs.
    """
    ids = [str(i) for i in prompt_ids]
    values = as_vector(scores, "scores")
    table = as_float_array(quality, "quality")
    ref = as_vector(reference, "reference")
    names = tuple(str(m) for m in models)
    if table.ndim != 2 or table.shape != (len(names), len(ids)) or values.size != len(ids) or ref.size != len(names):
        raise ValueError(
            f"expected quality of shape (models={len(names)}, prompts={len(ids)}), scores of "
            f"{len(ids)} and a reference of {len(names)}, got {table.shape}, {values.size}, {ref.size}"
        )
    if len(names) < 3:
        raise ValueError(f"a ranking of {len(names)} models agrees with any other by chance: give at least three")
    check_count(bins, "bins")
    check_count(resamples, "resamples", 2)
    level = check_confidence(confidence)
    ranked, ranked_scores = scored(ids, values)
    if len(ranked) < bins:
        raise ValueError(f"{len(ranked)} ranked prompts cannot fill {bins} bins")
    position = {i: k for k, i in enumerate(ids)}
    columns = np.array([position[i] for i in tail_prompts(ranked, ranked_scores, 1.0)[::-1]])  # peak first
    rng = np.random.default_rng(seed)
    found = tuple(
        _agreement(f"bin {b + 1}", part, values, table, ref, level=level, resamples=resamples, rng=rng)
        for b, part in enumerate(np.array_split(columns, bins))
    )
    tail_columns = np.array([position[i] for i in tail_prompts(ranked, ranked_scores, alpha)])
    tail = _agreement(f"q@Tail({alpha:g})", tail_columns, values, table, ref, level=level, resamples=resamples,
                      rng=rng)  # fmt: skip
    return TailAgreement(names, tuple(float(r) for r in ref), found, tail, float(alpha), level, resamples)
