"""The public datasets' formats as prompts (TinyStories, CoPoet, MacGyver, NoveltyBench; a file or the
hub), and the JSON Lines reading every prompt source shares. Each kind has a reader (a file to
``Row`` records) and a converter (records to prompts), chosen by :mod:`pytest_novelty.suites.loaders`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_novelty.infra.errors import ConfigError, did_you_mean
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.tasks import find_characters, parse_instruction, parse_items, split_opening

__all__ = ["CONVERTERS", "READERS", "Row", "hub_rows", "read_records", "require"]

END_OF_TEXT = "<|endoftext|>"
Row = tuple[str, dict[str, Any]]
"""A record and where it came from ("line 3", "row 12"), for error messages."""

_MACGYVER_COLUMNS = ("ID", "Problem", "Solvable?", "Unconventional?", "Solution")
_MACGYVER_REQUIRED = ("ID", "Problem", "Solvable?")
_COLUMN_LIST = ", ".join(_MACGYVER_COLUMNS)


def hub_rows(dataset: str, *, split: str, config: str | None) -> list[Row]:
    """The rows of ``split`` of the hub dataset ``dataset`` (``datasets`` is imported only now)."""
    try:
        import datasets
    except ImportError:
        raise ConfigError(f"reading {dataset!r} from the Hugging Face hub needs the 'datasets' package: "
                          "pip install datasets (or download the file and give its path)", field="source") from None
    try:
        table = datasets.load_dataset(dataset, config, split=split)
    except Exception as exc:  # network, unknown id, unknown split: all reach the user as one line
        raise ConfigError(f"cannot load {dataset!r} (split {split!r}) from the hub: {exc}", field="source") from None
    return [(f"row {i + 1}", dict(row)) for i, row in enumerate(table)]


def _read_text(path: Path) -> str:
    if path.is_dir():
        raise ConfigError("is a folder; give the data file", path=path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start}); save the file as UTF-8", path=path) from None


def read_records(path: Path, expected: str) -> list[Row]:
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
            raise ConfigError(f"line {number}: broken JSON ({exc.msg} at column {exc.colno}); "
                              f"each line must be one JSON object, {expected}", path=path) from None
        if not isinstance(record, dict):
            raise ConfigError(f"line {number}: expected a JSON object, got {type(record).__name__}", path=path)
        rows.append((f"line {number}", record))
    return rows


def _read_stories(path: Path) -> list[Row]:
    if path.suffix in (".jsonl", ".json"):
        return read_records(path, 'one JSON object per line with a "text" field')
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
        for where, record in read_records(file, expected):
            rows.append((f"{file.name}: {where}", {**record, "_file": file.stem}))
    return rows


def _read_macgyver(path: Path) -> list[Row]:
    if path.suffix in (".jsonl", ".json"):
        return read_records(path, f"one JSON object per line with the columns {_COLUMN_LIST}")
    if path.suffix not in (".xlsx", ".xlsm"):
        raise ConfigError("expected the MacGyver workbook (.xlsx) or its JSON Lines conversion (.jsonl)", path=path)
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
    return read_records(path, 'one JSON object per line with "id" and "prompt"')


READERS: dict[str, Callable[[Path], list[Row]]] = {
    "tinystories": _read_stories,
    "copoet": _read_copoet,
    "macgyver": _read_macgyver,
    "noveltybench": _read_noveltybench,
}


def require(record: Mapping[str, Any], name: str, where: str, origin: str, expected: Sequence[str]) -> Any:
    """``record[name]``; a missing or blank one is an error naming the fields found and ``expected``."""
    value = record.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        found = ", ".join(repr(k) for k in record if not k.startswith("_")) or "none"
        raise ConfigError(f"{where}: missing {name!r} (found: {found}); expected fields {', '.join(expected)}"
                          + did_you_mean(name, list(record)), path=origin)
    return value


def _story_prompts(rows: list[Row], origin: str, opts: Mapping[str, Any]) -> list[Prompt]:
    for name in ("opening_sentences", "opening_words"):
        if opts[name] is not None and opts[name] < 1:
            raise ConfigError(f"must be at least 1, got {opts[name]}", field=f"options.{name}")
    prompts = []
    for index, (where, record) in enumerate(rows):
        text = str(require(record, "text", where, origin, ("text",)))
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
        problem_id = str(require(record, "ID", where, origin, _MACGYVER_COLUMNS)).strip()
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
        problem = _clean_problem(str(require(record, "Problem", where, origin, _MACGYVER_COLUMNS)))
        meta: dict[str, Any] = {"items": parse_items(problem), "solvable": solvable, "unconventional": unconventional}
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
        prompt_id = str(require(record, "id", where, origin, ("id", "prompt")))
        text = str(require(record, "prompt", where, origin, ("id", "prompt"))).strip()
        meta: dict[str, Any] = {}
        if record.get("category"):
            meta["category"] = str(record["category"])
        if isinstance(record.get("prompt_paraphrases"), list):
            meta["paraphrases"] = [str(p) for p in record["prompt_paraphrases"]]
        prompts.append(Prompt(prompt_id, "open", text, None, meta))
    return prompts


CONVERTERS: dict[str, Callable[[list[Row], str, Mapping[str, Any]], list[Prompt]]] = {
    "tinystories": _story_prompts,
    "copoet": _copoet_prompts,
    "macgyver": _macgyver_prompts,
    "noveltybench": _noveltybench_prompts,
}
