"""The plugin's one call into the integrations: log a finished session's report to the trackers.

The report folder of ``--novelty-report`` is read back when there is one; without it the report
is written to a temporary folder first, so the trackers always read the files a reviewer would.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_novelty.gate.record import CaseRecord
from pytest_novelty.integrations.base import Logged, log_run
from pytest_novelty.integrations.run import TrackedRun
from pytest_novelty.pipeline.suite_data import SuiteData


def log_session(
    specs: Sequence[str], records: Sequence[CaseRecord], suites_data: Mapping[str, SuiteData],
    versions: Mapping[str, Any], *, report_dir: str | Path | None = None, write: Callable[[str], None] | None = None,
) -> Logged:
    """Log one session to every tracker in ``specs`` (:func:`~pytest_novelty.integrations.base.log_run`);
    ``report_dir`` is the folder its report was just written to, if any."""
    from pytest_novelty.report.json_report import JSON_NAME

    if report_dir is not None and (Path(report_dir) / JSON_NAME).is_file():
        return log_run(specs, TrackedRun.from_report_file(Path(report_dir) / JSON_NAME), write)
    from pytest_novelty.report import write_report

    with tempfile.TemporaryDirectory(prefix="novelty-log-") as folder:
        files = write_report(folder, records, suites_data, versions, step_summary=False)
        return log_run(specs, TrackedRun.from_report_file(files.json), write)
