"""The pytest plugin: wires pytest to the layers and does nothing unless ``--model`` is given.

Each suite file is collected as a test module whose single test function, ``test_metric``, is
parametrized with the suite's thresholds, so every (suite, metric, threshold) is a real
``pytest.Function`` with an id such as ``test_metric[story-novelty@5>=0.3]``. Generation and
scoring run once per suite, on first use, and are shared by that suite's cases.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_novelty.errors import NoveltyError
from pytest_novelty.generation import GENERATORS
from pytest_novelty.session import NoveltyState
from pytest_novelty.suites.schema import Suite, load_suites

if TYPE_CHECKING:
    from pytest_novelty.runner import SuiteResult


STATE = pytest.StashKey[NoveltyState]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("novelty", "pytest-novelty: gate checkpoints on the novelty of their output")
    group.addoption(
        "--model",
        dest="novelty_model",
        metavar="PATH_OR_ID",
        help="checkpoint to gate: a local Hugging Face folder, a hub id, or 'demo' / 'demo-early'",
    )
    group.addoption(
        "--device",
        dest="novelty_device",
        default="auto",
        help="where the model runs: auto (CUDA when available, else CPU), cpu, cuda, cuda:N",
    )
    group.addoption(
        "--generator",
        dest="novelty_generator",
        default="hf",
        choices=GENERATORS,
        help="generation backend: hf (transformers; default) or vllm (faster on GPUs, when installed)",
    )
    group.addoption(
        "--novelty-suites", dest="novelty_suites", metavar="DIR", help="folder of suite files (*.toml)"
    )
    group.addoption(
        "--novelty-cache",
        dest="novelty_cache",
        metavar="DIR",
        help="cache folder for demo assets, generations and scores (default ~/.cache/pytest-novelty)",
    )
    group.addoption(
        "--originality",
        dest="novelty_originality",
        metavar="SPEC",
        help="originality backend for every suite: infini-gram:DIR, ngram-set:DIR, infini-gram-api:INDEX, ...",
    )
    group.addoption(
        "--judge", dest="novelty_judge", metavar="SPEC", help="quality judge for every suite: rules, openai:MODEL, ..."
    )
    group.addoption(
        "--judge-base-url",
        dest="novelty_judge_base_url",
        metavar="URL",
        help="OpenAI-compatible endpoint for openai: judges (default $OPENAI_BASE_URL)",
    )
    group.addoption(
        "--trust-remote-code",
        dest="novelty_trust_remote_code",
        action="store_true",
        help="allow a checkpoint to run the Python code it ships (review it first)",
    )
    group.addoption(
        "--gpus-per-worker",
        dest="novelty_gpus_per_worker",
        type=int,
        default=1,
        help="GPUs given to each pytest-xdist worker (for models spread over several devices)",
    )
    group.addoption(
        "--novelty-seed",
        dest="novelty_seed",
        type=int,
        default=None,
        help="override every suite's generation seed (a different seed must not look like a regression)",
    )
    group.addoption(
        "--baseline-model",
        dest="novelty_baseline_model",
        metavar="PATH_OR_ID",
        help="also generate and score this checkpoint on the same prompts and compare paired",
    )
    group.addoption(
        "--novelty-snapshots",
        dest="novelty_snapshots",
        action="store_true",
        default=None,
        help="compare every case with its accepted snapshot (on with --snapshot-update)",
    )
    group.addoption(
        "--novelty-snapshot-dir",
        dest="novelty_snapshot_dir",
        metavar="DIR",
        help="where snapshots live (default: __novelty_snapshots__ beside each suite file)",
    )
    group.addoption(
        "--novelty-rerecord",
        dest="novelty_rerecord",
        action="store_true",
        help="with --snapshot-update: re-record every snapshot, even those within tolerance",
    )
    group.addoption(
        "--novelty-cache-clear",
        dest="novelty_cache_clear",
        action="store_true",
        help="remove cached generations, scores and judge answers before the run (keeps the built demo)",
    )
    group.addoption(
        "--novelty-report",
        dest="novelty_report",
        metavar="DIR",
        help="write report.json, report.md and plots into DIR",
    )
    parser.addini("novelty_snapshots", "compare cases with their snapshots", type="bool", default=False)
    parser.addini("novelty_suites", "folder of suite files, relative to the rootdir", default="")
    parser.addini("novelty_cache", "cache folder for pytest-novelty", default="")


def _suites_dir(config: pytest.Config) -> Path:
    opt = config.option.novelty_suites or config.getini("novelty_suites")
    if opt:
        path = Path(opt)
        return path if path.is_absolute() else (Path(config.invocation_params.dir) / path).resolve()
    # The folder pytest runs from first: a checkpoint path given to --model outside the repository
    # can move pytest's rootdir there.
    for base in (Path(config.invocation_params.dir), config.rootpath):
        local = base / "suites"
        if local.is_dir() and any(local.glob("*.toml")):
            return local
    from pytest_novelty.resources import bundled_path

    return bundled_path("suites")


def _cache_dir(config: pytest.Config) -> Path:
    opt = config.option.novelty_cache or config.getini("novelty_cache")
    if opt:
        return Path(opt).expanduser().resolve()
    from pytest_novelty.storage import default_cache_dir

    return default_cache_dir()


def pytest_configure(config: pytest.Config) -> None:
    if not config.option.novelty_model:
        return
    if config.option.novelty_report and not hasattr(config, "workerinput"):
        from pytest_novelty.report.json_report import write_placeholder  # no stale "all passed" report

        write_placeholder(config.option.novelty_report, "the run stopped before its summary (see pytest's output)")
    try:
        folder = _suites_dir(config)
        suites = load_suites(folder)
        cache_dir = _cache_dir(config)
        if config.option.novelty_cache_clear and not hasattr(config, "workerinput"):
            from pytest_novelty.storage import clear_cache

            clear_cache(cache_dir)
        for model in (config.option.novelty_model, config.option.novelty_baseline_model):
            if model:
                _check_model(config, model, cache_dir)
    except NoveltyError as exc:
        raise pytest.UsageError(str(exc)) from None
    _place_worker(config)
    _configure_snapshots(config)
    state = NoveltyState(config, suites, cache_dir)
    config.stash[STATE] = state
    config.pluginmanager.register(state, "novelty-state")
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        # `pytest --model X` with no paths: run the suites, not the project's own tests.
        config.args = [str(folder)]


def _check_model(config: pytest.Config, model: str, cache_dir: Path) -> None:
    """Fail fast on a missing checkpoint; build the demo on the controller, before workers start."""
    from pytest_novelty import demo

    if model in demo.DEMO_MODELS:
        if not hasattr(config, "workerinput"):
            demo.ensure_demo(cache_dir)
        return
    from pytest_novelty.generation.hf import check_checkpoint

    check_checkpoint(model, trust_remote_code=config.option.novelty_trust_remote_code)


def _configure_snapshots(config: pytest.Config) -> None:
    """Snapshot comparison: on with --novelty-snapshots, the ini setting, or --snapshot-update."""
    from pytest_novelty.gate.snapshot import NoveltySnapshotExtension

    opt = config.option
    if opt.novelty_snapshots is None:
        opt.novelty_snapshots = bool(config.getini("novelty_snapshots") or getattr(opt, "update_snapshots", False))
    if opt.novelty_snapshot_dir:
        NoveltySnapshotExtension.root = str(Path(opt.novelty_snapshot_dir).resolve())
    NoveltySnapshotExtension.rerecord = bool(opt.novelty_rerecord)
    if opt.novelty_rerecord:
        opt.update_snapshots = True


def _place_worker(config: pytest.Config) -> None:
    """Pin an xdist worker to its GPU group before CUDA initialises; keep a suite on one worker."""
    from pytest_novelty.generation import devices

    args = [str(a) for a in config.invocation_params.args]
    if getattr(config.option, "dist", "no") == "load" and not any(a.startswith("--dist") for a in args):
        # All cases of a suite share one generation run: keep each suite file on one worker.
        config.option.dist = "loadscope"
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or config.option.novelty_device not in ("auto", "cuda"):
        return
    gpus = devices.visible_gpus()
    if gpus:
        try:
            chosen = devices.assign_gpus(worker, gpus, config.option.novelty_gpus_per_worker)
        except NoveltyError as exc:
            raise pytest.UsageError(str(exc)) from None
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(chosen)
    else:
        import torch

        torch.set_num_threads(devices.cpu_threads(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` with ``--model``: one worker per GPU group (xdist's default on CPU-only machines)."""
    if not config.option.novelty_model:
        return None
    from pytest_novelty.generation import devices

    return devices.auto_workers(devices.visible_gpus(), config.option.novelty_gpus_per_worker)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = config.stash.get(STATE, None)
    if state is None:
        return None
    folders = sorted({str(p.parent) for p in state.suites})
    from pytest_novelty.storage import cache_usage

    size = sum(cache_usage(state.cache_dir).values()) / 1e6
    return [
        f"novelty: model {config.option.novelty_model}, suites {', '.join(folders)}, "
        f"cache {state.cache_dir} ({size:.0f} MB)"
    ]


