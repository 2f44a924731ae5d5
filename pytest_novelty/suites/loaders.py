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
reads a dataset from the Hugging Face hub through ``datasets``, imported only then.

Every source has a held-out split for in-context examples (option ``split``: ``test``, the
default, ``examples`` or ``all``). The project's files mark it per line; for the real datasets
it is a fixed ``holdout`` fraction of the prompts that have a reference answer, chosen by a hash
of their ids, so it never changes with ``limit`` or ``seed``.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_novelty.infra.errors import ConfigError, did_you_mean
from pytest_novelty.suites.prompts import TASKS, Prompt
from pytest_novelty.suites.tasks import find_characters, parse_instruction, parse_items, split_opening

__all__ = ["SOURCE_KINDS", "SPLITS", "load_prompts", "locate_prompt"]

SOURCE_KINDS = ("builtin", "jsonl", "tinystories", "copoet", "macgyver", "noveltybench")
SPLITS = ("test", "examples", "all")
HUB_PREFIX = "hf:"
END_OF_TEXT = "<|endoftext|>"

Row = tuple[str, dict[str, Any]]
"""A record and where it came from ("line 3", "row 12"), for error messages."""

_OWN_FIELDS = ("id", "text", "reference", "meta", "split", "task")
_MACGYVER_COLUMNS = ("ID", "Problem", "Solvable?", "Unconventional?", "Solution")
_MACGYVER_REQUIRED = ("ID", "Problem", "Solvable?")
_COLUMN_LIST = ", ".join(_MACGYVER_COLUMNS)
_HUB_SPLITS = {"tinystories": "validation", "noveltybench": "curated"}
_KIND_TASKS = {"tinystories": "story", "copoet": "poetry", "macgyver": "tool", "noveltybench": "open"}

# option name -> (default, allowed types); ``split`` and ``task`` are common to every kind.
_OPTIONS: dict[str, dict[str, tuple[Any, tuple[type, ...]]]] = {
    "builtin": {},
    "jsonl": {},
    "tinystories": {
        "opening_sentences": (1, (int,)),
        "opening_words": (None, (int,)),
        "skip_partial": (True, (bool,)),
    },
    "copoet": {},
    "macgyver": {"solvable_only": (True, (bool,)), "unconventional_only": (False, (bool,))},
    "noveltybench": {},
}
_DATASET_OPTIONS: dict[str, tuple[Any, tuple[type, ...]]] = {
    "holdout": (0.1, (float, int)),
    "hub_split": (None, (str,)),
    "hub_config": (None, (str,)),
}


def load_prompts(
    source: str, *, base_dir: Path, limit: int | None = None, seed: int = 0, **options: Any
) -> list[Prompt]:
    """Load the prompts of ``source``; ``limit`` keeps a seeded random subset in file order.

    Raises ``ConfigError`` naming the file and the fix for an unknown source kind, a missing or
    empty file, a broken JSON line (with its number), missing columns or fields, and unknown or
    mistyped options.
    """
    kind, location = _parse_source(source)
    opts = _check_options(kind, options)
    if kind in ("builtin", "jsonl"):
        prompts = _load_own(kind, location, base_dir, opts)
    else:
        prompts = _load_dataset(kind, location, base_dir, opts)
    return _take(prompts, limit, seed)


def locate_prompt(source: str, prompt_id: str, *, base_dir: Path) -> str:
    """Where the prompt ``prompt_id`` of ``source`` was read, for error messages.

    ``suites/data/story.jsonl line 12`` for the project's own files (the line whose ``id`` it is);
    the file (or hub id) and the prompt id for the dataset formats, whose ids are derived.
    """
    try:
        kind, location = _parse_source(source)
        if location.startswith(HUB_PREFIX):
            return f"{location} (prompt {prompt_id!r})"
        path = _builtin_path(location) if kind == "builtin" else _resolve(location, base_dir)
        if kind in ("builtin", "jsonl"):
            for where, record in _read_records(path, "JSON lines"):
                if str(record.get("id")) == prompt_id:
                    return f"{path} {where}"
        return f"{path} (prompt {prompt_id!r})"
    except ConfigError:
        return f"{source} (prompt {prompt_id!r})"


# -- sources and options ----------------------------------------------------------------------


def _load_own(kind: str, location: str, base_dir: Path, opts: dict[str, Any]) -> list[Prompt]:
    if location.startswith(HUB_PREFIX):
        raise ConfigError(
            f"{kind}: sources are files; hub ids work for the dataset kinds ({', '.join(SOURCE_KINDS[2:])})",
            field="source",
        )
    path = _builtin_path(location) if kind == "builtin" else _resolve(location, base_dir)
    default_task = opts["task"] or (location if kind == "builtin" and location in TASKS else None)
    rows = _read_records(path, "one JSON object per line with id and text")
    return _own_prompts(rows, path, default_task=default_task, split=opts["split"])


