"""Checkpoint series: the checkpoints of one training run, found on disk in step order.

``--model-series RUN_DIR`` (pytest) or ``pytest-novelty run --model-series RUN_DIR`` takes the
entries named ``checkpoint-<step>`` (the Hugging Face Trainer layout), or every entry a quoted
glob matches (its step is the number its name ends with). The newest checkpoint is the
candidate and is gated with the usual cases; every earlier one is generated and scored on the
same prompts and settings (each through the usual cache, so a nightly run only scores new
checkpoints). How a series is compared and reported is :mod:`pytest_novelty.gate.series`.

A series of answers generated elsewhere, ``--model-series answers:RUN_DIR`` (or ``answers:`` and
a quoted glob), is read the same way, with one source of answers per checkpoint: an entry is a
file (``checkpoint-<step>.jsonl``, its step read before the suffix) or a folder of answer files
(``checkpoint-<step>/``), and each becomes ``answers:ENTRY`` (with the spec's ``?options``), the
model of its step, gated and scored as ``--model answers:ENTRY`` is.

A run folder is read exactly: every entry that matches the layout is a checkpoint of the series,
gated or refused by name (:func:`find_checkpoints` refuses what is not a folder, :func:`check_series`
what is not a whole checkpoint). Nothing is left out without a word, so the candidate is always the
newest entry and a series never has a silent hole.
"""

from __future__ import annotations

import errno
import glob
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_novelty.generation.backends import ANSWERS_PREFIX
from pytest_novelty.infra.errors import ConfigError

CHECKPOINT_RE = re.compile(r"checkpoint-(\d+)")
_TRAILING_NUMBER = re.compile(r"(\d+)$")
OPTION = "--model-series"

TRAINER_STATE = "trainer_state.json"
"""The file the Trainer writes last when it saves a checkpoint: after the weights, the tokenizer,
``training_args.bin``, the optimizer, the scheduler and the RNG states
(``Trainer._save_checkpoint`` in transformers 4 and 5 writes them straight into ``checkpoint-<step>``)."""
TRAINER_FILES = ("training_args.bin", "optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state.pth")
"""Files only the Trainer writes into a checkpoint: with one of them and no :data:`TRAINER_STATE`,
its save has not finished (or was interrupted)."""


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a series: its training step and its folder."""

    step: int
    path: str

    @property
    def name(self) -> str:
        """The checkpoint's folder name (``checkpoint-400``); for answers, its entry's name, options left out."""
        return Path(self.path.partition("?")[0] if self.answers else self.path).name

    @property
    def answers(self) -> bool:
        """Whether the checkpoint is answers generated elsewhere (``answers:ENTRY``)."""
        return self.path.startswith(ANSWERS_PREFIX)


def find_checkpoints(spec: str) -> list[Checkpoint]:
    """The checkpoints of a run folder (``checkpoint-<step>`` entries) or of a glob, in step order.

    Every entry that matches is a checkpoint of the series: one that is not a folder (a dangling
    symbolic link, a file) raises ``ConfigError`` naming it, as do nothing matching, a matched name
    without a step number, and two entries sharing a step. What is inside each folder is
    :func:`check_series`'s to check. With ``answers:`` (module doc) an entry may be a file of answers
    too, and its step is read from its name without ``.jsonl``.
    """
    answers = spec.strip().startswith(ANSWERS_PREFIX)
    given, mark, options = spec.strip()[len(ANSWERS_PREFIX):].rpartition("?") if answers else ("", "", spec)
    if "=" not in options:  # no ``?name=value``: a ``?`` of a glob, or none at all
        given, mark, options = given + mark + options, "", ""
    expanded = os.path.expanduser(given)
    pattern = any(ch in expanded for ch in "*?[")
    if pattern:
        entries = [Path(p) for p in sorted(glob.glob(expanded))]
        if not entries:
            raise ConfigError("the pattern matches no folder; quote it so the shell leaves it to pytest-novelty",
                              path=spec, field=OPTION)
    else:
        run = Path(expanded)
        if not run.is_dir():
            raise ConfigError("run folder not found", path=spec, field=OPTION)
        try:
            entries = sorted(p for p in run.iterdir() if CHECKPOINT_RE.fullmatch(_stem(p, answers)))
        except OSError as exc:
            raise ConfigError(f"the run folder cannot be read: {(exc.strerror or str(exc)).lower()}; make it "
                              "readable, or give another", path=spec, field=OPTION) from None
        if not entries:
            what = "checkpoint-<step>.jsonl files or checkpoint-<step> folders" if answers else \
                "checkpoint-<step> subfolders"  # fmt: skip
            raise ConfigError(f"no {what}; give the run folder the trainer wrote, or a quoted glob such as "
                              "'run/step_*'", path=spec, field=OPTION)  # fmt: skip
    by_step: dict[int, Path] = {}
    for entry in entries:
        found = _TRAILING_NUMBER.search(_stem(entry, answers))
        if found is None:
            raise ConfigError(f"cannot read a step from {entry.name!r}: a checkpoint folder's name must end "
                              "with its step number", path=entry, field=OPTION)
        _check_entry(entry, pattern, files=answers)
        step = int(found.group(1))
        if step in by_step:
            raise ConfigError(f"step {step} is both {by_step[step].name} and {entry.name}", path=spec, field=OPTION)
        by_step[step] = entry
    prefix = ANSWERS_PREFIX if answers else ""
    return [Checkpoint(step, f"{prefix}{by_step[step]}{mark}{options}") for step in sorted(by_step)]


def _stem(entry: Path, answers: bool) -> str:
    """The name a step is read from: an answer file's without ``.jsonl``."""
    return entry.name.removesuffix(".jsonl") if answers else entry.name


