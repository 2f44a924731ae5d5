"""Bad input found before the first training step, never at the first save.

Two checks, each raising :class:`~pytest_novelty.infra.errors.ConfigError` in one line that names
what the user wrote (``NoveltyGateCallback(judge=...)``, a suite file and its key, an option of
``extra_args``):

* :func:`check_arguments`, when the callback is made: its own arguments, the suite files (every
  key, as the gate reads them), every originality and judge spec (the callback's and the suites'),
  the tracker specs of ``--novelty-log`` in ``extra_args``, the device;
* :func:`dry_run`, when training begins: the gate's own command line collected by pytest
  (``--collect-only``), so every option of ``extra_args``, the project's pytest config and its
  suites are read exactly as every gate will read them. No checkpoint exists yet, so the dry run
  stands in a served model that is never contacted (collection loads and asks nothing).
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_novelty.infra.errors import ConfigError, last_line
from pytest_novelty.integrations.trainer_gate import NO_CASE_EXIT_STATUS, GateSettings, usage_error

if TYPE_CHECKING:
    from pytest_novelty.infra.registry import Registry

logger = logging.getLogger("pytest_novelty.integrations.trainer")

CALLBACK = "NoveltyGateCallback"

AUTO_NEEDS_ORIGINALITY = (
    "scoring.originality is 'auto' (an index saved in the checkpoint folder), which no checkpoint the "
    f"Trainer saves holds; pass {CALLBACK}(originality='infini-gram:DIR') (pytest-novelty index build)"
)

#: Options the callback sets on every gate itself: ``extra_args`` may not give them.
OWNED = ("--novelty-model", "--model", "--novelty-model-series", "--model-series", "--novelty-report")

DRY_RUN_MODEL = "openai:novelty-gate-dry-run"
"""The stand-in model of the dry run: a served model, never contacted by pytest's collection."""
DRY_RUN_URL = "http://127.0.0.1:9/v1"
DRY_RUN_TIMEOUT = 120.0
"""Seconds the dry run may take before the check is left to the first gate (a loaded machine)."""


def keyword(name: str) -> str:
    """How an error names one of the callback's arguments: ``NoveltyGateCallback(judge=...)``."""
    return f"{CALLBACK}({name}=...)"


def check_arguments(
    *,
    every: Any,
    flags: dict[str, Any],
    end_timeout: Any,
    gate_timeout: Any,
    device: str | None,
    suites: Path | None,
    originality: str | None,
    judge: str | None,
    extra_args: Sequence[str],
) -> None:
    """Every argument of the callback that can be checked without running anything (see the
    module doc); ``flags`` are its yes/no arguments by name."""
    if not isinstance(every, int) or isinstance(every, bool) or every < 1:
        raise ConfigError(f"every must be a whole number of saves, 1 or more; got {every!r}", field=keyword("every"))
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise ConfigError(f"{name} is True or False; got {value!r}", field=keyword(name))
    if flags.get("skip_queued") and flags.get("wait", True):
        raise ConfigError("skip_queued applies to wait=False (with wait=True no save waits for a gate)",
                          field=keyword("skip_queued"))  # fmt: skip
    for name, seconds in (("end_timeout", end_timeout), ("gate_timeout", gate_timeout)):
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                    or not seconds > 0):  # fmt: skip
            raise ConfigError(f"{name} is a number of seconds above 0, or None (no bound); got {seconds!r}",
                              field=keyword(name))  # fmt: skip
    _check_extra_args(extra_args)
    if device is not None:
        _check_device(device)
    _check_spec("originality", originality, None)
    _check_spec("judge", judge, None)
    if suites is not None:
        _check_suites(suites, originality=originality, judge=judge)


def _check_device(device: str) -> None:
    from pytest_novelty.generation.devices import check_device

    try:
        check_device(str(device))
    except ConfigError as exc:
        words = exc.detail.replace("--device cpu", "device='cpu'").replace("--device", "device")
        raise ConfigError(words, field=keyword("device")) from None


def _check_spec(kind: str, spec: str | None, suite: Any) -> None:
    """An originality or judge spec parses and its ``?options`` are known (nothing is opened)."""
    if spec is None or (kind == "originality" and spec == "auto"):
        return
    from pytest_novelty.scoring.judges.base import JUDGES
    from pytest_novelty.scoring.originality.backend import BACKENDS

    registry: Registry[Any] = BACKENDS if kind == "originality" else JUDGES
    try:
        registry.options(registry.parse(spec), {})
    except ConfigError as exc:
        if suite is None:
            raise ConfigError(exc.detail, field=keyword(kind)) from None
        raise ConfigError(exc.detail, path=suite.path, field=f"scoring.{kind}") from None


