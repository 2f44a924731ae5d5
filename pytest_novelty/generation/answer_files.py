"""Files of answers generated elsewhere, read into one record per prompt (``--model answers:FILE``).

Two formats, told apart line by line (a folder may hold both):

**pytest-novelty answers, version 1** (JSON Lines, one object per prompt of a suite run)::

    {"format": "pytest-novelty.answers", "version": 1, "suite": "story", "id": "story-0007",
     "prompt": "Once upon a time, Lily found a shell.", "answers": ["She ...", "It ..."],
     "settings": {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 96, "stop": ["\\n\\n"]}}

``format``, ``version``, ``suite`` (the suite run's name as the gate prints it: ``story``,
``story[temperature=0.7]``, ``story#repeat=1``), ``id`` (the suite's prompt id) and ``answers``
(the model's raw continuations, at least the suite's ``samples``) are required; ``prompt`` (the
exact model input: a string, or for chat prompting the list of ``{"role", "content"}`` messages)
and ``settings`` (any of ``temperature``, ``top_p``, ``top_k``, ``max_new_tokens``, ``stop``,
``seed``) are checked against the suite when given. Any other key is an error: a misspelt
``promt`` would otherwise go unchecked. A later version adds keys under a new ``version``.

**lm-evaluation-harness samples** (``--log_samples``), one object per document of a task, as its
``EvaluationTracker.save_results_samples`` writes ``samples_<task>_<date>.jsonl`` (0.4.3 and later:
``"arguments": {"gen_args_0": {"arg_0": context, "arg_1": gen_kwargs}}``), or as 0.4.0-0.4.2 wrote
``<model_args>_<task>.jsonl``, one JSON array of the same objects with ``"arguments": [[context,
gen_kwargs]]``. Only ``generate_until`` samples hold answers (one request whose second argument is
the generation settings); ``resps[0]`` are its answers (``repeats`` of them), ``filtered_resps``
the task's filters' output (``take_first`` by default: one answer), read instead on request. The
context is the prompt text (a chat model behind an API logs its messages as a JSON string); the
generation settings are read as lm-evaluation-harness itself reads them (``normalize_gen_kwargs``:
``do_sample`` false, or no temperature, means greedy; ``max_gen_toks`` before its aliases
``max_new_tokens``, ``max_tokens``, ``max_completion_tokens``; ``until`` the stop strings).

Bad input is one :class:`~pytest_novelty.infra.errors.ConfigError` naming the file and the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_novelty.infra.errors import ConfigError, did_you_mean
from pytest_novelty.infra.jsonlines import json_lines

if TYPE_CHECKING:
    from pytest_novelty.suites.schema import GenerationSettings

__all__ = [
    "FORMAT", "LM_EVAL", "VERSION", "AnswerRecord", "answer_record", "chat_text", "read_answer_file",
    "write_answer_file",
]  # fmt: skip

FORMAT = "pytest-novelty.answers"
"""The ``format`` of our own records."""
VERSION = 1
"""The version of our own records this module reads and writes."""
LM_EVAL = "lm-evaluation-harness"
CHAT = "\x00chat\x00"
"""Marks a chat input rendered as text: its messages as JSON after it (as a served model renders them)."""

_REQUIRED = ("format", "version", "suite", "id", "answers")
_KEYS = frozenset({*_REQUIRED, "prompt", "settings"})
SETTING_TYPES: Mapping[str, tuple[type, ...]] = {
    "temperature": (int, float), "top_p": (int, float), "top_k": (int,), "max_new_tokens": (int,),
    "stop": (list,), "seed": (int,),
}  # fmt: skip
"""The settings our records may carry, and their JSON types."""
_LM_EVAL_KEYS = frozenset({"doc_id", "arguments", "resps"})
_MAX_TOKEN_ALIASES = ("max_gen_toks", "max_new_tokens", "max_tokens", "max_completion_tokens")


@dataclass(frozen=True)
class AnswerRecord:
    """One prompt's answers as a file holds them, with what the file says about how they were made."""

    place: str
    """Where it is, for messages: ``FILE: line N`` (``FILE: item N`` in a JSON array)."""
    format: str
    """:data:`FORMAT` or :data:`LM_EVAL`."""
    answers: tuple[str, ...]
    suite: str | None = None
    """The suite run it answers (our records); None: any run whose prompt it matches (lm-evaluation-harness)."""
    id: str | None = None
    """The prompt id: ours, or the logged document's ``id_field`` (lm-evaluation-harness)."""
    prompt: str | None = None
    """The model input it was generated from, as text (chat messages after :data:`CHAT`); None: not given."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """How it was generated, in the suite's names (``temperature``, ``top_p``, ``top_k``,
    ``max_new_tokens``, ``stop``); only what the file says."""


def chat_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """A chat input as the text it is compared and keyed by: :data:`CHAT`, then its messages as JSON."""
    return CHAT + json.dumps([{"role": m["role"], "content": m["content"]} for m in messages], ensure_ascii=False)


def read_answer_file(path: Path, *, filtered: bool = False, id_field: str | None = None) -> list[AnswerRecord]:
    """Every record of one file, in order (see the module doc for the formats).

    ``filtered``: an lm-evaluation-harness sample's answers are its ``filtered_resps``, not its
    ``resps``; ``id_field``: its prompt id is ``doc[id_field]`` (else it has none, and is matched by
    its prompt text).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the answers ({exc})", path=path) from None
    return [_record(path, place, value, filtered, id_field) for place, value in _objects(path, text)]


