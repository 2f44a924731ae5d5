"""The benchmark-level ranking of a suite's prompts, built from a pool of models, as q@Tail's paper builds it.

Source: Wang, Huang, Padmakumar and Lee (2026), "Evaluating LLM Creativity through Long-Tail
Performance". One ranking of a benchmark's prompts serves every model judged on it: prompt j's
score is s_j = (input novelty_j + pool output novelty_j) / 2
(:func:`pytest_novelty.metrics.tail.prompt_scores`), the pool a fixed set of evaluated models, and
the tail and the peak are read off that ranking. :func:`rank_pool` builds it:

* **Novelty** is originality at n = :data:`~pytest_novelty.metrics.tail.NGRAM_ORDER` (4) against one
  index for every member, an output too short for a 4-gram counting as 0, as the metrics step
  counts it.
* **The pool's novelty of a prompt** is the mean over members of each member's mean over its
  samples: a member that wrote more answers does not pull the ranking towards itself.
* **NaN**: a prompt whose text holds no 4-gram has no score; it is left out of the ranking (listed in
  :attr:`PoolRanking.unranked`), and α is a share of the N ranked prompts.
* **Ties**: by score descending, then prompt id ascending (as
  :func:`~pytest_novelty.metrics.tail.tail_prompts` ranks). :meth:`PoolRanking.ties_at_cut` counts
  the prompts tied at a cut on both sides of it, where the id decides, for the caller to say so.
* **Members that disagree**: the pool keeps equal weights, since averaging over models that rank
  prompts differently is what a pool is for. The disagreement is measured: :func:`member_agreement`
  (Kendall's τ-b of every two members' per-prompt novelty; τ-b for the ties, among them the many
  prompts at 0) and :func:`tail_overlap` (the share of the pool's tail in each member's own tail).
  :func:`disagreements` names a pair below :data:`DISAGREEING_TAU` or a member below
  :data:`DISAGREEING_OVERLAP`, a sign that the pool is worth widening.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics._validate import as_float_array, as_vector, ceil_fraction, check_fraction
from pytest_novelty.metrics.agreement import kendall
from pytest_novelty.metrics.novelty import originality_counting_short
from pytest_novelty.metrics.tail import peak_prompts, prompt_scores, scored, tail_prompts

Array = NDArray[np.float64]

#: Two members whose per-prompt output novelty has Kendall's τ-b below this rank prompts unlike each other.
DISAGREEING_TAU = 0.3

#: A member whose own tail holds less than this share of the pool's tail would have frozen another tail.
DISAGREEING_OVERLAP = 0.5


@dataclass(frozen=True)
class PoolRanking:
    """A suite's prompts scored by a pool: ``input_novelty`` and ``scores`` by prompt (NaN: unranked),
    ``member_novelty`` (members × prompts) each member's mean output novelty."""

    prompt_ids: tuple[str, ...]
    input_novelty: Array
    member_novelty: Array
    scores: Array

    @property
    def members(self) -> int:
        """How many models the pool holds."""
        return int(self.member_novelty.shape[0])

    @property
    def pool_novelty(self) -> Array:
        """Per prompt, the mean over members of their mean output novelty."""
        return np.asarray(self.member_novelty.mean(axis=0), dtype=float)

    @property
    def ranked(self) -> tuple[str, ...]:
        """Every prompt with a score, tail first: score descending, then id ascending."""
        return self.tail(1.0)

    @property
    def unranked(self) -> tuple[str, ...]:
        """The prompts without a score (their text has no n-gram of order n), in suite order."""
        return tuple(i for i, s in zip(self.prompt_ids, self.scores, strict=True) if np.isnan(s))

    def tail(self, alpha: float) -> tuple[str, ...]:
        """The ceil(α·N) ranked prompts with the highest score, highest first."""
        ids, scores = scored(self.prompt_ids, self.scores)
        return tail_prompts(ids, scores, alpha) if ids else ()

    def peak(self, alpha: float) -> tuple[str, ...]:
        """The ceil(α·N) ranked prompts with the lowest score (the most common), lowest first."""
        ids, scores = scored(self.prompt_ids, self.scores)
        return peak_prompts(ids, scores, alpha) if ids else ()

    def ties_at_cut(self, alpha: float, *, end: str = "tail") -> int:
        """How many ranked prompts share the score at the cut of the tail (or ``end="peak"``) while
        lying on both sides of it; 0 when the cut falls between two different scores."""
        share = check_fraction(alpha, "alpha")
        ranking = self.ranked if end == "tail" else tuple(reversed(self.ranked))
        size = ceil_fraction(share, len(ranking))
        if not ranking or size >= len(ranking):
            return 0
        score = dict(zip(self.prompt_ids, self.scores, strict=True))
        inside, outside = score[ranking[size - 1]], score[ranking[size]]
        if inside != outside:
            return 0
        return sum(1 for prompt_id in ranking if score[prompt_id] == inside)

    def member_tail(self, member: int, alpha: float) -> tuple[str, ...]:
        """The tail member ``member`` alone would give (its own output novelty as the pool)."""
        ids, own = scored(self.prompt_ids, prompt_scores(self.input_novelty, list(self.member_novelty[member])))
        return tail_prompts(ids, own, alpha) if ids else ()


