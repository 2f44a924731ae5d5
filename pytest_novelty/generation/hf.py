"""Generation with a Hugging Face causal LM: batched, left-padded, seeded sampling.

torch and transformers are imported only when a checkpoint is loaded (its folder's checks, its
loaders and its tokenizer's text side are :mod:`.checkpoint`'s).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_novelty.generation import DTYPES, Batch, LoadSettings, Reproducibility
from pytest_novelty.generation.backends import GENERATOR_BACKENDS
from pytest_novelty.generation.checkpoint import (
    adapter_base,
    attention_sizes,
    check_checkpoint,
    context_refusal,
    is_adapter,
    load_tokenizer,
    render,
    run_loader,
    token_counts,
    tokenizer_source,
    with_adapter,
)
from pytest_novelty.generation.devices import resolve_device
from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.infra.identity import checkpoint_identity
from pytest_novelty.infra.storage import stable_hash
from pytest_novelty.suites.schema import GenerationSettings

if TYPE_CHECKING:
    from pytest_novelty.generation import ModelInput


class PromptTooLong(ConfigError):
    """A prompt of the batch (``tokens`` long, with its in-context examples) fills the model's whole
    ``context``; the runner finds which prompt it was and names its file and line."""

    def __init__(self, tokens: int, context: int) -> None:
        self.tokens = tokens
        self.context = context
        super().__init__(f"a prompt of {tokens} tokens does not fit the model's context of {context} tokens")


@GENERATOR_BACKENDS.register("hf", summary="transformers, on the CPU or GPUs (accelerate spreads one model)")
class HFGenerator:
    """Samples continuations from a transformers causal LM, with a decode loop that retires rows.

    ``model.generate`` runs every row until the longest ends; this loop calls the forward pass itself
    and drops a row that ends (an end-of-sequence token or a stop string) from the batch and the KV
    cache (``Cache.reorder_cache``), so the cost follows the tokens produced. Rows are seeded one by one.
    """

    def __init__(self, model: str, load: LoadSettings | None = None) -> None:
        """Checks ``model`` and its identity now; the tokenizer and the weights load when first needed
        (a rerun whose answers are all cached imports no torch)."""
        self.load = load = load or LoadSettings()
        check_checkpoint(model, trust_remote_code=load.trust_remote_code, base_model=load.base_model)
        self.name = model
        self.adapter = model if is_adapter(model) else None
        self.base = adapter_base(model, load.base_model) if self.adapter else model
        self.identity = checkpoint_identity(model, memo=load.memo, base=load.base_model)  # what is loaded, its key
        # The key of its answers and their seeds: the checkpoint's content (and the decoding, where it is
        # not the batch-invariant one every cached answer has since generations version 3).
        self.identity_id = self.identity.id if load.batch_invariant else f"batched:{self.identity.id}"
        self.tokens_generated = 0
        self._device: str | None = None
        self._tokenizer: Any = None
        self._model: Any = None
        self._pieces: list[str] | None = None
        self.floor, self.min_slots = 1, 1  # rows and slots a batch keeps at least (see .invariant)

    def _source(self, of_adapter: str) -> tuple[str, dict[str, Any]]:
        """What ``from_pretrained`` loads and its options: remote code as allowed, a hub model at its
        pinned commit; for an adapter folder, ``of_adapter`` (its base, or where its tokenizer is)."""
        remote: dict[str, Any] = {"trust_remote_code": self.load.trust_remote_code}
        if self.adapter:
            return of_adapter, remote
        return self.identity.source, {**remote, **self.identity.load_options}

    @property
    def device(self) -> str:
        """Where inputs go: the device (the first one of a model spread over several)."""
        if self._device is None:
            self._device = resolve_device(self.load.device)
        return self._device

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            name, remote = self._source(tokenizer_source(self.name, self.load.base_model))
            tokenizer = load_tokenizer(name, **remote)
            tokenizer.padding_side = "left"
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            self._tokenizer = tokenizer
        return self._tokenizer

    def _placement_kwargs(self) -> dict[str, Any]:
        """``from_pretrained`` arguments that spread the weights, or {} for one device."""
        if self.load.placement is not None:
            return dict(self.load.placement)
        if self.load.gpus <= 1:
            return {}
        import torch

        from pytest_novelty.generation import devices

        # The GPUs this process sees (its worker's group), and the free bytes of each (NVML, no allocation).
        spread = devices.model_devices(self.device, self.load.gpus, torch.cuda.device_count())
        free = {d: int(torch.cuda.mem_get_info(torch.device(d))[0]) for d in spread}
        return devices.shard_placement(spread, free)

    @property
    def model(self) -> Any:
        if self._model is None:
            import inspect

            import torch
            from transformers import AutoModelForCausalLM

            name, remote = self._source(self.base)
            dtype = getattr(torch, DTYPES[self.load.dtype]) if self.load.dtype != "auto" else None
            dtype = dtype or (torch.bfloat16 if self.device.startswith("cuda") else torch.float32)
            placement = self._placement_kwargs()
            model = run_loader(
                "model", name, lambda: AutoModelForCausalLM.from_pretrained(name, dtype=dtype, **remote, **placement)
            )
            if self.adapter:
                model = with_adapter(model, self.adapter)
            if not placement:
                run_loader("model", name, lambda: model.to(self.device))  # placing the weights can run out of memory
            self.device_map = dict(getattr(model, "hf_device_map", None) or {"": self.device})
            model.eval()
            config = model.config
            self.context = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
            self.eos_ids = _eos_ids(model, self.tokenizer)
            self.processors = checkpoint_processors(model, self.device)
            if self.load.batch_invariant:
                from pytest_novelty.generation import invariant

                self.products, self.invariant_attention = invariant.enable(model)
                self.floor = self.products.floor or 1
                self.min_slots = max(self.floor, invariant.min_slots(model))
            params = inspect.signature(model.forward).parameters
            # transformers 5.2x renamed past_key_values to cache; older releases know only the first.
            self._cache_arg = "cache" if "cache" in params else "past_key_values"
            self._last_logits = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
            self._model = model
        return self._model

    @property
    def reproducibility(self) -> Reproducibility:
        """Batch-invariant decoding (:mod:`.invariant`) and what was checked for it at load."""
        if not self.load.batch_invariant:
            return Reproducibility(False, "decoded without batch invariance: an answer can change with its batch")
        if not self.invariant_attention:
            return Reproducibility(False, f"{type(self.model).__name__} takes no attention function from "
                                          "transformers' registry: an answer can change with its batch's padding")
        where = "" if self.device == "cpu" else "; its attention is checked on the CPU only"
        return Reproducibility(True, f"batch-invariant decoding on {self.device}: {self.products.description}{where}")

    def render(self, model_input: ModelInput) -> str:
        """The exact text fed to the model: chat messages go through the chat template, and the result is
        memoised under the content identity (which covers the template), so a warm rerun of a chat
        suite loads no tokenizer either."""
        if isinstance(model_input, str):
            return model_input  # plain text needs no tokenizer (and a cached rerun loads none)
        key = f"chat-render/{self.identity_id}/{stable_hash([dict(m) for m in model_input])}"
        known = None if self.load.memo is None else self.load.memo.get(key)
        if isinstance(known, str):
            return known
        text = render(self.tokenizer, self.name, model_input)
        if self.load.memo is not None:
            self.load.memo.put(key, text)
        return text

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Prompt lengths in tokens, as the model will see them."""
        return token_counts(self.tokenizer, texts)

    def max_rows(self, prompt_tokens: int, settings: GenerationSettings) -> int:
        """Rows per batch for prompts of up to ``prompt_tokens`` tokens. On CUDA: half the free memory of
        the model's GPUs over a row's KV cache at full length plus its sampling buffers; on the CPU at
        most 256 (beyond a few hundred rows a step only gets slower)."""
        length = prompt_tokens + settings.max_new_tokens
        if not self.device.startswith("cuda"):
            return max(1, min(256, (1 << 16) // max(1, length)))
        import torch

        config = self.model.config
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        # Sampling holds a few full-vocabulary vectors per row (float32 logits, float64 probabilities
        # and their cumulative sum): 32 bytes per vocabulary entry.
        per_row = kv_bytes_per_token(config, self.model.dtype) * length + 32 * int(getattr(text, "vocab_size", 0) or 0)
        gpus = sorted({str(d) for d in self.device_map.values() if str(d).startswith("cuda") or isinstance(d, int)})
        free = sum(torch.cuda.mem_get_info(torch.device(_torch_device(d)))[0] for d in gpus or [self.device])
        return max(1, min(1024, int(0.5 * free) // per_row))

    def sample(self, batch: Batch) -> list[str]:
        """The decode loop over ``batch``; on running out of CUDA memory, the halves in turn (the same answers)."""
        import torch

        try:
            return self._decode(batch)
        except torch.OutOfMemoryError:
            if len(batch) == 1:
                raise HarnessError(f"{self.name}: out of memory on a single prompt") from None
        # Retried outside the except clause: there, the traceback still holds the failed attempt's
        # tensors (its KV cache), and the halves would run short of the very memory it took.
        torch.cuda.empty_cache()
        half = len(batch) // 2
        before = self.tokens_generated
        first = self.sample(batch.part(0, half))
        later = batch.part(half, len(batch), tokens_before=self.tokens_generated - before)
        return first + self.sample(later)

    def _limits(self, lengths: Sequence[int], settings: GenerationSettings) -> list[int]:
        """New tokens each row may take: ``max_new_tokens``, less where its own prompt leaves less of
        the context (never its neighbours': a row's answer does not depend on its batch);
        ``max_new_tokens`` at or past the context is refused, as is a prompt that fills it."""
        if self.context is None:
            return [settings.max_new_tokens] * len(lengths)
        if settings.max_new_tokens >= self.context:
            raise context_refusal(settings.max_new_tokens, self.context)
        if max(lengths, default=0) >= self.context:
            raise PromptTooLong(max(lengths), self.context)
        return [min(settings.max_new_tokens, self.context - n) for n in lengths]

    def _forward(self, pads: Sequence[int], width: int) -> Any:
        """The context of one forward pass: batch-invariant (:mod:`.invariant`) unless turned off."""
        import contextlib

        from pytest_novelty.generation import invariant

        return invariant.forward(self.products, pads, width) if self.load.batch_invariant else contextlib.nullcontext()

    def _decode(self, batch: Batch) -> list[str]:
        """The decode loop (see the class doc); a row that ends is decoded and handed on at once.

        Rows run sorted by prompt length, so rows with the same padding sit together (the
        batch-invariant attention takes them as one view)."""
        import random

        import torch

        from pytest_novelty.generation.sampling import next_tokens

        texts, settings = batch.texts, batch.settings
        rngs = [random.Random(seed) for seed in batch.seeds]
        produced: list[list[int]] = [[] for _ in texts]
        decoded: dict[int, str] = {}

        def finish(row: int) -> None:
            decoded[row] = str(self.tokenizer.decode(produced[row], skip_special_tokens=True))
            batch.finished(row, decoded[row])

        tokens = 0
        filler = random.Random(0)  # the draws of rows kept only to fill a batch (their tokens are dropped)
        with torch.inference_mode():
            live, cache, logits, mask, position, ids, pads = self._prefill(texts)
            limits = self._limits([mask.shape[1] - pad for pad in pads], settings)
            limit_of = {row: limit for row, limit in zip(live, limits, strict=True) if row >= 0}
            stops = _StopWatch(settings.stop, self._token_pieces() if settings.stop else [], len(texts))
            for step in range(max(limit_of.values())):
                if self.processors:
                    logits = _processed(self.processors, ids, logits.float(), pads)
                chosen = next_tokens(logits, [rngs[r] if r >= 0 else filler for r in live],
                                     temperature=settings.temperature, top_k=settings.top_k, top_p=settings.top_p)
                keep, ended = [], []  # the slots of the rows that go on, and of those that end now
                for slot, (row, token) in enumerate(zip(live, chosen.tolist(), strict=True)):
                    if row < 0:
                        ended.append(slot)
                        continue
                    if token not in self.eos_ids:
                        produced[row].append(token)
                        tokens += 1
                        if not stops.hit(row, token) and step + 1 < limit_of[row]:
                            keep.append(slot)
                            continue
                    finish(row)
                    ended.append(slot)
                batch.step(len(texts) - len(keep), tokens)
                if not keep:
                    break
                if len(keep) < self.floor:  # rows kept as fillers (see .invariant)
                    keep = sorted(keep + ended[-(self.floor - len(keep)) :])
                if self.processors:
                    ids = torch.cat([ids, chosen.unsqueeze(-1)], dim=-1)  # the processors read the whole row
                if len(keep) < len(live):
                    index = torch.tensor(keep, device=self.device)
                    cache.reorder_cache(index)
                    mask, position, chosen, ids = mask[index], position[index], chosen[index], ids[index]
                    pads = [pads[slot] for slot in keep]
                live = [-1 if live[slot] in decoded else live[slot] for slot in keep]
                mask = torch.cat([mask, mask.new_ones((len(live), 1))], dim=-1)
                inputs = {"input_ids": chosen.unsqueeze(-1), "attention_mask": mask, "position_ids": position}
                with self._forward(pads, mask.shape[1]):
                    out = self.model(**inputs, use_cache=True, **{self._cache_arg: cache})
                cache, logits = _cache_of(out), out.logits[:, -1, :].to(self.device)
                position = position + 1
                if self.context is not None:
                    position.clamp_(max=self.context - 1)  # only a filler row gets that far
        for row in range(len(texts)):
            if row not in decoded:
                finish(row)  # reached the length limit
        self.tokens_generated += tokens
        return [decoded[row] for row in range(len(texts))]

    def _prefill(self, texts: Sequence[str]) -> tuple[Any, ...]:
        """The prompts' forward pass, each distinct prompt once, shortest first: the batch's rows in
        that order, the cache, then per row its logits, attention mask, next position, input ids
        and left padding."""
        import torch


        model = self.model  # loads the weights on first use, and with them the context and stop ids
        lengths = self.token_counts(texts)
        if self.context is not None and max(lengths, default=0) >= self.context:  # refused before it runs
            raise PromptTooLong(max(lengths), self.context)
        order = sorted(range(len(texts)), key=lambda row: (lengths[row], row))
        distinct = list(dict.fromkeys(texts[row] for row in order))
        # Fillers (see .invariant): at least `floor` rows to decode and `floor` prompts in the prefill.
        order += [-1] * (self.floor - len(order))
        distinct += [distinct[-1]] * (self.floor - len(distinct))
        enc = self.tokenizer(distinct, return_tensors="pt", padding=True, add_special_tokens=False)
        mask = enc["attention_mask"].to(self.device)
        ids = enc["input_ids"].to(self.device)
        if self.load.batch_invariant and ids.shape[1] < self.min_slots:
            extra = self.min_slots - ids.shape[1]
            ids = torch.cat([ids.new_full((len(distinct), extra), self.tokenizer.pad_token_id), ids], dim=1)
            mask = torch.cat([mask.new_zeros((len(distinct), extra)), mask], dim=1)
        pads = (mask.shape[1] - mask.sum(-1)).tolist()
        positions = (mask.cumsum(-1) - 1).clamp_(min=0)
        with self._forward(pads, mask.shape[1]):
            out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                        **self._last_logits)
        cache, logits = _cache_of(out), out.logits[:, -1, :].to(self.device)
        where = {text: i for i, text in reversed(list(enumerate(distinct)))}
        expand = [where[texts[row]] if row >= 0 else len(distinct) - 1 for row in order]
        if expand != list(range(len(distinct))):
            index = torch.tensor(expand, device=self.device)
            cache.reorder_cache(index)
            logits, mask, positions, ids = logits[index], mask[index], positions[index], ids[index]
        return order, cache, logits, mask, positions[:, -1:] + 1, ids, [pads[i] for i in expand]

    def _token_pieces(self) -> list[str]:
        """Each token's text on its own, to spot stop strings without decoding every row each step."""
        if self._pieces is None:
            size = len(self.tokenizer)
            self._pieces = [self.tokenizer.decode([i], skip_special_tokens=True) for i in range(size)]
        return self._pieces


class _StopWatch:
    """Notices when a row's last characters (the longest stop string plus one token) hold a stop string.
    Pieces decoded one by one can differ from the text for multi-byte characters: this only ends
    generation early, and the task cuts answers at the exact stop afterwards."""

    def __init__(self, stops: Sequence[str], pieces: Sequence[str], rows: int) -> None:
        self.stops = [s for s in stops if s]
        self.pieces = pieces
        self.keep = max((len(s) for s in self.stops), default=0)
        self.tails = [""] * rows
        self.seen = [False] * rows

    def hit(self, row: int, token: int) -> bool:
        if not self.stops:
            return False
        piece = self.pieces[token] if token < len(self.pieces) else ""
        text = self.tails[row] + piece
        # Leading whitespace never counts as a stop (as in the tasks' cut_at_stops).
        if not self.seen[row]:
            text = text.lstrip()
            self.seen[row] = bool(text)
        self.tails[row] = text[-(self.keep + len(piece)) :]
        return any(stop in text for stop in self.stops)


def _processed(processors: Any, ids: Any, logits: Any, pads: Sequence[int]) -> Any:
    """The logits processors applied row by row to each row's own tokens (no padding: a processor
    that reads the row, a repetition penalty say, must not see its neighbours' pad tokens)."""
    import torch

    return torch.cat([processors(ids[i : i + 1, pad:], logits[i : i + 1]) for i, pad in enumerate(pads)])


def checkpoint_processors(model: Any, device: str) -> Any:
    """The token rules of the checkpoint's generation config (``repetition_penalty``,
    ``no_repeat_ngram_size``, ``bad_words_ids``, ``suppress_tokens``) as logits processors, as
    ``model.generate`` keeps them; None when it sets none. Sampling itself follows the suite."""
    from transformers import (
        LogitsProcessorList,
        NoBadWordsLogitsProcessor,
        NoRepeatNGramLogitsProcessor,
        RepetitionPenaltyLogitsProcessor,
        SuppressTokensLogitsProcessor,
    )

    config = getattr(model, "generation_config", None)
    if config is None:
        return None
    processors = LogitsProcessorList()
    penalty = getattr(config, "repetition_penalty", None)
    if penalty is not None and penalty != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(float(penalty)))
    ngram = getattr(config, "no_repeat_ngram_size", None)
    if ngram:
        processors.append(NoRepeatNGramLogitsProcessor(int(ngram)))
    bad = getattr(config, "bad_words_ids", None)
    if bad:
        processors.append(NoBadWordsLogitsProcessor(bad, eos_token_id=getattr(config, "eos_token_id", None)))
    suppress = getattr(config, "suppress_tokens", None)
    if suppress:
        processors.append(SuppressTokensLogitsProcessor(suppress, device=device))
    return processors or None


def kv_bytes_per_token(config: Any, dtype: Any) -> int:
    """Bytes of KV cache one token takes: keys and values of every layer's key/value heads."""
    import torch

    layers, _, kv_heads, head_dim = attention_sizes(config)
    return 2 * layers * kv_heads * head_dim * (torch.finfo(dtype).bits // 8)


def _torch_device(entry: Any) -> str:
    """A device map entry (0, "cuda:1", "cpu") as a torch device string."""
    return f"cuda:{entry}" if isinstance(entry, int) or str(entry).isdigit() else str(entry)


def _cache_of(output: Any) -> Any:
    """The KV cache a forward pass returned (``cache`` in recent transformers, ``past_key_values`` before)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """End-of-sequence ids: the generation config's (chat models list several) and the tokenizer's."""
    ids: set[int] = set()
    for value in (getattr(getattr(model, "generation_config", None), "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return ids
