"""Files of lm-evaluation-harness ``--log_samples`` output, written the way its own code writes them.

Not hand-shaped JSON: the steps below are those of lm-evaluation-harness, read from its
repository, so a test of ``answers:FILE`` meets exactly what a team's evaluation run leaves.

- **0.4.3 and later** (checked against v0.4.3, v0.4.12 and the main branch of August 2026,
  4e7e0d47): ``lm_eval/evaluator.py`` builds one ``example`` per document and filter, with
  ``"arguments": [req.args for req in requests]`` (a ``generate_until`` request's args are
  ``(context, generation_kwargs)``), ``"resps": [req.resps for req in requests]`` (the
  ``repeats`` answers of each request) and ``"filtered_resps"`` (what the task's filters kept:
  ``take_first`` by default), then its metrics; ``EvaluationTracker.save_results_samples``
  (``lm_eval/loggers/evaluation_tracker.py``) turns the arguments into
  ``{"gen_args_i": {"arg_j": ...}}``, passes ``resps`` and ``filtered_resps`` through
  ``sanitize_list``, makes ``target`` a string, and appends ``json.dumps(sample,
  default=handle_non_serializable, ensure_ascii=False)`` lines to ``samples_<task>_<date>.jsonl``.
- **0.4.0 to 0.4.2** (checked against v0.4.0 and v0.4.2, 4600d6bf): the same ``example``
  without the filter, metric list and hashes, and ``lm_eval/__main__.py`` writes each task's
  list with ``json.dumps(samples, indent=2, default=_handle_non_serializable,
  ensure_ascii=False)`` into ``<model_args>_<task>.jsonl``: one JSON array, arguments as lists.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATE_ID = "2026-08-21T10-56-54.123456"  # datetime.now().isoformat().replace(":", "-"), as the tracker names files


@dataclass
class Request:
    """The parts of an ``lm_eval.api.instance.Instance`` the sample writer reads."""

    args: tuple[Any, ...]
    resps: list[Any]
    filtered_resps: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Document:
    """One document of a generate_until task, and what the model answered it."""

    doc: Mapping[str, Any]
    context: Any  # the prompt text; a chat model behind an API passes a JsonChatStr (a 1-tuple)
    answers: Sequence[str]
    gen_kwargs: Mapping[str, Any]
    target: str = ""


def hash_string(string: str) -> str:
    """``lm_eval.utils.hash_string``."""
    return hashlib.sha256(string.encode("utf-8")).hexdigest()


def handle_non_serializable(o: Any) -> Any:
    """``lm_eval.utils.handle_non_serializable`` (numpy integers do not occur here)."""
    return list(o) if isinstance(o, set) else str(o)


def sanitize_list(sub: Any) -> Any:
    """``lm_eval.utils.sanitize_list``: every leaf of nested lists and tuples as a string."""
    if isinstance(sub, list):
        return [sanitize_list(item) for item in sub]
    if isinstance(sub, tuple):
        return tuple(sanitize_list(item) for item in sub)
    return str(sub)


def _request(document: Document) -> Request:
    """The one request of a generate_until document after the model ran (``repeats`` answers) and
    the default filter (``take_first``) was applied."""
    args = (document.context, dict(document.gen_kwargs))
    resps = list(document.answers)
    return Request(args, resps, {"none": resps[0]})


def _example(doc_id: int, document: Document, *, new: bool) -> dict[str, Any]:
    """``lm_eval/evaluator.py``'s ``example`` for one document and the filter ``none``."""
    requests = [_request(document)]
    example: dict[str, Any] = {
        "doc_id": doc_id,
        "doc": dict(document.doc),
        "target": document.target,
        "arguments": [req.args for req in requests],
        "resps": [req.resps for req in requests],
        "filtered_resps": [req.filtered_resps["none"] for req in requests],
    }
    metrics = {"exact_match": float(document.answers[0].strip() == document.target)}
    if new:
        example["filter"] = "none"
        example["metrics"] = list(metrics)
        example["doc_hash"] = hash_string(json.dumps(dict(document.doc), indent=2, default=handle_non_serializable,
                                                     ensure_ascii=False))
        context = document.context if isinstance(document.context, str) else str(document.context)
        example["prompt_hash"] = hash_string(context)
        example["target_hash"] = hash_string(str(document.target))
    example.update(metrics)
    return example


def write_samples(folder: Path, task: str, documents: Sequence[Document]) -> Path:
    """``EvaluationTracker.save_results_samples`` (0.4.3 and later): ``samples_<task>_<date>.jsonl``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"samples_{task}_{DATE_ID}.jsonl"
    with open(path, "a", encoding="utf-8") as f:
        for doc_id, document in enumerate(documents):
            sample = _example(doc_id, document, new=True)
            arguments: dict[str, dict[str, Any]] = {}
            for i, arg in enumerate(sample["arguments"]):
                arguments[f"gen_args_{i}"] = {}
                for j, tmp in enumerate(arg):
                    arguments[f"gen_args_{i}"][f"arg_{j}"] = tmp
            sample["resps"] = sanitize_list(sample["resps"])
            sample["filtered_resps"] = sanitize_list(sample["filtered_resps"])
            sample["arguments"] = arguments
            sample["target"] = str(sample["target"])
            f.write(json.dumps(sample, default=handle_non_serializable, ensure_ascii=False) + "\n")
    return path


def write_samples_0_4_2(folder: Path, model_args: str, task: str, documents: Sequence[Document]) -> Path:
    """``lm_eval/__main__.py`` of 0.4.0-0.4.2: one indented JSON array in ``<model_args>_<task>.jsonl``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{re.sub('/|=', '__', model_args)}_{task}.jsonl"
    samples = [_example(doc_id, document, new=False) for doc_id, document in enumerate(documents)]
    path.write_text(json.dumps(samples, indent=2, default=handle_non_serializable, ensure_ascii=False),
                    encoding="utf-8")
    return path


def gen_kwargs_of(settings: Any) -> dict[str, Any]:
    """A task's ``generation_kwargs`` that sample as a suite's ``GenerationSettings`` do."""
    return {"until": list(settings.stop), "do_sample": settings.temperature > 0,
            "temperature": settings.temperature, "top_p": settings.top_p, "max_gen_toks": settings.max_new_tokens}


def chat_context(messages: Sequence[Mapping[str, str]]) -> tuple[str]:
    """What a chat model behind an API logs as the context: ``JsonChatStr(json.dumps(messages))``, a 1-tuple."""
    return (json.dumps(list(messages), ensure_ascii=False),)
