"""``--novelty-log mlflow:URI?experiment=E&name=N``: the gate's results as an MLflow run, through
``MlflowClient`` (``docs/trackers.md`` says what is logged, and where credentials come from).

The preflight opens the store as MLflow does: a URI MLflow has no store for (``bogus://x``,
``sqlite:`` with ``mlflow-skinny``) or a folder store it refuses is bad input; a server must answer
one request (reading experiment E), else a harness error naming why; a folder must take a write.
MLflow's client retries a request 7 times with backoff and waits 120 s for each answer, so a
silent server once held a run for about ten minutes: :func:`bounded_client` bounds it through the
variables MLflow reads at every request.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pytest_novelty.infra.errors import ConfigError, HarnessError, PreflightError
from pytest_novelty.infra.redact import echo
from pytest_novelty.infra.retry import failure_reason
from pytest_novelty.integrations.base import (
    CALL_RETRIES,
    CALL_TIMEOUT,
    FIELD,
    TRACKERS,
    failure,
    installed,
    local_folder,
    require,
)
from pytest_novelty.integrations.run import PREFIX, TrackedRun

_KEY_UNSAFE = re.compile(r"[^0-9A-Za-z_\-. :/]")
#: MLflow's limits for one log_batch request (metrics, params) and for one param value.
BATCH_METRICS, BATCH_PARAMS, PARAM_CHARS = 1000, 100, 6000
REMOTE_SCHEMES = ("http", "https", "databricks", "databricks-uc", "uc")
"""Stores behind a server: a failure to reach one is a harness error, not bad input."""
HTTP_SETTINGS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": str(CALL_TIMEOUT), "MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(CALL_RETRIES),
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
}  # fmt: skip
"""MLflow's own request settings while a tracker call runs, where the user set none."""
QUIET = "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"
FILE_STORE = "MLFLOW_ALLOW_FILE_STORE"


def metric_key(name: str) -> str:
    """``name`` with every character MLflow refuses in a key replaced by ``_``, as the Trainer's MLflow
    integration does (``novelty@5`` is logged as ``novelty_5``)."""
    return _KEY_UNSAFE.sub("_", name)


@TRACKERS.register(
    "mlflow", argument="URI", needs="a tracking URI", options={"experiment": str, "name": str},
    summary="an MLflow run",
)  # fmt: skip
class MlflowTracker:
    """Logs a run to one new MLflow run at a tracking URI."""

    def __init__(self, uri: str, *, experiment: str = "pytest-novelty", name: str | None = None) -> None:
        self.uri, self.experiment, self.name = uri, experiment, name
        self.spec = f"mlflow:{uri}"

    @property
    def remote(self) -> bool:
        """Whether the store is behind a server (see :data:`REMOTE_SCHEMES`)."""
        return urlparse(self.uri).scheme.lower() in REMOTE_SCHEMES

    @property
    def folder(self) -> Path | None:
        """The folder of a folder store (a path or a ``file:`` URI), None for any other store."""
        parts = urlparse(self.uri)
        if parts.scheme == "file":
            return Path(parts.path)
        return Path(self.uri) if parts.scheme == "" or len(parts.scheme) == 1 else None

    def _client(self) -> Any:
        require("mlflow", "mlflow", self.spec)
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.uri)

    def check(self) -> None:
        installed("mlflow", "mlflow", self.spec)
        with bounded_client():
            try:
                client = self._client()
            except ConfigError:
                raise
            except Exception as exc:  # no store for this URI: bad input, with MLflow's own reason
                why = f"MLflow has no store for this URI: {failure(exc)}"
                if FILE_STORE in str(exc):  # MLflow 3 keeps its folder store behind a variable
                    why = f"MLflow opens a folder store only with {FILE_STORE}=true; set it, or log to a server"
                raise ConfigError(f"{self.spec}: {why}", field=FIELD) from None
            try:
                client.get_experiment_by_name(self.experiment)
            except Exception as exc:
                if self.remote:  # the server is down, silent, refuses us, or is no MLflow server
                    raise PreflightError(f"{self.spec}: {server_failure(exc)}") from None
                raise ConfigError(f"{self.spec}: MLflow cannot open this store: {failure(exc)}", field=FIELD) from None
        if self.folder is not None:
            local_folder(self.spec, self.folder)  # the runs are written there: it must take a write

    def log(self, run: TrackedRun) -> str:
        with bounded_client():
            try:
                return self._log(run)
            except Exception as exc:
                if self.remote and type(exc).__module__.startswith("mlflow"):
                    raise HarnessError(f"{self.spec}: {server_failure(exc)}") from None
                raise

    def _log(self, run: TrackedRun) -> str:
        from mlflow.entities import Metric, Param

        client = self._client()
        found = client.get_experiment_by_name(self.experiment)
        experiment_id = found.experiment_id if found is not None else client.create_experiment(self.experiment)
        created = client.create_run(experiment_id, run_name=self.name, tags={"mlflow.source.name": "pytest-novelty"})
        run_id = created.info.run_id
        try:
            now = int(time.time() * 1000)
            metrics = [Metric(metric_key(k), v, now, p.step) for p in run.points for k, v in p.flat().items()]
            metrics += [Metric(metric_key(k), v, now, run.step) for k, v in run.summary_scalars().items()]
            params = [Param(metric_key(k), v[:PARAM_CHARS]) for k, v in sorted(run.identity.items())]
            for start in range(0, len(params), BATCH_PARAMS):
                client.log_batch(run_id, params=params[start : start + BATCH_PARAMS])
            for start in range(0, len(metrics), BATCH_METRICS):
                client.log_batch(run_id, metrics=metrics[start : start + BATCH_METRICS])
            cases = [c.brief() for suite in run.suites for c in run.cases_of(suite)]
            client.log_dict(run_id, {"step": run.step, "cases": cases}, f"{PREFIX}/cases.json")
            tables = [f"## {suite}\n\n{run.cases_markdown(suite)}\n" for suite in run.suites]
            client.log_text(run_id, "\n".join(tables), f"{PREFIX}/cases.md")
            spans = [s.as_dict() for suite in run.suites for s in run.spans.get(suite, ())]
            client.log_dict(run_id, {"copied_spans": spans}, f"{PREFIX}/copied_spans.json")
            for suite in run.suites:
                for path in run.plots.get(suite, {}).values():
                    client.log_artifact(run_id, str(path), f"{PREFIX}/plots")
        except BaseException:
            with suppress(Exception):  # the store may be what failed: the first error is the one to tell
                client.set_terminated(run_id, "FAILED")
            raise
        client.set_terminated(run_id, "FINISHED")
        return f"mlflow: run {run_id} in experiment {self.experiment} at step {run.step} ({self.uri})"


