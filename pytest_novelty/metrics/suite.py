"""A suite's metric values from its per-generation arrays (what the gate compares).

Inputs are aligned arrays of shape (prompts, samples): quality in [0, 1] (NaN: the judge gave no
score) and, per n-gram order, originality in [0, 1] (NaN: the generation has fewer than n units, so
no n-gram of that order). Names match the suite files' threshold metrics:

* ``quality``: mean over scored generations; ``unscored`` the share of generations with no
  quality score (they are left out of ``quality`` and the novelty means, so the share is shown
  and can be gated, e.g. ``unscored <= 0.05``).
* ``coverage@n``: the share of generations with at least one n-gram of order n.
* ``originality@n``: mean over generations of the share of unseen n-grams (Padmakumar et al.
  2025), a generation too short for n counting as 0 (:func:`originality_counting_short`): it has no
  unseen n-gram, and leaving it out would let a checkpoint that says little keep only its long,
  original answers in the mean.
* ``novelty@n``: mean over generations of the per-generation harmonic mean of quality and
  originality (:func:`gated_novelty`), as the novelty paper averages per-generation values; a
  too-short generation counts as novelty 0 (it cannot be novel at that length), an unscored one is
  left out. ``top10_novelty@n`` is the mean of the top 10 % of the same per-generation values
  (:func:`top_fraction_mean`), too-short generations included as 0.
* ``q_at_tail@α``: :func:`q_at_tail` on the tail chosen by :func:`tail_prompts` from
  s_j = (input novelty_j + mean output novelty_j) / 2, novelty here being originality at n = 4,
  too-short outputs counting as 0 like everywhere else. The reference pool is the given
  ``pool_novelty`` (e.g. a frozen baseline), else the candidate's own outputs; the gate fixes the
  tail it judges on afterwards (:func:`pytest_novelty.gate.tail.choose_tail`).
  Prompts whose own text is too short for a 4-gram (s_j undefined) are left out of the ranking.
* ``novelty_overall`` and ``novelty_at_peak@α``: the paper's Novelty Overall and Novelty at Peak
  (:func:`novelty_overall`, :func:`novelty_at_peak`), the candidate's mean per-prompt output
  originality at n = 4 (too-short outputs as 0) over every prompt and over the peak, the ceil(α·N)
  lowest s_j of the same ranking. Both are computed beside every ``q_at_tail@α`` and can be gated
  themselves. The peak is the pool's (``pool_novelty``) when there is one, else the suite's frozen
  peak (``frozen_peaks``, from its tail file), else the candidate's own; its ids are returned with
  the tails, so a snapshot compares a later checkpoint on the same peak.
* ``uniqueness@L`` and ``creativity_index``: the Creativity Index of Lu et al. (2025)
  (:mod:`pytest_novelty.metrics.creativity`), from the per-generation ``uniqueness`` at every L of
  the suite's range (NaN: shorter than L): the mean over generations of ``uniqueness@L`` with a
  too-short generation at 0, and of the per-generation index, the sum over the range (so the
  suite's index is the sum of its ``uniqueness@L``). Computed when ``uniqueness`` is given.
* ``distinct_k`` and ``utility_k``: NoveltyBench's per-prompt values, averaged over prompts. The
  per-generation score g on NoveltyBench's 1-10 scale is 10 × quality (a rubric judge's 0-1
  quality, or a reward model's 1-10 score / 10, which this turns back into that score); prompts
  with an unscored generation are left out of ``utility_k``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from pytest_novelty.metrics.novelty import originality_counting_short
from pytest_novelty.metrics.noveltybench import distinct_k, partition, utility_k
from pytest_novelty.metrics.stats import mean_excluding_nan, top_fraction_mean
from pytest_novelty.metrics.table import family, values_of
from pytest_novelty.metrics.tail import (
    NGRAM_ORDER,
    novelty_at_peak,
    novelty_overall,
    peak_prompts,
    prompt_scores,
    q_at_tail,
    scored,
    tail_prompts,
)

Array = NDArray[np.float64]
Parts = tuple[dict[str, float], dict[str, list[float]]]
"""Some of a suite's values, and the per-prompt values behind them."""


def suite_metrics(
    *,
    quality: Array,
    originality: Mapping[int, Array],
    prompt_ids: Sequence[str],
    metrics: Sequence[str],
    prompt_novelty: Array | None = None,
    answers: Sequence[Sequence[str]] | None = None,
    equivalent: Callable[[str, str], bool] | None = None,
    pool_novelty: Array | None = None,
    frozen_peaks: Mapping[str, Sequence[str]] | None = None,
    uniqueness: Mapping[int, Array] | None = None,
) -> tuple[dict[str, float], dict[str, list[float]], dict[str, list[str]]]:
    """Every metric of a suite, the per-prompt values behind them (for paired tests), and the tails.

    ``metrics`` lists the threshold metrics the suite gates on; the standard ones (quality,
    originality, novelty, top-10 % novelty at every n) are always computed. The third value maps
    each ``q_at_tail@α`` metric to the prompt ids of its tail and each ``novelty_at_peak@α`` to those
    of its peak, to be stored with a snapshot. ``frozen_peaks`` maps ``novelty_at_peak@α`` to the
    peak a suite froze (its tail file's), used when no ``pool_novelty`` ranks the prompts.
    ``uniqueness`` (per L, prompts × samples) adds ``uniqueness@L`` and ``creativity_index``.
    """
    quality = np.asarray(quality, dtype=float)
    if quality.ndim != 2 or quality.shape[0] != len(prompt_ids):
        raise ValueError(f"quality must have shape (prompts={len(prompt_ids)}, samples), got {quality.shape}")
    names = ["quality", "unscored"]
    for n in sorted(originality):
        names += [f"coverage@{n}", f"originality@{n}", f"novelty@{n}", f"top10_novelty@{n}"]
    if uniqueness:
        names += [*(f"uniqueness@{length}" for length in sorted(uniqueness)), "creativity_index"]
    values, per_prompt = _per_generation(names, quality, originality, uniqueness)
    tails: dict[str, list[str]] = {}
    alphas = {float(name.partition("@")[2]) for name in metrics if name.startswith(("q_at_tail@", "novelty_at_peak@"))}
    if "novelty_overall" in metrics or alphas:
        values["novelty_overall"] = _novelty_overall(per_prompt, prompt_ids)
    for alpha in sorted(alphas):
        tail_values, subsets = _tail_metrics(
            alpha, per_prompt, prompt_ids, prompt_novelty, pool_novelty,
            (frozen_peaks or {}).get(f"novelty_at_peak@{alpha:g}"),
        )  # fmt: skip
        values.update(tail_values)
        tails.update(subsets)
    if any(name in ("distinct_k", "utility_k") for name in metrics):
        found, by_prompt = _noveltybench(quality, answers, equivalent)
        values.update(found)
        per_prompt.update(by_prompt)
    return values, per_prompt, tails


