"""Wall time of a checkpoint series under ``-n 0`` and ``-n N``: the earlier checkpoints spread
over the workers, one (checkpoint, suite) pair per unit of work.

    python benchmarks/series_workers.py [--checkpoints 4] [--workers 2] [-k story]

Makes a run folder of ``--checkpoints`` checkpoints from the demo: the demo's early and final
weights, and between them copies of the final weights with a little noise of their own (every
checkpoint has other weights, so every one is generated and scored). Then runs
``pytest --model-series RUN`` once in one process and once with ``-n N``, each on an empty cache
(the demo's index serves originality), and prints both wall times, which worker scored each
checkpoint, and whether the two series in ``report.json`` are the same. On a machine with one
GPU per worker the speed-up approaches the number of workers; on a CPU the workers share its
cores, so what this shows there is mostly that the work is spread and the series agree.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from pathlib import Path

from e2e import run_pytest  # this folder's own: python benchmarks/series_workers.py puts it on the path

from pytest_novelty.infra.storage import default_cache_dir
from pytest_novelty.pipeline import demo


def noisy_copy(source: Path, dest: Path, seed: int, scale: float = 2e-3) -> None:
    """``source``'s weights plus Gaussian noise of ``scale`` times each tensor's own spread."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(source)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in model.parameters():
            noise = torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype)
            tensor.add_(noise * scale * float(tensor.std() if tensor.numel() > 1 else 1.0))
    model.save_pretrained(dest)
    AutoTokenizer.from_pretrained(source).save_pretrained(dest)


def make_run(folder: Path, built: Path, checkpoints: int) -> list[int]:
    """The run folder: step 100 the early demo, the last step the final demo, noisy copies between."""
    steps = [100 * (i + 1) for i in range(checkpoints)]
    (folder / f"checkpoint-{steps[0]}").symlink_to(built / "demo-early")
    (folder / f"checkpoint-{steps[-1]}").symlink_to(built / "demo")
    for i, step in enumerate(steps[1:-1], start=1):
        noisy_copy(built / "demo", folder / f"checkpoint-{step}", seed=i)
    return steps


def run(run_dir: Path, index: Path, out: Path, select: str, *extra: str) -> tuple[float, str]:
    return run_pytest(f"--model-series={run_dir}", f"--originality=infini-gram:{index}",
                      f"--novelty-cache={out / 'cache'}", f"--novelty-report={out / 'report'}",
                      "-p", "no:cacheprovider", "-k", select, *extra)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=4, help="checkpoints in the run, at least 2 (default 4)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers of the second run (default 2)")
    parser.add_argument("-k", dest="select", default="story", help="the suites to run, as pytest -k (default story)")
    args = parser.parse_args()
    built = demo.ensure_demo(default_cache_dir())
    with tempfile.TemporaryDirectory(prefix="novelty-series-") as tmp:
        root = Path(tmp)
        run_dir = root / "run"
        run_dir.mkdir()
        steps = make_run(run_dir, built, max(2, args.checkpoints))
        one, _ = run(run_dir, built / "index", root / "one", args.select)
        many, log = run(run_dir, built / "index", root / "many", args.select, "-n", str(args.workers))
        same = [json.loads((root / name / "report" / "report.json").read_text())["series"] for name in ("one", "many")]
    print(f"series of {len(steps)} checkpoints (steps {', '.join(map(str, steps))}), suites -k {args.select!r}; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"  -n 0: {one:6.1f} s")
    print(f"  -n {args.workers}: {many:6.1f} s  ({many / one:.2f} x the one-process time)")
    for worker, suite, name in re.findall(r"\[novelty (gw\d+)\] (\S+) @ (checkpoint-\d+):", log):
        print(f"    {worker} scored {name} on {suite}")
    print("  the two series are", "the same" if same[0] == same[1] else "DIFFERENT")


if __name__ == "__main__":
    main()
