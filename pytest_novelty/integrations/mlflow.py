"""``--novelty-log mlflow:URI?experiment=E&name=N``: the gate's results as an MLflow run.

Through MLflow's own client (``MlflowClient``; the ``mlflow`` extra installs ``mlflow-skinny``,
which talks to a tracking server or a local folder; a database URI such as ``sqlite:///mlflow.db``
needs the full ``mlflow`` package). URI is any tracking URI: ``http(s)://`` a server (credentials
from ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` / ``MLFLOW_TRACKING_TOKEN``, as
MLflow reads them), a database, or a folder (MLflow 3 opens a folder store only with
``MLFLOW_ALLOW_FILE_STORE=true``).

One MLflow run per gate run, in experiment E (default ``pytest-novelty``), named N when given:

* metrics ``novelty/<suite>/<metric>`` at the checkpoint's step (each checkpoint of a series at
  its own), and ``novelty/passed`` and the case counts at the gated step. MLflow allows only
  letters, digits and ``_ - . : /`` and space in a key; every other character becomes ``_``, as the
  Trainer's MLflow integration does (``novelty@5`` is logged as ``novelty_5``);
* params: the run's identity (checkpoint, content identity, suites, judge, index, units);
* artifacts under ``novelty/``: ``cases.json`` and ``cases.md`` (value, bound, outcome,
  comparison), ``copied_spans.json``, and the plots under ``novelty/plots/``.
"""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import urlparse

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.integrations.base import FIELD, TRACKERS, failure, installed, require
from pytest_novelty.integrations.run import PREFIX, TrackedRun

_KEY_UNSAFE = re.compile(r"[^0-9A-Za-z_\-. :/]")
#: MLflow's limits for one log_batch request (metrics, params) and for one param value.
BATCH_METRICS, BATCH_PARAMS, PARAM_CHARS = 1000, 100, 6000
LOCAL_SCHEMES = ("", "file", "sqlite")


def metric_key(name: str) -> str:
    """``name`` with every character MLflow refuses in a key replaced by ``_``."""
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
    def local(self) -> bool:
        """Whether the store is on this machine (a folder or a SQLite file): checked before the run."""
        scheme = urlparse(self.uri).scheme
        return scheme in LOCAL_SCHEMES or len(scheme) == 1  # one letter: a Windows drive

    def _client(self) -> Any:
        require("mlflow", "mlflow", self.spec)
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.uri)

    def check(self) -> None:
        installed("mlflow", "mlflow", self.spec)
        if not self.local:
            return  # a server is reached when the run logs; a failure then is a harness error
        try:
            self._client().get_experiment_by_name(self.experiment)
        except Exception as exc:  # MLflow refuses the store: bad input, with MLflow's own reason
            raise ConfigError(f"{self.spec}: MLflow cannot open this store: {failure(exc)}", field=FIELD) from None

    def log(self, run: TrackedRun) -> str:
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
            client.set_terminated(run_id, "FAILED")
            raise
        client.set_terminated(run_id, "FINISHED")
        return f"mlflow: run {run_id} in experiment {self.experiment} at step {run.step} ({self.uri})"
