"""The run configuration: session-wide settings from the command line (they override the suite files).

:meth:`RunConfig.from_options` is the one place it is built, from pytest's options or the
``pytest-novelty run`` arguments: both are parsed from :data:`pytest_novelty.pipeline.options.OPTIONS`,
whose ``field`` entries name the settings below.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_novelty.infra.progress import QUIET, ProgressSink

MAIN = "main"
"""The worker name of a run that is no pytest-xdist worker (the command line, a pytest session
without workers, the xdist controller)."""


@dataclass
class RunConfig:
    """Session-wide settings from the command line (they override the suite files)."""

    model: str
    cache_dir: Path
    device: str = "auto"
    originality: str | None = None
    judge: str | None = None
    judge_base_url: str | None = None
    trust_remote_code: bool = False
    seed: int | None = None
    generator: str = "hf"
    gpus_per_worker: int = 1  # GPUs one model is spread over
    base_model: str | None = None  # the base checkpoint of a PEFT adapter folder (else its config's)
    model_base_url: str | None = None  # the endpoint of a served model (--model openai:NAME)
    model_revision: str | None = None  # the served weights' revision, for the cache key
    worker: str = MAIN  # the pytest-xdist worker running the suites (for the log and the report)
    shard: str | None = None  # --novelty-shard K/N (or auto): this run does one shard's part of the gate
    fill_missing_shards: bool = False  # a merge run generates what the shards' caches did not bring
    front: str = "pytest"  # the front end ("pytest" or "cli"): how a message spells an option
    progress: ProgressSink = QUIET
    """Where progress bars are drawn; the run's lines are notices (:func:`~pytest_novelty.infra.progress.notice`),
    which go where the front end sends them."""

    @classmethod
    def from_options(cls, options: Any, *, model: str, cache_dir: Path, **settings: Any) -> RunConfig:
        """The configuration for ``model`` from parsed options (``novelty_device``, ``novelty_judge``, …).

        An option the namespace lacks keeps the field's default; ``settings`` (``worker``,
        ``progress``, ``front``) are passed through as given.
        """
        from pytest_novelty.pipeline.options import OPTIONS

        given = {o.field: getattr(options, o.dest, None) for o in OPTIONS if o.field}
        found = {name: value for name, value in given.items() if value is not None}
        return cls(model=model, cache_dir=cache_dir, **found, **settings)