def _objects(path: Path, text: str) -> Iterator[tuple[str, Any]]:
    """``(place, object)`` for each record: a JSON array's items, or each line of JSON Lines."""
    if text.lstrip().startswith("["):  # lm-evaluation-harness 0.4.0-0.4.2: one JSON array
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"not valid JSON ({exc.msg}, line {exc.lineno})", path=path) from None
        for number, item in enumerate(items, 1):
            if not isinstance(item, dict):
                raise ConfigError("expected a JSON object", path=path, field=f"item {number}")
            yield f"item {number}", item
        return
    hint = "; answers are JSON Lines, one object per prompt"
    for number, item in json_lines(text.splitlines(), path, hint=hint):
        yield f"line {number}", item


def _record(path: Path, place: str, data: dict[str, Any], filtered: bool, id_field: str | None) -> AnswerRecord:
    where = f"{path}: {place}"
    if "format" in data:
        return _ours(where, data)
    if set(data) >= _LM_EVAL_KEYS:
        return _lm_eval(where, data, filtered, id_field)
    raise ConfigError(
        f'neither a pytest-novelty answer (format "{FORMAT}", version, suite, id, answers) nor an '
        "lm-evaluation-harness sample (doc_id, arguments, resps)",
        path=path, field=place,
    )  # fmt: skip


