"""The interface every task implements, and the plain completion behaviour most tasks share."""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from pytest_novelty.suites.prompts import Prompt

_BLANK_LINES = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")


@runtime_checkable
class Task(Protocol):
    """What the prompting methods and the generation layer need to know about a task."""

    name: str
    """One of ``pytest_novelty.suites.prompts.TASKS``."""
    stop: tuple[str, ...]
    """Strings that end a plain completion (the generation layer may stop early on them)."""
    description: str
    """What the task asks for, as a phrase that completes "Your task is to ..."."""
    concepts: str
    """The high-level concepts a judge lists for an answer in denial prompting, as a phrase."""

    def labelled_input(self, prompt: Prompt) -> str:
        """The task input with its label ("Problem: ..."), for instructions that explain the task."""
        ...

    def completion_prefix(self, prompt: Prompt) -> str:
        """The zero-shot input for a base model; the answer follows after one space."""
        ...

    def render_example(self, prompt: Prompt, answer: str) -> str:
        """A solved example: ``completion_prefix`` + " " + the answer, tidied to hold no stop."""
        ...

    def instruction(self, prompt: Prompt) -> str:
        """The user message that asks an instruct model for the same answer."""
        ...

    def cut(self, prompt: Prompt, raw: str, *, chat: bool = False) -> str:
        """The answer in a raw continuation (up to the first stop sequence) or, with ``chat=True``, in a
        chat reply (the task's own rule only: the first line for poetry), without an echo of the input."""
        ...


class CompletionTask:
    """A :class:`Task` whose input is ``INPUT_LABEL TEXT`` and whose answer follows ``ANSWER_LABEL``;
    subclasses set ``name``, ``description``, ``concepts`` and ``input_label``."""

    name: str
    description: str
    concepts: str
    input_label: str
    """The label before the task input (``Problem:``) in the completion prefix and ``labelled_input``."""
    answer_label: str = ""
    """The label the answer follows (``Solution:``); empty where the answer continues the input."""
    stop: tuple[str, ...] = ("\n\n",)
    """A plain completion ends at a blank line unless the task says otherwise."""

    def labelled_input(self, prompt: Prompt) -> str:
        return f"{self.input_label} {prompt.text.strip()}"

    def completion_prefix(self, prompt: Prompt) -> str:
        return f"{self.input_label} {prompt.text.strip()}\n{self.answer_label}"

    def render_example(self, prompt: Prompt, answer: str) -> str:
        return f"{self.completion_prefix(prompt)} {self.tidy_answer(answer)}"

    def instruction(self, prompt: Prompt) -> str:
        """The prompt's text as it is: it already reads as a request."""
        return prompt.text.strip()

    def cut(self, prompt: Prompt, raw: str, *, chat: bool = False) -> str:
        text = self.strip_echo(prompt, raw)
        if not chat:
            text = cut_at_stops(text, self.stop)
        return self.strip_label(text.strip())

    def tidy_answer(self, answer: str) -> str:
        """One block of lines: a blank line inside an example would read as its end."""
        return _BLANK_LINES.sub("\n", answer.strip())

    def strip_echo(self, prompt: Prompt, raw: str) -> str:
        """Drop a repeat of the input at the start of the output (full decodes, chatty models)."""
        stripped = raw.lstrip()
        for echo in (self.completion_prefix(prompt), prompt.text.strip()):
            if echo and stripped.startswith(echo):
                return stripped[len(echo):]
        return raw

    def strip_label(self, text: str) -> str:
        """Drop a leading answer label (``Solution:``) that a chat model may repeat."""
        if self.answer_label and text.startswith(self.answer_label):
            return text[len(self.answer_label):].strip()
        return text


def cut_at_stops(text: str, stops: tuple[str, ...]) -> str:
    """The text before the earliest stop sequence; leading whitespace never counts as a stop."""
    body = text.lstrip()
    end = min((i for i in (body.find(stop) for stop in stops if stop) if i >= 0), default=len(body))
    return body[:end]
