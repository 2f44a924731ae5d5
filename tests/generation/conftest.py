"""Fixtures of the generation tests: a real ``transformers serve`` on 127.0.0.1, and a small gate suite."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder

STORY_PROMPTS = story_prompts(4)
STORY_SUITE = suite_toml(max_new_tokens=12, batch_size=None, thresholds=[("originality@4", 0.0), ("quality", 0.0)])


def write_story_suite(folder: Path) -> Path:
    """A folder with one story suite over four prompts, both thresholds at 0 (so the gate passes)."""
    return write_story_suite_folder(folder, STORY_PROMPTS, STORY_SUITE)


@dataclass
class Served:
    """A running ``transformers serve``: its ``/v1`` URL, the model it serves, and its request log."""

    url: str
    model: str
    log: Path

    def requests(self, route: str) -> int:
        """How many requests the server has answered on ``route`` (from its access log)."""
        return sum(f'"POST {route} HTTP' in line for line in self.log.read_text(errors="replace").splitlines())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(checkpoint: Path, log: Path, *, wait: float = 120.0) -> tuple[subprocess.Popen[bytes], Served]:
    """Start ``transformers serve CHECKPOINT`` on a free port. Without the serving extra the test skips;
    with it, a server that does not start is a failure (the test extra installs it, so it must run)."""
    exe = shutil.which("transformers", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("transformers serve is not installed (pip install 'pytest-novelty[serving]')")
    port = _free_port()
    args = [exe, "serve", str(checkpoint), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    with log.open("wb") as out:
        proc = subprocess.Popen([*args, "--log-level", "info"], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            pytest.fail(f"transformers serve exited with status {proc.returncode}: {' | '.join(tail)}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return proc, Served(url, str(checkpoint), log)
        except urllib.error.HTTPError:  # it answers (some versions fail to list models without a hub cache)
            return proc, Served(url, str(checkpoint), log)
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    proc.wait(10)
    pytest.fail(f"transformers serve did not answer within {wait:.0f} s")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@pytest.fixture(scope="session")
def served(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``transformers serve`` serving the tiny checkpoint on 127.0.0.1 for the whole session."""
    proc, server = start_server(tiny_checkpoint, tmp_path_factory.mktemp("serve") / "serve.log")
    try:
        yield server
    finally:
        stop_server(proc)
