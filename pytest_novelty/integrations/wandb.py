"""``--novelty-log wandb:PROJECT?entity=E&name=N&group=G``: the gate's results as a Weights & Biases
run, through the ``wandb`` client library with W&B's own conventions (``docs/trackers.md`` says
what is logged). W&B's console output is silenced; the run's id and where it went are one line of ours.

The preflight follows ``WANDB_MODE``: online, ``wandb.Api`` (with a :data:`~.base.CALL_TIMEOUT` s
timeout) must find a key (none is bad input) and the server accept it (else a harness error);
offline, the folder the run is written to (``WANDB_DIR``, else the working folder) must take a
write; disabled, nothing is checked or logged. ``wandb.init`` gets half of :data:`~.base.DEADLINE`.
"""

from __future__ import annotations

import os
from typing import Any

from pytest_novelty.infra.errors import ConfigError, PreflightError
from pytest_novelty.integrations.base import CALL_TIMEOUT, DEADLINE, FIELD, TRACKERS, failure, local_folder, require
from pytest_novelty.integrations.run import PREFIX, TrackedRun

OFFLINE_MODES = ("offline", "dryrun")
CASE_COLUMNS = ("suite", "metric", "value", "bound", "outcome", "comparison", "message")
SPAN_COLUMNS = ("suite", "length", "units", "text", "document", "prompt", "sample", "answer")


@TRACKERS.register(
    "wandb", argument="PROJECT", needs="a project name", options={"entity": str, "name": str, "group": str},
    summary="a Weights & Biases run",
)  # fmt: skip
class WandbTracker:
    """Logs a run to one new W&B run in ``project``."""

    def __init__(self, project: str, *, entity: str | None = None, name: str | None = None,
                 group: str | None = None) -> None:  # fmt: skip
        self.project, self.entity, self.name, self.group = project, entity, name, group
        self.spec = f"wandb:{project}"

    @property
    def mode(self) -> str:
        """How W&B runs here, from its own variables: online, offline, dryrun or disabled."""
        if os.environ.get("WANDB_DISABLED", "").strip().lower() in ("1", "true", "yes"):
            return "disabled"
        return os.environ.get("WANDB_MODE", "online").strip().lower() or "online"

    def check(self) -> None:
        wandb: Any = require("wandb", "wandb", self.spec)
        mode = self.mode
        try:
            wandb.Settings(mode=mode)
        except Exception:  # W&B's own validation of the mode
            raise ConfigError(f"{self.spec}: W&B has no mode WANDB_MODE={mode!r}; use online, offline or disabled",
                              field=FIELD) from None  # fmt: skip
        if mode == "disabled":
            return
        if mode in OFFLINE_MODES:  # the run is written under WANDB_DIR, for `wandb sync` later
            local_folder(self.spec, os.environ.get("WANDB_DIR") or ".")
            return
        try:  # W&B's own client: finds the key, and has the server verify it
            wandb.Api(timeout=CALL_TIMEOUT)
        except wandb.errors.UsageError as exc:  # no key: bad input
            raise ConfigError(f"{self.spec}: W&B finds no API key ({failure(exc)}); run `wandb login`, set "
                              "WANDB_API_KEY, or set WANDB_MODE=offline to keep the run on disk",
                              field=FIELD) from None  # fmt: skip
        except Exception as exc:  # the server is down, silent, or refuses the key
            raise PreflightError(f"{self.spec}: W&B could not verify the key with its server: {failure(exc)}") from None

    def log(self, run: TrackedRun) -> str:
        wandb: Any = require("wandb", "wandb", self.spec)
        settings = wandb.Settings(silent=True, console="off", init_timeout=DEADLINE / 2)
        active = wandb.init(
            project=self.project, entity=self.entity, name=self.name, group=self.group,
            config=dict(run.identity), job_type="novelty-gate", settings=settings,
        )  # fmt: skip
        try:
            for point in run.points[:-1]:
                active.log(point.flat(), step=point.step)
            gated = {**run.gated.flat(), **run.summary_scalars()}
            gated[f"{PREFIX}/cases"] = wandb.Table(
                columns=list(CASE_COLUMNS),
                data=[[c.brief()[k] for k in CASE_COLUMNS] for s in run.suites for c in run.cases_of(s)],
            )
            spans = [span.as_dict() for suite in run.suites for span in run.spans.get(suite, ())]
            if spans:
                gated[f"{PREFIX}/copied_spans"] = wandb.Table(
                    columns=list(SPAN_COLUMNS), data=[[s[k] for k in SPAN_COLUMNS] for s in spans]
                )
            for suite in run.suites:
                for kind, path in sorted(run.plots.get(suite, {}).items()):
                    gated[f"{PREFIX}/{suite}/{kind}"] = wandb.Image(str(path), caption=f"{suite} {kind}")
            active.log(gated, step=run.step)
            for key, value in run.summary_scalars().items():
                active.summary[key] = value
            run_id, mode = active.id, str(getattr(active.settings, "mode", "") or "")
            folder = str(getattr(active.settings, "sync_dir", "") or "")
        except BaseException:
            active.finish(exit_code=1)
            raise
        active.finish()
        where = f"offline in {folder}; `wandb sync` uploads it" if mode in ("offline", "dryrun") else "online"
        return f"wandb: run {run_id} in project {self.project} at step {run.step} ({where})"