class SuiteFile(pytest.Module):
    """A suite file collected as a test module holding ``test_metric``."""

    suite: Suite

    def _getobj(self) -> Any:
        from pytest_novelty import _cases

        return _cases


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    state = parent.config.stash.get(STATE, None)
    if state is None or file_path.suffix != ".toml":
        return None
    suite = state.suites.get(file_path.resolve())
    if suite is None:
        return None
    node = SuiteFile.from_parent(parent, path=file_path)
    node.suite = suite
    return node


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "novelty_threshold" not in metafunc.fixturenames:
        return
    suite: Suite = metafunc.definition.parent.suite  # type: ignore[union-attr]
    cases = [(run, threshold) for run in suite.runs() for threshold in run.thresholds]
    metafunc.parametrize(
        ("novelty_suite", "novelty_threshold"), cases, ids=[f"{run.name}-{t.label}" for run, t in cases]
    )


@pytest.fixture
def novelty_state(request: pytest.FixtureRequest) -> NoveltyState:
    """The session's pytest-novelty state."""
    return request.config.stash[STATE]


@pytest.fixture
def novelty_result(novelty_state: NoveltyState, novelty_suite: Suite, request: pytest.FixtureRequest) -> SuiteResult:
    """The suite's generations, scores and metrics (computed once per suite)."""
    try:
        result = novelty_state.result(novelty_suite)
    except NoveltyError as exc:
        pytest.fail(f"harness error (not a gate failure): {exc}", pytrace=False)
    line = novelty_state.announce(novelty_suite, result)
    if line:  # the first case of the suite carries what its run did, to the controller's log
        request.node.user_properties.append(("novelty_work", line))
    return result


@pytest.fixture
def novelty_baseline(novelty_state: NoveltyState, novelty_suite: Suite) -> SuiteResult | None:
    """The baseline checkpoint's result for the suite, when --baseline-model is given."""
    try:
        return novelty_state.baseline_result(novelty_suite)
    except NoveltyError as exc:
        pytest.fail(f"harness error in the baseline (not a gate failure): {exc}", pytrace=False)
