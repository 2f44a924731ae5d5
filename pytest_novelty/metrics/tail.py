"""q@Tail(α): quality on the long tail of prompts, with Novelty Overall and Novelty at Peak beside it.

Source: Wang, Huang, Padmakumar and Lee (2026), "Evaluating LLM Creativity through Long-Tail
Performance". No reference code is public; this module is our implementation of the definition,
with every choice stated where it is made:

* text novelty is the fraction of a text's 4-grams absent from a reference corpus (the paper used
  the Pile); the originality engine computes it, this module only takes the numbers;
* a prompt's score s_j is the mean of two parts, the novelty of the prompt itself and the mean output
  novelty of a frozen reference pool of models and samples on that prompt (:func:`prompt_scores`);
* the tail is the ceil(α·N) prompts with the highest s_j, the peak the ceil(α·N) with the lowest
  (the most common prompts); both are read off one ranking whose ties are broken by prompt id, so
  the selection does not depend on the order the prompts are listed in;
* q@Tail is the mean quality of the candidate on the tail; Novelty Overall and Novelty at Peak are
  the candidate's mean output novelty over all prompts and over the peak
  (:func:`novelty_overall`, :func:`novelty_at_peak`), per-prompt means averaged over prompts, so
  every prompt weighs alike whatever its number of samples;
* n-grams are of order :data:`NGRAM_ORDER` (4), for the prompts' own novelty and the outputs' alike.

The pool is frozen and the selected ids are stored by the caller, so every candidate checkpoint is
judged on the same prompts. Per-prompt values are passed either as a mapping from prompt id to value
or as an array aligned with ``prompt_ids``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics._validate import (
    as_float_array,
    as_vector,
    ceil_fraction,
    check_fraction,
    check_range,
)

#: Per-prompt values: a mapping from prompt id, or an array aligned with a ``prompt_ids`` argument.
PerPrompt: TypeAlias = Mapping[str, float] | ArrayLike

#: The n-gram order of every novelty q@Tail, Novelty Overall and Novelty at Peak read (the paper's 4).
NGRAM_ORDER = 4


def prompt_scores(input_novelty: ArrayLike, pool_novelty: Sequence[ArrayLike]) -> NDArray[np.float64]:
    """Per-prompt long-tail score s_j = (input novelty_j + mean pool output novelty_j) / 2.

    ``input_novelty[j]`` is the novelty of prompt j's text; ``pool_novelty[j]`` holds the output
    novelty of every reference-pool sample for prompt j (a single number is accepted too). All
    values lie in [0, 1], so s_j does as well. NaN outputs are left out of the pool mean (the
    suite layer passes too-short outputs as 0, not NaN: see :mod:`pytest_novelty.metrics.suite`);
    s_j is NaN when the prompt's novelty is NaN or no pool output was scored,
    and :func:`tail_prompts` refuses NaN scores, so such prompts must be scored or dropped first.
    """
    prompts = as_vector(input_novelty, "input_novelty")
    check_range(prompts, "input_novelty", 0.0, 1.0)
    if len(pool_novelty) != prompts.size:
        raise ValueError(f"input_novelty has {prompts.size} prompts but pool_novelty has {len(pool_novelty)}")
    pool_means = np.empty(prompts.size)
    for index, outputs in enumerate(pool_novelty):
        values = as_float_array(outputs, f"pool_novelty[{index}]").ravel()
        check_range(values, f"pool_novelty[{index}]", 0.0, 1.0)
        present = values[~np.isnan(values)]
        pool_means[index] = present.mean() if present.size else np.nan
    return (prompts + pool_means) / 2.0


def _ranked(prompt_ids: Sequence[str], scores: ArrayLike, alpha: float, *, highest: bool) -> tuple[str, ...]:
    ids = list(prompt_ids)
    values = as_vector(scores, "scores")
    share = check_fraction(alpha, "alpha")
    if not all(isinstance(prompt_id, str) for prompt_id in ids):
        raise ValueError("prompt_ids must be strings")
    if len(ids) != values.size:
        raise ValueError(f"prompt_ids has {len(ids)} entries but scores has {values.size}")
    if len(set(ids)) != len(ids):
        repeated = sorted({prompt_id for prompt_id in ids if ids.count(prompt_id) > 1})
        raise ValueError(f"prompt_ids must be unique, repeated: {repeated[:5]}")
    missing = [prompt_id for prompt_id, value in zip(ids, values, strict=True) if np.isnan(value)]
    if missing:
        raise ValueError(f"scores are NaN for prompts {missing[:5]}: score or drop them before selecting")
    ranking = sorted(range(len(ids)), key=lambda index: (-values[index], ids[index]))
    if not highest:
        ranking.reverse()
    return tuple(ids[index] for index in ranking[: ceil_fraction(share, len(ids))])


def tail_prompts(prompt_ids: Sequence[str], scores: ArrayLike, alpha: float) -> tuple[str, ...]:
    """Ids of the long tail: the ceil(α·N) prompts with the highest score s_j, highest first.

    The prompts are ranked once, by score descending and, among equal scores, by prompt id
    ascending (string order); the tail is the head of that ranking. The result therefore depends
    only on the (id, score) pairs, not on the order they are listed in. α must lie in (0, 1]; ceil
    is taken on the decimal value of α. Ids must be unique strings and no score may be NaN.
    """
    return _ranked(prompt_ids, scores, alpha, highest=True)


def peak_prompts(prompt_ids: Sequence[str], scores: ArrayLike, alpha: float) -> tuple[str, ...]:
    """Ids of the peak: the ceil(α·N) prompts with the lowest score s_j (the most common), lowest first.

    The peak is the end of the same ranking as :func:`tail_prompts`, read backwards: among equal
    scores the larger id comes first. Using one ranking keeps tail and peak disjoint whenever
    2·ceil(α·N) ≤ N, even when many scores are tied. Validation as in :func:`tail_prompts`.
    """
    return _ranked(prompt_ids, scores, alpha, highest=False)


def _values_by_id(values: PerPrompt, prompt_ids: Sequence[str] | None, name: str) -> dict[str, float]:
    """Return per-prompt values as a dict, from a mapping or from an array aligned with ``prompt_ids``."""
    if isinstance(values, Mapping):
        if prompt_ids is not None:
            raise ValueError(f"{name} is a mapping from prompt id: do not pass prompt_ids as well")
        ids = list(values.keys())
        array = as_float_array(list(values.values()), name, allow_empty=True)
    else:
        if prompt_ids is None:
            raise ValueError(f"{name} is an array: pass prompt_ids to say which prompt each value belongs to")
        ids = list(prompt_ids)
        array = as_float_array(values, name, allow_empty=True)
        if array.ndim != 1 or array.size != len(ids):
            raise ValueError(f"{name} has shape {array.shape} but prompt_ids has {len(ids)} entries")
        if len(set(ids)) != len(ids):
            raise ValueError("prompt_ids must be unique")
    if not ids:
        raise ValueError(f"{name} is empty")
    return {str(prompt_id): float(value) for prompt_id, value in zip(ids, array, strict=True)}


def _subset_mean(by_id: dict[str, float], subset: Iterable[str], name: str) -> float:
    """Mean of ``by_id`` over ``subset``, NaN values left out (NaN when all are NaN)."""
    chosen = list(subset)
    if not chosen:
        raise ValueError("the selected prompt ids are empty")
    absent = [prompt_id for prompt_id in chosen if prompt_id not in by_id]
    if absent:
        raise ValueError(f"{name} has no value for prompts {absent[:5]}")
    if len(set(chosen)) != len(chosen):
        raise ValueError("the selected prompt ids must be unique")
    values = np.array([by_id[prompt_id] for prompt_id in chosen])
    present = values[~np.isnan(values)]
    return float(present.mean()) if present.size else float("nan")


def q_at_tail(
    quality: PerPrompt, tail_ids: Iterable[str], *, prompt_ids: Sequence[str] | None = None
) -> float:
    """q@Tail: the candidate's mean per-prompt quality over the tail prompts.

    ``quality`` maps prompt id to the candidate's quality on that prompt (or is an array aligned with
    ``prompt_ids``); it may cover more prompts than the tail. Every tail id must have a value; NaN
    values (unscored) are left out of the mean, and the result is NaN when all are NaN.
    """
    return _subset_mean(_values_by_id(quality, prompt_ids, "quality"), tail_ids, "quality")


def novelty_overall(novelty: PerPrompt, *, prompt_ids: Sequence[str] | None = None) -> float:
    """Novelty Overall: the candidate's mean per-prompt output novelty over every prompt.

    ``novelty`` maps prompt id to the prompt's mean output novelty (or is an array aligned with
    ``prompt_ids``); NaN values are left out, the result is NaN when all are NaN. It does not depend
    on α: the paper reports it beside q@Tail(α) to show what a plain average says.
    """
    by_id = _values_by_id(novelty, prompt_ids, "novelty")
    return _subset_mean(by_id, by_id, "novelty")


def novelty_at_peak(
    novelty: PerPrompt, peak_ids: Iterable[str], *, prompt_ids: Sequence[str] | None = None
) -> float:
    """Novelty at Peak: the candidate's mean per-prompt output novelty over the peak prompts.

    The peak is the ceil(α·N) most common prompts (:func:`peak_prompts`), where a model that copies
    its training data looks most like it; validation and NaN handling as in :func:`q_at_tail`.
    """
    return _subset_mean(_values_by_id(novelty, prompt_ids, "novelty"), peak_ids, "novelty")
