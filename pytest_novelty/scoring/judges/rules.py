"""``rules``: an offline, deterministic quality heuristic (not an LLM judge).

It needs no model and no network, so the demo and the test suite use it by default. It awards
the same 0-5 additive points as the LLM rubrics, one per check below, but its checks are about
*form*, not meaning: a finished, on-topic, well-formed answer against a broken one (measure quality
with an LLM judge; use this one to catch degenerate output and to run offline). On MacGyver's
human solutions it ranks a problem's own solution above another problem's in 91% of pairs (ties
counted half), but it is at chance telling feasible from infeasible ones
(``benchmarks/rules_judge_agreement.py``). Deterministic, it judges each item once whatever
``samples`` says.

Checks per task (words come from :func:`pytest_novelty.scoring.text.words`, lower-cased, without
punctuation; "content words" leave out common function words and are compared after a crude
stemming that drops plural and -ing/-ed endings):

story (continue a story)
    1. *characters*: mentions one of the prompt's characters (``meta["characters"]``, else the
       capitalised names found in the opening); with no known characters, shares a content word
       with the opening instead.
    2. *length*: 10 to 1,000 words.
    3. *no degeneration*: fewer than 30% of its 4-grams are repeats and no token repeats more
       than 3 times in a row.
    4. *ending*: the last sentence ends with ``.``, ``!`` or ``?`` (closing quotes allowed).
    5. *sentences*: at least 80% of the sentences start with a capital letter (or digit) and
       hold 1 to 60 words, and the text is *clean*: no task label of the prompt formats leaks in
       (a line starting ``Solution:``, ``Question:``, ``Poem line:``...), no word is glued across
       a case boundary (``sisterLet``), no control or replacement character.

poetry (one line to an instruction; constraints from ``meta`` or read from the instruction)
    1. *one line*: non-empty, without line breaks, and clean (as for stories).
    2. *contains*: holds each required word or phrase (``meta["contains"]``, a string or a list);
       passes when nothing is required.
    3. *ending*: the last word is the required one (``ends_with``), or rhymes with
       ``rhymes_with``; passes when neither is asked. Plural or -ing/-ed forms of the word count.
    4. *length*: 4 to 30 words.
    5. *no repetition*: no 3-word sequence occurs twice and no content word three times.

    The rhyme test compares the *rimes* of the two words: the letters from the start of the last
    vowel group to the end (a final silent ``e`` and the group before it stay together, so
    "time" and "rhyme" both give "ime"; after a consonant ``y`` counts as the vowel ``i``;
    ``ck``/``k``, ``ph``/``f`` and doubled consonants are merged). When the rime is only an
    inflection (``ed``, ``es``, ``s``, ``er``, ``ly``, ``ing``) the previous vowel group is taken in
    too. Identical words do not rhyme. A spelling heuristic: "great"/"late" are missed.

tool (solve a problem with the listed items; ``meta["items"]``, else read from the problem)
    1. *uses an item*: mentions at least one listed item (a content word of its name).
    2. *only listed items*: every object introduced by a verb of use (use, take, grab, get,
       attach) or by "with", "into" or "onto", then an article or possessive ("use a hammer",
       "with your scissors"), is named somewhere in the problem or is a generic word (end, side,
       hand, ...). Objects brought in any other way are not detected.
    3. *actionable*: at least one sentence or step contains an action verb (tie, pour, wrap, ...).
    4. *length*: 10 to 400 words.
    5. *no degeneration*, as for stories.

open (open-ended requests)
    1. *non-empty*: at least 2 words.
    2. *on topic*: shares a content word with the request (passes when the request has none).
    3. *no degeneration*, as for stories.
    4. *length*: at most 1,500 words.
    5. *ending*: ends like finished text (sentence punctuation, a closing bracket or quote, a code
       fence, or a list item), not mid-sentence.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pytest_novelty.infra.errors import ConfigError, did_you_mean
from pytest_novelty.scoring.judges.base import JUDGES, JudgeItem, JudgeResult, rubric_result
from pytest_novelty.scoring.text import words as tokenize

SPEC = "rules"
DESCRIPTION = "rules (offline heuristic, not an LLM judge)"


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_STOPWORDS = _wordset(
    """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves one two three get got make made let
    lets like said say says go went come came way thing things much many well also still even back
    just really want wanted write writing sentence poetic tell give describe explain please
    """
)
_GENERIC_OBJECTS = _wordset(
    """
    hand hands finger fingers arm arms foot feet leg body head mouth end ends side sides top bottom
    edge edges corner middle center centre tip base inside outside surface area part parts piece
    pieces bit bits half place spot way time moment minute minutes second seconds hour help rest
    amount lot shape hole holes gap line knot loop direction front back floor ground air handle
    process step steps item items tool tools object objects thing things something problem situation
    method solution idea force pressure weight strength room space position angle length size
    scenario manner pattern approximation constraint word mixture contraption ability fashion order
    case condition result effect attempt approach technique motion movement setup device structure
    system arrangement makeshift improvised remaining rest other same new
    """
)
_ACTION_VERBS = _wordset(
    """
    use tie place put fill cut attach wrap pour pull push open close cover hold insert fold bend
    press lift hang remove rub scrub dab clean heat light dry soak wet stick tape secure break mix
    stir shake lay set position turn twist fasten bind lower raise slide roll drag scoop dip tap
    poke hook fish spread apply squeeze drain block seal connect plug climb stand move carry fix
    make create build form take grab throw swing knock wipe rinse wash boil melt burn fan blow tear
    rip punch pierce drill scrape sharpen weigh measure mark draw write fold pin clip glue strap
    lean stack prop wedge thread loop drop pick fetch catch trap wave signal shine reflect focus aim
    collect gather fashion craft tighten loosen unscrew screw hammer nail balance sprinkle cool
    """
)
_INFLECTIONS = ("ed", "es", "s", "er", "ly", "ing")
_VOWELS = frozenset("aeiouy")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+|[\r\n]+")
_ENDS_SENTENCE = re.compile(r"[.!?…][\"'”’)\]»]*$")
_ENDS_OPEN = re.compile(r"(?:[.!?…][\"'”’)\]»*_]*|[)\]}\"'”’]|```|[\U0001F300-\U0001FAFF])$")
_LIST_LINE = re.compile(r"^\s*(?:[-*•]|\d+[.)]|#+)\s+\S")
_OBJECT = re.compile(
    r"\b(?:use|uses|using|used|take|taking|grab|grabbing|get|getting|with|into|onto|attach|attaching)"
    r"\s+(?:a|an|the|your|my|some|his|her|their)\s+"
    r"(?P<phrase>[a-z][a-z-]*(?:\s+[a-z][a-z-]*){0,2})",
    re.IGNORECASE,
)


def _words(text: str) -> list[str]:
    """The lower-cased word tokens (not punctuation) of the shared tokenisation."""
    return [token.lower() for token in tokenize(text) if token[0].isalnum() or token[0] == "_"]


def _stem(word: str) -> str:
    """A crude stem: enough to match "towels" with "towel" and "cleaning" with "clean"."""
    w = word.lower()
    if w.endswith(("'s", "’s")):
        w = w[:-2]
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 4 and w.endswith("ied"):
        w = w[:-3] + "y"
    elif len(w) > 4 and w.endswith("ed"):
        w = w[:-2]
    elif len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 4 and w.endswith(("ches", "shes", "sses", "xes", "zes")):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in _VOWELS and w[-1] not in "ls":
        w = w[:-1]  # "stopp" (from "stopped") -> "stop"
    return w


def _content(words: Iterable[str]) -> set[str]:
    """Stems of the content words."""
    return {_stem(w) for w in words if len(w) > 2 and w not in _STOPWORDS and not w.isdigit()}


def _repeat_ratio(words: Sequence[str], n: int) -> float:
    """The share of the text's n-grams that repeat an earlier one."""
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return 1 - len(set(grams)) / len(grams) if grams else 0.0


