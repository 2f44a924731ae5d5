"""A series from a job array: separate processes gate one checkpoint each into one shared cache
(a Slurm array, a Kubernetes job per checkpoint, a CI matrix), and a final ``--model-series`` run
over the same folder generates and scores nothing, printing the series a single run would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin.test_plugin_model_series import reseeded

pytestmark = pytest.mark.slow


def test_three_concurrent_gates_leave_a_series_run_nothing_to_do(
    suite_dir: Path, tiny_checkpoint: Path, tiny_index: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for seed, step in enumerate((100, 200, 300)):
        reseeded(tiny_checkpoint, run / f"checkpoint-{step}", seed)
    shared = tmp_path / "shared-cache"
    common = [f"--novelty-suites={suite_dir}", f"--novelty-cache={shared}", f"--originality=infini-gram:{tiny_index}",
              "-p", "no:cacheprovider", "-p", "no:randomly"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path.cwd()), os.environ.get("PYTHONPATH")]))}
    jobs = [
        subprocess.Popen([sys.executable, "-m", "pytest", f"--novelty-model={run / f'checkpoint-{step}'}", *common],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for step in (100, 200, 300)
    ]  # fmt: skip
    for job in jobs:  # all three at once, as an array's tasks on one shared file system
        out, _ = job.communicate(timeout=600)
        assert job.returncode == 0, out
    report = tmp_path / "report"
    final = subprocess.run(
        [sys.executable, "-m", "pytest", f"--model-series={run}", f"--novelty-report={report}", *common],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert final.returncode == 0, final.stdout + final.stderr
    assert "novelty work done: 0 samples generated in 0 batches" in final.stdout, final.stdout
    assert "0 originality lookups, 0 judge requests; earlier checkpoints: 0 samples generated" in final.stdout
    series = json.loads((report / "report.json").read_text())["series"]
    assert [e["step"] for e in series] == [100, 200, 300]
    assert all(e["suites"]["story"]["generated_rows"] == 0 for e in series)
