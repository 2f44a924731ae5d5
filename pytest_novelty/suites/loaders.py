"""Prompt sources: the real dataset formats, the project's own JSON Lines, and hub ids.

One entry point, :func:`load_prompts`, takes a source string ``KIND:LOCATION``:

=================  ==================================================================
``builtin:NAME``   the prompts that ship with the project (``suites/data/NAME.jsonl``)
``jsonl:PATH``     a file in the project's own format (``id``, ``text``, ``reference``,
                   ``meta``, ``split``; ``task`` per line or as an option)
``tinystories:P``  TinyStories: a text file with ``<|endoftext|>`` separators, or JSONL
``copoet:P``       CoPoet test sets (JSON Lines despite ``.json``), a file or a folder
``macgyver:P``     the MacGyver workbook (``.xlsx``) or its JSONL conversion
``noveltybench:P`` NoveltyBench ``curated.jsonl`` / ``wildchat-1k.jsonl``
=================  ==================================================================

Relative paths are read from ``base_dir`` (the suite file's folder). ``KIND:hf:OWNER/NAME``
reads a dataset from the Hugging Face hub through ``datasets``, imported only then. The datasets'
formats are read by :mod:`pytest_novelty.suites.dataset_formats`.

Every source has a held-out split for in-context examples (option ``split``: ``test``, the
default, ``examples`` or ``all``). The project's files mark it per line; for the real datasets
it is a fixed ``holdout`` fraction of the prompts that have a reference answer, chosen by a hash
of their ids, so it never changes with ``limit`` or ``seed``.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_novelty.infra.errors import ConfigError, did_you_mean
from pytest_novelty.suites.dataset_formats import CONVERTERS, READERS, Row, hub_rows, read_records, require
from pytest_novelty.suites.prompts import TASKS, Prompt

__all__ = ["SOURCE_KINDS", "SPLITS", "load_prompts", "locate_prompt"]

SOURCE_KINDS = ("builtin", "jsonl", "tinystories", "copoet", "macgyver", "noveltybench")
SPLITS = ("test", "examples", "all")
HUB_PREFIX = "hf:"

_OWN_FIELDS = ("id", "text", "reference", "meta", "split", "task")
_HUB_SPLITS = {"tinystories": "validation", "noveltybench": "curated"}
_KIND_TASKS = {"tinystories": "story", "copoet": "poetry", "macgyver": "tool", "noveltybench": "open"}

# A kind's own options, name -> (default, allowed types); ``split`` and ``task`` are every kind's, and
# the dataset kinds all take _DATASET_OPTIONS.
_OPTIONS: dict[str, dict[str, tuple[Any, tuple[type, ...]]]] = {
    "tinystories": {"opening_sentences": (1, (int,)), "opening_words": (None, (int,)), "skip_partial": (True, (bool,))},
    "macgyver": {"solvable_only": (True, (bool,)), "unconventional_only": (False, (bool,))},
}
_DATASET_OPTIONS: dict[str, tuple[Any, tuple[type, ...]]] = {
    "holdout": (0.1, (float, int)), "hub_split": (None, (str,)), "hub_config": (None, (str,)),
}


def load_prompts(
    source: str, *, base_dir: Path, limit: int | None = None, seed: int = 0, **options: Any
) -> list[Prompt]:
    """The prompts of ``source``, ``limit`` of them a seeded random subset in file order; a
    ``ConfigError`` naming the file (and line) and the fix for any bad source, file or option."""
    kind, location = _parse_source(source)
    opts = _check_options(kind, options)
    if kind in ("builtin", "jsonl"):
        prompts = _load_own(kind, location, base_dir, opts)
    else:
        prompts = _load_dataset(kind, location, base_dir, opts)
    return _take(prompts, limit, seed)


def locate_prompt(source: str, prompt_id: str, *, base_dir: Path) -> str:
    """Where the prompt ``prompt_id`` of ``source`` was read, for error messages: the file and line for
    the project's own files, the file (or hub id) and the prompt id for the datasets (derived ids)."""
    try:
        kind, location = _parse_source(source)
        if location.startswith(HUB_PREFIX):
            return f"{location} (prompt {prompt_id!r})"
        path = _builtin_path(location) if kind == "builtin" else _resolve(location, base_dir)
        if kind in ("builtin", "jsonl"):
            for where, record in read_records(path, "JSON lines"):
                if str(record.get("id")) == prompt_id:
                    return f"{path} {where}"
        return f"{path} (prompt {prompt_id!r})"
    except ConfigError:
        return f"{source} (prompt {prompt_id!r})"


