"""Warm caches of the tiny checkpoint's gate, filled once and copied by the tests that start from one.

A cold gate of the tiny checkpoint costs a process its torch and transformers imports, the model's
load and the generation (about 9 s here); the same gate on a cache that holds every answer and
score imports none of them (about 1 s). A test whose point is not the generation (a report folder
that fills up, a worker that crashes, a tail file) starts from a private copy of a cache filled
once (:func:`copy_warm`), and behaves as it did after a cold run of its own.

The cache's keys do not depend on the suite folder's path, nor on a suite's thresholds or gate:
a cache filled on the plugin tests' story suite serves every test whose suite generates with the
same settings on the same prompts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin.conftest import PROMPTS, SUITE
from tests.suite_text import write_story_suite_folder

REPO = Path(__file__).resolve().parents[1]

_FILLED: dict[tuple[Path, Path], Path] = {}


def fill_cache(cache: Path, checkpoint: Path, index: Path, suites: Path) -> Path:
    """``cache`` filled by ``pytest-novelty run`` of ``checkpoint`` on every suite in ``suites``
    (originality with the infini-gram ``index``), in a process of its own; returns ``cache``."""
    command = [sys.executable, "-m", "pytest_novelty.cli", "run", "--model", str(checkpoint), "--suites", str(suites),
               "--cache", str(cache), "--originality", f"infini-gram:{index}"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return cache


def story_cache(tmp_path_factory: pytest.TempPathFactory, checkpoint: Path, index: Path) -> Path:
    """A cache holding the tiny checkpoint's gate on the plugin tests' story suite (the one
    ``suite_dir`` writes), filled once per process; copy it (:func:`copy_warm`) before writing.

    Once per process, not once per run: it also holds the memo of this process's checkpoint and
    index paths (another xdist worker builds its own), which a test of a full disk counts on."""
    key = (checkpoint, index)
    if key not in _FILLED:
        folder = tmp_path_factory.mktemp("warm-cache")
        suites = write_story_suite_folder(folder / "gate-suites", PROMPTS, SUITE)
        _FILLED[key] = fill_cache(folder / "cache", checkpoint, index, suites)
    return _FILLED[key]


def copy_warm(warm: Path, cache: Path, *, without: tuple[str, ...] = ()) -> Path:
    """The files of the warm cache ``warm`` copied into ``cache`` (a folder, or a mount, that may
    exist already), leaving out its top-level folders named in ``without``; returns ``cache``."""
    shutil.copytree(warm, cache, symlinks=True, dirs_exist_ok=True, ignore=lambda folder, names: [
        name for name in names if Path(folder) == warm and name in without])  # fmt: skip
    return cache


def cache_of(novelty_args: list[str]) -> Path:
    """The cache folder ``novelty_args`` name (``--novelty-cache=DIR``)."""
    (cache,) = [a.split("=", 1)[1] for a in novelty_args if a.startswith("--novelty-cache=")]
    return Path(cache)
