"""Prompting methods: how (task, prompt, examples) becomes the model's input, and how the answer
comes back out of its output. Pure text: a model input is a plain string (a base model's completion
format, :mod:`pytest_novelty.suites.tasks`) or chat messages the generation layer renders.

=================  ===========================================================================
``few-shot``       k solved examples from the held-out split (seeded per prompt), then the
                   prompt's completion prefix; k = 0 is zero-shot
``chat``           the task's instruction as one user message
``ask-novelty``    explain the task, ask for high-quality original output, thinking first,
                   with the final answer between asterisks
``denial``         the task, minus every concept that earlier rounds' answers used (a judge
                   lists them with :func:`concept_prompt`, :func:`parse_concepts` reads them)
``novel-examples`` like few-shot, with examples drawn from the top 10 % of the held-out set,
                   ranked by originality (the runner scores each reference answer with the
                   suite's index, :meth:`pytest_novelty.pipeline.runner.Runner.example_scores`)
=================  ===========================================================================
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from pytest_novelty.infra.errors import ConfigError, did_you_mean
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.schema import PROMPTING_METHODS
from pytest_novelty.suites.tasks import Task, get_task

if TYPE_CHECKING:
    from pytest_novelty.suites.schema import Suite

__all__ = [
    "METHODS", "Message", "ModelInput", "ask_novelty", "build_inputs", "chat", "concept_prompt", "denial",
    "extract_answer", "extract_between_asterisks", "few_shot", "load_examples", "merge_concepts", "novel_examples",
    "parse_concepts", "sample_examples", "top_examples",
]

Message = dict[str, str]
ModelInput = str | list[Message]

METHODS = PROMPTING_METHODS
DEFAULT_EXAMPLES = 5
TOP_FRACTION = 0.1
EXAMPLE_SEPARATOR = "\n\n"

NOVELTY_REQUEST = (
    "Write an answer of high quality that is also original: avoid the first idea that comes to "
    "mind and the plots, images or solutions that most people would come up with, while still doing "
    "exactly what the task asks. First think about several possible answers and choose the one "
    "that is the most original and still good. Then write your final answer between asterisks, "
    "like this: *your answer*. Do not use asterisks anywhere else."
)
ANSWER_FORMAT = "Write only your answer, between asterisks, like this: *your answer*."

# An emphasis span: opening asterisks not followed by a space, the same number closing, not
# preceded by a space (so bullet points and "5 * 3" are not spans).
_ASTERISK_SPAN = re.compile(r"(?<!\*)(\*+)(?!\s)(.+?)(?<!\s)\1(?!\*)", re.DOTALL)
_BULLET = re.compile(r"^\s*(?:[-*•–]|\d+[.)])\s+(?P<item>.+)$")
_NO_CONCEPTS = frozenset({"none", "n/a", "nothing", "no concepts"})


def _user(content: str) -> list[Message]:
    """One user message."""
    return [{"role": "user", "content": content}]


# -- few-shot and novel examples --------------------------------------------------------------


def sample_examples(prompt: Prompt, examples: Sequence[Prompt], k: int, *, seed: int = 0) -> list[Prompt]:
    """``k`` examples with a reference for ``prompt``, never itself (all when there are fewer), drawn
    with ``seed`` and the prompt's id: the draw does not depend on which prompts run (xdist workers agree)."""
    pool = [e for e in examples if e.reference and e.id != prompt.id]
    if k >= len(pool):
        return pool
    digest = hashlib.sha256(f"{seed}:{prompt.id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big")).sample(pool, k)


def few_shot(
    task: Task, prompt: Prompt, examples: Sequence[Prompt], *, k: int = DEFAULT_EXAMPLES, seed: int = 0
) -> str:
    """Solved examples (``task.render_example``) joined by blank lines, then the prompt's prefix."""
    chosen = sample_examples(prompt, examples, k, seed=seed)
    shots = [task.render_example(e, e.reference or "") for e in chosen]
    return EXAMPLE_SEPARATOR.join([*shots, task.completion_prefix(prompt)])


