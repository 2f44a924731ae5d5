"""Two real gate runs logged to every installed tracker, shared by the integration tests.

* ``demo_logged``: the demo's story suite on one checkpoint whose folder is named
  ``checkpoint-400`` (a link to the prepared demo), so its step is 400;
* ``series_logged``: ``--model-series`` over three tiny checkpoints (steps 60, 200, 400).

Each runs pytest once in a subprocess with ``--novelty-log`` for TensorBoard, W&B (offline) and
MLflow (a local folder store), whichever are installed, plus ``--novelty-report`` and, when
pytest-html is installed, ``--html``. The tests read the results back with each tool's own reader.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import copy_demo
from tests.plugin.test_plugin_model_series import reseeded
from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder

REPO = Path(__file__).resolve().parents[2]


def has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@dataclass(frozen=True)
class LoggedRun:
    """One gate run and where each tracker wrote to."""

    folder: Path
    steps: list[int]
    returncode: int
    output: str

    @property
    def tensorboard(self) -> Path:
        return self.folder / "tb"

    @property
    def wandb_dir(self) -> Path:
        return self.folder / "wandb-dir"

    @property
    def mlruns(self) -> Path:
        return self.folder / "mlruns"

    @property
    def report(self) -> Path:
        return self.folder / "report"

    @property
    def html(self) -> Path:
        return self.folder / "report.html"


#: A credential in the environment of the logged runs (a W&B key's shape); no output or file may hold it.
FAKE_KEY = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"


def tracker_env(folder: Path) -> dict[str, str]:
    """The environment of a logged run: W&B offline under ``folder``, MLflow's folder store allowed."""
    env = dict(os.environ)
    for name in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR"):
        path = folder / "wandb-dir" / name.lower()
        path.mkdir(parents=True, exist_ok=True)
        env[name] = str(folder / "wandb-dir") if name == "WANDB_DIR" else str(path)
    env.update({"WANDB_MODE": "offline", "MLFLOW_ALLOW_FILE_STORE": "true", "PYTHONPATH": str(REPO)})
    env.update({"WANDB_API_KEY": FAKE_KEY, "MLFLOW_TRACKING_TOKEN": FAKE_KEY})  # must never show up anywhere
    return env


def log_args(folder: Path) -> list[str]:
    """``--novelty-log`` for every installed tracker, the report, and pytest-html's report if installed."""
    args = [f"--novelty-report={folder / 'report'}"]
    if has("tensorboard"):
        args.append(f"--novelty-log=tensorboard:{folder / 'tb'}")
    if has("wandb"):
        args.append("--novelty-log=wandb:novelty-tests?name=gate&group=ci")
    if has("mlflow"):
        args.append(f"--novelty-log=mlflow:{folder / 'mlruns'}?experiment=novelty-tests")
    if has("pytest_html"):
        args += [f"--html={folder / 'report.html'}", "--self-contained-html"]
    return args


def run_gate(folder: Path, args: list[str], steps: list[int]) -> LoggedRun:
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", *args, *log_args(folder), "-p", "no:cacheprovider", "-q"]
    done = subprocess.run(cmd, cwd=folder, env=tracker_env(folder), capture_output=True, text=True, timeout=900)
    return LoggedRun(folder, steps, done.returncode, done.stdout + done.stderr)


@pytest.fixture(scope="session")
def demo_logged(tmp_path_factory: pytest.TempPathFactory, demo_assets: Path) -> LoggedRun:
    """The demo's story suite on ``run/checkpoint-400`` (the demo checkpoint), logged everywhere."""
    root = tmp_path_factory.mktemp("demo-logged")
    cache = copy_demo(demo_assets, root / "cache")
    checkpoint = root / "run" / "checkpoint-400"
    checkpoint.parent.mkdir()
    checkpoint.symlink_to(demo_assets / "demo", target_is_directory=True)
    args = [f"--novelty-model={checkpoint}", f"--novelty-suites={REPO / 'suites'}", f"--novelty-cache={cache}",
            f"--novelty-originality=infini-gram:{demo_assets / 'index'}", "-k", "story"]
    run = run_gate(root / "out", args, [400])
    assert run.returncode == 0, run.output[-3000:]
    return run


# Each case is also compared with the best earlier checkpoint (a drop within the tolerance never fails).
SERIES_SUITE = suite_toml(
    gate='against = "series-best"\ntolerance_abs = 1.0',
    thresholds=[("originality@4", 0.0), ("quality", 0.0), ("coverage@4", 0.0)],
)


@pytest.fixture(scope="session")
def series_logged(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path, tiny_index: Path) -> LoggedRun:
    """``--model-series`` over three tiny checkpoints (steps 60, 200, 400), logged everywhere."""
    root = tmp_path_factory.mktemp("series-logged")
    suites = write_story_suite_folder(root / "suites", story_prompts(4), SERIES_SUITE)
    run_dir = root / "run"
    run_dir.mkdir()
    for seed, step in enumerate((60, 200, 400)):
        reseeded(tiny_checkpoint, run_dir / f"checkpoint-{step}", seed)
    args = [f"--novelty-model-series={run_dir}", f"--novelty-suites={suites}", f"--novelty-cache={root / 'cache'}",
            f"--novelty-originality=infini-gram:{tiny_index}"]
    run = run_gate(root / "out", args, [60, 200, 400])
    assert run.returncode == 0, run.output[-3000:]
    return run


#: The gated metrics of the demo's story suite and of the series' suite, with the standard values.
DEMO_METRICS = ("coverage@5", "creativity_index", "novelty@5", "q_at_tail@0.1", "quality", "top10_novelty@5",
                "unscored")
STANDARD = ("quality", "unscored", "originality@4", "originality@5", "originality@6", "coverage@4", "coverage@6",
            "uniqueness@5", "uniqueness@12")
SERIES_METRICS = ("originality@4", "quality", "coverage@4")
