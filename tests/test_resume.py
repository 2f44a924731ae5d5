"""A run killed with SIGKILL during generation resumes and ends exactly like an uninterrupted one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_novelty.cli import main
from tests.suite_text import suite_toml

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="needs SIGKILL (POSIX)")]

SUITE = suite_toml(max_new_tokens=48, batch_size=1, thresholds=[("novelty@5", 0.0)])


def _command(folder: Path, checkpoint: Path, index: Path, cache: Path, output: Path) -> list[str]:
    return [
        sys.executable, "-m", "pytest_novelty.cli", "run", "--model", str(checkpoint), "--suites", str(folder),
        "--cache", str(cache), "--originality", f"infini-gram:{index}", "--device", "cpu", "--output", str(output),
    ]


def test_sigkill_during_generation_then_resume(tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path) -> None:
    folder = tmp_path / "suites"
    folder.mkdir()
    prompts = [{"id": f"p{i}", "text": f"Story number {i}: Lily saw a {w}."} for i, w in enumerate("abcdefghijkl")]
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    (folder / "story.toml").write_text(SUITE)

    # The uninterrupted run, in this process (only the interrupted one needs a process of its own).
    reference = tmp_path / "reference.json"
    assert main(_command(folder, tiny_checkpoint, tiny_index, tmp_path / "cache-a", reference)[3:]) == 0

    cache = tmp_path / "cache-b"
    output = tmp_path / "resumed.json"
    proc = subprocess.Popen(_command(folder, tiny_checkpoint, tiny_index, cache, output))
    deadline = time.monotonic() + 300
    batches = cache / "generations"
    while time.monotonic() < deadline and len(list(batches.rglob("*.json"))) < 3:
        if proc.poll() is not None:
            pytest.fail("the run finished before it could be interrupted")
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(list(batches.rglob("*.json")))
    assert 3 <= done_before < len(prompts), "the kill must land during generation"

    subprocess.run(_command(folder, tiny_checkpoint, tiny_index, cache, output), check=True)
    assert json.loads(output.read_text()) == json.loads(reference.read_text())
