"""Reading the score out of an LLM judge's reply.

The rubric asks the judge to end with ``Score: <points>``. Judges do not always comply exactly, so
:func:`parse_score` takes the *last* score statement in the reply and tolerates the usual variants:
markdown emphasis (``**Score:** 4``, ``Score: **4**``), a denominator (``Score: 4/5``,
``Score: 4 out of 5``), a unit (``Score: 4 points``), a spelled-out number (``Score: four``) and, when
there is no ``Score`` label at all, a final line such as ``Total: 4/5`` or ``4 points``.

A reply without any of these, a score outside 0-5, or a score on another scale (``8/10``) raises
:class:`UnparsableScore` with the reason; the judges then ask again, a bounded number of times.
"""

from __future__ import annotations

import re

from pytest_novelty.scoring.judges.base import RUBRIC_POINTS


class UnparsableScore(ValueError):
    """A judge reply that holds no valid 0-5 score; the message says why."""


_NUMBER = r"(?<![\w.])(?P<num>[+-]?\d+(?:\.\d+)?|zero|one|two|three|four|five)\b"
_OVER = r"[^\S\n]*(?:/|out[^\S\n]+of)[^\S\n]*(?P<den>\d+(?:\.\d+)?)"
_LABELLED = re.compile(
    r"\bscore\b[^\S\n]*(?:[:=]|\bis\b|\bof\b)?[^\S\n]*(?:\bis\b[^\S\n]*)?" + _NUMBER + f"(?:{_OVER})?",
    re.IGNORECASE,
)
_BARE = re.compile(_NUMBER + rf"(?:{_OVER}|[^\S\n]*points?\b)", re.IGNORECASE)
_MARKUP = str.maketrans("", "", "*_`#[]")
_WORDS = {"zero": 0.0, "one": 1.0, "two": 2.0, "three": 3.0, "four": 4.0, "five": 5.0}


def parse_score(reply: str) -> float:
    """Return the rubric score (0-5) stated last in ``reply``; raise :class:`UnparsableScore` if none.

    Why the last one: judges often quote the scale or score criteria one by one before the total.
    """
    text = reply.translate(_MARKUP)
    matches = list(_LABELLED.finditer(text))
    if not matches:
        lines = [line for line in text.splitlines() if line.strip()]
        matches = list(_BARE.finditer(lines[-1])) if lines else []
    if not matches:
        raise UnparsableScore("reply has no 'Score: N' line")
    found = matches[-1]
    raw = found.group("num")
    value = _WORDS[raw.lower()] if raw.lower() in _WORDS else float(raw)
    denominator = found.group("den")
    if denominator is not None and float(denominator) != RUBRIC_POINTS:
        raise UnparsableScore(f"score {raw}/{denominator} is not on the 0-{RUBRIC_POINTS} scale")
    if not 0 <= value <= RUBRIC_POINTS:
        raise UnparsableScore(f"score {raw} is outside 0-{RUBRIC_POINTS}")
    return value
