"""Every option of a run, declared once: pytest's options, the command line's arguments and
:class:`~pytest_novelty.pipeline.config.RunConfig` are built from :data:`OPTIONS`.

An :class:`Option` named ``NAME`` is

- ``--novelty-NAME`` in pytest (``config.option.novelty_NAME``), and its ``short`` spelling
  (``--model``) where the host project and the other plugins leave that name free;
- ``--NAME`` (or its ``short`` spelling) in ``pytest-novelty run``, with the same destination
  ``novelty_NAME``, so one namespace shape serves both front ends;
- the ini setting ``ini`` when it has one (pytest only; the option wins);
- the :class:`~pytest_novelty.pipeline.config.RunConfig` field ``field`` when it sets one.

``where`` says which front ends offer it: a few belong to one only (pytest has syrupy's own
``--snapshot-update``; the command line has ``--suite`` where pytest has ``-k``). This module imports
nothing heavy: the plugin reads it when pytest starts.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pytest_novelty.generation.backends import GENERATORS
from pytest_novelty.pipeline.values import Takes

__all__ = ["OPTIONS", "Option", "add_arguments", "by_name", "check_values", "ini_settings", "offered", "spelled"]

UNSET: Any = object()
"""The default of an option that declares none (see :attr:`Option.default`)."""

PYTEST = "pytest"
CLI = "cli"
BOTH = (PYTEST, CLI)
FLAG = Takes("flag")


@dataclass(frozen=True)
class Option:
    """One option of a run (see the module doc)."""

    name: str
    help: str
    short: str | None = None
    """The spelling users type where it is free (``--model``); None: only ``--novelty-NAME`` in pytest."""
    metavar: str | None = None
    default: Any = UNSET
    """The value when the option is not given: None for a value option, False for a flag (unless set)."""
    action: str = "store"
    field: str | None = None
    """The ``RunConfig`` field this option sets, if any."""
    ini: str | None = None
    """The pytest ini setting that gives it a default (``novelty_suites``), if any."""
    ini_help: str = ""
    where: tuple[str, ...] = BOTH
    takes: Takes = FLAG
    """What the value is (:class:`~pytest_novelty.pipeline.values.Takes`): both front ends check a given
    value by it before anything runs, and the fault matrix of the tests breaks it by it."""

    @property
    def long(self) -> str:
        """The pytest spelling, ``--novelty-NAME``."""
        return f"--novelty-{self.name}"

    @property
    def dest(self) -> str:
        """Where the value lands in a parsed namespace: ``novelty_NAME``."""
        return "novelty_" + self.name.replace("-", "_")

    @property
    def cli_flag(self) -> str:
        """The command line's spelling: the short one, else ``--NAME``."""
        return self.short or f"--{self.name}"

    def spelled(self, front: str) -> str:
        """How ``front`` (``"pytest"`` or ``"cli"``) spells the option in a message: the command
        line's flag, or pytest's short spelling where it has one, else ``--novelty-NAME``."""
        return self.cli_flag if front == CLI else self.short or self.long

    @property
    def takes_value(self) -> bool:
        """Whether the option reads a value (so ``--option VALUE`` can hold a path)."""
        return self.action in ("store", "append")

    @property
    def described(self) -> str:
        """The help, and what a value may be where the declaration says it: a number's range, the choices."""
        takes = self.takes
        if takes.kind == "number":
            return f"{self.help} ({takes.range_words})"
        if takes.kind == "choice" and not all(choice in self.help for choice in takes.choices):
            return f"{self.help} (one of {', '.join(takes.choices)})"
        return self.help

    def settings(self) -> dict[str, Any]:
        """The keywords for ``parser.addoption`` / ``add_argument`` (without the names). Both front ends
        take the value as text, which :func:`check_values` checks by its declaration (pytest's own
        parser would print its usage around a type's error)."""
        out: dict[str, Any] = {"dest": self.dest, "help": self.described, "action": self.action}
        if self.takes_value and self.metavar:
            out["metavar"] = self.metavar
        unset = False if self.action == "store_true" else None
        out["default"] = unset if self.default is UNSET else self.default
        return out


MODEL = Takes("model", read_by="the model's source: the checkpoint's checks, the hub, the served model, the files")