def _longest_run(tokens: Sequence[str]) -> int:
    """The longest run of one token repeated back to back."""
    return max((len(list(run)) for _, run in itertools.groupby(tokens)), default=0)


def _degenerate(text: str) -> bool:
    words = _words(text)
    return _repeat_ratio(words, 4) >= 0.3 or _longest_run([t.lower() for t in tokenize(text)]) > 3


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_SPLIT.split(text.strip()) if s.strip()]


def _well_formed(sentence: str) -> bool:
    start = sentence.lstrip("\"'“‘([-*• ")
    return bool(start) and (start[0].isupper() or start[0].isdigit()) and 1 <= len(_words(sentence)) <= 60


_LABEL = re.compile(r"(?m)^\s*(?:Solution|Instruction|Poem line|Question|Answer|Problem|Available items)\s*:")
_GLUED = re.compile(r"[a-z][A-Z]|[\x00-\x08\x0b-\x1f\x7f\ufffd]")


def _clean(text: str) -> bool:
    """No sign of broken generation: a task label of the prompt formats leaking into the answer
    (``Solution:`` inside a story), words glued across a case boundary (``sisterLet``), or
    control and replacement characters."""
    return not _LABEL.search(text) and not any(_GLUED.search(w) for w in text.split() if not w.isupper())


