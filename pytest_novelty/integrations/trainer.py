"""Gate while training: a ``transformers.TrainerCallback`` that gates every checkpoint the Trainer saves.

::

    from pytest_novelty.integrations import NoveltyGateCallback

    trainer = Trainer(model=model, args=TrainingArguments(..., save_steps=500, report_to=["tensorboard"]), ...)
    NoveltyGateCallback(suites="suites/", originality="infini-gram:corpus-index", stop_on_failure=True).attach(trainer)
    trainer.train()

On each save (every ``every``-th one) the callback runs the gate on the saved checkpoint in a
separate process, ``python -m pytest --novelty-model=OUTPUT/checkpoint-N ...``: the same code path
as a user's run, sharing the cache, while the training process keeps its memory and devices (it
waits for the gate). Once an earlier checkpoint was gated, the gate runs as a series instead
(``--novelty-model-series`` over the checkpoints gated so far, the new one newest), so a suite
with ``[gate] against = "series-best"`` compares the new checkpoint with the best earlier one; the
earlier checkpoints come from the cache. A later ``pytest --model-series OUTPUT`` over the same
output folder and cache then generates nothing and reports the same numbers.

The results reach the Trainer's own ``report_to`` integrations through ``Trainer.log`` at the
checkpoint's step: the scalars of :class:`~pytest_novelty.integrations.run.TrackedRun` (every
gated metric, quality, originality@n, coverage@n and unscored per suite, ``novelty/passed`` and
the case counts); the Trainer's loggers add their own prefix (``train/``). Hence
:meth:`NoveltyGateCallback.attach`, which gives the callback the Trainer to log through. Each
gate's report (``report.json``, ``report.md``, plots) and output are kept in
``OUTPUT/novelty-gate/checkpoint-N/``.

With ``stop_on_failure`` a checkpoint that fails its gate (exit status 1: a threshold broken or a
significant regression) ends training after that save. A harness error (exit status 8: no verdict)
is logged as a warning and never stops training; bad input (exit status 4, or a gate that ran no
case) raises :class:`~pytest_novelty.infra.errors.ConfigError` at once, since every later
checkpoint would fail the same way. The gate runs on the main process only
(``state.is_world_process_zero``); ``stop_on_failure`` is meant for single-process training.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS, ConfigError, last_line
from pytest_novelty.integrations.run import TrackedRun

logger = logging.getLogger(__name__)

#: Where each gate's report and output go, inside the Trainer's output folder.
GATE_FOLDER = "novelty-gate"


@dataclass(frozen=True)
class GateResult:
    """One gated checkpoint: its step and folder, the gate's exit status, its report, and the time."""

    step: int
    checkpoint: Path
    status: int
    seconds: float
    report: Path
    run: TrackedRun | None
    """The gate's results; None when it reached no verdict (no report)."""
    message: str = ""

    @property
    def failed(self) -> bool:
        """Whether the checkpoint failed its gate (exit status 1), not a harness error."""
        return self.status == 1

    @property
    def error(self) -> bool:
        return self.status == HARNESS_EXIT_STATUS

    def logs(self) -> dict[str, float]:
        """The values logged through the Trainer at the checkpoint's step."""
        if self.run is None:
            return {}
        return {**self.run.gated.flat(), **self.run.summary_scalars()}