def _check_entry(entry: Path, pattern: bool, *, files: bool = False) -> None:
    """A matched entry is a folder (or a link to one), or with ``files`` a file of answers; anything
    else is refused by name."""
    if entry.is_dir() or (files and entry.is_file()):
        return
    matched = "the pattern matches it" if pattern else "its name makes it a checkpoint of the run"
    fix = "narrow the pattern, or remove it" if pattern else "remove it, or rename it"
    if entry.is_symlink():
        target = os.readlink(entry)
        what = "a symbolic link to a file, not a folder"
        if not entry.exists():
            what, fix = "a dangling symbolic link", "restore its target, or remove the link"
            if _loops(entry):
                what = "a symbolic link that leads back to itself"
        raise ConfigError(f"{what} (to {target}); {matched}: {fix}", path=entry, field=OPTION)
    raise ConfigError(f"not a folder; {matched}: {fix}", path=entry, field=OPTION)


def _loops(link: Path) -> bool:
    """Whether a symbolic link never reaches a file or folder because it leads back to itself."""
    try:
        link.resolve(strict=True)
    except RuntimeError:  # Python 3.11-3.12: "Symlink loop"
        return True
    except OSError as exc:  # Python 3.13: ELOOP
        return exc.errno == errno.ELOOP
    return False


def check_series(
    checkpoints: Sequence[Checkpoint], *, trust_remote_code: bool = True, base_model: str | None = None
) -> None:
    """Every checkpoint of a series is a whole checkpoint, before anything loads: refused by name
    (``ConfigError`` naming its folder and ``--model-series``) when it is not.

    Each folder gets the checks a ``--model`` folder gets
    (:func:`~pytest_novelty.generation.checkpoint.check_checkpoint`: empty, no config, no tokenizer, no
    weights, weights still being written or cut off, shards its index names but the folder lacks),
    and one of a run folder: a checkpoint holding the Trainer's own files but not
    :data:`TRAINER_STATE` is a save the Trainer has not finished. ``base_model`` is
    ``--base-model``, for a series of adapter folders.
    """
    from pytest_novelty.generation.checkpoint import check_checkpoint

    for checkpoint in checkpoints:
        if checkpoint.answers:  # files of answers: checked as --model answers:FILE is, when the run checks its models
            continue
        check_checkpoint(checkpoint.path, trust_remote_code=trust_remote_code, base_model=base_model, option=OPTION)
        folder = Path(checkpoint.path)  # readable now: the checks above listed it
        trainer = [name for name in TRAINER_FILES if (folder / name).is_file()]
        if trainer and not (folder / TRAINER_STATE).is_file():
            raise ConfigError(
                f"the Trainer's save has not finished: it holds {trainer[0]} but no {TRAINER_STATE}, which the "
                "Trainer writes last; wait for the save, or remove the folder if training stopped during it",
                path=folder,
                field=OPTION,
            )
