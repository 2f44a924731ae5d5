"""Where training teams look: experiment trackers, a Trainer callback, and pytest-html.

Every integration reads one typed value, :class:`TrackedRun` (built from a run's report), and
computes no metric and decides no case. ``ARCHITECTURE.md`` lists the modules. Importing this
package loads no tracker library; ``NoveltyGateCallback`` imports transformers when first named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_novelty.integrations.base import TRACKERS, Logged, Tracker, check_trackers, log_run
from pytest_novelty.integrations.run import Point, TrackedRun, checkpoint_step
from pytest_novelty.integrations.session import log_session

if TYPE_CHECKING:
    from pytest_novelty.integrations.trainer import NoveltyGateCallback

__all__ = ["TRACKERS", "Logged", "NoveltyGateCallback", "Point", "TrackedRun", "Tracker", "check_trackers",
           "checkpoint_step", "log_run", "log_session"]


def __getattr__(name: str) -> Any:
    if name == "NoveltyGateCallback":  # imports transformers: only when asked for
        from pytest_novelty.integrations.trainer import NoveltyGateCallback

        return NoveltyGateCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
