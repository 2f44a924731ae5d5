"""Per-row seeded sampling from next-token logits (torch only; no model code).

Each row owns a ``random.Random`` seeded from its row seed and draws one uniform ``u`` per step;
the token is the first whose cumulative probability exceeds ``u`` times the total (inverse
transform sampling), so a draw does not depend on its batch and costs one cumulative sum.

Filtering follows Hugging Face: logits over the temperature, then ``top_k`` keeps the k most likely
tokens (ties with the k-th kept) and ``top_p`` the smallest most likely set whose probability
reaches ``top_p`` (at least one token). Temperature 0 is greedy.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def filtered_probs(logits: torch.Tensor, *, temperature: float, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Next-token probabilities (rows × vocabulary, float64) after temperature, top-k and top-p."""
    import torch

    scores = logits.double() / temperature
    if 0 < top_k < scores.shape[-1]:
        kth = torch.topk(scores, top_k, dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        before = sorted_probs.cumsum(-1) - sorted_probs  # mass of the more likely tokens
        drop_sorted = before >= top_p
        drop_sorted[:, 0] = False
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def draw(probs: torch.Tensor, uniforms: Sequence[float]) -> torch.Tensor:
    """One token per row: the first whose cumulative probability exceeds ``u`` × the row's total."""
    import torch

    cdf = probs.cumsum(-1)
    u = torch.tensor(uniforms, dtype=cdf.dtype, device=cdf.device).unsqueeze(-1) * cdf[:, -1:]
    index = torch.searchsorted(cdf, u, right=True).squeeze(-1)
    # u at the very top can round onto the total: take the last token that may be drawn.
    last = probs.shape[-1] - 1 - (probs > 0).flip(-1).int().argmax(-1)
    return torch.minimum(index, last)


def next_tokens(
    logits: torch.Tensor, rngs: Sequence[random.Random], *, temperature: float, top_k: int = 0, top_p: float = 1.0
) -> torch.Tensor:
    """Sample (or, at temperature 0, pick greedily) one token per row of ``logits``."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    probs = filtered_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    return draw(probs, [rng.random() for rng in rngs])