def _load_own(kind: str, location: str, base_dir: Path, opts: dict[str, Any]) -> list[Prompt]:
    if location.startswith(HUB_PREFIX):
        raise ConfigError(
            f"{kind}: sources are files; hub ids work for the dataset kinds ({', '.join(SOURCE_KINDS[2:])})",
            field="source",
        )
    path = _builtin_path(location) if kind == "builtin" else _resolve(location, base_dir)
    default_task = opts["task"] or (location if kind == "builtin" and location in TASKS else None)
    rows = read_records(path, "one JSON object per line with id and text")
    return _own_prompts(rows, path, default_task=default_task, split=opts["split"])


def _load_dataset(kind: str, location: str, base_dir: Path, opts: dict[str, Any]) -> list[Prompt]:
    if opts["task"] not in (None, _KIND_TASKS[kind]):
        raise ConfigError(f"{kind} sources hold {_KIND_TASKS[kind]} prompts, not {opts['task']} prompts", field="task")
    if not 0 <= opts["holdout"] < 1:
        raise ConfigError(f"must be at least 0 and below 1, got {opts['holdout']}", field="options.holdout")
    if location.startswith(HUB_PREFIX):
        dataset = location[len(HUB_PREFIX):]
        split = opts["hub_split"] or _HUB_SPLITS.get(kind, "test")
        rows, origin = hub_rows(dataset, split=split, config=opts["hub_config"]), f"hf:{dataset}"
    else:
        if opts["hub_split"] or opts["hub_config"]:
            raise ConfigError("hub_split and hub_config apply to hub ids (hf:OWNER/NAME) only", field="options")
        path = _resolve(location, base_dir)
        rows, origin = READERS[kind](path), str(path)
    return _select_split(CONVERTERS[kind](rows, origin, opts), opts["split"], opts["holdout"])


def _parse_source(source: str) -> tuple[str, str]:
    kind, sep, location = source.partition(":")
    if not sep or kind not in SOURCE_KINDS:
        guess = did_you_mean(kind if sep else source, SOURCE_KINDS)
        if not sep and source in TASKS:
            guess = f" (did you mean 'builtin:{source}'?)"
        raise ConfigError(f"unknown prompt source {source!r}; use KIND:PATH with KIND one of {', '.join(SOURCE_KINDS)}"
                          + guess, field="source")
    if not location.strip():
        raise ConfigError(f"{source!r} names no file; e.g. '{kind}:data/prompts.jsonl'", field="source")
    return kind, location.strip()


def _check_options(kind: str, options: Mapping[str, Any]) -> dict[str, Any]:
    allowed = {"split": ("test", (str,)), "task": (None, (str,)), **_OPTIONS.get(kind, {})}
    if kind not in ("builtin", "jsonl"):
        allowed.update(_DATASET_OPTIONS)
    resolved = {name: default for name, (default, _) in allowed.items()}
    for name, value in options.items():
        if name not in allowed:
            raise ConfigError(f"unknown option {name!r} for {kind} sources; allowed: {', '.join(sorted(allowed))}"
                              + did_you_mean(name, allowed), field=f"options.{name}")
        types = allowed[name][1]
        wrong_bool = isinstance(value, bool) and bool not in types
        if value is not None and (wrong_bool or not isinstance(value, types)):
            names = " or ".join(t.__name__ for t in types)
            raise ConfigError(f"expected {names}, got {value!r}", field=f"options.{name}")
        resolved[name] = value
    if resolved["split"] not in SPLITS:
        raise ConfigError(f"unknown split {resolved['split']!r}; expected one of {', '.join(SPLITS)}"
                          + did_you_mean(resolved["split"], SPLITS), field="options.split")
    return resolved