def top_examples(
    examples: Sequence[Prompt],
    scores: Mapping[str, float],
    *,
    fraction: float = TOP_FRACTION,
    at_least: int = 1,
) -> list[Prompt]:
    """The examples in the top ``fraction`` by score (unscored left out, ties by id), at least
    ``at_least`` of them, so a small held-out set still gives a full set of in-context examples."""
    scored = [e for e in examples if e.reference and not math.isnan(scores.get(e.id, math.nan))]
    ranked = sorted(scored, key=lambda e: (-scores[e.id], e.id))
    return ranked[: max(math.ceil(fraction * len(ranked)), at_least)]


def novel_examples(
    task: Task,
    prompt: Prompt,
    examples: Sequence[Prompt],
    scores: Mapping[str, float],
    *,
    k: int = DEFAULT_EXAMPLES,
    seed: int = 0,
    fraction: float = TOP_FRACTION,
) -> str:
    """Few-shot input whose examples come from the most novel ``fraction`` of a scored held-out set."""
    pool = top_examples(examples, scores, fraction=fraction, at_least=k)
    return few_shot(task, prompt, pool, k=k, seed=seed)


# -- instruct models --------------------------------------------------------------------------


def chat(task: Task, prompt: Prompt) -> list[Message]:
    """The task's instruction as the only user message."""
    return _user(task.instruction(prompt))


def ask_novelty(task: Task, prompt: Prompt) -> list[Message]:
    """Explain the task and ask for an original, high-quality answer, thought through first."""
    return _user(f"Your task is to {task.description}.\n\n{task.labelled_input(prompt)}\n\n{NOVELTY_REQUEST}")


def denial(task: Task, prompt: Prompt, forbidden: Sequence[str] = ()) -> list[Message]:
    """The prompt of one denial round: the task, minus every concept in ``forbidden`` (the first round
    forbids nothing), the answer between asterisks."""
    parts = [f"Your task is to {task.description}.", task.labelled_input(prompt)]
    concepts = merge_concepts([], forbidden)
    if concepts:
        listed = "\n".join(f"- {c}" for c in concepts)
        parts.append(
            f"Earlier answers already used the concepts below ({task.concepts}). "
            f"Your answer must not use any of them; find different ones.\n{listed}"
        )
    parts.append(ANSWER_FORMAT)
    return _user("\n\n".join(parts))


def concept_prompt(task: Task, prompt: Prompt, answer: str) -> list[Message]:
    """The judge's request: list the high-level concepts of ``answer``, one per line."""
    return _user(
        f"Here is a task and an answer to it.\n\n"
        f"Task: {task.description}.\n{task.labelled_input(prompt)}\n\n"
        f"Answer:\n{answer.strip()}\n\n"
        f"List the high-level concepts this answer uses: {task.concepts}. "
        "Name each one as a short, general phrase that could be forbidden in a new answer, "
        'not a quotation. Write one concept per line, each line starting with "- ", and nothing else.'
    )


def parse_concepts(reply: str) -> list[str]:
    """The concepts in a judge's reply (bullet or numbered lines, a JSON list, or plain lines), without
    Markdown emphasis and trailing full stops; "none" means none; duplicates (any case) kept once."""
    text = reply.strip()
    items: list[str] = []
    if text.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, list):
            items = [str(x) for x in data]
    if not items:
        lines = [line for line in text.splitlines() if line.strip()]
        bullets = [m.group("item") for m in map(_BULLET.match, lines) if m]
        if bullets:
            items = bullets
        elif len(lines) == 1:
            items = re.split(r"[;,]", lines[0])
        else:
            items = lines
    cleaned = (_clean_concept(item) for item in items)
    return merge_concepts([], (c for c in cleaned if c and c.lower() not in _NO_CONCEPTS))