def _check_suites(folder: Path, *, originality: str | None, judge: str | None) -> None:
    from pytest_novelty.suites.suite_file import load_suites

    if not folder.is_dir():
        raise ConfigError("the suites folder does not exist", path=folder, field=keyword("suites"))
    for suite in load_suites(folder):
        for run in suite.runs():
            if originality is None and run.scoring.originality == "auto":
                raise ConfigError(AUTO_NEEDS_ORIGINALITY, path=run.path)
            if originality is None:
                _check_spec("originality", run.scoring.originality, run)
            if judge is None:
                _check_spec("judge", run.scoring.judge, run)


def _check_extra_args(extra_args: Sequence[str]) -> None:
    if isinstance(extra_args, str) or not all(isinstance(a, str) for a in extra_args):
        raise ConfigError(f"extra_args is a list of pytest arguments (strings); got {extra_args!r}",
                          field=keyword("extra_args"))  # fmt: skip
    for arg in extra_args:
        name = arg.partition("=")[0]
        if name in OWNED:
            raise ConfigError(f"{name}: the callback sets it on every gate (each saved checkpoint, its own "
                              "report folder); remove it", field=keyword("extra_args"))  # fmt: skip
    specs = _values(extra_args, "--novelty-log")
    if specs:
        from pytest_novelty.integrations.base import check_trackers

        check_trackers(specs)


def _values(args: Sequence[str], option: str) -> list[str]:
    """The values of ``option`` in ``args`` (``--opt=VALUE`` and ``--opt VALUE``)."""
    out = []
    for i, arg in enumerate(args):
        if arg.startswith(option + "="):
            out.append(arg.partition("=")[2])
        elif arg == option and i + 1 < len(args):
            out.append(args[i + 1])
    return out


def dry_run_command(settings: GateSettings) -> list[str]:
    """The gate's command line as the dry run collects it (see the module doc); it leaves the
    cache and the report alone (no ``--novelty-cache-clear``, no report folder)."""
    options = [o for o in settings.options() if o.partition("=")[0] != "--novelty-cache-clear"]
    return settings.pytest_command(f"--novelty-model={DRY_RUN_MODEL}", f"--novelty-model-base-url={DRY_RUN_URL}",
                                   "--collect-only", options=options)  # fmt: skip


def dry_run(settings: GateSettings, *, timeout: float = DRY_RUN_TIMEOUT) -> None:
    """Collect the gate's command line with pytest before training: its refusal (exit status 4,
    or no case selected) is a :class:`ConfigError` in the gate's own words, with the callback's
    names for what the callback's arguments gave. A dry run that cannot finish (a loaded machine,
    a broken environment) is a warning: the first gate then says what is wrong."""
    try:
        done = subprocess.run(dry_run_command(settings), capture_output=True, text=True, timeout=timeout,
                              env=settings.env(), stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    except FileNotFoundError:
        raise ConfigError(f"{settings.python}: no such Python", field=keyword("python")) from None
    except (subprocess.TimeoutExpired, OSError) as exc:
        logger.warning("novelty gate: could not check the gate's options before training (%s); the first "
                       "gate will", type(exc).__name__)  # fmt: skip
        return
    output = done.stdout + "\n" + done.stderr
    if done.returncode == 0:
        return
    if done.returncode == NO_CASE_EXIT_STATUS:
        raise ConfigError(f"the gate's options select no case of its suites ({last_line(output)})",
                          field=keyword("extra_args"))  # fmt: skip
    refused = usage_error(output)
    if done.returncode == 4 and refused:
        raise ConfigError(_callback_words(" ".join(refused.split()), settings))
    logger.warning("novelty gate: the check of the gate's options before training ended with exit status %s: %s",
                   done.returncode, last_line(output))  # fmt: skip


def _callback_words(line: str, settings: GateSettings) -> str:
    """A refusal of the gate's pytest, naming the callback's argument where one gave the option."""
    from pytest_novelty.pipeline.options import by_name
    from pytest_novelty.pipeline.runner import SERVED_NEEDS_ORIGINALITY

    if SERVED_NEEDS_ORIGINALITY in line:  # the stand-in is served; a saved checkpoint has no index either
        return AUTO_NEEDS_ORIGINALITY
    if line.startswith(("unrecognized arguments: ", "argument ")):  # pytest's argument parser refused one
        return f"{keyword('extra_args')}: pytest refuses them: {line}"
    for name in ("suites", "originality", "judge", "cache", "device"):
        if getattr(settings, name) is None:
            continue
        option = by_name(name)
        for spelling in filter(None, (option.long, option.short)):
            if line.startswith(f"{spelling}: "):
                return f"{keyword(name)}: {line[len(spelling) + 2:]}"
    return line