def _load_dataset(kind: str, location: str, base_dir: Path, opts: dict[str, Any]) -> list[Prompt]:
    if opts["task"] not in (None, _KIND_TASKS[kind]):
        raise ConfigError(f"{kind} sources hold {_KIND_TASKS[kind]} prompts, not {opts['task']} prompts", field="task")
    if not 0 <= opts["holdout"] < 1:
        raise ConfigError(f"must be at least 0 and below 1, got {opts['holdout']}", field="options.holdout")
    if location.startswith(HUB_PREFIX):
        dataset = location[len(HUB_PREFIX):]
        split = opts["hub_split"] or _HUB_SPLITS.get(kind, "test")
        rows, origin = _hub_rows(dataset, split=split, config=opts["hub_config"]), f"hf:{dataset}"
    else:
        if opts["hub_split"] or opts["hub_config"]:
            raise ConfigError("hub_split and hub_config apply to hub ids (hf:OWNER/NAME) only", field="options")
        path = _resolve(location, base_dir)
        rows, origin = _READERS[kind](path), str(path)
    return _select_split(_CONVERTERS[kind](rows, origin, opts), opts["split"], opts["holdout"])




def _parse_source(source: str) -> tuple[str, str]:
    kind, sep, location = source.partition(":")
    if not sep or kind not in SOURCE_KINDS:
        guess = did_you_mean(kind if sep else source, SOURCE_KINDS)
        if not sep and source in TASKS:
            guess = f" (did you mean 'builtin:{source}'?)"
        raise ConfigError(
            f"unknown prompt source {source!r}; use KIND:PATH with KIND one of {', '.join(SOURCE_KINDS)}"
            + guess,
            field="source",
        )
    if not location.strip():
        raise ConfigError(f"{source!r} names no file; e.g. '{kind}:data/prompts.jsonl'", field="source")
    return kind, location.strip()


def _check_options(kind: str, options: Mapping[str, Any]) -> dict[str, Any]:
    allowed = {"split": ("test", (str,)), "task": (None, (str,)), **_OPTIONS[kind]}
    if kind not in ("builtin", "jsonl"):
        allowed.update(_DATASET_OPTIONS)
    resolved = {name: default for name, (default, _) in allowed.items()}
    for name, value in options.items():
        if name not in allowed:
            raise ConfigError(
                f"unknown option {name!r} for {kind} sources; allowed: {', '.join(sorted(allowed))}"
                + did_you_mean(name, allowed),
                field=f"options.{name}",
            )
        types = allowed[name][1]
        wrong_bool = isinstance(value, bool) and bool not in types
        if value is not None and (wrong_bool or not isinstance(value, types)):
            names = " or ".join(t.__name__ for t in types)
            raise ConfigError(f"expected {names}, got {value!r}", field=f"options.{name}")
        resolved[name] = value
    if resolved["split"] not in SPLITS:
        raise ConfigError(
            f"unknown split {resolved['split']!r}; expected one of {', '.join(SPLITS)}"
            + did_you_mean(resolved["split"], SPLITS),
            field="options.split",
        )
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
        raise ConfigError(
            f"no built-in prompt set {name!r}; available: {', '.join(available)}"
            + did_you_mean(name, available),
            field="source",
        )
    return path


def _hub_rows(dataset: str, *, split: str, config: str | None) -> list[Row]:
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            f"reading {dataset!r} from the Hugging Face hub needs the 'datasets' package: "
            "pip install datasets (or download the file and give its path)",
            field="source",
        ) from None
    try:
        table = datasets.load_dataset(dataset, config, split=split)
    except Exception as exc:  # network, unknown id, unknown split: all reach the user as one line
        raise ConfigError(
            f"cannot load {dataset!r} (split {split!r}) from the hub: {exc}", field="source"
        ) from None
    return [(f"row {i + 1}", dict(row)) for i, row in enumerate(table)]


# -- reading files ----------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    if path.is_dir():
        raise ConfigError("is a folder; give the data file", path=path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start}); save the file as UTF-8", path=path) from None


def _read_records(path: Path, expected: str) -> list[Row]:
    """JSON Lines of objects; blank lines are skipped."""
    text = _read_text(path)
    if not text.strip():
        raise ConfigError(f"the file is empty; expected {expected}", path=path)
    rows: list[Row] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"line {number}: broken JSON ({exc.msg} at column {exc.colno}); "
                f"each line must be one JSON object, {expected}",
                path=path,
            ) from None
        if not isinstance(record, dict):
            raise ConfigError(f"line {number}: expected a JSON object, got {type(record).__name__}", path=path)
        rows.append((f"line {number}", record))
    return rows


