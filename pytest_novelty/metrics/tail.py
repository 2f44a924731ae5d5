"""q@Tail(α): quality on the long tail of prompts, with Novelty Overall and Novelty at Peak beside it.

Source: Wang, Huang, Padmakumar and Lee (2026), "Evaluating LLM Creativity through Long-Tail
Performance". No reference code is public; this is our implementation of the definition:

* text novelty is the fraction of a text's 4-grams (:data:`NGRAM_ORDER`, for prompts and outputs
  alike) absent from a reference corpus (the paper used the Pile), computed by the originality engine;
* a prompt's score s_j is the mean of the prompt's own novelty and the mean output novelty of a
  frozen reference pool of models on it (:func:`prompt_scores`);
* the tail is the ceil(α·N) prompts with the highest s_j, the peak the ceil(α·N) lowest (the most
  common prompts), read off one ranking whose ties are broken by prompt id;
* q@Tail is the candidate's mean quality on the tail; Novelty Overall and Novelty at Peak its mean
  output novelty over all prompts and over the peak, per-prompt means averaged, so every prompt
  weighs alike whatever its samples.

The caller stores the selected ids, so every candidate is judged on the same prompts. Per-prompt
values are a mapping from prompt id or an array aligned with ``prompt_ids``.
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
    """Per-prompt score s_j = (input novelty_j + mean pool output novelty_j) / 2, all in [0, 1].

    ``pool_novelty[j]`` holds the novelty of every pool sample for prompt j (or one number). NaN
    outputs are left out of the pool mean (the suite layer passes too-short ones as 0); s_j is NaN
    when the prompt's novelty is NaN or no output was scored, and :func:`tail_prompts` refuses it.
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


def scored(prompt_ids: Sequence[str], scores: NDArray[np.float64]) -> tuple[list[str], NDArray[np.float64]]:
    """The prompts with a score s_j (NaN: their text has no n-gram of the order), and those scores."""
    keep = ~np.isnan(scores)
    return [i for i, k in zip(prompt_ids, keep, strict=True) if k], scores[keep]


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
    """Ids of the long tail: the ceil(α·N) prompts with the highest score s_j, highest first, equal
    scores by prompt id ascending, so only the (id, score) pairs matter. α in (0, 1], ceil taken on
    its decimal value; ids unique strings, no score NaN."""
    return _ranked(prompt_ids, scores, alpha, highest=True)


def peak_prompts(prompt_ids: Sequence[str], scores: ArrayLike, alpha: float) -> tuple[str, ...]:
    """Ids of the peak: the ceil(α·N) prompts with the lowest score s_j (the most common), lowest
    first: :func:`tail_prompts`'s ranking read backwards, so tail and peak are disjoint whenever
    2·ceil(α·N) ≤ N, however many scores tie."""
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


def q_at_tail(quality: PerPrompt, tail_ids: Iterable[str], *, prompt_ids: Sequence[str] | None = None) -> float:
    """q@Tail: the candidate's mean per-prompt quality over the tail prompts, each of which needs a
    value in ``quality`` (which may hold more); NaN left out (all NaN: NaN)."""
    return _subset_mean(_values_by_id(quality, prompt_ids, "quality"), tail_ids, "quality")


def novelty_overall(novelty: PerPrompt, *, prompt_ids: Sequence[str] | None = None) -> float:
    """Novelty Overall: the candidate's mean per-prompt output novelty over every prompt (NaN left
    out), which the paper reports beside q@Tail(α) to show what a plain average says."""
    by_id = _values_by_id(novelty, prompt_ids, "novelty")
    return _subset_mean(by_id, by_id, "novelty")


def novelty_at_peak(novelty: PerPrompt, peak_ids: Iterable[str], *, prompt_ids: Sequence[str] | None = None) -> float:
    """Novelty at Peak: the mean per-prompt output novelty over the peak (:func:`peak_prompts`),
    where a model that copies its training data looks most like it; as :func:`q_at_tail` otherwise."""
    return _subset_mean(_values_by_id(novelty, prompt_ids, "novelty"), peak_ids, "novelty")