#: Every option, in ``--help`` order. To add one: a line here, then read its ``dest`` (or its field).
OPTIONS: tuple[Option, ...] = (
    Option("model", short="--model", metavar="PATH_OR_ID",
           help="checkpoint to gate: a local Hugging Face folder, a hub id, 'demo' / 'demo-early', a served "
                "openai:NAME, or answers:FILE generated elsewhere", takes=MODEL),
    Option("model-series", short="--model-series", metavar="RUN_DIR",
           help="gate the newest checkpoint-<step> of RUN_DIR (or of a quoted glob) and report the whole series",
           takes=Takes("folder", read_by="the series' finder, which names every entry it refuses (or a glob)")),
    Option("model-base-url", short="--model-base-url", metavar="URL", field="model_base_url",
           help="OpenAI-compatible endpoint of a served --model openai:NAME (vLLM, SGLang, TGI, transformers serve)",
           takes=Takes("url")),
    Option("model-revision", short="--model-revision", metavar="REV", field="model_revision",
           help="revision of a hub id (as org/name@REV) or of a served model's weights (part of its cache key)",
           takes=Takes("text", why="any revision name: the hub, or the served model, says whether it exists")),
    Option("base-model", short="--base-model", metavar="PATH_OR_ID", field="base_model",
           help="base checkpoint of a PEFT adapter --model (default: the adapter config's base_model_name_or_path)",
           takes=MODEL),
    Option("device", short="--device", metavar="DEVICE", default="auto", field="device",
           help="where the model runs: auto (CUDA when available, else CPU), cpu, cuda, cuda:N", takes=Takes("spec")),
    Option("generator", short="--generator", metavar="NAME", default="hf", field="generator",
           help="generation backend: hf (transformers; default), vllm (faster on GPUs, when installed) "
           "or auto (vllm where it can run, else hf)", takes=Takes("choice", choices=GENERATORS)),
    Option("suites", metavar="DIR", ini="novelty_suites",
           ini_help="folder of suite files, relative to the folder holding the ini file (the rootdir)",
           help="folder of suite files (*.toml); default: ./suites, else the bundled ones",
           takes=Takes("folder", what="the folder of suite files (*.toml)")),
    Option("suite", metavar="NAME", action="append", where=(CLI,),
           help="run only this suite (repeatable; under pytest select with -k)", takes=Takes("spec")),
    Option("cache", metavar="DIR", ini="novelty_cache", ini_help="cache folder for pytest-novelty",
           help="cache folder for demo assets, generations and scores (default ~/.cache/pytest-novelty)",
           takes=Takes("out-folder", what="cache folder")),
    Option("originality", short="--originality", metavar="SPEC", field="originality",
           help="originality backend for every suite: infini-gram:DIR, ngram-set:DIR, infini-gram-api:INDEX, ...",
           takes=Takes("spec")),
    Option("judge", short="--judge", metavar="SPEC", field="judge",
           help="quality judge for every suite: rules, openai:MODEL, ...", takes=Takes("spec")),
    Option("judge-base-url", short="--judge-base-url", metavar="URL", field="judge_base_url",
           help="OpenAI-compatible endpoint for openai: judges (default $OPENAI_BASE_URL)", takes=Takes("url")),
    Option("trust-remote-code", short="--trust-remote-code", action="store_true", field="trust_remote_code",
           help="allow a checkpoint to run the Python code it ships (review it first)"),
    Option("gpus-per-worker", short="--gpus-per-worker", metavar="N", default=1, field="gpus_per_worker",
           help="GPUs one model is spread over (one per pytest-xdist worker group)", takes=Takes("number", 1, 1024)),
    Option("seed", metavar="N", field="seed",
           help="override every suite's generation seed (a different seed must not look like a regression)",
           takes=Takes("number", 0, 2**32 - 1)),
    Option("baseline-model", short="--baseline-model", metavar="PATH_OR_ID",
           help="also generate and score this checkpoint on the same prompts and compare paired", takes=MODEL),
    Option("snapshots", action="store_true", default=None, ini="novelty_snapshots",
           ini_help="compare cases with their snapshots",
           help="compare every case with its accepted snapshot (on with --snapshot-update)"),
    Option("snapshot-update", action="store_true", where=(CLI,),
           help="accept this run's values as the new snapshots where they differ (pytest: syrupy's own option)"),
    Option("snapshot-dir", metavar="DIR",
           help="where snapshots live (default: __novelty_snapshots__ beside each suite file)",
           takes=Takes("out-folder", what="snapshot folder",
                       read_by="the preflight, which probes it when --snapshot-update writes it (a compare reads)")),
    Option("rerecord", action="store_true",
           help="with --snapshot-update: re-record every snapshot, even those within tolerance"),
    Option("threshold-mode", metavar="MODE", takes=Takes("choice", choices=("point", "lenient", "strict")),
           help="how a threshold case reads its value's interval (default: each suite's [gate] threshold_mode): "
           "point (the value), lenient (fail only when the whole interval is on the wrong side), strict (pass "
           "only when the whole interval is on the right side)"),
    Option("repeat", metavar="N", default=1, takes=Takes("number", 1, 1000),
           help="also generate N - 1 more independent sets of samples and report each case's pass rate and "
           "spread over the N (the verdict stays the first's, whose cached answers are reused)"),
    Option("adaptive", metavar="SAMPLES", takes=Takes("number", 1, 10_000_000),
           help="spend up to SAMPLES more samples per suite run, in rounds, on the threshold cases the first pass "
           "cannot decide, under a sequential rule that keeps each case's error rates (docs/verdicts.md)"),
    Option("adaptive-minutes", metavar="M", takes=Takes("number", 0.1, 10_080, whole=False),
           help="with --novelty-adaptive: stop a suite's rounds after M minutes (its undecided cases stay undecided)"),
    Option("shard", metavar="K/N", field="shard",
           help="do shard K of N of the gate only (numbered from 1, as Slurm's --array=1-N): generate and score "
           "its part into the cache and decide no case (each is 'decided by the merge run', a skip under "
           "pytest); 'auto' reads the shard from a Slurm array, a Kubernetes Indexed Job or a CI's parallel "
           "jobs (docs/shards.md)", takes=Takes("spec")),
    Option("fill-missing-shards", action="store_true", field="fill_missing_shards",
           help="in the merge run over the shards' caches: generate the answers of shards whose part the cache "
           "lacks, instead of stopping with a harness error that names them"),
    Option("cache-clear", action="store_true",
           help="remove cached generations, scores and judge answers before the run (keeps the built demo)"),
    Option("report", metavar="DIR", help="write report.json, report.md and plots into DIR",
           takes=Takes("out-folder", what="report folder")),
    Option("log", metavar="SPEC", action="append",
           help="also log the results to a tracker (repeatable): tensorboard:DIR, wandb:PROJECT, mlflow:URI",
           takes=Takes("spec")),
    Option("output", metavar="FILE", where=(CLI,),
           help="also write each suite's prompts, answers and metrics to this JSON file",
           takes=Takes("out-file", what="the output file")),
)


