"""pytest-xdist's hooks: how a gate's cases are spread over workers, and how many workers ``-n auto``
starts. Both are optional hooks (declared only where xdist is loaded), so the plugin works without it."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from pytest_novelty.plugin.state import STATE, checkpoint_key


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # xdist's hook: declared only where xdist is loaded
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Keep each suite file on one worker: its cases share one generation run; each earlier
    checkpoint of a series is a scope of its own.

    xdist's default ``load`` becomes a ``loadscope`` scheduling (one scope per suite file, one per
    (checkpoint, suite) of a series); a ``--dist`` given on the command line is kept.
    """
    if config.stash.get(STATE, None) is None or config.getvalue("dist") != "load":
        return None
    if any(str(a).startswith("--dist") for a in config.invocation_params.args):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SuiteScheduling(LoadScopeScheduling):
        """One scope per suite file, and one per earlier checkpoint of a series on a suite: a
        series' checkpoints are spread over the workers."""

        def _split_scope(self, nodeid: str) -> str:
            return nodeid if checkpoint_key(nodeid) else str(super()._split_scope(nodeid))

        def _assign_work_unit(self, node: Any) -> None:
            """A unit of work for a node whose collection has arrived; a node still collecting gets
            its work when its collection arrives (``schedule`` runs again then). A worker that
            replaced a crashed one was given work before it had collected, when the last original
            worker finished collecting after the crash: a KeyError in xdist, an INTERNALERROR. A node
            that died since its last event refuses the send (an INTERNALERROR too, under load): its
            unit waits for :meth:`remove_node`."""
            if node in self.registered_collections:
                # A node that died since its last event refuses the send (execnet: "connection already
                # closed"): its unit stays assigned to it, and remove_node puts it back once xdist sees it down.
                with contextlib.suppress(OSError):
                    super()._assign_work_unit(node)

        def _reschedule(self, node: Any) -> None:
            """As ``loadscope`` does, and then a node always holds two tests or knows that no more
            come. A worker runs a test only once it knows the next one or that none comes, and
            ``loadscope`` gives a node more work (or says there is none) only when one of its tests
            finishes: a replacement worker given a single test (what was left of a crashed worker's
            suite) never finished it, and the session waited forever."""
            super()._reschedule(node)
            if node.shutting_down or node not in self.registered_collections:
                return
            while self.workqueue and self._pending_of(self.assigned_work[node]) < 2:
                self._assign_work_unit(node)
            if not self.workqueue:
                node.shutdown()

        def remove_node(self, node: Any) -> str | None:
            """A crashed worker's unfinished items go back to the queue, the one it died on excepted
            (xdist has reported it as crashed; as its ``load`` scheduling does). xdist's own
            ``loadscope`` puts back the whole workload, finished scopes too: a replacement worker
            then gets a scope with nothing left to run and the session waits for it forever."""
            workload = self.assigned_work.pop(node)
            pending = [nodeid for unit in workload.values() for nodeid, done in unit.items() if not done]
            if not pending:
                return None
            crashed = pending[0]
            for scope, unit in workload.items():
                if any(not done and nodeid != crashed for nodeid, done in unit.items()):
                    self.workqueue[scope] = {nodeid: done or nodeid == crashed for nodeid, done in unit.items()}
            for other in self.assigned_work:
                self._reschedule(other)
            return crashed

    return SuiteScheduling(config, log)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` with ``--model``: one worker per GPU group (xdist's default on CPU-only machines)."""
    if not config.option.novelty_model:
        return None
    from pytest_novelty.generation import devices

    return devices.auto_workers(devices.visible_gpus(), config.option.novelty_gpus_per_worker)
