"""A fake Hugging Face hub on 127.0.0.1: the one endpoint pinning a hub id asks, with faults.

``GET /api/models/ORG/NAME/revision/REV`` answers ``{"id", "sha"}`` with the commit of ``REV``
in :attr:`FakeHub.revisions` (404 with ``X-Error-Code: RevisionNotFound`` for another). Point
``huggingface_hub.constants.ENDPOINT`` (or ``HF_ENDPOINT`` in a new process) at :attr:`url`.

Faults (:meth:`FakeHub.inject`): ``status`` (HTTP ``status`` with ``message`` as the hub's error
text, e.g. 401 ``Invalid credentials in Authorization header`` or 503), ``garbage`` (HTTP 200
whose body is not JSON).
"""

from __future__ import annotations

import json
from typing import ClassVar

from tests.servers.base import FakeHandler, FakeServer


class _HubHandler(FakeHandler):
    fake: FakeHub

    def do_GET(self) -> None:
        self.fake._enter()
        try:
            self._answer()
        finally:
            self.fake._leave()

    def _answer(self) -> None:
        self.fake._record({"path": self.path})
        fault = self.fake._take_fault(self.path)
        if fault is not None and fault.kind == "status":
            self._send(fault.status, {"error": fault.message or "Internal Error"},
                       {"X-Error-Message": fault.message or "Internal Error"})
            return
        if fault is not None and fault.kind == "garbage":
            self._send(200, b"<html>\x00 not json \xff</html>")
            return
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) != 6 or parts[:2] != ["api", "models"] or parts[4] != "revision":
            self._send(404, {"error": "not found"}, {"X-Error-Code": "RepoNotFound"})
            return
        sha = self.fake.revisions.get(parts[5])
        if sha is None:
            self._send(404, {"error": "Invalid rev id"}, {"X-Error-Code": "RevisionNotFound"})
            return
        self._send(200, json.dumps({"id": f"{parts[2]}/{parts[3]}", "sha": sha, "siblings": []}).encode())


class FakeHub(FakeServer):
    """A real HTTP server answering the hub's model-info requests (see the module doc)."""

    fault_kinds: ClassVar[tuple[str, ...]] = ("status", "garbage")
    handler = _HubHandler
    name = "fake-hub"
    path = ""

    def __init__(self, revisions: dict[str, str] | None = None) -> None:
        super().__init__()
        self.revisions = dict(revisions or {})
        """The commit of each revision name the hub knows."""