def by_name(name: str) -> Option:
    """The option called ``name`` (``KeyError`` when there is none)."""
    return {option.name: option for option in OPTIONS}[name]


def spelled(option: str, front: str = PYTEST) -> str:
    """How ``front`` (``"pytest"`` or ``"cli"``) spells ``option`` in a message: ``option`` is the
    name of an option of the table (``fill-missing-shards``) or any of its spellings
    (``--novelty-log``, ``--log``), see :meth:`Option.spelled`; any other text (a suite key, an ini
    setting) is returned as it is. A message names an option the way the user typed it."""
    return next((o.spelled(front) for o in OPTIONS if option in (o.name, o.long, o.cli_flag)), option)


def offered(where: str) -> Iterator[Option]:
    """The options one front end (``"pytest"`` or ``"cli"``) offers, in ``--help`` order."""
    return (o for o in OPTIONS if where in o.where)


def add_arguments(parser: argparse.ArgumentParser, *, exclusive: tuple[str, ...] = ("model", "model-series")) -> None:
    """The command line's ``run`` arguments, from :data:`OPTIONS`; ``exclusive`` names form a required,
    mutually exclusive group (one checkpoint or one series)."""
    group = parser.add_mutually_exclusive_group(required=True) if exclusive else None
    for option in offered(CLI):
        target: Any = group if group is not None and option.name in exclusive else parser
        target.add_argument(option.cli_flag, **option.settings())


def check_values(options: Any, front: str = PYTEST) -> None:
    """Check every given value of the table's options in ``options`` (a parsed namespace) by its
    declaration, in place (a number becomes one): bad input is one line naming the option as
    ``front`` spells it, the value and the fix (:meth:`~pytest_novelty.pipeline.values.Takes.check`)."""
    for option in offered(front):
        value = getattr(options, option.dest, None)
        if value is not None and option.takes_value:
            setattr(options, option.dest, option.takes.check(value, option.spelled(front)))


@dataclass(frozen=True)
class Ini:
    """One pytest ini setting taken from the table."""

    name: str
    help: str
    type: str | None = None
    default: Any = field(default="")


def ini_settings() -> list[Ini]:
    """The ini settings the table declares (for ``parser.addini``)."""
    out = []
    for option in offered(PYTEST):
        if option.ini:
            boolean = option.action == "store_true"
            out.append(Ini(option.ini, option.ini_help or option.help, "bool" if boolean else None,
                           False if boolean else ""))
    return out
