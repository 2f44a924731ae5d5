"""Poetry lines (CoPoet): one poetic sentence that meets the constraints of an instruction, which
:func:`parse_instruction` reads back out ("... contains the word 'rays' and ending in 'color'") for the
judge to check."""

from __future__ import annotations

import re

from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.tasks.base import CompletionTask

_QUOTE_PAIRS = {'"': '"', "'": "'", "“": "”"}

# A quoted value runs to the quote that ends the instruction or precedes the next clause, so
# values may hold apostrophes ("bull's eye"); a missing closing quote runs to the end.
_VALUE = r"'(?P<value>.*?)(?:'+(?=\s+(?:and|that|has|with)\s|\s*[.!]?\s*$)|\s*$)"
_CLAUSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (key, re.compile(pattern + r"\s*" + _VALUE, re.IGNORECASE | re.DOTALL))
    for key, pattern in (
        ("rhymes_with", r"\b(?:ends?|ending) (?:in|with) a word (?:which|that) rhymes with"),
        ("ends_with", r"\b(?:ends?|ending) (?:in|with)(?: the words?)?(?=\s*')"),
        ("starts_with", r"\b(?:starts?|starting|begins?|beginning) (?:with|in)(?: the words?)?(?=\s*')"),
        ("contains", r"\b(?:contains?|containing|includes?|including|invluding)(?: the words?)?(?=\s*')"),
        ("topic", r"\b(?:about|speaks of|for)(?=\s*')"),
        ("previous_line", r"\bprevious sentence(?=\s*')"),
    )
)
_FORM = re.compile(r"\b(haiku|metaphor|simile|next sentence|poetic sentence)\b", re.IGNORECASE)


class PoetryTask(CompletionTask):
    """``Instruction: TEXT`` / ``Poem line:``; the answer is the first line."""

    name = "poetry"
    stop: tuple[str, ...] = ("\n",)
    description = "write one line of poetry that follows an instruction"
    concepts = "the literary devices (such as a metaphor, a simile or personification) and the rhyme"
    input_label = "Instruction:"
    answer_label = "Poem line:"

    def instruction(self, prompt: Prompt) -> str:
        """The instruction, and a request for the line alone."""
        return f"{prompt.text.strip()}\nReply with the poetic sentence only, on one line."

    def cut(self, prompt: Prompt, raw: str, *, chat: bool = False) -> str:
        """The first non-empty line; in a chat reply, without quotes around the whole line."""
        text = self.strip_echo(prompt, raw)
        line = next((line.strip() for line in text.splitlines() if line.strip()), "")
        line = self.strip_label(line)
        if chat and len(line) >= 2 and _QUOTE_PAIRS.get(line[0]) == line[-1]:
            line = line[1:-1].strip()
        return line

    def tidy_answer(self, answer: str) -> str:
        """A poem line is one line: inner line breaks become spaces."""
        return " ".join(answer.split())


def parse_instruction(text: str) -> dict[str, str]:
    """The constraints a CoPoet-style instruction states: ``contains``, ``ends_with``, ``rhymes_with``,
    ``starts_with``, ``topic``, ``previous_line`` and ``form`` where it has them, as quoted."""
    found: dict[str, str] = {}
    for key, pattern in _CLAUSES:
        match = pattern.search(text)
        if match:
            value = match.group("value").strip()
            if key != "previous_line":
                value = value.rstrip(".,;:!?'\" ").strip()
            if value:
                found[key] = value
    form = _FORM.search(text)
    if form:
        found["form"] = form.group(1).lower()
    return found