@contextmanager
def bounded_client() -> Iterator[None]:
    """MLflow's client bounded and quiet while the block runs: :data:`HTTP_SETTINGS` where the user set
    none (a value they set is theirs; the whole call is bounded anyway), its log held back to errors
    (its warnings repeat our one line), and its own link to the run, printed with the URI as given
    (a password in it too), suppressed. The environment and the logger are restored afterwards."""
    saved = {name: os.environ.get(name) for name in (*HTTP_SETTINGS, QUIET)}
    logger = logging.getLogger("mlflow")
    level = logger.level
    os.environ.update({name: value for name, value in HTTP_SETTINGS.items() if name not in os.environ})
    os.environ[QUIET] = "true"
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


_STATUS = re.compile(r"error code (\d{3}) != 200|too many (\d{3}) error responses")
_CREDENTIALS = ("MLflow reads the credentials from MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, "
                "or MLFLOW_TRACKING_TOKEN")  # fmt: skip


def server_failure(exc: BaseException) -> str:
    """Why a request of MLflow's client to a tracking server failed, in words: not reached (and why),
    no answer in time, the status it answered (with what to check for 401, 403, 404), else MLflow's words."""
    reason = failure_reason(exc)
    if reason in ("connection refused", "host name not resolved", "connection dropped"):
        return f"cannot reach the tracking server ({reason})"
    if reason == "timed out":
        timeout = os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT", str(CALL_TIMEOUT))
        return f"the tracking server accepts connections but did not answer within {timeout} s"
    text = str(exc)
    if "SSLError" in text or "CERTIFICATE_VERIFY_FAILED" in text:
        return "cannot reach the tracking server over TLS (the handshake failed: is it served over http, or is its " \
               "certificate one this machine trusts?)"
    from mlflow.exceptions import RestException

    if isinstance(exc, RestException):  # the server's own error (MLflow 3.18 raises it without the HTTP status)
        return f"the tracking server refused the request: {echo(text, limit=200)}"
    found = _STATUS.search(text)
    if found is None:
        return f"MLflow's client could not use the tracking server's answer: {failure(exc)}"
    status = found.group(1) or found.group(2)
    body = text.partition("Response body: ")[2].strip().strip("'")
    said = f": {echo(body, limit=120)}" if body else ""
    hint = {"401": _CREDENTIALS, "403": _CREDENTIALS, "404": "is the URI that of an MLflow tracking server?"}
    return f"the tracking server answered HTTP {status}{said}" + (f"; {hint[status]}" if status in hint else "")