def _resolve(location: str, base_dir: Path) -> Path:
    path = Path(location).expanduser()
    path = path if path.is_absolute() else Path(base_dir) / path
    if not path.exists():
        raise ConfigError(f"file not found (relative paths are read from {base_dir})", path=path)
    return path


def _builtin_path(name: str) -> Path:
    from pytest_novelty.infra.resources import bundled_path

    folder = bundled_path("suites") / "data"
    path = folder / f"{name}.jsonl"
    if not path.is_file():
        available = sorted(p.stem for p in folder.glob("*.jsonl"))
        raise ConfigError(f"no built-in prompt set {name!r}; available: {', '.join(available)}"
                          + did_you_mean(name, available), field="source")
    return path


def _own_prompts(rows: list[Row], path: Path, *, default_task: str | None, split: str) -> list[Prompt]:
    """The project's format: id, text, reference (optional), meta (optional), split, task."""
    if default_task is not None and default_task not in TASKS:
        raise ConfigError(f"unknown task {default_task!r}; expected one of {', '.join(TASKS)}"
                          + did_you_mean(default_task, TASKS), field="options.task")
    if default_task is None and path.stem in TASKS:
        default_task = path.stem
    prompts: list[Prompt] = []
    seen: dict[str, str] = {}
    for where, record in rows:
        unknown = [k for k in record if k not in _OWN_FIELDS]
        if unknown:
            raise ConfigError(f"{where}: unknown field {unknown[0]!r}; allowed: {', '.join(_OWN_FIELDS)}"
                              + did_you_mean(unknown[0], _OWN_FIELDS), path=path)
        prompt_id = str(require(record, "id", where, str(path), ("id", "text")))
        text = require(record, "text", where, str(path), ("id", "text"))
        task = record.get("task") or default_task
        if task not in TASKS:
            raise ConfigError(f"{where}: no task; add \"task\" (one of {', '.join(TASKS)}) to each line or set the "
                              "source's task option", path=path)
        row_split = record.get("split") or "test"
        if row_split not in SPLITS[:2]:
            raise ConfigError(f"{where}: split must be 'test' or 'examples', got {row_split!r}", path=path)
        reference, meta = record.get("reference"), record.get("meta") or {}
        if not isinstance(text, str) or not (reference is None or isinstance(reference, str)):
            raise ConfigError(f"{where}: text and reference must be strings", path=path)
        if not isinstance(meta, dict):
            raise ConfigError(f"{where}: meta must be a JSON object", path=path)
        if prompt_id in seen:
            raise ConfigError(f"{where}: id {prompt_id!r} repeats the one on {seen[prompt_id]}", path=path)
        seen[prompt_id] = where
        if split in ("all", row_split):
            prompts.append(Prompt(prompt_id, task, text.strip(), reference, meta))
    return prompts


def _select_split(prompts: list[Prompt], split: str, holdout: float) -> list[Prompt]:
    """The fixed held-out examples: ``holdout`` of the prompts that have a reference, by id hash."""
    if split == "all":
        return prompts
    answered = [p for p in prompts if p.reference]
    count = math.ceil(holdout * len(answered))
    ranked = sorted(answered, key=lambda p: hashlib.sha256(p.id.encode("utf-8")).hexdigest())
    held = {p.id for p in ranked[:count]}
    return [p for p in prompts if (p.id in held) == (split == "examples")]


def _take(prompts: list[Prompt], limit: int | None, seed: int) -> list[Prompt]:
    if limit is None:
        return prompts
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"limit must be a whole number of at least 1, got {limit!r}", field="limit")
    if limit >= len(prompts):
        return prompts
    keep = sorted(random.Random(seed).sample(range(len(prompts)), limit))
    return [prompts[i] for i in keep]
