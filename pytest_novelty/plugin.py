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
from pytest_novelty.suites.schema import Suite, load_suites

if TYPE_CHECKING:
    from pytest_novelty.runner import Runner, SuiteResult


class NoveltyState:
    """Per-session state, kept in ``config.stash``."""

    def __init__(self, config: pytest.Config, suites: list[Suite], cache_dir: Path) -> None:
        self.config = config
        self.suites = {s.path.resolve(): s for s in suites}
        self.cache_dir = cache_dir
        self._runner: Runner | None = None
        self._results: dict[str, SuiteResult | NoveltyError] = {}
        self.rows: list[dict[str, Any]] = []

    @property
    def runner(self) -> Runner:
        if self._runner is None:
            from pytest_novelty.runner import RunConfig, Runner

            opt = self.config.option
            self._runner = Runner(
                RunConfig(
                    model=opt.novelty_model,
                    cache_dir=self.cache_dir,
                    device=opt.novelty_device,
                    originality=opt.novelty_originality,
                    judge=opt.novelty_judge,
                    judge_base_url=opt.novelty_judge_base_url,
                    trust_remote_code=opt.novelty_trust_remote_code,
                    log=self._log,
                )
            )
        return self._runner

    def _log(self, line: str) -> None:
        """Progress lines, on their own line even in the middle of a verbose test line."""
        if os.environ.get("PYTEST_XDIST_WORKER") and "generated batch" in line:
            return
        capman = self.config.pluginmanager.getplugin("capturemanager")
        reporter = self.config.pluginmanager.getplugin("terminalreporter")
        if reporter is None:
            return
        if capman is not None:
            with capman.global_and_fixture_disabled():
                reporter.write_line(line)
        else:
            reporter.write_line(line)

    def result(self, suite: Suite) -> SuiteResult:
        """The suite's result, computed on first use; an error is remembered and re-raised."""
        if suite.name not in self._results:
            try:
                self._results[suite.name] = self.runner.run(suite)
            except NoveltyError as exc:
                self._results[suite.name] = exc
        result = self._results[suite.name]
        if isinstance(result, NoveltyError):
            raise result
        return result

    # Hooks: this object is registered as a plugin while --model is in use.

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect each case's numbers, on the controller too under xdist."""
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == "novelty" and isinstance(value, dict):
                self.rows.append(value)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self.config, "workerinput") or not self.rows:
            return
        from pytest_novelty.report import render_table

        terminalreporter.section("novelty gate")
        headers = {str(r["suite"]): str(r["header"]) for r in self.rows if r.get("header")}
        for line in render_table(self.rows, headers):
            terminalreporter.line(line)


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
    parser.addini("novelty_suites", "folder of suite files, relative to the rootdir", default="")
    parser.addini("novelty_cache", "cache folder for pytest-novelty", default="")


def _suites_dir(config: pytest.Config) -> Path:
    opt = config.option.novelty_suites or config.getini("novelty_suites")
    if opt:
        path = Path(opt)
        return path if path.is_absolute() else (Path(config.invocation_params.dir) / path).resolve()
    local = config.rootpath / "suites"
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
    try:
        folder = _suites_dir(config)
        suites = load_suites(folder)
        cache_dir = _cache_dir(config)
        model = config.option.novelty_model
        from pytest_novelty import demo

        if model in demo.DEMO_MODELS:
            if not hasattr(config, "workerinput"):
                demo.ensure_demo(cache_dir)
        else:
            from pytest_novelty.generation.hf import check_checkpoint

            check_checkpoint(model, trust_remote_code=config.option.novelty_trust_remote_code)
    except NoveltyError as exc:
        raise pytest.UsageError(str(exc)) from None
    _place_worker(config)
    state = NoveltyState(config, suites, cache_dir)
    config.stash[STATE] = state
    config.pluginmanager.register(state, "novelty-state")
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        # `pytest --model X` with no paths: run the suites, not the project's own tests.
        config.args = [str(folder)]


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
    return [f"novelty: model {config.option.novelty_model}, suites {', '.join(folders)}, cache {state.cache_dir}"]


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
    metafunc.parametrize(
        "novelty_threshold", suite.thresholds, ids=[f"{suite.name}-{t.label}" for t in suite.thresholds]
    )


@pytest.fixture
def novelty_suite(request: pytest.FixtureRequest) -> Suite:
    """The suite of the current case."""
    return request.node.parent.suite  # type: ignore[no-any-return]


@pytest.fixture
def novelty_result(request: pytest.FixtureRequest, novelty_suite: Suite) -> SuiteResult:
    """The suite's generations, scores and metrics (computed once per suite)."""
    state = request.config.stash[STATE]
    try:
        return state.result(novelty_suite)
    except NoveltyError as exc:
        pytest.fail(f"harness error (not a gate failure): {exc}", pytrace=False)