def rank_pool(prompt_ids: Sequence[str], input_novelty: ArrayLike, members: Sequence[ArrayLike]) -> PoolRanking:
    """Score every prompt by the pool ``members`` (module doc), each one model's (prompts × samples)
    output originality at n = 4. ``ValueError`` for an empty pool or misaligned shapes."""
    ids = tuple(str(i) for i in prompt_ids)
    prompts = as_vector(input_novelty, "input_novelty")
    if prompts.size != len(ids):
        raise ValueError(f"input_novelty has {prompts.size} prompts but prompt_ids has {len(ids)}")
    if len(set(ids)) != len(ids):
        raise ValueError("prompt_ids must be unique")
    if not members:
        raise ValueError("the pool is empty: give at least one model's outputs")
    means = []
    for index, outputs in enumerate(members):
        values = as_float_array(outputs, f"members[{index}]")
        if values.ndim != 2 or values.shape[0] != len(ids) or values.shape[1] == 0:
            raise ValueError(f"members[{index}] has shape {values.shape}, expected ({len(ids)}, samples)")
        means.append(originality_counting_short(values).mean(axis=1))
    member_novelty = np.vstack(means)
    scores = prompt_scores(prompts, list(member_novelty.T))
    return PoolRanking(ids, prompts, member_novelty, scores)


def member_agreement(ranking: PoolRanking) -> list[tuple[int, int, float]]:
    """Kendall's τ-b of every two members' per-prompt output novelty, over the ranked prompts:
    ``(i, j, τ)`` for i < j (τ NaN where a member's novelty is the same on every prompt)."""
    values = ranking.member_novelty[:, ~np.isnan(ranking.scores)]
    pairs = [(i, j) for i in range(ranking.members) for j in range(i + 1, ranking.members)]
    return [(i, j, kendall(values[i], values[j]) if values.shape[1] > 1 else float("nan")) for i, j in pairs]


def tail_overlap(ranking: PoolRanking, alpha: float) -> list[float]:
    """Per member, the share of the pool's tail that its own ranking also puts in its tail."""
    pooled = set(ranking.tail(alpha))
    if not pooled:
        return [float("nan")] * ranking.members
    return [len(pooled & set(ranking.member_tail(m, alpha))) / len(pooled) for m in range(ranking.members)]


def disagreements(ranking: PoolRanking, alpha: float, names: Sequence[str] | None = None) -> list[str]:
    """One phrase per pair below :data:`DISAGREEING_TAU` and per member below
    :data:`DISAGREEING_OVERLAP`, each member called by ``names`` (default ``member 0``, ...)."""
    called = list(names) if names is not None else [f"member {m}" for m in range(ranking.members)]
    if len(called) != ranking.members:
        raise ValueError(f"{len(called)} names for {ranking.members} members")
    found = [
        f"{called[i]} and {called[j]} rank the prompts' novelty unlike each other "
        f"(Kendall tau-b {tau:.2f} < {DISAGREEING_TAU:g})"
        for i, j, tau in member_agreement(ranking)
        if not np.isnan(tau) and tau < DISAGREEING_TAU
    ]
    if ranking.members > 1:
        found += [
            f"{called[m]}'s own tail holds {share:.0%} of the pool's tail@{alpha:g} (< {DISAGREEING_OVERLAP:.0%})"
            for m, share in enumerate(tail_overlap(ranking, alpha))
            if share < DISAGREEING_OVERLAP
        ]
    return found
