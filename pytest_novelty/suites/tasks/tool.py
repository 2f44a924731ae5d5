"""Creative tool use (MacGyver): solve a physical problem using only the items listed, which
:func:`parse_items` finds ("You have a rope, a bucket and a spoon.") for the judge to check."""

from __future__ import annotations

import re

from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.tasks.base import CompletionTask

# Phrases that introduce an item list, most specific first; the list runs to the sentence end.
_INTRODUCERS = (
    r"(?:tools|items|disposal|availability|available|resources|supplies|materials)\s*:",
    r"tools? available(?: to you)?(?: (?:are|include|includes))?\s*:?",
    r"items? available(?: to you)?(?: (?:are|include|includes))?\s*:?",
    r"available (?:items|tools|objects|supplies|materials)(?: to you)?(?: (?:are|include|includes))?\s*:?",
    r"(?:your )?(?:available )?(?:tools|items|resources|supplies|materials) (?:consist of|are|include)\s*:?",
    r"available to you (?:are|is)",
    r"(?:at your disposal|on hand|with you),? (?:are|you have|is|there (?:are|is))\s*:?",
    r"despite having",
    r"armed with",
    r"you can only use",
    r"you (?:only |also |do |still )?(?:have|possess)(?: access to| with you| on hand| at your disposal)?"
    r"(?: only)?\s*:?",
    r"you(?:'ve| have) got",
    r"you (?:can |could )?(?:find|see|notice)",
    r"(?:contains|you are left with|around you are|using only)",
)
_LISTS = tuple(
    re.compile(rf"\b{intro}\s+(?P<list>.+?)(?:\.(?=\s|$)|\?|$)", re.IGNORECASE | re.DOTALL)
    for intro in _INTRODUCERS
)
_NOT_A_LIST = re.compile(
    r"^(?:to|been|run|just|no|not|an? (?:important|urgent|big|small)? ?"
    r"(?:meeting|appointment|problem|issue|task|deadline|presentation|hour|minute|day|week))\b",
    re.IGNORECASE,
)
_LIST_END = re.compile(r"\.\s|[,;]?\s(?:however|but|although|albeit)\b", re.IGNORECASE)
_SEPARATORS = re.compile(
    r",\s*(?:and\s+|or\s+)?|\s+and\s+(?=(?:a|an|some|the|several|one|two|three|four|five|six|\d+)\b)",
    re.IGNORECASE,
)
_TRAILING = re.compile(
    r"\s*(?:available(?: to you)?|at your disposal|with you|on hand|at hand|handy"
    r"|in your (?:bag|pocket|backpack|room))\s*$",
    re.IGNORECASE,
)
_ARTICLE = re.compile(r"^(?:and |or )?(?:a |an |the |some |your )", re.IGNORECASE)
_RELATIVE = re.compile(r"\s+(?:which|that|who)\b.*$", re.IGNORECASE | re.DOTALL)


class ToolTask(CompletionTask):
    """``Problem: TEXT`` / ``Solution:``; the answer ends at a blank line."""

    name = "tool"
    description = "solve a practical problem in a creative way, using only the items at hand"
    concepts = "how each item is used and the overall plan"
    input_label = "Problem:"
    answer_label = "Solution:"

    def instruction(self, prompt: Prompt) -> str:
        """The problem, and a request for a step-by-step solution with the listed items only."""
        return (
            f"{prompt.text.strip()}\n"
            "Explain step by step how you would solve the problem using only the listed items. "
            "Reply with the solution only."
        )


def parse_items(problem: str) -> list[str]:
    """The items (at least two) a MacGyver-style problem lists, split at commas and "and", without
    articles or relative clauses ("a hammer which is not very heavy": "hammer"); [] when none."""
    for pattern in _LISTS:
        for match in pattern.finditer(problem):
            listed = match.group("list")
            if _NOT_A_LIST.match(listed):
                continue
            listed = _TRAILING.sub("", _LIST_END.split(listed)[0])
            items = []
            for part in _SEPARATORS.split(listed):
                item = _RELATIVE.sub("", _ARTICLE.sub("", part.strip(" .:")).strip()).strip()
                if item:
                    items.append(item)
            if len(items) >= 2:
                return items
    return []