def _fail(where: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: {message}")


# -- our own records --------------------------------------------------------------------------


def answer_record(
    run: str, prompt_id: str, model_input: Any, answers: Sequence[str], settings: GenerationSettings
) -> dict[str, Any]:
    """One record of our format: the answers a model gave one prompt of the suite run ``run``,
    with the model input (a string, chat messages, or None: not recorded) and the sampling
    ``settings`` (:class:`~pytest_novelty.suites.schema.GenerationSettings`) they were generated with."""
    values = asdict(settings)
    given = {name: values[name] for name in SETTING_TYPES}
    given["stop"] = list(given["stop"])
    record: dict[str, Any] = {"format": FORMAT, "version": VERSION, "suite": run, "id": prompt_id}
    if model_input is not None:
        record["prompt"] = model_input if isinstance(model_input, str) else [
            {"role": m["role"], "content": m["content"]} for m in model_input]
    return {**record, "answers": list(answers), "settings": given}


def write_answer_file(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    """Write ``records`` as JSON Lines, atomically (a reader never sees half a file)."""
    from pytest_novelty.infra.storage import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def _ours(where: str, data: dict[str, Any]) -> AnswerRecord:
    if data["format"] != FORMAT:
        raise _fail(where, f'format is {data["format"]!r}; answers of this kind say "format": "{FORMAT}"')
    version = data.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
        raise _fail(where, f"version {version} was written by a newer pytest-novelty; this one reads version {VERSION}")
    if version != VERSION:
        raise _fail(where, f"version must be {VERSION}, got {version!r}")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise _fail(where, f"unknown key {unknown[0]!r}{did_you_mean(unknown[0], _KEYS)}; "
                           f"a record has {', '.join(sorted(_KEYS))}")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise _fail(where, f"missing {missing[0]!r} (a record needs {', '.join(_REQUIRED)})")
    for key in ("suite", "id"):
        if not isinstance(data[key], str) or not data[key]:
            raise _fail(where, f"{key} must be a non-empty string, got {data[key]!r}")
    answers = data["answers"]
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        raise _fail(where, "answers must be a non-empty list of strings (the model's raw continuations)")
    return AnswerRecord(
        where, FORMAT, tuple(answers), suite=data["suite"], id=data["id"],
        prompt=_prompt(where, data.get("prompt")), settings=_settings(where, data.get("settings", {})),
    )  # fmt: skip


def _prompt(where: str, value: Any) -> str | None:
    """A record's prompt as text: a string as it is, a message list after :data:`CHAT`."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) and {"role", "content"} <= set(m) for m in value):
        return chat_text(value)
    raise _fail(where, 'prompt must be the model input: a string, or a list of {"role", "content"} messages')


def _settings(where: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, f"settings must be an object, got {value!r}")
    for key, setting in value.items():
        types = SETTING_TYPES.get(key)
        if types is None:
            raise _fail(where, f"settings has no {key!r}{did_you_mean(key, SETTING_TYPES)}; "
                               f"it may give {', '.join(SETTING_TYPES)}")
        if isinstance(setting, bool) or not isinstance(setting, types):
            raise _fail(where, f"settings.{key} must be a {' or '.join(t.__name__ for t in types)}, got {setting!r}")
        if isinstance(setting, list) and not all(isinstance(s, str) for s in setting):
            raise _fail(where, "settings.stop must be a list of strings")
    return {k: tuple(v) if k == "stop" else v for k, v in value.items()}


# -- lm-evaluation-harness samples ----------------------------------------------------------


def _lm_eval(where: str, data: dict[str, Any], filtered: bool, id_field: str | None) -> AnswerRecord:
    requests = _requests(where, data["arguments"])
    if len(requests) != 1 or len(requests[0]) < 2 or not isinstance(requests[0][1], dict):
        raise _fail(where, f"document {data.get('doc_id')!r} is not a generate_until sample (its arguments are "
                           "not one (context, generation settings) request); only generated answers can be gated")
    context, gen_kwargs = requests[0][0], requests[0][1]
    answers = _responses(where, data, filtered)
    prompt_id = None
    if id_field is not None:
        doc = data.get("doc")
        if not isinstance(doc, dict) or id_field not in doc:
            fields = ", ".join(sorted(doc)) if isinstance(doc, dict) else "none"
            raise _fail(where, f"its doc has no field {id_field!r} (id_field){did_you_mean(id_field, doc or ())}; "
                               f"it has {fields}")
        prompt_id = str(doc[id_field])
    return AnswerRecord(where, LM_EVAL, answers, id=prompt_id, prompt=_context(where, context),
                        settings=lm_eval_settings(gen_kwargs))


def _requests(where: str, arguments: Any) -> list[list[Any]]:
    """The requests of a sample as lists of arguments, from either shape lm-evaluation-harness writes."""
    if isinstance(arguments, list) and all(isinstance(a, list) for a in arguments):
        return arguments  # 0.4.0-0.4.2: [[context, gen_kwargs], ...]
    if isinstance(arguments, dict) and all(isinstance(a, dict) for a in arguments.values()):
        ordered = sorted(arguments.items(), key=lambda item: _index(where, item[0], "gen_args_"))
        return [[a for _, a in sorted(args.items(), key=lambda item: _index(where, item[0], "arg_"))]
                for _, args in ordered]  # 0.4.3 and later: {"gen_args_0": {"arg_0": ..., "arg_1": ...}}
    raise _fail(where, 'arguments must be [[context, settings]] or {"gen_args_0": {"arg_0": context, "arg_1": '
                       "settings}} as lm-evaluation-harness writes them")


def _index(where: str, key: str, prefix: str) -> int:
    if not key.startswith(prefix) or not key[len(prefix):].isdigit():
        raise _fail(where, f"arguments: unexpected key {key!r} (lm-evaluation-harness writes {prefix}0, "
                           f"{prefix}1, ...)")
    return int(key[len(prefix):])


def _responses(where: str, data: dict[str, Any], filtered: bool) -> tuple[str, ...]:
    key = "filtered_resps" if filtered else "resps"
    value = data.get(key)
    if not isinstance(value, list) or len(value) != 1:
        raise _fail(where, f"{key} must hold one entry (one request's answers), got {_short(value)}")
    entry = value[0]
    answers = [entry] if isinstance(entry, str) else entry
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        raise _fail(where, f"{key}[0] must be a list of answers (strings), got {_short(entry)}")
    return tuple(answers)


def _context(where: str, context: Any) -> str:
    """The prompt text of a request: a string; a chat model behind an API logs ``[messages as JSON]``."""
    if isinstance(context, str):
        return context
    if isinstance(context, list) and len(context) == 1 and isinstance(context[0], str):
        try:
            messages = json.loads(context[0])
        except json.JSONDecodeError:
            return context[0]
        if isinstance(messages, list) and all(isinstance(m, dict) and {"role", "content"} <= set(m) for m in messages):
            return chat_text(messages)
        return context[0]
    raise _fail(where, f"the request's context is not text: {_short(context)}")


def lm_eval_settings(gen_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """lm-evaluation-harness generation settings in the suite's names, read as its
    ``normalize_gen_kwargs`` reads them; a setting it leaves to the backend is left out."""
    settings: dict[str, Any] = {}
    do_sample = gen_kwargs.get("do_sample")
    temperature = gen_kwargs.get("temperature")
    if do_sample is False or (do_sample is None and not temperature):
        settings["temperature"] = 0.0  # greedy
    elif isinstance(temperature, (int, float)) and not isinstance(temperature, bool):
        settings["temperature"] = float(temperature)
    for alias in _MAX_TOKEN_ALIASES:
        value = gen_kwargs.get(alias)
        if isinstance(value, int) and not isinstance(value, bool):
            settings["max_new_tokens"] = value
            break
    for name in ("top_p", "top_k"):
        value = gen_kwargs.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            settings[name] = value
    until = gen_kwargs.get("until")
    if isinstance(until, str):
        settings["stop"] = (until,)
    elif isinstance(until, list):
        settings["stop"] = tuple(str(s) for s in until)
    return settings


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