def _listify(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    return [str(v) for v in value if str(v).strip()]


def rime(word: str) -> str:
    """The rime of ``word`` used by the rhyme check (see the module doc): "rhyme" -> "ime"."""
    w = re.sub(r"[^a-z]", "", unicodedata.normalize("NFKC", word).lower())
    if not w:
        return ""

    def vowel(i: int) -> bool:
        return w[i] in "aeiou" or (w[i] == "y" and i > 0 and w[i - 1] not in "aeiou")

    def group_start(end: int) -> int:
        """Start of the last vowel group in w[:end], or -1."""
        j = end - 1
        while j >= 0 and not vowel(j):
            j -= 1
        if j < 0:
            return -1
        while j > 0 and vowel(j - 1):
            j -= 1
        return j

    end = len(w)
    if len(w) > 3 and w.endswith("e") and not vowel(len(w) - 2):
        end = len(w) - 1  # silent e: its vowel group comes before the consonant
    start = group_start(end)
    if start < 0:
        return w
    if w[start:] in _INFLECTIONS or w[start:].rstrip("s") in _INFLECTIONS:
        earlier = group_start(start)
        if earlier >= 0:
            start = earlier
    out = "".join("i" if ch == "y" and vowel(start + k) else ch for k, ch in enumerate(w[start:]))
    out = out.replace("ck", "k").replace("ph", "f")
    return re.sub(r"([b-df-hj-np-tv-z])\1", r"\1", out)


def rhymes(a: str, b: str) -> bool:
    """Whether two words rhyme by the spelling heuristic of the module doc (identical words do not)."""
    ra, rb = rime(a), rime(b)
    return bool(ra) and ra == rb and _stem(a) != _stem(b)


def _story(item: JudgeItem) -> dict[str, bool]:
    text = item.response.strip()
    words = _words(text)
    names = _listify(item.meta.get("characters"))
    if not names:
        from pytest_novelty.suites.tasks.story import find_characters

        names = find_characters(item.prompt)
    if names:
        mentioned = {_stem(w) for w in words}
        keeps = any(all(_stem(w) in mentioned for w in _words(name)) for name in names)
    else:
        keeps = bool(_content(words) & _content(_words(item.prompt)))
    sentences = _sentences(text)
    formed = sum(_well_formed(s) for s in sentences)
    return {
        "characters": keeps,
        "length": 10 <= len(words) <= 1000,
        "no degeneration": bool(words) and not _degenerate(text),
        "ending": bool(_ENDS_SENTENCE.search(text)),
        "sentences": bool(sentences) and formed >= 0.8 * len(sentences) and _clean(text),
    }


def _poetry(item: JudgeItem) -> dict[str, bool]:
    from pytest_novelty.suites.tasks.poetry import parse_instruction

    wanted: dict[str, Any] = dict(parse_instruction(item.prompt))
    wanted.update({k: v for k, v in item.meta.items() if k in ("contains", "ends_with", "rhymes_with") and v})
    text = item.response.strip()
    words = _words(text)
    stems = [_stem(w) for w in words]
    joined = " " + " ".join(stems) + " "

    def has(phrase: str) -> bool:
        return " " + " ".join(_stem(w) for w in _words(phrase)) + " " in joined

    ending = True
    ends_with, rhymes_with = _listify(wanted.get("ends_with")), _listify(wanted.get("rhymes_with"))
    if ends_with:
        target = " ".join(_stem(w) for w in _words(ends_with[0]))
        ending = bool(target) and joined.rstrip().endswith(" " + target)
    elif rhymes_with and words:
        ending = any(rhymes(words[-1], w) for w in _words(rhymes_with[0])[-1:])
    counts = Counter(s for w, s in zip(words, stems, strict=True) if len(w) > 3 and w not in _STOPWORDS)
    return {
        "one line": bool(words) and "\n" not in text and _clean(text),
        "contains": all(has(phrase) for phrase in _listify(wanted.get("contains"))),
        "ending": bool(words) and ending,
        "length": 4 <= len(words) <= 30,
        "no repetition": _repeat_ratio(words, 3) == 0 and max(counts.values(), default=0) < 3,
    }


def _tool(item: JudgeItem) -> dict[str, bool]:
    items = _listify(item.meta.get("items"))
    if not items:
        from pytest_novelty.suites.tasks.tool import parse_items

        items = parse_items(item.prompt)
    text = item.response.strip()
    words = _words(text)
    used = _content(words)
    named = [w for name in items for w in _words(name)] if items else _words(item.prompt)
    item_words = _content(named)
    outsiders = _objects_outside(text, item.prompt, item_words)
    parts = [s for s in _sentences(text) if s]
    acting = sum(any(_stem(w) in _ACTION_VERBS or w in _ACTION_VERBS for w in _words(s)) for s in parts)
    return {
        "uses an item": bool(used & item_words),
        "only listed items": bool(words) and not outsiders,
        "actionable": acting >= 1,
        "length": 10 <= len(words) <= 400,
        "no degeneration": bool(words) and not _degenerate(text),
    }


def _objects_outside(text: str, prompt: str, item_words: set[str]) -> list[str]:
    """Objects the text brings in after a verb of use or a preposition that the problem never names."""
    named = _words(prompt)
    joined = {_stem(a + b) for a, b in itertools.pairwise(named)}  # "hair dryer" -> "hairdryer"
    allowed = _content(named) | joined | item_words | {_stem(w) for w in _GENERIC_OBJECTS}
    outsiders = []
    for match in _OBJECT.finditer(text):
        kept: list[str] = []
        for w in match.group("phrase").lower().split():
            if w in _STOPWORDS or _stem(w) in _ACTION_VERBS:
                break
            kept.append(w)
        if kept and not any(_stem(w) in allowed for w in kept) and _stem("".join(kept)) not in allowed:
            outsiders.append(" ".join(kept))
    return outsiders


def _open(item: JudgeItem) -> dict[str, bool]:
    text = item.response.strip()
    words = _words(text)
    topic = _content(_words(item.prompt))
    lines = [line for line in text.splitlines() if line.strip()]
    last = lines[-1].rstrip() if lines else ""
    return {
        "non-empty": len(words) >= 2,
        "on topic": not topic or bool(topic & _content(words)),
        "no degeneration": bool(words) and not _degenerate(text),
        "length": 0 < len(words) <= 1500,
        "ending": bool(last) and (bool(_ENDS_OPEN.search(last)) or bool(_LIST_LINE.match(last))),
    }


CHECKS: dict[str, Callable[[JudgeItem], dict[str, bool]]] = {"story": _story, "poetry": _poetry, "tool": _tool,
                                                              "open": _open}


def explain(item: JudgeItem) -> dict[str, bool]:
    """The five checks of ``item``'s task, each with whether it passed (one point each)."""
    try:
        checks = CHECKS[item.task]
    except KeyError:
        raise ConfigError(
            f"the rules judge has no checks for task {item.task!r}{did_you_mean(item.task, CHECKS)}; "
            f"known tasks: {', '.join(CHECKS)}", field="task",
        ) from None
    return checks(item)


@JUDGES.register("rules", summary="the offline heuristic judge (not an LLM)")
class RulesJudge:
    """The offline heuristic judge; see the module doc for its checks."""

    spec = SPEC
    description = DESCRIPTION

    def __repr__(self) -> str:
        return f"RulesJudge({DESCRIPTION!r})"

    def score(self, items: Sequence[JudgeItem], *, progress: bool = False) -> list[JudgeResult]:
        """One deterministic judgement per item: the number of checks passed, out of 5."""
        return [rubric_result([float(sum(explain(item).values()))], SPEC) for item in items]

    def planned_calls(self, items: Sequence[JudgeItem]) -> int:
        """Always 0: the rules judge calls nothing."""
        return 0
