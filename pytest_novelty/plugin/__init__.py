"""The pytest plugin: wires pytest to the layers and does nothing unless ``--model`` is given.

Each suite file is collected as a test module whose single test function, ``test_metric``, is
parametrized with the suite's thresholds, so every (suite, metric, threshold) is a real
``pytest.Function`` with an id such as ``test_metric[story-novelty@5>=0.3]``. Generation and
scoring run once per suite, on first use, and are shared by that suite's cases.

Being loaded into every pytest run of its environment, the plugin keeps out of the host project's
way: every option has a ``--novelty-`` name, and the short spellings (``--model``, ``--device``, ...)
are added only after the host's initial conftests have added theirs, and only where free. Session
state lives in ``config.stash``; what the plugin changes in the process (``CUDA_VISIBLE_DEVICES``,
torch's thread count) is undone at the config's cleanup.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_novelty.infra.errors import ConfigError, HarnessError, NoveltyError
from pytest_novelty.pipeline.options import PYTEST, by_name, ini_settings, offered
from pytest_novelty.plugin.series import spread_series
from pytest_novelty.plugin.state import STATE, NoveltyState
from pytest_novelty.suites.schema import Suite
from pytest_novelty.suites.suite_file import load_suites

if TYPE_CHECKING:
    from pytest_novelty.pipeline.results import SuiteResult
    from pytest_novelty.pipeline.session import Baseline


pytest_plugins = ["pytest_novelty.plugin.xdist"]  # pytest-xdist's hooks, optional where xdist is absent

#: The suite a collected suite file holds.
SUITE = pytest.StashKey[Suite]()
#: The short option names this session registered (those the host project left free).
SHORT_NAMES = pytest.StashKey[tuple[str, ...]]()


GROUP = "novelty"


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``--novelty-`` names and ini settings (the short names follow the host's conftests)."""
    group = parser.getgroup(GROUP, "pytest-novelty: gate checkpoints on the novelty of their output")
    for option in offered(PYTEST):
        group.addoption(option.long, **option.settings())
    for ini in ini_settings():
        parser.addini(ini.name, ini.help, type=ini.type, default=ini.default)  # type: ignore[arg-type]


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Generator[None, object, object]:
    """Add the short option names once the host's initial conftests have added their options.

    An installed plugin's ``pytest_addoption`` runs before the host's root ``conftest.py``, so a
    short name registered there would make the host's own ``addoption("--model")`` fail. Here the
    host has registered its options; a short name it (or another plugin) took is skipped, and the
    ``--novelty-`` name still works. pytest parses the full command line only after this hook.
    """
    result = yield
    group = parser.getgroup(GROUP)
    registered = []
    for option in offered(PYTEST):
        if option.short is None:
            continue
        settings = {**option.settings(), "help": f"short for {option.long}"}
        try:
            group.addoption(option.short, **settings)
        except argparse.ArgumentError:
            continue  # the host project or another plugin owns this name: it keeps it
        registered.append(option.short)
    early_config.stash[SHORT_NAMES] = tuple(registered)
    return result


def attach_path_values(args: Sequence[str], names: set[str], invocation_dir: Path) -> list[str] | None:
    """``args`` with ``--option PATH`` written as ``--option=PATH`` for our options, or None if none.

    pytest picks its rootdir and config file before plugins load, from every free argument that
    names an existing path, so the PATH of ``--model PATH`` counts there as a test path (with the
    checkpoint outside the project the rootdir becomes a common parent folder and the project's
    config file is not read). Only an existing path outside the folder pytest runs from can move the
    rootdir; other values stay as given.
    """
    here = invocation_dir.resolve()

    def moves_rootdir(value: str) -> bool:
        try:
            path = (invocation_dir / value).resolve()
            return path.exists() and not path.is_relative_to(here)
        except (OSError, ValueError):  # not a usable path (too long, a NUL byte): pytest ignores it too
            return False

    fixed = list(args)
    changed = False
    i = 0
    while i < len(fixed) - 1:
        arg, value = fixed[i], fixed[i + 1]
        if arg == "--":
            break
        if arg in names and not value.startswith("-") and moves_rootdir(value):
            fixed[i : i + 2] = [f"{arg}={value}"]
            changed = True
        i += 1
    return fixed if changed else None


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """Run again with ``--model=PATH`` when ``--model PATH`` chose pytest's rootdir.

    The rootdir, config file and node ids are then those of ``--model=PATH``. Nothing has been
    configured or collected yet at this point; xdist workers get the joined form from the start.
    """
    if hasattr(config, "workerinput") or config.option.help or config.option.version:
        return None
    names = {o.long for o in offered(PYTEST) if o.takes_value}
    short = config.stash.get(SHORT_NAMES, ())
    names |= {o.short for o in offered(PYTEST) if o.takes_value and o.short in short}
    params = config.invocation_params
    fixed = attach_path_values([str(a) for a in params.args], names, Path(params.dir))
    if fixed is None:
        return None
    return int(pytest.main(fixed, plugins=list(params.plugins or ())))