class NoveltyGateCallback(TrainerCallback):
    """Gates each checkpoint the Trainer saves (see the module's docs).

    ``suites``, ``originality``, ``judge``, ``cache`` and ``device`` become the gate's
    ``--novelty-suites``, ``--novelty-originality``, ``--novelty-judge``, ``--novelty-cache`` and
    ``--novelty-device`` (each left to the suites and defaults when None); ``extra_args`` are more
    pytest arguments (``-k story``, ``--novelty-snapshots``). ``every`` gates every N-th save.
    ``history`` lists what each gate found, in order.
    """

    def __init__(
        self,
        *,
        suites: str | os.PathLike[str] | None = None,
        originality: str | None = None,
        judge: str | None = None,
        every: int = 1,
        stop_on_failure: bool = False,
        cache: str | os.PathLike[str] | None = None,
        device: str | None = None,
        extra_args: Sequence[str] = (),
        python: str = sys.executable,
    ) -> None:
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise ConfigError(f"every must be a whole number of saves, 1 or more; got {every!r}", field="every")
        self.suites = None if suites is None else Path(suites).resolve()
        if self.suites is not None and not self.suites.is_dir():
            raise ConfigError("the suites folder does not exist", path=self.suites, field="suites")
        self.originality, self.judge, self.device = originality, judge, device
        self.cache = None if cache is None else Path(cache).resolve()
        self.every, self.stop_on_failure = every, stop_on_failure
        self.extra_args, self.python = list(extra_args), python
        self.history: list[GateResult] = []
        self._saves = 0
        self._trainer: Any = None

    def attach(self, trainer: Any) -> Any:
        """Add the callback to ``trainer`` and log through it; returns the trainer."""
        trainer.add_callback(self)
        self._trainer = trainer
        return trainer

    # -- the Trainer's events -------------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._trainer is None:
            raise ConfigError(
                "NoveltyGateCallback logs through the Trainer's report_to integrations: add it with "
                "NoveltyGateCallback(...).attach(trainer) instead of Trainer(callbacks=[...])"
            )

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if not state.is_world_process_zero:
            return control
        self._saves += 1
        if (self._saves - 1) % self.every:
            return control
        step = int(state.global_step)
        result = self.gate(Path(args.output_dir), step)
        self.history.append(result)
        if result.error or result.run is None:
            logger.warning("novelty gate, %s: harness error, no verdict: %s", result.checkpoint.name, result.message)
            return control
        self._trainer.log(result.logs())  # at state.global_step: the checkpoint's step
        verdict = "FAILED" if result.failed else "passed"
        logger.info("novelty gate, %s: %s in %.1f s", result.checkpoint.name, verdict, result.seconds)
        if result.failed and self.stop_on_failure:
            logger.warning("novelty gate, %s: failed; stopping training (stop_on_failure)", result.checkpoint.name)
            control.should_training_stop = True
        return control

    # -- the gate -------------------------------------------------------------------------------

    def command(self, output_dir: Path, step: int, report: Path, series: Path | None) -> list[str]:
        """The gate's command line for ``output_dir/checkpoint-<step>`` (``series``: the folder of
        the checkpoints gated so far, when there are earlier ones)."""
        checkpoint = output_dir / f"checkpoint-{step}"
        target = f"--novelty-model-series={series}" if series is not None else f"--novelty-model={checkpoint}"
        cmd = [self.python, "-m", "pytest", target, f"--novelty-report={report}", "-p", "no:cacheprovider", "-q"]
        for option, value in (("suites", self.suites), ("originality", self.originality), ("judge", self.judge),
                              ("cache", self.cache), ("device", self.device)):  # fmt: skip
            if value is not None:
                cmd.append(f"--novelty-{option}={value}")
        return cmd + self.extra_args

    def gate(self, output_dir: Path, step: int) -> GateResult:
        """Gate ``output_dir/checkpoint-<step>`` in a separate process and read its report."""
        checkpoint = output_dir / f"checkpoint-{step}"
        folder = output_dir / GATE_FOLDER / checkpoint.name
        folder.mkdir(parents=True, exist_ok=True)
        report = folder / "report"
        earlier = [r.checkpoint for r in self.history if r.checkpoint.is_dir() and r.step < step and r.run is not None]
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="novelty-series-") as links:
            series = None
            if earlier:  # the series of the checkpoints gated so far, this one newest
                series = Path(links)
                for path in [*earlier, checkpoint]:
                    (series / path.name).symlink_to(path.resolve(), target_is_directory=True)
            cmd = self.command(output_dir, step, report, series)
            # From the training script's folder, as the user would run it (its suites/, its pytest config).
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        (folder / "pytest.log").write_text(done.stdout + done.stderr, encoding="utf-8")
        message = last_line(done.stdout + "\n" + done.stderr)
        if done.returncode not in (0, 1, HARNESS_EXIT_STATUS):
            raise ConfigError(
                f"the gate of {checkpoint.name} ended with exit status {done.returncode}: {message} "
                f"(its output: {folder / 'pytest.log'})"
            )
        run = _read(report / "report.json") if done.returncode != HARNESS_EXIT_STATUS else None
        if run is not None and series is not None:
            run = _at_step(run, step, checkpoint)
        return GateResult(step, checkpoint, done.returncode, seconds, report, run, message)


def _read(path: Path) -> TrackedRun | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not data.get("summary", {}).get("complete", True):
        return None  # a "no verdict" placeholder
    return TrackedRun.from_report(data, path.parent)


def _at_step(run: TrackedRun, step: int, checkpoint: Path) -> TrackedRun:
    """The gated point named by the real checkpoint folder (the series ran over links to it)."""
    from dataclasses import replace

    gated = replace(run.gated, step=step, model=str(checkpoint))
    return replace(run, points=(*run.points[:-1], gated))


