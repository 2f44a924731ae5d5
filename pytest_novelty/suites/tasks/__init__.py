"""The four creative tasks, one module each, behind the small :class:`Task` interface.

Each task fixes one plain completion format, shared by zero-shot prompts, in-context examples
and the demo model's training corpus (``render_example`` is ``completion_prefix``, one space and
the answer, so a model trained on rendered examples sees exactly what it is later asked to
continue):

========  ========================================  ==========================
task      completion prefix                         the answer ends at
========  ========================================  ==========================
story     the opening itself                        a blank line
poetry    ``Instruction: TEXT`` ⏎ ``Poem line:``    the end of the first line
tool      ``Problem: TEXT`` ⏎ ``Solution:``         a blank line
open      ``Question: TEXT`` ⏎ ``Answer:``          a blank line
========  ========================================  ==========================

Instruct models get :meth:`Task.instruction` as a user message instead; their reply is cut with
``chat=True``.
"""

from __future__ import annotations

from pytest_novelty.infra.errors import ConfigError, did_you_mean
from pytest_novelty.suites.prompts import TASKS
from pytest_novelty.suites.tasks.base import CompletionTask, Task
from pytest_novelty.suites.tasks.open_ended import OpenTask
from pytest_novelty.suites.tasks.poetry import PoetryTask, parse_instruction
from pytest_novelty.suites.tasks.story import StoryTask, find_characters, split_opening
from pytest_novelty.suites.tasks.tool import ToolTask, parse_items

__all__ = [
    "TASKS", "CompletionTask", "OpenTask", "PoetryTask", "StoryTask", "Task", "ToolTask", "find_characters",
    "get_task", "parse_instruction", "parse_items", "split_opening",
]

_ALL: tuple[Task, ...] = (StoryTask(), PoetryTask(), ToolTask(), OpenTask())
_REGISTRY: dict[str, Task] = {task.name: task for task in _ALL}


def get_task(name: str) -> Task:
    """The task called ``name``; a ``ConfigError`` with a did-you-mean for an unknown name."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(
            f"unknown task {name!r}; expected one of {', '.join(TASKS)}" + did_you_mean(name, TASKS),
            field="task",
        ) from None
