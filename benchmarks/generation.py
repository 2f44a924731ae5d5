"""Tokens per second of the demo suites: one row at a time versus batched generation.

    python benchmarks/generation.py [--model demo] [--prompts N] [--suites story,poetry,tool,open]
                                    [--device auto] [--vllm]

Each suite's prompts are rendered and sampled with the suite's own settings (samples, length,
temperature, stop strings). Rows are seeded one by one, so every way of batching produces the
same answers up to float rounding in batched matrix products (the script counts the rows that
differ), and the figures compare equal work. Modes:

- one row at a time: batch size 1, what a plain loop over prompts and samples does;
- one prompt at a time: a prompt's k samples together (``num_return_sequences``-style);
- batched: ``batch_size = "auto"``, rows sorted by prompt length, as many as fit.

On a GPU machine pass a ~1B model folder with --model (and --suites with a chat prompt method if
it is an instruct model); --vllm adds the vLLM backend on the same prompts when vLLM is installed.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from pytest_novelty.generation import GenerationStats, generate, open_generator
from pytest_novelty.runner import RunConfig, Runner
from pytest_novelty.storage import default_cache_dir
from pytest_novelty.suites.schema import load_suite
from pytest_novelty.suites.tasks import get_task

REPO = Path(__file__).resolve().parents[1]


def _suite_inputs(runner: Runner, name: str, limit: int) -> tuple[list[str], object]:
    suite = load_suite(REPO / "suites" / f"{name}.toml")
    _, inputs = runner.prompts(suite)
    gen = runner.generator()
    texts = [gen.render(x) for x in inputs][: limit or None]
    settings = suite.generation
    task = get_task(suite.task)
    if not settings.stop and task.stop:
        settings = replace(settings, stop=tuple(task.stop))
    return texts, settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo")
    parser.add_argument("--prompts", type=int, default=0, help="prompts per suite (default: all of the suite's)")
    parser.add_argument("--suites", default="story,poetry,tool,open")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--repeats", type=int, default=3, help="runs per mode; the median is shown (default 3)")
    parser.add_argument("--vllm", action="store_true", help="also time the vLLM backend (needs vllm and a GPU)")
    args = parser.parse_args()

    import torch

    runner = Runner(RunConfig(model=args.model, cache_dir=default_cache_dir(), device=args.device))
    work = [_suite_inputs(runner, name, args.prompts) for name in args.suites.split(",")]
    gen = runner.generator()
    rows = sum(len(texts) * settings.samples for texts, settings in work)  # type: ignore[attr-defined]
    print(
        f"model {args.model} on {gen.device} ({torch.get_num_threads()} threads); suites {args.suites}: "
        f"{sum(len(t) for t, _ in work)} prompts, {rows} rows"
    )
    gen.sample(work[0][0][:2], [0, 1], work[0][1])  # type: ignore[arg-type]  # warm-up

    modes = {
        "one row at a time": lambda s: replace(s, batch_size=1),
        "one prompt at a time": lambda s: replace(s, batch_size=s.samples),
        "batched (auto)": lambda s: replace(s, batch_size=0),
    }
    figures: dict[str, GenerationStats] = {}
    answers: dict[str, list[list[list[str]]]] = {}
    for label, batching in modes.items():
        runs = []
        for _ in range(args.repeats):
            total = GenerationStats()
            answers[label] = []
            for texts, settings in work:
                out, stats = generate(gen, texts, batching(settings))
                total.seconds += stats.seconds
                total.tokens += stats.tokens
                total.batches += stats.batches
                answers[label].append(out)
            runs.append(total)
        total = sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]
        figures[label] = total
        print(
            f"  {label:22s} {total.tokens:7d} tokens in {total.seconds:7.2f} s = {total.tokens_per_second:8.1f} "
            f"tokens/s ({total.batches} batches; median of {len(runs)}, "
            f"range {min(r.seconds for r in runs):.2f}-{max(r.seconds for r in runs):.2f} s)"
        )
    flat = {label: [a for suite in out for prompt in suite for a in prompt] for label, out in answers.items()}
    reference = flat["batched (auto)"]
    differing = max(sum(x != y for x, y in zip(rows_, reference, strict=True)) for rows_ in flat.values())
    print(
        f"  answers that differ between modes: {differing} of {len(reference)} "
        "(rows are seeded one by one; a difference comes from float rounding in batched matrix products)"
    )
    base = figures["one row at a time"].tokens_per_second
    for label in ("one prompt at a time", "batched (auto)"):
        print(f"  speed-up of {label} over one row at a time: {figures[label].tokens_per_second / base:.1f}x")
    if args.vllm:
        _vllm(runner.model_path(), work, args.device)


def _vllm(model: str, work: list[tuple[list[str], object]], device: str) -> None:
    try:
        vllm = open_generator(model, device=device, backend="vllm")
    except Exception as exc:
        print(f"  vLLM: not available ({exc})")
        return
    total = GenerationStats()
    for texts, settings in work:
        start = time.perf_counter()
        _, stats = generate(vllm, texts, replace(settings, batch_size=0))  # type: ignore[type-var]
        total.seconds += time.perf_counter() - start
        total.tokens += stats.tokens
    rate = total.tokens_per_second
    print(f"  {'vLLM':22s} {total.tokens:7d} tokens in {total.seconds:7.2f} s = {rate:8.1f} tokens/s")


if __name__ == "__main__":
    main()