def _clean_concept(item: str) -> str:
    return item.replace("**", "").replace("__", "").strip().strip("\"'`").rstrip(".").strip()


def merge_concepts(previous: Iterable[str], new: Iterable[str]) -> list[str]:
    """``previous`` followed by the concepts of ``new`` not already in it (ignoring case and spaces)."""
    merged: list[str] = []
    seen: set[str] = set()
    for concept in (*previous, *new):
        key = " ".join(concept.lower().split())
        if key and key not in seen:
            seen.add(key)
            merged.append(" ".join(concept.split()))
    return merged


# -- answers ----------------------------------------------------------------------------------


def extract_between_asterisks(reply: str) -> str | None:
    """The last span between asterisks (``*answer*`` or ``**answer**``), or None when there is none."""
    spans = [m.group(2).strip() for m in _ASTERISK_SPAN.finditer(reply)]
    spans = [s for s in spans if s]
    return spans[-1] if spans else None


def extract_answer(method: str, task: Task, prompt: Prompt, raw: str) -> str:
    """The answer in one raw model output, for any method; "" when an asterisk answer is missing."""
    _check_method(method)
    if method in ("few-shot", "novel-examples"):
        return task.cut(prompt, raw)
    if method == "chat":
        return task.cut(prompt, raw, chat=True)
    inner = extract_between_asterisks(raw)
    return "" if inner is None else task.cut(prompt, inner, chat=True)


# -- a suite's inputs -------------------------------------------------------------------------


def load_examples(suite: Suite) -> list[Prompt]:
    """The held-out ``examples`` split of the suite's prompt source, with reference answers only."""
    from pytest_novelty.suites.loaders import load_prompts

    source = suite.prompts
    options = {"task": suite.task, **source.options, "split": "examples"}
    examples = [p for p in load_prompts(source.source, base_dir=suite.base_dir, **options) if p.reference]
    if not examples:
        raise ConfigError(
            f"{suite.prompting.method} needs solved examples, and {source.source!r} has none with a "
            "reference in its 'examples' split; set prompting.examples = 0 or use a source with references",
            path=suite.path, field="prompting.examples",
        )
    return examples


def build_inputs(
    suite: Suite,
    prompts: Sequence[Prompt],
    *,
    examples: Sequence[Prompt] | None = None,
    example_scores: Mapping[str, float] | None = None,
    forbidden: Mapping[str, Sequence[str]] | None = None,
) -> list[ModelInput]:
    """The model input for each prompt under the suite's ``prompting`` settings: ``examples`` default
    to the held-out split (loaded only when needed), ``novel-examples`` needs ``example_scores``
    (originality by id), ``forbidden`` (concepts by prompt id) makes a later denial round."""
    method, k, seed = suite.prompting.method, suite.prompting.examples, suite.prompts.seed
    _check_method(method)
    task = get_task(suite.task)
    if method == "chat":
        return [chat(task, p) for p in prompts]
    if method == "ask-novelty":
        return [ask_novelty(task, p) for p in prompts]
    if method == "denial":
        forbidden = forbidden or {}
        return [denial(task, p, forbidden.get(p.id, ())) for p in prompts]
    if method == "few-shot" and k == 0:
        return [task.completion_prefix(p) for p in prompts]
    if k == 0:
        raise ConfigError("novel-examples needs at least 1 example", path=suite.path, field="prompting.examples")
    pool = list(examples) if examples is not None else load_examples(suite)
    if method == "novel-examples":
        if example_scores is None:
            raise ConfigError("novel-examples needs novelty scores for the held-out examples", path=suite.path,
                              field="prompting.method")
        pool = top_examples(pool, example_scores, at_least=k)
    return [few_shot(task, p, pool, k=k, seed=seed) for p in prompts]


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ConfigError(f"unknown prompting method {method!r}; expected one of {', '.join(METHODS)}"
                          + did_you_mean(method, METHODS), field="prompting.method")
