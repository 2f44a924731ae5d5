"""Batch-invariant forward passes: a row's logits do not depend on the rows that share its batch.

A sampled answer depends only on its weights, prompt, settings and seed if every next-token
distribution does. Two things in a batched forward pass break that ("Defeating Nondeterminism in
LLM Inference", Thinking Machines Lab, 2025; vLLM's batch-invariant mode and SGLang's deterministic
inference fix the same two on GPUs):

1. **Matrix products whose kernel depends on the number of rows.** A BLAS picks its kernel and
   blocking from the shape, and with them the order in which a row's sums are added. Measured here
   (MKL in the CPU build of torch 2.13, AMD EPYC, float32, 1 and 2 threads): a product of 1 row, of
   2-3 rows and of 4 or more rows are three roundings of the same row, and from 4 rows on the row's
   result is the same whatever the number of rows and the row's place. :func:`enable` checks that
   on the model's own weight shapes when it loads (:func:`row_floor`), against one thread; where it
   holds from some row count on, products run as they are and the decode loop keeps at least that
   many rows in a batch (finished rows stay as fillers, a short prefill repeats its last prompt);
   where it does
   not (a GPU that splits the reduction when rows are few), every product runs in blocks of exactly
   :data:`BLOCK` rows, the last one filled up with zero rows, so every call has one shape.
2. **Padding.** A row left-padded to a longer neighbour attends over more (masked) keys, and the
   softmax and the weighted sum group their terms by position, so they round differently (and
   PyTorch's fused CPU attention rounds a one-row batch differently from a larger one). Attention
   here is written out in plain products. In the prefill, each row is attended alone over its real
   keys only. In a decode step every row goes in one pass: the scores are
   each key's product with the query (a key's place does not change its sum), the softmax runs on
   each row's scores moved to the front of a row whose width is a multiple of 64 slots (every real
   score in the same vector lane whatever the padding), and the weighted sum of values runs over
   the cache's slots with zero probability on padding (leading zeros add nothing). Every batch is
   wide enough (:func:`min_slots`) that the loop PyTorch takes for tiny products instead of the
   BLAS never serves one batch and not another.

Everything else in a decoder works row by row already: norms, activations, the sampler's softmax,
cumulative sum and search. What this does not give: the same bits on another instruction set
(AVX2 against AVX-512) or another BLAS; docs/generation.md says how often that changes an answer.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

NAME = "pytest_novelty_invariant"
"""The attention implementation's name in transformers' registries."""

FLOORS = (4, 16, 64, 256)
"""The row counts :func:`row_floor` tries as the least rows a batch keeps."""

BLOCK = 64
"""Rows per product where it does not: every call the same shape."""

SMALL_PRODUCT = 400
"""PyTorch's CPU batched product sums with its own loop (no BLAS) when rows × columns × summed terms
is under this (measured with torch 2.13: a decode step's scores round otherwise below it)."""

"""The narrowest batch (in slots): extra left padding below that."""

_PROBE_ROWS = (1, 2, 3, 4, 5, 7, 9, 11, 13, 16, 17, 19, 23, 31, 33, 63, 64, 65, 127, 129, 255, 257, 600)


@dataclass
class Padding:
    """What the attention of one forward pass needs to know of its batch."""

    pads: Sequence[int]
    """Each row's left padding, in slots."""
    width: int
    """Slots per row so far: the padded prompt plus the tokens generated."""
    decode_index: dict[int, Any] = field(default_factory=dict)
    """Per mask (by id; all layers of one pass share it) the decode step's index tensors."""


_PADDING: contextvars.ContextVar[Padding | None] = contextvars.ContextVar("novelty_padding", default=None)


def attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> tuple[Any, None]:
    """transformers' attention interface (query ``(B, heads, Tq, d)``, keys and values ``(B, kv_heads,
    Tk, d)``, a boolean mask; returns ``(B, Tq, heads, d)``), invariant to the batch inside
    :func:`forward`, transformers' own SDPA outside it."""
    padding = _PADDING.get()
    if padding is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if len(padding.pads) != query.shape[0] or attention_mask is None or attention_mask.dtype != _bool():
        raise RuntimeError(f"batch-invariant attention: {len(padding.pads)} rows of padding for a batch of "
                           f"{query.shape[0]}, and a boolean mask, are needed")
    scaling = kwargs.get("scaling") or query.shape[-1] ** -0.5
    softcap = kwargs.get("softcap")
    if query.shape[2] == 1:
        return _decode_step(padding, query, key, value, attention_mask, scaling, softcap), None
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # see _prefill
    try:
        return _prefill(padding, query, key, value, attention_mask, scaling, softcap), None
    finally:
        torch.set_num_threads(threads)


def _bool() -> Any:
    import torch

    return torch.bool


def _scores(query: Any, key: Any, scaling: float, softcap: float | None) -> Any:
    """``(q · scaling) kᵀ`` as each key times the queries (a key per matrix row), grouped-query heads
    sharing their key head: ``(B, kv_heads, repeat · Tq, Tk)``."""
    import torch

    batch, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    grouped = (query * scaling).reshape(batch, kv_heads, heads // kv_heads * q_len, dim)
    scores = torch.matmul(key, grouped.transpose(-1, -2)).transpose(-1, -2)
    return torch.tanh(scores / softcap) * softcap if softcap else scores


def _weighted(probs: Any, value: Any, heads: int, q_len: int) -> Any:
    """The weighted sum of values, back to ``(B, Tq, heads, d)``."""
    import torch

    out = torch.matmul(probs.to(value.dtype), value)  # (B, kv_heads, repeat · Tq, d)
    return out.reshape(out.shape[0], heads, q_len, value.shape[-1]).transpose(1, 2)


def _prefill(padding: Padding, query: Any, key: Any, value: Any, mask: Any, scaling: float,
             softcap: float | None) -> Any:
    """Each row attended on its own over its real keys, the mask cut to match; query slots on padding
    get zeros. One row at a time and on one thread: PyTorch picks the kernel of a batched product by
    its size (how many rows share it) and splits a small product's rows over its threads, and both
    change a row's sums. (A prefill runs once per batch; the decode step, which runs every token, has
    at least the row floor of rows and of key slots, so its products take one path.)"""
    import torch

    batch, heads, q_len, _ = query.shape
    k_len = key.shape[2]
    out = query.new_zeros(batch, q_len, heads, value.shape[-1])
    for row, pad in enumerate(padding.pads):
        q0, k0 = max(0, pad - (padding.width - q_len)), max(0, pad - (padding.width - k_len))
        one = slice(row, row + 1)
        scores = _scores(query[one, :, q0:], key[one, :, k0:], scaling, softcap)
        cut = mask[one, :, q0:, k0:].repeat(1, 1, heads // key.shape[1], 1)  # the rows of each query head
        probs = torch.softmax(scores.masked_fill(~cut, float("-inf")), dim=-1, dtype=torch.float32)
        out[one, q0:] = _weighted(probs.nan_to_num_(0.0), value[one, :, k0:], heads, q_len - q0)
    return out


def _decode_step(padding: Padding, query: Any, key: Any, value: Any, mask: Any, scaling: float,
                 softcap: float | None) -> Any:
    """One new token per row, every row in one pass (see the module doc)."""
    import torch

    heads, k_len = query.shape[1], key.shape[2]
    scores = _scores(query, key, scaling, softcap)  # (B, kv_heads, repeat, Tk)
    index = padding.decode_index.get(id(mask))
    if index is None:
        lengths = mask[:, 0, -1, :].sum(-1, keepdim=True)  # the visible keys: a suffix of the slots
        starts = k_len - lengths
        wide = -(-(k_len + 1) // 64) * 64  # room for one slot that is never a key
        slots = torch.arange(wide, device=query.device).unsqueeze(0)
        take = (starts + slots).clamp_(max=k_len - 1)[:, None, None, :]
        back = slots[:, :k_len] - starts
        back = back.masked_fill_(back < 0, wide - 1)[:, None, None, :]
        index = padding.decode_index[id(mask)] = (take, (slots >= lengths)[:, None, None, :], back)
    take, outside, back = index
    front = scores.gather(-1, take.expand(*scores.shape[:3], -1)).masked_fill_(outside, float("-inf"))
    probs = torch.softmax(front, dim=-1, dtype=torch.float32)
    return _weighted(probs.gather(-1, back.expand(*scores.shape[:3], -1)), value, heads, 1)


def _mask(*args: Any, **kwargs: Any) -> Any:
    """transformers' boolean mask, always materialised (never skipped for ``is_causal``)."""
    from transformers.masking_utils import sdpa_mask

    kwargs["allow_is_causal_skip"] = False
    return sdpa_mask(*args, **kwargs)


@dataclass(frozen=True)
class Products:
    """How matrix products run: as they are, in batches the decode loop keeps at least ``floor``
    rows high (a row's sums checked not to vary from ``floor`` rows on), or, with no such floor,
    in blocks of :data:`BLOCK` rows under :func:`forward`."""

    floor: int | None

    @property
    def blocks(self) -> bool:
        return self.floor is None

    @property
    def description(self) -> str:
        if self.floor is None:
            return f"matrix products in blocks of {BLOCK} rows (a row's sums varied with the row count here)"
        return (f"batches of at least {self.floor} rows (checked at load: a row's sums here do not vary "
                f"from {self.floor} rows on, nor with the thread count)")

    def __call__(self, bias: Any, rows: Any, weight_t: Any) -> Any:
        """``bias + rows @ weight_t`` for ``rows`` (…, K), in blocks of :data:`BLOCK` rows."""
        import torch

        flat = rows.reshape(-1, rows.shape[-1])
        count = flat.shape[0]
        if count % BLOCK:
            flat = torch.cat([flat, flat.new_zeros(BLOCK - count % BLOCK, flat.shape[1])])
        out = flat.new_empty(flat.shape[0], weight_t.shape[1])
        for i in range(0, flat.shape[0], BLOCK):
            if bias is None:
                torch.mm(flat[i : i + BLOCK], weight_t, out=out[i : i + BLOCK])
            else:
                torch.addmm(bias, flat[i : i + BLOCK], weight_t, out=out[i : i + BLOCK])
        return out[:count].reshape(*rows.shape[:-1], weight_t.shape[1])


def row_floor(shapes: Sequence[tuple[int, int]], device: Any, dtype: Any) -> int | None:
    """The least of :data:`FLOORS` from which a product's rows come out the same bits whatever the
    number of rows, the row's place and (on the CPU) the thread count, for each (K, N) weight shape
    (at most 256 columns of it): random rows at :data:`_PROBE_ROWS` row counts against one product of
    them all on one thread. None where no floor holds."""
    import torch

    generator = torch.Generator().manual_seed(0)
    bad: list[int] = []  # row counts whose rows differ
    for k, n in shapes:
        rows = torch.randn(max(_PROBE_ROWS), k, generator=generator).to(device, dtype)
        weight_t = torch.randn(k, min(n, 256), generator=generator).to(device, dtype)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            whole = rows @ weight_t
        finally:
            torch.set_num_threads(threads)
        shuffled = torch.randperm(rows.shape[0], generator=generator).to(device)
        if not torch.equal(rows[shuffled] @ weight_t, whole[shuffled]):
            return None
        bad += [m for m in _PROBE_ROWS if not torch.equal(rows[:m] @ weight_t, whole[:m])]
    return next((floor for floor in FLOORS if all(m < floor for m in bad)), None)


def min_slots(model: Any) -> int:
    """The narrowest batch, in slots, whose decode-step products (each key times the query heads that
    share it, and the weighted sum of values) are never small enough for :data:`SMALL_PRODUCT`."""
    from pytest_novelty.generation.checkpoint import attention_sizes

    _, heads, kv_heads, head_dim = attention_sizes(model.config)
    return SMALL_PRODUCT // (head_dim * (heads // kv_heads)) + 1


def _weight_shapes(model: Any) -> list[tuple[int, int]]:
    """The (K, N) shape of every product with a weight in ``model``: linear layers (weight ``N × K``)
    and GPT-2's ``Conv1D`` (weight ``K × N``)."""
    import torch

    shapes = set()
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if weight is None:
            continue
        if isinstance(module, torch.nn.Linear):
            shapes.add((int(weight.shape[1]), int(weight.shape[0])))
        elif type(module).__name__ == "Conv1D" and weight.dim() == 2:
            shapes.add((int(weight.shape[0]), int(weight.shape[1])))
    return sorted(shapes)


def enable(model: Any) -> tuple[Products, bool]:
    """Prepare ``model`` for :func:`forward`: how its products run (checked on its weight shapes),
    and whether it takes the batch-invariant attention (False when its architecture does not take
    an attention function from transformers' registry: it keeps its own, not invariant to padding)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    parameter = next(model.parameters())
    products = Products(row_floor(_weight_shapes(model), parameter.device, parameter.dtype))
    AttentionInterface.register(NAME, attention)
    AttentionMaskInterface.register(NAME, _mask)
    if not getattr(model, "_supports_attention_backend", False):
        return products, False
    model.set_attn_implementation(NAME)
    return products, True


def _mode(products: Products) -> Any:
    """A torch function mode that runs ``linear`` and ``addmm`` (GPT-2's ``Conv1D``) as ``products``."""
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    class Invariant(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func is F.linear and args[0].dim() >= 2 and args[1].dim() == 2:
                return products(args[2] if len(args) > 2 else kwargs.get("bias"), args[0], args[1].t())
            if func is torch.addmm and len(args) == 3 and not kwargs and args[1].dim() == 2:
                return products(*args)
            return func(*args, **kwargs)

    return Invariant()


@contextlib.contextmanager
def forward(products: Products, pads: Sequence[int], width: int) -> Iterator[None]:
    """Around one forward pass of a batch whose rows have ``pads`` slots of left padding, ``width``
    slots in all: its products as ``products``, its attention told the padding."""
    token = _PADDING.set(Padding(tuple(pads), width))
    try:
        with _mode(products) if products.blocks else contextlib.nullcontext():
            yield
    finally:
        _PADDING.reset(token)
