"""Generation speed on a GPU: our decode loop against ``model.generate`` (and vLLM when installed).

    python benchmarks/generation_gpu.py [--model DIR | --build-layers 16] [--prompts 256] [--samples 4]
                                        [--max-new-tokens 128] [--stop k] [--device cuda] [--save DIR]

Without ``--model`` the script builds a Llama-layout checkpoint of about 1.1B parameters from its
config (TinyLlama's shapes: hidden 2048, 22 layers, 32 heads, 4 key-value heads, intermediate 5632;
random weights, which are fine for speed) with a byte-level BPE tokenizer trained on the bundled
story prompts, and saves it to a temporary folder. Every engine gets the same rendered prompts
(the bundled story prompts, cycled) and the same sampling settings; figures are tokens/s
(generated tokens over wall seconds) and the time to finish the whole set.

- ``ours``: ``pytest_novelty.generation.generate`` with ``batch_size = "auto"`` (rows sorted by
  length, finished rows leave the batch, per-row seeds);
- ``model.generate``: transformers' own sampling loop over the same batches (same batch size,
  left padding, ``do_sample``), k samples per prompt as ``num_return_sequences``;
- ``vllm``: the vLLM backend, when ``import vllm`` works.

Random weights rarely emit the end-of-sequence token, so without a stop string every row runs to
``max_new_tokens``: the comparison is of raw decoding throughput, where retiring finished rows
gains nothing. ``--stop .`` gives both engines a stop string that random tokens hit now and then,
so answer lengths vary as real answers do (``model.generate`` gets it as ``stop_strings``).
The built model's vocabulary is its trained tokenizer's (4,096 tokens), smaller than TinyLlama's
32,000, so its output layer is cheaper than a real 1B model's.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _story_texts() -> list[str]:
    rows = [json.loads(line) for line in (REPO / "suites" / "data" / "story.jsonl").read_text().splitlines() if line]
    return [str(r["text"]) for r in rows]


def build_llama(folder: Path, *, layers: int, hidden: int, device: str) -> Path:
    """A random-weight Llama checkpoint of TinyLlama's shapes (``layers`` deep) with a trained tokenizer."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    eos = "</s>"
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=4096, special_tokens=["<s>", eos], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(_story_texts() * 4, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token=eos, pad_token=eos, unk_token=eos, padding_side="left"
    )
    eos_id = fast.convert_tokens_to_ids(eos)
    heads = max(1, hidden // 64)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=hidden,
        intermediate_size=int(hidden * 2.75),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 8),
        max_position_embeddings=2048,
        bos_token_id=fast.convert_tokens_to_ids("<s>"),
        eos_token_id=eos_id,
        pad_token_id=eos_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    with torch.device(device):
        model = LlamaForCausalLM(config).to(dtype)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    params = sum(p.numel() for p in model.parameters())
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    print(f"built a Llama-layout checkpoint: {params / 1e9:.2f}B parameters, {layers} layers, hidden {hidden}")
    return folder


def run_ours(model: str, texts: list[str], settings: object, device: str) -> tuple[int, float, int]:
    from pytest_novelty.generation import Batch, generate
    from pytest_novelty.generation.backends import open_generator

    gen = open_generator(model, device=device)
    gen.sample(Batch(texts[:2], [0, 1], replace(settings, max_new_tokens=4)))  # type: ignore[type-var]  # warm-up
    _sync(device)
    start = time.perf_counter()
    _, stats = generate(gen, texts, settings)  # type: ignore[arg-type]
    _sync(device)
    seconds = time.perf_counter() - start
    batch = math.ceil(len(texts) * settings.samples / max(1, stats.batches))  # type: ignore[attr-defined]
    del gen
    return stats.tokens, seconds, batch