def _per_generation(
    names: Sequence[str], quality: Array, originality: Mapping[int, Array], uniqueness: Mapping[int, Array] | None
) -> Parts:
    """Each of ``names`` as the mean over generations of the values :func:`.table.values_of` gives it
    (a top fraction's: the mean of their top), and the per-prompt means (none for a top fraction)."""
    values: dict[str, float] = {}
    per_prompt: dict[str, list[float]] = {}
    for name in names:
        counted = np.asarray(values_of(name, quality, originality, uniqueness), dtype=float)
        if counted.shape != quality.shape:
            raise ValueError(f"{name} has shape {counted.shape}, quality {quality.shape}")
        share = family(name).top_fraction
        if share is None:
            values[name] = mean_excluding_nan(counted.ravel()).mean
            per_prompt[name] = [mean_excluding_nan(row).mean for row in counted]
        else:
            flat = counted.ravel()
            values[name] = top_fraction_mean(flat, share) if np.any(~np.isnan(flat)) else float("nan")
    return values, per_prompt


def _noveltybench(
    quality: Array, answers: Sequence[Sequence[str]] | None, equivalent: Callable[[str, str], bool] | None
) -> Parts:
    """``distinct_k`` and ``utility_k`` from each prompt's partition of its answers, and their per-prompt
    values (a prompt with an unscored answer has no ``utility_k``)."""
    if answers is None or equivalent is None:
        raise ValueError("distinct_k and utility_k need the answers and an equivalence check")
    distinct, utility = [], []
    for samples, q in zip(answers, quality, strict=True):
        labels = partition(list(samples), equivalent)
        distinct.append(float(distinct_k(labels)))
        utility.append(float("nan") if np.isnan(q).any() else utility_k(labels, 10.0 * q))
    values = {"distinct_k": float(np.mean(distinct)), "utility_k": mean_excluding_nan(np.array(utility)).mean}
    return values, {"distinct_k": distinct, "utility_k": utility}


def _novelty_overall(per_prompt: Mapping[str, list[float]], prompt_ids: Sequence[str]) -> float:
    key = f"originality@{NGRAM_ORDER}"
    if key not in per_prompt:
        raise ValueError(f"novelty_overall, q_at_tail and novelty_at_peak need originality at n = {NGRAM_ORDER}")
    return novelty_overall(per_prompt[key], prompt_ids=prompt_ids)


def _tail_metrics(
    alpha: float,
    per_prompt: Mapping[str, list[float]],
    prompt_ids: Sequence[str],
    prompt_novelty: Array | None,
    pool_novelty: Array | None,
    frozen_peak: Sequence[str] | None,
) -> tuple[dict[str, float], dict[str, list[str]]]:
    """q@Tail(α) and Novelty at Peak(α) from the per-prompt values, and the tail's and the peak's ids."""
    if prompt_novelty is None:
        raise ValueError("q_at_tail and novelty_at_peak need the prompts' own novelty")
    # Output novelty at n = 4, a too-short output counting as 0 (it cannot be novel at that length).
    outputs = per_prompt[f"originality@{NGRAM_ORDER}"]
    pool = outputs if pool_novelty is None else originality_counting_short(np.asarray(pool_novelty, dtype=float))
    ids, scores = scored(prompt_ids, prompt_scores(np.asarray(prompt_novelty, dtype=float), list(pool)))
    tail_name, peak_name = f"q_at_tail@{alpha:g}", f"novelty_at_peak@{alpha:g}"
    if not ids:
        return {tail_name: float("nan"), peak_name: float("nan")}, {tail_name: [], peak_name: []}
    tail = list(tail_prompts(ids, scores, alpha))
    if pool_novelty is None and frozen_peak is not None:
        peak = list(dict.fromkeys(str(i) for i in frozen_peak))
    else:
        peak = list(peak_prompts(ids, scores, alpha))
    per_quality = dict(zip(prompt_ids, per_prompt["quality"], strict=True))
    per_novelty = dict(zip(prompt_ids, outputs, strict=True))
    known = [i for i in tail if i in per_quality]
    at_peak = [i for i in peak if i in per_novelty]
    values = {tail_name: q_at_tail({i: per_quality[i] for i in known}, known) if known else float("nan")}
    values[peak_name] = novelty_at_peak({i: per_novelty[i] for i in at_peak}, at_peak) if at_peak else float("nan")
    return values, {tail_name: known, peak_name: at_peak}