def _read_stories(path: Path) -> list[Row]:
    if path.suffix in (".jsonl", ".json"):
        return _read_records(path, 'one JSON object per line with a "text" field')
    text = _read_text(path)
    stories = [story.strip() for story in text.split(END_OF_TEXT)]
    rows = [(f"story {i + 1}", {"text": story}) for i, story in enumerate(stories) if story]
    if not rows:
        raise ConfigError(f"the file is empty; expected stories separated by {END_OF_TEXT} lines", path=path)
    return rows


def _read_copoet(path: Path) -> list[Row]:
    files = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl")) if path.is_dir() else [path]
    if not files:
        raise ConfigError("no .json or .jsonl files in this folder; give a CoPoet test-set file", path=path)
    expected = '{"translation": {"en1": instruction, "en2": reference}} per line'
    rows: list[Row] = []
    for file in files:
        for where, record in _read_records(file, expected):
            rows.append((f"{file.name}: {where}", {**record, "_file": file.stem}))
    return rows


def _read_macgyver(path: Path) -> list[Row]:
    if path.suffix in (".jsonl", ".json"):
        return _read_records(path, f"one JSON object per line with the columns {_COLUMN_LIST}")
    if path.suffix not in (".xlsx", ".xlsm"):
        raise ConfigError(
            "expected the MacGyver workbook (.xlsx) or its JSON Lines conversion (.jsonl)", path=path
        )
    import openpyxl

    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises several types for a broken or foreign file
        raise ConfigError(f"cannot read the workbook ({exc}); save it as .xlsx", path=path) from None
    try:
        values = list(workbook.worksheets[0].iter_rows(values_only=True))
    finally:
        workbook.close()
    values = [row for row in values if any(cell not in (None, "") for cell in row)]
    if not values:
        raise ConfigError(f"the first sheet is empty; expected a header row {_COLUMN_LIST}", path=path)
    header = [str(cell).strip() if cell is not None else "" for cell in values[0]]
    return [
        (f"row {number}", {name: cell for name, cell in zip(header, row, strict=False) if name})
        for number, row in enumerate(values[1:], start=2)
    ]


def _read_noveltybench(path: Path) -> list[Row]:
    return _read_records(path, 'one JSON object per line with "id" and "prompt"')


_READERS: dict[str, Callable[[Path], list[Row]]] = {
    "tinystories": _read_stories,
    "copoet": _read_copoet,
    "macgyver": _read_macgyver,
    "noveltybench": _read_noveltybench,
}


# -- records to prompts -----------------------------------------------------------------------


def _require(record: Mapping[str, Any], name: str, where: str, origin: str, expected: Sequence[str]) -> Any:
    value = record.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        found = ", ".join(repr(k) for k in record if not k.startswith("_")) or "none"
        raise ConfigError(
            f"{where}: missing {name!r} (found: {found}); expected fields {', '.join(expected)}"
            + did_you_mean(name, list(record)),
            path=origin,
        )
    return value


def _story_prompts(rows: list[Row], origin: str, opts: Mapping[str, Any]) -> list[Prompt]:
    for name in ("opening_sentences", "opening_words"):
        if opts[name] is not None and opts[name] < 1:
            raise ConfigError(f"must be at least 1, got {opts[name]}", field=f"options.{name}")
    prompts = []
    for index, (where, record) in enumerate(rows):
        text = str(_require(record, "text", where, origin, ("text",)))
        if opts["skip_partial"] and record.get("partial_start"):
            continue
        parts = split_opening(text, sentences=opts["opening_sentences"], words=opts["opening_words"])
        if parts is None:
            continue
        opening, rest = parts
        story_id = record.get("idx", record.get("id", index))
        prompts.append(Prompt(f"tinystories-{story_id}", "story", opening, rest,
                              {"characters": find_characters(opening, text)}))
    return prompts


def _copoet_prompts(rows: list[Row], origin: str, opts: Mapping[str, Any]) -> list[Prompt]:
    prompts = []
    counters: dict[str, int] = {}
    for where, record in rows:
        pair = record.get("translation")
        if not isinstance(pair, dict) or not str(pair.get("en1") or "").strip():
            raise ConfigError(
                f"{where}: expected {{\"translation\": {{\"en1\": instruction, \"en2\": reference}}}}",
                path=origin,
            )
        stem = str(record.get("_file", "copoet"))
        counters[stem] = counters.get(stem, 0) + 1
        instruction = " ".join(str(pair["en1"]).split())
        reference = str(pair.get("en2") or "").strip() or None
        prompts.append(Prompt(f"{stem}-{counters[stem]}", "poetry", instruction, reference,
                              parse_instruction(instruction)))
    return prompts


