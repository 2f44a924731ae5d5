"""The demo corpus generator: deterministic, in the fixed task formats, varied enough to generalise."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

POEM_CONTAINS = re.compile(
    r"Instruction: Write a poetic sentence that contains the word '([a-z ]+)' and ends in '([a-z]+)'\.\n"
    r"Poem line: (.+)"
)
POEM_RHYMES = re.compile(
    r"Instruction: Write a poetic sentence about ([a-z ]+) that ends in a word that rhymes with '([a-z]+)'\.\n"
    r"Poem line: (.+)"
)
TOOL = re.compile(r"Problem: (.+?) Available items: (.+)\.\nSolution: (1\. .+)")
OPEN = re.compile(r"Question: (.+)\nAnswer: (.+)")


@pytest.fixture(scope="module")
def corpus(build: ModuleType) -> ModuleType:
    return build.sibling("corpus")


@pytest.fixture(scope="module")
def docs(corpus: ModuleType) -> list[dict]:
    return corpus.generate(2_000, seed=0)


def _last_word(line: str) -> str:
    return re.sub(r"[^a-z ]", "", line.lower()).split()[-1]


def test_same_seed_same_corpus_other_seed_other_corpus(corpus: ModuleType) -> None:
    first = corpus.generate(300, seed=7)
    assert first == corpus.generate(300, seed=7)
    assert [d["text"] for d in first] != [d["text"] for d in corpus.generate(300, seed=8)]


def test_kinds_come_in_their_shares(corpus: ModuleType, docs: list[dict]) -> None:
    counts = Counter(d["kind"] for d in docs)
    assert counts == corpus.kind_counts(2_000)
    assert counts == {"story": 1_400, "poetry": 240, "tool": 200, "open": 160}


def test_every_document_starts_with_its_prompt(docs: list[dict]) -> None:
    for d in docs:
        assert d["text"].startswith(d["prompt"])
        assert len(d["text"]) > len(d["prompt"]) + 5


def test_stories_are_plain_text_that_reuses_the_opening_characters(docs: list[dict]) -> None:
    stories = [d for d in docs if d["kind"] == "story"]
    for d in stories:
        text, opening = d["text"], d["prompt"]
        assert not re.match(r"(Instruction|Problem|Question):", text)
        assert opening.endswith((".", "!")) and "\n" not in text
        rest = text[len(opening) :]
        assert d["meta"]["characters"]
        for name in d["meta"]["characters"]:
            assert re.search(rf"\b{name}\b", opening) and re.search(rf"\b{name}\b", rest), (name, text)
        assert 2 <= len(re.findall(r'[.!?]"?(?=\s|$)', rest)) <= 12
        assert text.endswith((".", "!", '"'))
    assert len({d["meta"]["arc"] for d in stories}) >= 8


def test_poetry_lines_meet_their_instruction(corpus: ModuleType, docs: list[dict]) -> None:
    families = corpus.load_words()["rhymes"].values()
    poems = [d for d in docs if d["kind"] == "poetry"]
    seen = Counter()
    for d in poems:
        if m := POEM_CONTAINS.fullmatch(d["text"]):
            word, end, line = m.groups()
            assert _last_word(line) == end
            seen["contains"] += 1
        else:
            m = POEM_RHYMES.fullmatch(d["text"])
            assert m, d["text"]
            word, given, line = m.groups()
            end = _last_word(line)
            assert end != given
            assert any({given, end} <= set(f["n"] + f["a"]) for f in families), (given, end)
            seen["rhymes"] += 1
        assert word in line and line.endswith(".")
        assert d["prompt"] == d["text"][: d["text"].index("\nPoem line:")] + "\nPoem line:"
    assert seen["contains"] > 50 and seen["rhymes"] > 50


def test_tool_solutions_use_only_listed_items(corpus: ModuleType, docs: list[dict]) -> None:
    words = corpus.load_words()
    known = set(words["item_pool"]) | {i for p in words["tool_problems"] for w in p["ways"] for i in w["items"]}
    for d in (d for d in docs if d["kind"] == "tool"):
        m = TOOL.fullmatch(d["text"])
        assert m, d["text"]
        problem, listed, solution = m.groups()
        items = [re.sub(r"^(a|an|some) ", "", i) for i in listed.split(", ")]
        assert items == d["meta"]["items"] and set(d["meta"]["used"]) <= set(items)
        steps = re.findall(r"(\d)\. ", solution)
        assert steps == [str(i) for i in range(1, len(steps) + 1)] and 2 <= len(steps) <= 4
        mentioned = {i for i in known if re.search(rf"\bthe {i}\b", solution)}
        in_problem = {i for i in known if re.search(rf"\b{i}\b", problem)}
        assert mentioned <= set(items) | in_problem, (mentioned - set(items), d["text"])


def test_open_questions_have_answers(docs: list[dict]) -> None:
    open_docs = [d for d in docs if d["kind"] == "open"]
    for d in open_docs:
        m = OPEN.fullmatch(d["text"])
        assert m, d["text"]
        assert m.group(2)[0].isupper() and m.group(2).endswith((".", "!"))
    assert len({OPEN.fullmatch(d["text"]).group(1) for d in open_docs}) > 60  # type: ignore[union-attr]


def test_full_corpus_is_varied(corpus: ModuleType) -> None:
    docs = corpus.generate(20_000, seed=0)
    texts = [d["text"] for d in docs]
    assert len(set(texts)) > 0.95 * len(texts)
    stories = [d["text"] for d in docs if d["kind"] == "story"]
    assert len(set(stories)) == len(stories)
    openings = Counter(d["prompt"] for d in docs if d["kind"] == "story")
    assert len(openings) > 0.8 * len(stories)
    names = Counter(c for d in docs if d["kind"] == "story" for c in d["meta"]["characters"])
    assert len(names) >= 90


def test_corpus_file_holds_only_text(corpus: ModuleType, docs: list[dict], tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    corpus.write_jsonl(docs[:50], path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [{"text": d["text"]} for d in docs[:50]]


def test_build_rejects_an_early_step_outside_the_run(build: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="early_step"):
        build.build_demo(tmp_path, steps=10, early_step=10, progress=False)
    assert build.read_facts(tmp_path) is None
