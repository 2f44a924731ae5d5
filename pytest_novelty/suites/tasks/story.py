"""Story completion (TinyStories): the model continues a children's story from its opening; and the
loader's helpers, where the opening ends and which capitalised names in it are characters."""

from __future__ import annotations

import re

from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.tasks.base import CompletionTask

# A sentence ends at . ! or ? (and any closing quotes) before whitespace, except after a title.
_SENTENCE_END = re.compile(r"(?<!\bMr)(?<!\bMrs)(?<!\bMs)(?<!\bDr)(?<!\bSt)[.!?]+[\"”’']*(?=\s|$)")
_WORD = re.compile(r"\S+")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?:['’]s)?\b")
_LOWER_WORD = re.compile(r"\b[a-z]+\b")
# Capitalised words that start sentences or exclamations in children's stories but are no names.
_STARTERS = """
    a an the and but or so then once one two three upon there this that these those it its he she
    they we you i his her their our my your me him them us when while after before every each all
    some many much more most in on at by for from with without into over under about as if because
    until since though although today tomorrow yesterday now soon later finally suddenly sometimes
    always never also even still just only yes no oh wow hello hi hey look let lets please thank
    thanks okay ok sorry good bad come go stop wait what where why how who which whose can could will
    would shall should may might must do does did is are was were be been being have has had not very
    too here long inside outside together everyone everything someone something nobody nothing
    instead maybe meanwhile next first last again already almost
    monday tuesday wednesday thursday friday saturday sunday january february march july
    september october november december christmas easter
"""
_NOT_NAMES = frozenset(_STARTERS.split())


class StoryTask(CompletionTask):
    """The input is the opening itself; the model writes the rest after one space."""

    name = "story"
    description = "continue a short story for young children from its opening"
    concepts = "the characters, the plot arc and the themes"
    input_label = "Story opening:"

    def completion_prefix(self, prompt: Prompt) -> str:
        """The opening, without surrounding whitespace."""
        return prompt.text.strip()

    def instruction(self, prompt: Prompt) -> str:
        """Ask for the continuation only, in the same simple style and with the same characters."""
        return (
            "Here is the beginning of a short story for young children:\n\n"
            f"{prompt.text.strip()}\n\n"
            "Continue the story from where it stops, in simple words and with the same characters. "
            "Reply with the continuation only."
        )


def split_opening(story: str, *, sentences: int = 1, words: int | None = None) -> tuple[str, str] | None:
    """(opening, rest): the first ``sentences`` sentences (not ended by "Mr.", closing quotes kept) or
    ``words`` words; None when no continuation is left."""
    text = story.strip()
    if words is not None:
        if words < 1:
            raise ValueError("words must be at least 1")
        spans = list(_WORD.finditer(text))
        if len(spans) <= words:
            return None
        end = spans[words - 1].end()
    else:
        if sentences < 1:
            raise ValueError("sentences must be at least 1")
        ends = [m.end() for m in _SENTENCE_END.finditer(text)]
        if len(ends) < sentences:
            return None
        end = ends[sentences - 1]
    opening, rest = text[:end].strip(), text[end:].strip()
    return (opening, rest) if rest else None


def find_characters(opening: str, story: str | None = None) -> list[str]:
    """Capitalised names in ``opening`` in order, possessives reduced ("Lily's": "Lily"), but not
    sentence starters or words whose lower case occurs in ``story`` ("Once" against "once")."""
    lower_words = set(_LOWER_WORD.findall(story if story is not None else opening))
    names: list[str] = []
    for match in _CAPITALISED.finditer(opening):
        word = re.sub(r"['’]s$", "", match.group())
        if word.lower() in _NOT_NAMES or word.lower() in lower_words or word in names:
            continue
        names.append(word)
    return names