def _macgyver_prompts(rows: list[Row], origin: str, opts: Mapping[str, Any]) -> list[Prompt]:
    if rows:
        first = rows[0][1]
        missing = [c for c in _MACGYVER_REQUIRED if c not in first]
        if missing:
            found = ", ".join(repr(k) for k in first) or "none"
            hints = "".join(did_you_mean(c, list(first)) for c in missing)
            raise ConfigError(
                f"{rows[0][0]}: missing column(s) {', '.join(map(repr, missing))} (found: {found}){hints}; "
                f"the MacGyver file has columns {', '.join(_MACGYVER_COLUMNS)}",
                path=origin,
            )
    grouped: dict[str, dict[str, Any]] = {}
    for where, record in rows:
        problem_id = str(_require(record, "ID", where, origin, _MACGYVER_COLUMNS)).strip()
        solvable = str(record.get("Solvable?") or "").strip().lower() in ("yes", "y", "true", "1")
        if opts["solvable_only"] and not solvable:
            continue
        kind = str(record.get("Unconventional?") or "").strip().lower()
        unconventional = {"unconventional": True, "conventional": False}.get(kind)
        if opts["unconventional_only"] and not unconventional:
            continue
        solution = _clean_solution(record.get("Solution"))
        if problem_id in grouped:
            if solution:
                grouped[problem_id]["solutions"].append(solution)
            continue
        problem = _clean_problem(str(_require(record, "Problem", where, origin, _MACGYVER_COLUMNS)))
        meta: dict[str, Any] = {
            "items": parse_items(problem),
            "solvable": solvable,
            "unconventional": unconventional,
        }
        if record.get("Label"):
            meta["label"] = str(record["Label"])
        grouped[problem_id] = {"problem": problem, "solutions": [solution] if solution else [], "meta": meta}
    prompts = []
    for problem_id, entry in grouped.items():
        solutions, meta = entry["solutions"], entry["meta"]
        if len(solutions) > 1:
            meta["other_references"] = solutions[1:]
        prompts.append(Prompt(f"macgyver-{problem_id}", "tool", entry["problem"],
                              solutions[0] if solutions else None, meta))
    return prompts


def _clean_problem(problem: str) -> str:
    # Some rows start with a list number or their own ID ("6. Your bed's leg...", "1656   Your...").
    return re.sub(r"^\s*\d+\.?\s+(?=[A-Z])", "", " ".join(problem.split()))


def _clean_solution(solution: Any) -> str | None:
    if solution is None:
        return None
    lines = re.split(r"\s*<br\s*/?>\s*|\r\n|\r|\n", str(solution))
    text = "\n".join(line.strip() for line in lines if line.strip())
    return text or None


def _noveltybench_prompts(rows: list[Row], origin: str, opts: Mapping[str, Any]) -> list[Prompt]:
    prompts = []
    for where, record in rows:
        if record.get("chosen") is False:
            continue
        prompt_id = str(_require(record, "id", where, origin, ("id", "prompt")))
        text = str(_require(record, "prompt", where, origin, ("id", "prompt"))).strip()
        meta: dict[str, Any] = {}
        if record.get("category"):
            meta["category"] = str(record["category"])
        if isinstance(record.get("prompt_paraphrases"), list):
            meta["paraphrases"] = [str(p) for p in record["prompt_paraphrases"]]
        prompts.append(Prompt(prompt_id, "open", text, None, meta))
    return prompts


_CONVERTERS: dict[str, Callable[[list[Row], str, Mapping[str, Any]], list[Prompt]]] = {
    "tinystories": _story_prompts,
    "copoet": _copoet_prompts,
    "macgyver": _macgyver_prompts,
    "noveltybench": _noveltybench_prompts,
}


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
            raise ConfigError(
                f"{where}: unknown field {unknown[0]!r}; allowed: {', '.join(_OWN_FIELDS)}"
                + did_you_mean(unknown[0], _OWN_FIELDS),
                path=path,
            )
        prompt_id = str(_require(record, "id", where, str(path), ("id", "text")))
        text = _require(record, "text", where, str(path), ("id", "text"))
        task = record.get("task") or default_task
        if task not in TASKS:
            raise ConfigError(
                f"{where}: no task; add \"task\" (one of {', '.join(TASKS)}) to each line or set the "
                "source's task option",
                path=path,
            )
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


# -- splits and subsets -----------------------------------------------------------------------


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
