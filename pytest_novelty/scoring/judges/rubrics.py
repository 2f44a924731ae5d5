"""Versioned grading rubrics, one per task, shared by every LLM judge (``openai:``, ``hf:``).

Each rubric is additive, five criteria worth a point each; the judge explains itself first and
ends with ``Score: <points>`` (:mod:`.parsing`). The version is part of every cache key: change
the wording and bump it (a test checks the wording against each version's fingerprint).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pytest_novelty.infra.errors import ConfigError, did_you_mean
from pytest_novelty.scoring.judges.base import JudgeItem

_SYSTEM = (
    "You are a careful, strict grader of writing produced by a language model. You will see the task "
    "the model was given and the model's response. Grade only the response, using the checklist you "
    "are given: each criterion that the response fully meets earns one point, and a criterion that "
    "is only partly met earns nothing. Do not reward length for its own sake."
)

_FORMAT = (
    "First write two to four sentences explaining which criteria the response meets and which it "
    "misses. Then, on a line of its own, write the total as `Score: <points>`, where <points> is a "
    "whole number from 0 to 5. Write nothing after that line."
)


@dataclass(frozen=True)
class Rubric:
    """The grading instructions for one task: a version, what the task was, and five criteria."""

    task: str
    version: str
    task_label: str
    criteria: tuple[str, str, str, str, str]

    @property
    def fingerprint(self) -> str:
        """A short hash of everything the judge is told, to catch edits made without a version bump."""
        text = "\n".join((_SYSTEM, _FORMAT, self.task_label, *self.criteria))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def messages(self, item: JudgeItem) -> list[dict[str, str]]:
        """The chat messages that ask a judge to grade ``item`` with this rubric."""
        checklist = "\n".join(f"{i}. {criterion}" for i, criterion in enumerate(self.criteria, 1))
        user = (
            f"Task given to the model ({self.task_label}):\n<<<\n{item.prompt.strip()}\n>>>\n\n"
            f"The model's response:\n<<<\n{item.response.strip()}\n>>>\n\n"
            f"Checklist (one point per criterion met):\n{checklist}\n\n{_FORMAT}"
        )
        return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


RUBRICS: dict[str, Rubric] = {
    "story": Rubric(
        task="story", version="story/1", task_label="continue a story from its opening",
        criteria=(
            "The continuation stays with the opening: the same setting, theme and characters, "
            "picking up where the opening stops.",
            "The events follow from one another without contradicting the opening or each other.",
            "It develops what the opening set up and does not wander off into unrelated events or characters.",
            "The sentences are grammatical and read naturally.",
            "All of the above hold and the story reaches a sensible ending (an open ending is fine "
            "if it is deliberate).",
        ),
    ),
    "poetry": Rubric(
        task="poetry", version="poetry/1", task_label="write one line of poetry to an instruction",
        criteria=(
            "The response is an attempt at a line of poetry rather than prose, a refusal or a comment on the task.",
            "It meets the form the instruction asks for: it contains or ends with the required word, "
            "or rhymes with the given word, as instructed.",
            "The requested words or themes are woven into the line so that it makes sense, not just dropped in.",
            "The line is grammatical (poetic licence is fine, word salad is not).",
            "Every constraint of the instruction is satisfied at once.",
        ),
    ),
    "tool": Rubric(
        task="tool", version="tool/1", task_label="solve a practical problem creatively with a fixed set of items",
        criteria=(
            "The solution uses only the items the problem lists (plus the person's own hands and "
            "body), and nothing else.",
            "It shows an understanding of what each item it uses is and what it can do.",
            "It respects physical limits: nothing in it would break the laws of physics or the "
            "constraints stated in the problem.",
            "It is practical: a person could carry it out and it would likely solve the problem.",
            "It is complete and clearly explained, step by step, with no missing step.",
        ),
    ),
    "open": Rubric(
        task="open", version="open/1", task_label="answer an open-ended request",
        criteria=(
            "The response addresses the request that was made, not a different one.",
            "What it states is sensible and, where facts are involved, correct.",
            "It is complete: it does everything the request asks for.",
            "It is well written: clear, grammatical and well organised.",
            "All of the above hold and it would genuinely satisfy the person who asked.",
        ),
    ),
}


def rubric_for(task: str) -> Rubric:
    """The rubric for ``task``; a ``ConfigError`` names the known tasks otherwise."""
    try:
        return RUBRICS[task]
    except KeyError:
        raise ConfigError(
            f"no rubric for task {task!r}{did_you_mean(task, RUBRICS)}; known tasks: {', '.join(RUBRICS)}",
            field="task",
        ) from None