def _suites_dir(config: pytest.Config) -> Path:
    if config.option.novelty_suites:  # on the command line: relative to where pytest runs
        return (Path(config.invocation_params.dir) / Path(config.option.novelty_suites).expanduser()).resolve()
    ini = config.getini("novelty_suites")
    if ini:  # in the ini file: relative to the folder that holds it (the rootdir without one)
        base = config.inipath.parent if config.inipath is not None else config.rootpath
        return (base / Path(str(ini)).expanduser()).resolve()
    # The folder pytest runs from first, then the rootdir.
    for base in (Path(config.invocation_params.dir), config.rootpath):
        local = base / "suites"
        if local.is_dir() and any(local.glob("*.toml")):
            return local
    from pytest_novelty.infra.resources import bundled_path

    return bundled_path("suites")


def _suites_field(config: pytest.Config) -> str | None:
    """Where the suites folder came from, as the user wrote it: the option, the ini setting, or
    neither (the folder found by default)."""
    if config.option.novelty_suites:
        return by_name("suites").long
    if not config.getini("novelty_suites"):
        return None
    return f"novelty_suites in {config.inipath}" if config.inipath is not None else "novelty_suites"


def _cache_dir(config: pytest.Config) -> Path:
    from pytest_novelty.infra.storage import cache_folder

    return cache_folder(config.option.novelty_cache or config.getini("novelty_cache"))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Check every option and model, prepare the demo, and hold the session's state.

    Runs first, before pytest-xdist sets up its workers: bad input stops the run at once
    (``ERROR: ...``, exit 4); a harness error found now (the demo cannot be prepared, a service of
    the run is down: the xdist controller checks them here, before any worker starts) keeps every
    case from running, says so in one line, and exits with the harness status.
    """
    from pytest_novelty.pipeline.options import check_values
    from pytest_novelty.plugin.series import configure_series

    try:  # every given value by its declaration: one line, before anything else (the same check as the CLI's)
        check_values(config.option, PYTEST)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    if config.option.novelty_model_series:
        configure_series(config)  # the newest checkpoint becomes --model
    if not config.option.novelty_model:
        return
    worker = hasattr(config, "workerinput")
    from pytest_novelty.plugin.notices import send_notices

    send_notices(config, worker=worker)  # the layers' notices reach the terminal (a worker's: the controller's)
    try:
        suites, folder, cache_dir, stopped = _checked_run(config, worker)
    except ConfigError as exc:
        if worker:  # the controller checked it all: what fails now changed since (a file removed meanwhile).
            # The worker starts with no suites and says why (a worker that raised would be restarted, and
            # fail again, each time with a traceback).
            suites, folder, cache_dir = [], _suites_dir(config), _cache_dir(config)
            stopped = HarnessError(f"the xdist worker could not start: {exc}")
        elif config.option.novelty_report:
            from pytest_novelty.report.json_report import record_no_verdict

            record_no_verdict(config.option.novelty_report, f"bad input: {exc}", pytest.ExitCode.USAGE_ERROR)
        if not worker:
            raise pytest.UsageError(str(exc)) from None
    _place_worker(config)
    _configure_snapshots(config)
    state = NoveltyState(config, suites, cache_dir)
    config.stash[STATE] = state
    config.pluginmanager.register(state, "novelty-state")
    config.add_cleanup(lambda: config.pluginmanager.unregister(state))
    if stopped is not None:
        state.stop(stopped)
    elif not worker and config.getoption("dist", "no") != "no" and not config.option.collectonly:
        # The xdist controller collects nothing: it checks every suite's services before workers start.
        state.preflight([run for suite in suites for run in suite.runs()])
    if state.stopped is not None:
        config.option.dist = "no"  # no worker starts: this process deselects every case and says why
    if config.pluginmanager.hasplugin("html"):  # pytest-html: the suites' tables and plots in its report
        from pytest_novelty.integrations.html import register_html

        register_html(config, state.final_records, lambda: state.suite_data)
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        # `pytest --model X` with no paths: run the suites, not the project's own tests.
        config.args = [str(folder)]


def _checked_run(config: pytest.Config, worker: bool) -> tuple[list[Suite], Path, Path, HarnessError | None]:
    """Every option, tracker, folder and model checked, the suites loaded and the cache cleared when
    asked: the suites, their folder, the cache folder, and the harness error that stops the run
    (None: it goes on). Bad input raises :class:`ConfigError`."""
    from pytest_novelty.pipeline.preflight import check_models, check_options
    from pytest_novelty.plugin.series import SERIES

    stopped: HarnessError | None = None
    config.option.novelty_model = check_options(config.option, model=config.option.novelty_model)
    if config.option.novelty_log and not worker:
        from pytest_novelty.integrations.base import check_trackers, open_trackers

        trackers = open_trackers if config.option.collectonly else check_trackers
        stopped = _stopped_by(lambda: trackers(config.option.novelty_log))  # a bad spec: exit 4; down: 8
    cache_dir = _cache_dir(config)
    if not worker:  # the cache and report folders can be written: found before any model loads
        stopped = stopped or _stopped_by(lambda: _prepare_folders(config, cache_dir))
    folder = _suites_dir(config)
    suites = load_suites(folder, field=_suites_field(config))
    if config.option.novelty_cache_clear and not worker and stopped is None:
        from pytest_novelty.infra.cache import clear_cache

        clear_cache(cache_dir)
    series = config.stash.get(SERIES, None) or []
    models = [config.option.novelty_model, *(c.path for c in series[:-1])]
    if worker:  # the controller prepared the demo and checked the folders
        models = [m for m in models if m not in ("demo", "demo-early")]
    if stopped is None:
        stopped = _stopped_by(
            lambda: check_models(config.option, models, config.option.novelty_baseline_model, cache_dir, suites)
        )
    return suites, folder, cache_dir, stopped


def _stopped_by(step: Callable[[], object]) -> HarnessError | None:
    """Run a step of the configuration: the harness error that stops the run before any case, or None
    (bad input is raised as it is)."""
    try:
        step()
    except HarnessError as exc:
        return exc
    return None


def _prepare_folders(config: pytest.Config, cache_dir: Path) -> None:
    """Check that the cache and report folders can be written, then put a no-verdict placeholder in
    the report folder (no stale "all passed" report)."""
    from pytest_novelty.pipeline.preflight import check_folders

    opt = config.option
    check_folders(opt, cache_dir, cache_ini=not opt.novelty_cache and bool(config.getini("novelty_cache")))
    if opt.novelty_report:
        from pytest_novelty.report.json_report import write_placeholder

        write_placeholder(opt.novelty_report, "the run stopped before its summary (see pytest's output)")


def _configure_snapshots(config: pytest.Config) -> None:
    """Snapshot comparison: on with --novelty-snapshots, the ini setting, or --snapshot-update."""
    from pytest_novelty.plugin.snapshots import SETTINGS, SnapshotSettings

    opt = config.option
    enabled = opt.novelty_snapshots
    if enabled is None:
        enabled = bool(config.getini("novelty_snapshots") or getattr(opt, "update_snapshots", False))
    root = Path(opt.novelty_snapshot_dir).resolve() if opt.novelty_snapshot_dir else None
    config.stash[SETTINGS] = SnapshotSettings(enabled=bool(enabled), root=root, rerecord=bool(opt.novelty_rerecord))


def _place_worker(config: pytest.Config) -> None:
    """Pin an xdist worker to its GPU group before CUDA initialises.

    The environment variable and torch's thread count are restored at the config's cleanup. A worker
    is known by the ``workerinput`` xdist gives its config, not by ``PYTEST_XDIST_WORKER``: a pytest run
    started from inside a worker (a test's child run, a training job under xdist) inherits that
    variable without being a worker, and must neither take a GPU group nor import torch for it.
    """
    from pytest_novelty.generation import devices

    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or config.option.novelty_device not in ("auto", "cuda"):
        return
    worker, count = str(workerinput["workerid"]), int(workerinput["workercount"])
    gpus = devices.visible_gpus()
    if gpus:
        try:
            chosen = devices.assign_gpus(worker, gpus, config.option.novelty_gpus_per_worker)
        except NoveltyError as exc:
            raise pytest.UsageError(str(exc)) from None
        patch = pytest.MonkeyPatch()
        patch.setenv("CUDA_VISIBLE_DEVICES", ",".join(chosen))
        config.add_cleanup(patch.undo)
    elif "torch" in sys.modules:
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(devices.cpu_threads(count))
        config.add_cleanup(lambda: torch.set_num_threads(before))
    else:  # torch reads it when it loads, if it loads at all (a warm rerun never imports it)
        patch = pytest.MonkeyPatch()
        patch.setenv("OMP_NUM_THREADS", str(devices.cpu_threads(count)))
        config.add_cleanup(patch.undo)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = config.stash.get(STATE, None)
    if state is None:
        return None
    folders = sorted({str(p.parent) for p in state.suites})
    from pytest_novelty.infra.cache import cache_usage

    size = sum(cache_usage(state.cache_dir).values()) / 1e6
    return [
        f"novelty: model {config.option.novelty_model}, suites {', '.join(folders)}, "
        f"cache {state.cache_dir} ({size:.0f} MB)"
    ]


class SuiteFile(pytest.Module):
    """A suite file collected as a test module whose object is ``pytest_novelty.plugin.items``.

    The module object is given through the node's public ``obj`` attribute, so the cases are real
    ``pytest.Function`` items (syrupy derives each snapshot's place from them) parametrized by
    :func:`pytest_generate_tests`; the suite itself is in the node's stash under :data:`SUITE`.
    With ``--model-series`` the module also holds one ``test_checkpoint`` item per earlier
    checkpoint and suite run; without a series it holds none.
    """

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        nodes = list(super().collect())
        return [n for n in nodes if not n.name.startswith("test_checkpoint") or "[" in n.name]

def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    state = parent.config.stash.get(STATE, None)
    if state is None or file_path.suffix != ".toml":
        return None
    suite = state.suites.get(file_path.resolve())
    if suite is None:
        return None
    from pytest_novelty.plugin import items

    node = SuiteFile.from_parent(parent, path=file_path)
    node.obj = items
    node.stash[SUITE] = suite
    return node


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    module = metafunc.definition.getparent(SuiteFile)
    if module is None:
        return
    suite = module.stash[SUITE]
    if "novelty_checkpoint" in metafunc.fixturenames:  # --model-series: each earlier checkpoint, each run
        from pytest_novelty.plugin.series import SERIES

        earlier = (metafunc.config.stash.get(SERIES, None) or [])[:-1]
        pairs = [(run, checkpoint) for run in suite.runs() if spread_series(run) for checkpoint in earlier]
        if pairs:
            metafunc.parametrize(
                ("novelty_suite", "novelty_checkpoint"), pairs, ids=[f"{run.name}@{c.step}" for run, c in pairs]
            )
        return
    if "novelty_threshold" not in metafunc.fixturenames:
        return
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
    if novelty_state.shard is not None:  # --novelty-shard: its part of the suite, then the case is skipped
        novelty_state.shard_case(novelty_suite, request.node)
    result = novelty_state.guarded(lambda: novelty_state.cases.result(novelty_suite), request.node)
    line = novelty_state.announce(novelty_suite, result)
    if line:  # the first case of the suite carries what its run did, to the controller's log
        request.node.user_properties.append(("novelty_work", line))
    return result


@pytest.fixture
def novelty_baseline(
    novelty_state: NoveltyState, novelty_suite: Suite, request: pytest.FixtureRequest
) -> Baseline | None:
    """What the suite is compared with, paired: the baseline checkpoint or the human references."""
    baseline = novelty_state.session.baseline
    return novelty_state.guarded(lambda: baseline(novelty_suite), request.node, " in the baseline")