def run_hf_generate(
    model: str, texts: list[str], settings: object, device: str, rows_per_batch: int
) -> tuple[int, float]:
    """``model.generate`` over the same prompts, ``num_return_sequences`` = samples, similar batch rows."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.padding_side = "left"
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    lm = AutoModelForCausalLM.from_pretrained(model, dtype=dtype).to(device).eval()
    samples = settings.samples  # type: ignore[attr-defined]
    prompts_per_batch = max(1, rows_per_batch // samples)
    order = sorted(range(len(texts)), key=lambda i: len(tokenizer(texts[i])["input_ids"]))
    kwargs = {
        "do_sample": True,
        "temperature": settings.temperature,  # type: ignore[attr-defined]
        "top_p": settings.top_p,  # type: ignore[attr-defined]
        "max_new_tokens": settings.max_new_tokens,  # type: ignore[attr-defined]
        "num_return_sequences": samples,
        "pad_token_id": tokenizer.pad_token_id,
    }
    if settings.stop:  # type: ignore[attr-defined]
        kwargs.update(stop_strings=list(settings.stop), tokenizer=tokenizer)  # type: ignore[attr-defined]
    with torch.inference_mode():
        warm = tokenizer(texts[:2], return_tensors="pt", padding=True).to(device)
        lm.generate(**warm, **{**kwargs, "max_new_tokens": 4})
    _sync(device)
    tokens = 0
    start = time.perf_counter()
    with torch.inference_mode():
        for lo in range(0, len(order), prompts_per_batch):
            batch = [texts[i] for i in order[lo : lo + prompts_per_batch]]
            enc = tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            out = lm.generate(**enc, **kwargs)
            new = out[:, enc["input_ids"].shape[1] :]
            # Tokens up to and including the first end-of-sequence token (what a row really produced).
            ended = new == tokenizer.eos_token_id
            lengths = torch.where(
                ended.any(-1), ended.int().argmax(-1), torch.full_like(ended[:, 0], new.shape[1], dtype=torch.long)
            )
            tokens += int(lengths.sum())
    _sync(device)
    seconds = time.perf_counter() - start
    del lm
    return tokens, seconds


def run_vllm(model: str, texts: list[str], settings: object, device: str) -> tuple[int, float] | str:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return "not installed"
    from pytest_novelty.generation import generate
    from pytest_novelty.generation.backends import open_generator

    gen = open_generator(model, device=device, backend="vllm")
    start = time.perf_counter()
    _, stats = generate(gen, texts, settings)  # type: ignore[arg-type]
    return stats.tokens, time.perf_counter() - start


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a checkpoint folder (default: build a ~1.1B Llama-layout model)")
    parser.add_argument("--build-layers", type=int, default=22)
    parser.add_argument("--build-hidden", type=int, default=2048)
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--stop", action="append", default=[], help="a stop string for both engines (repeatable)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--save", help="build the model into this folder and keep it (for a second run with --model)")
    parser.add_argument("--skip-generate", action="store_true", help="time only our decode loop")
    args = parser.parse_args()

    import torch

    from pytest_novelty.suites.schema import GenerationSettings

    tmp = None
    model = args.model
    if model is None:
        folder = Path(args.save) if args.save else Path(tempfile.mkdtemp(prefix="novelty-gpu-bench-")) / "llama"
        tmp = None if args.save else folder.parent
        start = time.perf_counter()
        model = str(build_llama(folder, layers=args.build_layers, hidden=args.build_hidden, device=args.device))
        print(f"  (built and saved in {time.perf_counter() - start:.1f} s)")
    try:
        stories = _story_texts()
        texts = [stories[i % len(stories)] + f" (#{i})" for i in range(args.prompts)]
        settings = GenerationSettings(
            samples=args.samples,
            temperature=1.0,
            top_p=0.95,
            max_new_tokens=args.max_new_tokens,
            seed=1,
            batch_size=0,
            stop=tuple(args.stop),
        )
        where = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
        rows = len(texts) * args.samples
        print(
            f"device {where}; torch {torch.__version__}; {len(texts)} prompts x {args.samples} samples = {rows} rows, "
            f"up to {args.max_new_tokens} new tokens, top_p 0.95, stop {list(args.stop)}"
        )
        tokens, seconds, batch = run_ours(model, texts, settings, args.device)
        print(
            f"  ours (decode loop, batch auto ~{batch} rows): {tokens} tokens in {seconds:.2f} s = "
            f"{tokens / seconds:,.0f} tokens/s"
        )
        if not args.skip_generate:
            g_tokens, g_seconds = run_hf_generate(model, texts, settings, args.device, batch)
            print(
                f"  model.generate (same batch rows):          {g_tokens} tokens in {g_seconds:.2f} s = "
                f"{g_tokens / g_seconds:,.0f} tokens/s"
            )
            print(f"  ours / model.generate throughput: {(tokens / seconds) / (g_tokens / g_seconds):.2f}x")
        outcome = run_vllm(model, texts, settings, args.device)
        if isinstance(outcome, str):
            print(f"  vllm: {outcome}")
        else:
            v_tokens, v_seconds = outcome
            print(
                f"  vllm: {v_tokens} tokens in {v_seconds:.2f} s = {v_tokens / v_seconds:,.0f} tokens/s; "
                f"ours / vllm: {(tokens / seconds) / (v_tokens / v_seconds):.2f}x"
            )
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
