"""Rows are kept the moment they finish: a kill in the middle of a batch loses only the rows in flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_novelty.generation import generate
from pytest_novelty.generation.backends import open_generator
from pytest_novelty.suites.schema import GenerationSettings

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="needs SIGKILL (POSIX)")]

REPO = Path(__file__).resolve().parents[2]
TEXTS = [f"Story {i}: {name} saw a kite." for i, name in enumerate(["Lily", "Tom", "Mia", "Ben"] * 6)]
# One batch of 48 rows. The untrained checkpoint ends a row with its end-of-text token now and
# then, so rows finish at different steps while the longest run to the limit.
SETTINGS = GenerationSettings(samples=2, max_new_tokens=100, batch_size=64, seed=3)

_RUN = """
import sys, time
from pathlib import Path
import torch
torch.set_num_threads(1)
from pytest_novelty.generation import generate
from pytest_novelty.generation.backends import open_generator
from pytest_novelty.suites.schema import GenerationSettings
gen = open_generator(sys.argv[1], device="cpu")
model = gen.model
forward = model.forward
def slow_forward(*args, **kwargs):  # a bigger model's pace: the batch runs long enough to be killed
    time.sleep(0.05)
    return forward(*args, **kwargs)
model.forward = slow_forward
texts = [f"Story {i}: {name} saw a kite." for i, name in enumerate(["Lily", "Tom", "Mia", "Ben"] * 6)]
settings = GenerationSettings(samples=2, max_new_tokens=100, batch_size=64, seed=3)
generate(gen, texts, settings, cache_dir=Path(sys.argv[2]))
"""


def test_a_kill_mid_batch_keeps_the_finished_rows(tmp_path: Path, tiny_checkpoint: Path) -> None:
    cache = tmp_path / "generations"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", _RUN, str(tiny_checkpoint), str(cache)], env=env)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None and not list(cache.rglob("*.json")):
        time.sleep(0.01)
    time.sleep(0.5)  # a few more rows end
    assert proc.poll() is None, "the batch ended before the kill: nothing is shown"
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    generator = open_generator(str(tiny_checkpoint), device="cpu")
    resumed, stats = generate(generator, TEXTS, SETTINGS, cache_dir=cache)
    total = len(TEXTS) * SETTINGS.samples
    assert 0 < stats.cached_rows < total  # the rows that had finished were kept, the others were not
    assert stats.rows == total - stats.cached_rows
    uninterrupted, _ = generate(generator, TEXTS, SETTINGS)
    assert resumed == uninterrupted  # and they are exactly the rows an uninterrupted run gives
