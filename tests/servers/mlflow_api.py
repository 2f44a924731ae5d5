"""A fake MLflow tracking server on 127.0.0.1: the part of MLflow's REST API a gate run's log uses.

The full ``mlflow`` package (its server, with Flask and SQLAlchemy) is not installed here, only
``mlflow-skinny``, the client; so the tests talk to this server through MLflow's own client
(``MlflowClient(tracking_uri=server.url)``), exactly as to ``mlflow server``. It speaks REST API
2.0 as that server does:

- ``GET /api/2.0/mlflow/experiments/get-by-name``: the experiment, or 404 with
  ``RESOURCE_DOES_NOT_EXIST`` (the client then creates it);
- ``POST /api/2.0/mlflow/experiments/create``, ``POST /api/2.0/mlflow/runs/create``,
  ``GET /api/2.0/mlflow/runs/get``, ``POST /api/2.0/mlflow/runs/log-batch``,
  ``POST /api/2.0/mlflow/runs/update``, each answering the JSON the real server does;
- artifacts go to ``artifact_root``, a local folder named as each run's ``artifact_uri`` (a server
  started with ``--default-artifact-root`` on a shared file system), which the client writes to.

Faults are injected with :meth:`FakeMlflow.inject` for requests whose path contains ``match``
(``runs/log-batch``, say): ``status`` (an HTTP error, with ``message`` as a raw body when given,
bytes that need not be UTF-8 or JSON), ``hang`` (read the request, never answer) and ``drop``
(close the connection). :attr:`FakeMlflow.paths` records every request's path, faulted ones too.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.servers.base import FakeHandler, FakeServer

__all__ = ["FakeMlflow"]

API = "/api/2.0/mlflow/"


class _Handler(FakeHandler):
    fake: FakeMlflow

    def do_GET(self) -> None:
        self._answer(b"")

    def post(self, raw: bytes) -> None:
        self._answer(raw)

    def _answer(self, raw: bytes) -> None:
        fake = self.fake
        with fake._lock:
            fake.paths.append(self.path)
        fault = fake._take_fault(self.path)
        if fault is not None:
            if self._unanswered(fault):
                return
            body = fault.message.encode("utf-8", "surrogateescape") if fault.message is not None else {
                "error_code": "INTERNAL_ERROR", "message": f"injected status {fault.status}"}  # fmt: skip
            self._send(fault.status, body)
            return
        parts = urlsplit(self.path)
        route = parts.path.removeprefix(API)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        body = json.loads(raw) if raw else {}
        status, answer = fake.route(route, query, body)
        self._send(status, answer)


class FakeMlflow(FakeServer):
    """The server; see the module docstring. Start it with ``with`` or :meth:`start`."""

    fault_kinds = ("status", "hang", "drop")
    fault_seconds = 600.0  # a hang outlasts any client timeout; stop() releases it
    handler = _Handler
    name = "fake-mlflow"

    def __init__(self, artifact_root: Path) -> None:
        super().__init__()
        self.artifact_root = artifact_root
        self.paths: list[str] = []
        self.experiments: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, dict[str, Any]] = {}
        self.batches: list[dict[str, Any]] = []
        self._state = threading.Lock()

    @property
    def url(self) -> str:
        return super().url.rstrip("/")

    def route(self, route: str, query: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and JSON answer of one request of REST API 2.0 (404 for any other route)."""
        with self._state:
            if route == "experiments/get-by-name":
                found = self.experiments.get(query.get("experiment_name", ""))
                if found is None:
                    return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "No such experiment"}
                return 200, {"experiment": found}
            if route == "experiments/create":
                experiment_id = str(len(self.experiments) + 1)
                self.experiments[body["name"]] = {
                    "experiment_id": experiment_id, "name": body["name"], "lifecycle_stage": "active",
                    "artifact_location": str(self.artifact_root / experiment_id),
                }  # fmt: skip
                return 200, {"experiment_id": experiment_id}
            if route == "runs/create":
                run_id = uuid.uuid4().hex
                experiment_id = body["experiment_id"]
                info = {"run_id": run_id, "run_uuid": run_id, "experiment_id": experiment_id,
                        "run_name": body.get("run_name") or run_id[:8], "status": "RUNNING",
                        "start_time": body.get("start_time") or int(time.time() * 1000), "lifecycle_stage": "active",
                        "artifact_uri": str(self.artifact_root / experiment_id / run_id / "artifacts")}  # fmt: skip
                self.runs[run_id] = {"info": info, "data": {"tags": body.get("tags", [])}}
                return 200, {"run": self.runs[run_id]}
            if route == "runs/get" and query.get("run_id") in self.runs:
                return 200, {"run": self.runs[query["run_id"]]}
            if route == "runs/log-batch" and body.get("run_id") in self.runs:
                self.batches.append(body)
                return 200, {}
            if route == "runs/update" and body.get("run_id") in self.runs:
                info = self.runs[body["run_id"]]["info"]
                info["status"] = body.get("status", info["status"])
                return 200, {"run_info": info}
        return 404, {"error_code": "ENDPOINT_NOT_FOUND", "message": f"no route {route}"}
