"""Tokens per second of the demo suites: one row at a time, batched, model.generate, vLLM, a server.

    python benchmarks/generation.py [--model demo] [--prompts N] [--suites story,poetry,tool,open]
                                    [--device auto] [--dtype auto|bf16|fp16|fp32]
                                    [--modes row,prompt,batched,generate] [--vllm]
                                    [--served-url URL --served-name NAME]

Each suite's prompts are rendered and sampled with the suite's own settings (samples, length,
temperature, stop strings). Rows are seeded one by one and decoded batch-invariantly, so every
way of batching produces the same answers (the script counts the rows that differ), and the
figures compare equal work. Modes:

- one row at a time: batch size 1, what a plain loop over prompts and samples does;
- one prompt at a time: a prompt's k samples together (``num_return_sequences``-style);
- batched: ``batch_size = "auto"``, rows sorted by prompt length, as many as fit, decoded
  batch-invariantly (``pytest_novelty/generation/invariant.py``), as the gate does;
- plain: the same batches without batch invariance (what the gate did before it): the cost of
  invariance is batched against plain;
- generate: transformers' ``model.generate`` on the same batches (same rows, same sampling
  settings and stop strings, rows kept until the longest in the batch ends), the reference our
  decode loop is measured against.

Each mode prints its tokens/s and the time to finish every suite. On a GPU machine pass a ~1B
model folder with --model (``--modes batched,generate`` skips the slow one-row modes; --suites
with a chat prompt method if it is an instruct model); --vllm adds the vLLM backend on the same
prompts when vLLM is installed, and --served-url an OpenAI-compatible server (e.g. ``vllm
serve`` of the same folder).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_novelty.generation import Batch, GenerationStats, LoadSettings, generate
from pytest_novelty.generation.backends import open_generator
from pytest_novelty.infra.storage import default_cache_dir
from pytest_novelty.pipeline.runner import RunConfig, Runner
from pytest_novelty.suites.suite_file import load_suite
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


MODES = {"row": "one row at a time", "prompt": "one prompt at a time", "batched": "batched (auto)",
         "plain": "batched, not invariant"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo")
    parser.add_argument("--prompts", type=int, default=0, help="prompts per suite (default: all of the suite's)")
    parser.add_argument("--suites", default="story,poetry,tool,open")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto", choices=("auto", "bf16", "fp16", "fp32"))
    parser.add_argument("--modes", default="row,prompt,batched,plain,generate",
                        help="which of row,prompt,batched,plain,generate")
    parser.add_argument("--repeats", type=int, default=3, help="runs per mode; the median is shown (default 3)")
    parser.add_argument("--vllm", action="store_true", help="also time the vLLM backend (needs vllm and a GPU)")
    parser.add_argument("--served-url", help="also time an OpenAI-compatible server at this URL (…/v1)")
    parser.add_argument("--served-name", help="the model name the server knows (default: --model)")
    args = parser.parse_args()

    import torch

    from pytest_novelty.generation.hf import HFGenerator

    runner = Runner(RunConfig(model=args.model, cache_dir=default_cache_dir(), device=args.device))
    gen = HFGenerator(runner.model_path(), LoadSettings(device=args.device, dtype=args.dtype))
    runner._generator = gen  # render the suites' inputs with this generator
    names = args.suites.split(",")
    work = [_suite_inputs(runner, name, args.prompts) for name in names]
    rows = sum(len(texts) * settings.samples for texts, settings in work)  # type: ignore[attr-defined]
    print(
        f"model {args.model} on {gen.device} ({gen.model.dtype}, {torch.get_num_threads()} threads); suites "
        f"{args.suites}: {sum(len(t) for t, _ in work)} prompts, {rows} rows"
    )
    plain = HFGenerator(runner.model_path(), LoadSettings(device=args.device, dtype=args.dtype, batch_invariant=False))
    for each in (gen, plain):
        each.sample(Batch(work[0][0][:2], [0, 1], work[0][1]))  # type: ignore[arg-type]  # warm-up

    modes = {
        "row": lambda s: replace(s, batch_size=1),
        "prompt": lambda s: replace(s, batch_size=s.samples),
        "batched": lambda s: replace(s, batch_size=0),
        "plain": lambda s: replace(s, batch_size=0),
    }
    chosen = args.modes.split(",")
    figures: dict[str, GenerationStats] = {}
    answers: dict[str, list[list[list[str]]]] = {}
    for key in [m for m in chosen if m in modes]:
        label, batching = MODES[key], modes[key]
        runs = []
        for _ in range(args.repeats):
            total, per_suite = GenerationStats(), []
            answers[label] = []
            for texts, settings in work:
                _sync()
                out, stats = generate(plain if key == "plain" else gen, texts, batching(settings))
                _sync()
                total.seconds += stats.seconds
                total.tokens += stats.tokens
                total.batches += stats.batches
                per_suite.append(stats.seconds)
                answers[label].append(out)
            runs.append((total, per_suite))
        total, per_suite = sorted(runs, key=lambda r: r[0].seconds)[len(runs) // 2]
        figures[label] = total
        spread = f"{min(r[0].seconds for r in runs):.2f}-{max(r[0].seconds for r in runs):.2f} s"
        _line(label, total, f"{total.batches} batches; median of {len(runs)}, range {spread}", names, per_suite)
    if "generate" in chosen:
        total, per_suite = _model_generate(gen, work)
        figures["model.generate"] = total
        _line("model.generate", total, f"{total.batches} batches, same rows and batches", names, per_suite)
    answers.pop(MODES["plain"], None)  # its rows have seeds of their own (answers cached apart)
    if len(answers) > 1:
        flat = {label: [a for suite in out for prompt in suite for a in prompt] for label, out in answers.items()}
        reference = next(iter(flat.values()))
        differing = max(sum(x != y for x, y in zip(rows_, reference, strict=True)) for rows_ in flat.values())
        print(
            f"  answers that differ between modes: {differing} of {len(reference)} "
            "(rows are seeded one by one and decoded batch-invariantly: 0 expected)"
        )
    base = figures.get(MODES["row"])
    for label, figure in figures.items():
        if base is not None and label != MODES["row"]:
            speed_up = figure.tokens_per_second / base.tokens_per_second
            print(f"  speed-up of {label} over one row at a time: {speed_up:.1f}x")
    if MODES["batched"] in figures and MODES["plain"] in figures:
        cost = figures[MODES["plain"]].tokens_per_second / max(figures[MODES["batched"]].tokens_per_second, 1e-9) - 1
        print(f"  batch invariance costs {100 * cost:.1f} % of the tokens/s of plain batching")
    if MODES["batched"] in figures and "model.generate" in figures:
        ratio = figures[MODES["batched"]].tokens_per_second / max(figures["model.generate"].tokens_per_second, 1e-9)
        print(f"  our decode loop / model.generate: {ratio:.2f}x tokens/s")
    if args.vllm:
        _vllm(runner.model_path(), work, args.device, names)
    if args.served_url:
        _served(args.served_name or args.model, args.served_url, work, names)


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _line(label: str, total: GenerationStats, note: str, names: list[str], per_suite: list[float]) -> None:
    suites = ", ".join(f"{n} {s:.2f}s" for n, s in zip(names, per_suite, strict=True))
    print(
        f"  {label:22s} {total.tokens:7d} tokens in {total.seconds:7.2f} s = {total.tokens_per_second:8.1f} "
        f"tokens/s ({note}); suites: {suites}"
    )


def _model_generate(gen: Any, work: list[tuple[list[str], Any]]) -> tuple[GenerationStats, list[float]]:
    """transformers' ``model.generate`` on the batches our loop would use: same rows, sampling, stops."""
    import torch

    from pytest_novelty.generation import plan_batches

    tok, model = gen.tokenizer, gen.model
    total, per_suite = GenerationStats(), []
    torch.manual_seed(0)
    for texts, settings in work:
        rows = [t for t in texts for _ in range(settings.samples)]
        counts = dict(zip(texts, gen.token_counts(texts), strict=True))
        plan = plan_batches([counts[t] for t in rows], lambda n, s=settings: gen.max_rows(n, s), None)
        _sync()
        start = time.perf_counter()
        for batch in plan:
            enc = tok([rows[i] for i in batch], return_tensors="pt", padding=True, add_special_tokens=False)
            enc = enc.to(gen.device)
            sampling: dict[str, Any] = {"do_sample": False}
            if settings.temperature > 0:
                sampling = {"do_sample": True, "temperature": settings.temperature, "top_p": settings.top_p,
                            "top_k": settings.top_k or None}  # fmt: skip
            with torch.inference_mode():
                out = model.generate(
                    **enc, **sampling, max_new_tokens=settings.max_new_tokens, pad_token_id=tok.pad_token_id,
                    eos_token_id=sorted(gen.eos_ids), stop_strings=list(settings.stop) or None, tokenizer=tok,
                )  # fmt: skip
            for row in out[:, enc["input_ids"].shape[1] :].tolist():
                total.tokens += next((i for i, t in enumerate(row) if t in gen.eos_ids), len(row))
            total.batches += 1
        _sync()
        per_suite.append(time.perf_counter() - start)
    total.seconds = sum(per_suite)
    return total, per_suite


def _timed(gen: Any, work: list[tuple[list[str], Any]]) -> tuple[GenerationStats, list[float]]:
    total, per_suite = GenerationStats(), []
    for texts, settings in work:
        start = time.perf_counter()
        _, stats = generate(gen, texts, replace(settings, batch_size=0))
        per_suite.append(time.perf_counter() - start)
        total.tokens += stats.tokens
        total.batches += stats.batches
    total.seconds = sum(per_suite)
    return total, per_suite


def _vllm(model: str, work: list[tuple[list[str], Any]], device: str, names: list[str]) -> None:
    try:
        vllm = open_generator(model, device=device, backend="vllm")
    except Exception as exc:
        print(f"  vLLM: not available ({exc})")
        return
    total, per_suite = _timed(vllm, work)
    _line("vLLM", total, "one call per suite", names, per_suite)


def _served(name: str, url: str, work: list[tuple[list[str], Any]], names: list[str]) -> None:
    served = open_generator(f"openai:{name}", base_url=url)
    total, per_suite = _timed(served, work)
    _line(f"served ({url})", total, f"{served.concurrency} requests in flight", names, per_suite)


if __name__ == "__main__":
    main()
