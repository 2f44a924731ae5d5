"""Where training teams look: experiment trackers, a Trainer callback, and pytest-html.

* :mod:`~pytest_novelty.integrations.run`: :class:`TrackedRun`, the one typed value every
  integration reads, built from a run's report;
* :mod:`~pytest_novelty.integrations.base`: the :class:`Tracker` Protocol and the registry of
  ``--novelty-log`` specs; :mod:`.tensorboard`, :mod:`.wandb` and :mod:`.mlflow`, one module per
  tracker, each through the tool's own client library (an optional extra);
* :mod:`~pytest_novelty.integrations.html`: the suites' tables and plots in pytest-html's report;
* :mod:`~pytest_novelty.integrations.trainer`: :class:`NoveltyGateCallback`, a
  ``transformers.TrainerCallback`` that gates every checkpoint the Trainer saves, each gate in a
  process of its own (:mod:`.trainer_gate`), waited for or in the background one at a time
  (:mod:`.trainer_queue`), its bad input refused before the first step (:mod:`.trainer_checks`).

Integrations read results and outcomes; they compute no metric and decide no case. Importing
this package loads no tracker library, and ``NoveltyGateCallback`` imports transformers only when
it is first named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_novelty.integrations.base import TRACKERS, Logged, Tracker, check_trackers, log_run
from pytest_novelty.integrations.run import Point, TrackedRun, checkpoint_step
from pytest_novelty.integrations.session import log_session

if TYPE_CHECKING:
    from pytest_novelty.integrations.trainer import NoveltyGateCallback

__all__ = [
    "TRACKERS",
    "Logged",
    "NoveltyGateCallback",
    "Point",
    "TrackedRun",
    "Tracker",
    "check_trackers",
    "checkpoint_step",
    "log_run",
    "log_session",
]


def __getattr__(name: str) -> Any:
    if name == "NoveltyGateCallback":  # imports transformers: only when asked for
        from pytest_novelty.integrations.trainer import NoveltyGateCallback

        return NoveltyGateCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
