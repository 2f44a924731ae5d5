"""What the Trainer callback costs the training loop: N steps with no gate, with ``wait=True`` and with ``wait=False``.

    python benchmarks/trainer_wait.py [--steps 48] [--save-every 16] [--prompts 3] [--samples 1] [--log]

Trains the tests' tiny GPT-2 (32 dimensions, a byte-level BPE of 300 tokens, built here) on the
CPU, saving every ``--save-every`` steps, three times: without the callback, with
``NoveltyGateCallback()`` (each save waits for its gate) and with ``wait=False`` (the gates run
in the background, one at a time, on the CPU; ``train()`` waits for the last ones at its end).
Each mode has a cache of its own, so every gate generates and scores. The gate is a story suite
of ``--prompts`` prompts and ``--samples`` samples with the offline ``rules`` judge and an
infini-gram index of the tiny corpus. Prints, per mode: the time from the first step to the
last (what training itself took), the longest gap between two steps, the time ``train()`` took
in all (with ``wait=False``, the wait for the last gates at the end), and the gates' times. On
a CPU the background gates share the cores with training, so the steps slow down while a gate
runs; with the gate on a device of its own (``device="cuda:1"``) they do not.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tests' tiny checkpoint, suite and dataset

from tests.conftest import build_tiny_checkpoint, small_corpus  # noqa: E402
from tests.integrations.training import StepClock, make_trainer  # noqa: E402
from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder  # noqa: E402


def train(mode: str, root: Path, checkpoint: Path, suites: Path, index: Path, options: Any) -> dict[str, Any]:
    """One training run of ``options.steps`` steps in ``mode`` (``none``, ``wait=True``, ``wait=False``)."""
    from pytest_novelty.integrations import NoveltyGateCallback

    folder = root / mode.replace("=", "-")
    if mode == "none":
        gate: Any = _NoGate()
    else:
        gate = NoveltyGateCallback(suites=suites, originality=f"infini-gram:{index}", cache=folder / "cache",
                                   device="cpu", wait=mode == "wait=True")  # fmt: skip
    trainer = make_trainer(checkpoint, folder / "out", gate, max_steps=options.steps, save_steps=options.save_every,
                           logging_steps=options.steps)  # fmt: skip
    clock = StepClock(gate)
    trainer.add_callback(clock.callback())
    start = time.monotonic()
    trainer.train()
    total = time.monotonic() - start
    times = [t for _, t, _ in clock.ends]
    return {
        "mode": mode,
        "steps": times[-1] - times[0],
        "longest_gap": max(b - a for a, b in itertools.pairwise(times)),
        "train": total,
        "gates": [round(r.seconds, 1) for r in getattr(gate, "history", [])],
    }


class _NoGate:
    """Stands where the callback would: attaches nothing, gates nothing."""

    def __init__(self) -> None:
        self.history: list[Any] = []

    def attach(self, trainer: Any) -> Any:
        return trainer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--save-every", type=int, default=16)
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--log", action="store_true", help="show the callback's own lines (its logger at INFO)")
    options = parser.parse_args()
    if options.log:
        import logging

        logging.basicConfig(format="%(name)s: %(message)s")
        logging.getLogger("pytest_novelty").setLevel(logging.INFO)
    os.environ.setdefault("PYTHONPATH", str(REPO))
    from pytest_novelty.scoring.originality import build_index

    with tempfile.TemporaryDirectory(prefix="novelty-trainer-bench-") as tmp:
        root = Path(tmp)
        corpus = small_corpus()
        checkpoint = build_tiny_checkpoint(root / "tiny-model", corpus)
        (root / "corpus.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in corpus))
        index = root / "idx"
        build_index([root / "corpus.jsonl"], index, tokenizer="words", progress=False)
        suite = suite_toml(samples=options.samples, thresholds=[("originality@4", 0.0), ("quality", 0.0)])
        suites = write_story_suite_folder(root / "suites", story_prompts(options.prompts), suite)
        rows = [train(mode, root, checkpoint, suites, index, options) for mode in ("none", "wait=True", "wait=False")]
    load = os.getloadavg()
    print(f"{options.steps} steps, a save every {options.save_every}, gate: {options.prompts} prompts x "
          f"{options.samples} samples on the CPU; load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")  # fmt: skip
    print(f"{'mode':<11} {'steps':>8} {'longest gap':>12} {'train()':>8}  gates (s)")
    for row in rows:
        print(f"{row['mode']:<11} {row['steps']:>7.1f}s {row['longest_gap']:>11.1f}s {row['train']:>7.1f}s  "
              f"{', '.join(map(str, row['gates'])) or '-'}")  # fmt: skip
    if options.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
