"""Tokens per second: one prompt at a time versus batched generation, on the demo checkpoint.

    python benchmarks/generation.py [--model demo] [--prompts 64] [--max-new-tokens 64]

Uses the story suite's own prompts. On a GPU machine, pass a ~1B model folder with --model to get
the HF figure there (and --vllm to add vLLM's when it is installed).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pytest_novelty import demo
from pytest_novelty.generation import generate, open_generator
from pytest_novelty.storage import default_cache_dir
from pytest_novelty.suites.loaders import load_prompts
from pytest_novelty.suites.schema import GenerationSettings
from pytest_novelty.suites.tasks import get_task

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--vllm", action="store_true", help="also time vLLM (needs vllm and a GPU)")
    args = parser.parse_args()

    model = args.model
    if model in demo.DEMO_MODELS:
        model = str(demo.ensure_demo(default_cache_dir()) / model)
    task = get_task("story")
    prompts = load_prompts("builtin:story", base_dir=REPO / "suites", limit=args.prompts, task="story")
    texts = [task.completion_prefix(p) for p in prompts]
    gen = open_generator(model, device=args.device)
    # min_new_tokens-free sampling can stop early at EOS, so count the tokens actually produced.
    rows = []
    for label, batch_size in (("one prompt at a time", 1), (f"batched ({args.batch_size})", args.batch_size)):
        settings = GenerationSettings(max_new_tokens=args.max_new_tokens, batch_size=batch_size, seed=0)
        gen.generate(texts[:2], settings, seed=0)  # warm-up
        before = gen.tokens_generated
        start = time.perf_counter()
        generate(gen, texts, settings)
        seconds = time.perf_counter() - start
        tokens = gen.tokens_generated - before
        rows.append((label, tokens, seconds, tokens / seconds))
    print(f"model {args.model} on {gen.device}, {len(texts)} prompts, up to {args.max_new_tokens} new tokens each")
    for label, tokens, seconds, rate in rows:
        print(f"  {label:24s} {tokens:7d} tokens in {seconds:7.2f} s = {rate:9.1f} tokens/s")
    print(f"  speed-up of batching: {rows[1][3] / rows[0][3]:.1f}x")
    if args.vllm:
        try:
            from vllm import LLM, SamplingParams
        except ImportError:
            print("  vLLM: not installed")
            return
        llm = LLM(model=model, seed=0)
        params = SamplingParams(temperature=1.0, max_tokens=args.max_new_tokens, seed=0)
        start = time.perf_counter()
        outputs = llm.generate(texts, params)
        seconds = time.perf_counter() - start
        tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
        print(f"  {'vLLM':24s} {tokens:7d} tokens in {seconds:7.2f} s = {tokens / seconds:9.1f} tokens/s")


if __name__ == "__main__":
    main()
