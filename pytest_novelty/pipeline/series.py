"""Checkpoint series: the checkpoints of one training run, found on disk in step order.

``--model-series RUN_DIR`` (pytest) or ``pytest-novelty run --model-series RUN_DIR`` takes the
subfolders named ``checkpoint-<step>`` (the Hugging Face Trainer layout), or the folders a quoted
glob matches (their step is the number their name ends with). The newest checkpoint is the
candidate and is gated with the usual cases; every earlier one is generated and scored on the
same prompts and settings (each through the usual cache, so a nightly run only scores new
checkpoints). How a series is compared and reported is :mod:`pytest_novelty.gate.series`.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_novelty.infra.errors import ConfigError

CHECKPOINT_RE = re.compile(r"checkpoint-(\d+)")
_TRAILING_NUMBER = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a series: its training step and its folder."""

    step: int
    path: str

    @property
    def name(self) -> str:
        """The checkpoint's folder name (``checkpoint-400``)."""
        return Path(self.path).name


def find_checkpoints(spec: str) -> list[Checkpoint]:
    """The checkpoints of a run folder (``checkpoint-<step>`` subfolders) or of a glob, in step order.

    Raises ``ConfigError`` naming the folder or pattern when nothing matches, when a matched
    folder's name has no step number, or when two folders share a step.
    """
    expanded = os.path.expanduser(spec)
    if any(ch in expanded for ch in "*?["):
        folders = [Path(p) for p in sorted(glob.glob(expanded)) if Path(p).is_dir()]
        if not folders:
            raise ConfigError("the pattern matches no folder; quote it so the shell leaves it to pytest-novelty",
                              path=spec, field="--model-series")
    else:
        run = Path(expanded)
        if not run.is_dir():
            raise ConfigError("run folder not found", path=spec, field="--model-series")
        folders = sorted(p for p in run.iterdir() if p.is_dir() and CHECKPOINT_RE.fullmatch(p.name))
        if not folders:
            raise ConfigError("no checkpoint-<step> subfolders; give the run folder the trainer wrote, "
                              "or a quoted glob such as 'run/step_*'", path=spec, field="--model-series")
    by_step: dict[int, Path] = {}
    for folder in folders:
        found = _TRAILING_NUMBER.search(folder.name)
        if found is None:
            raise ConfigError(f"cannot read a step from {folder.name!r}: a checkpoint folder's name must end "
                              "with its step number", path=folder, field="--model-series")
        step = int(found.group(1))
        if step in by_step:
            raise ConfigError(f"step {step} is both {by_step[step].name} and {folder.name}", path=spec,
                              field="--model-series")
        by_step[step] = folder
    return [Checkpoint(step, str(by_step[step])) for step in sorted(by_step)]
