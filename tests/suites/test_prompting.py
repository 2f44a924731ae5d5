"""Prompting methods: the exact text each builds, and how answers come back out of the output."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.suites.prompting import (
    METHODS,
    ask_novelty,
    build_inputs,
    chat,
    concept_prompt,
    denial,
    extract_answer,
    extract_between_asterisks,
    few_shot,
    merge_concepts,
    novel_examples,
    parse_concepts,
    sample_examples,
    top_examples,
)
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.schema import (
    GateSettings,
    GenerationSettings,
    Prompting,
    PromptSource,
    Scoring,
    Suite,
    Threshold,
)
from pytest_novelty.suites.tasks import get_task

REPO = Path(__file__).resolve().parents[2]

OPEN = get_task("open")
STORY = get_task("story")
QUESTION = Prompt("q", "open", "Name a river spirit.")
SHOTS = [
    Prompt("e1", "open", "Name a cloud.", "Puffin."),
    Prompt("e2", "open", "Name a stone.", "Grumble."),
    Prompt("e3", "open", "Name a leaf.", "Flick."),
    Prompt("e4", "open", "Name a hill.", None),  # no reference: never an example
]


def suite(method: str, task: str = "open", examples: int = 0, source: str = "builtin:open") -> Suite:
    return Suite(
        name=f"{task}-{method}",
        task=task,
        path=REPO / "suites" / f"{task}.toml",
        prompts=PromptSource(source=source, seed=0),
        prompting=Prompting(method=method, examples=examples),
        generation=GenerationSettings(),
        scoring=Scoring(),
        gate=GateSettings(),
        thresholds=(Threshold("novelty", ">=", 0.1),),
    )


# -- few-shot ---------------------------------------------------------------------------------


def test_few_shot_joins_solved_examples_and_the_prefix() -> None:
    text = few_shot(OPEN, QUESTION, SHOTS, k=3, seed=0)
    blocks = text.split("\n\n")
    assert blocks[-1] == "Question: Name a river spirit.\nAnswer:"
    assert sorted(blocks[:-1]) == [
        "Question: Name a cloud.\nAnswer: Puffin.",
        "Question: Name a leaf.\nAnswer: Flick.",
        "Question: Name a stone.\nAnswer: Grumble.",
    ]


def test_few_shot_draw_is_seeded_per_prompt() -> None:
    first = few_shot(OPEN, QUESTION, SHOTS, k=2, seed=0)
    assert first == few_shot(OPEN, QUESTION, list(reversed(SHOTS))[::-1], k=2, seed=0)
    draws = {tuple(e.id for e in sample_examples(QUESTION, SHOTS, 2, seed=s)) for s in range(20)}
    assert len(draws) > 1  # the seed matters
    other = Prompt("q2", "open", "Name a lake spirit.")
    assert {e.id for e in sample_examples(other, SHOTS, 3)} == {"e1", "e2", "e3"}


def test_few_shot_never_shows_a_prompt_its_own_answer_or_an_unsolved_example() -> None:
    own = Prompt("e1", "open", "Name a cloud.")
    assert [e.id for e in sample_examples(own, SHOTS, 5)] == ["e2", "e3"]
    assert few_shot(OPEN, QUESTION, SHOTS, k=0) == "Question: Name a river spirit.\nAnswer:"


def test_story_few_shot_is_plain_continuation() -> None:
    example = Prompt("s0", "story", "Ana had a kite.", "It flew away. She laughed.")
    prompt = Prompt("s1", "story", "Bo had a drum.")
    assert few_shot(STORY, prompt, [example], k=5) == "Ana had a kite. It flew away. She laughed.\n\nBo had a drum."


# -- novel examples ---------------------------------------------------------------------------


def test_top_examples_keeps_the_most_novel_tenth() -> None:
    pool = [Prompt(f"x{i:02d}", "open", f"Q{i}", f"A{i}") for i in range(30)]
    scores = {p.id: i / 30 for i, p in enumerate(pool)}
    scores["x00"] = math.nan
    assert [p.id for p in top_examples(pool, scores)] == ["x29", "x28", "x27"]
    assert [p.id for p in top_examples(pool, scores, at_least=5)] == ["x29", "x28", "x27", "x26", "x25"]
    assert top_examples(pool, {}) == []


def test_novel_examples_draws_from_the_top_only() -> None:
    pool = [Prompt(f"x{i:02d}", "open", f"Q{i}", f"A{i}") for i in range(50)]
    scores = {p.id: float(i) for i, p in enumerate(pool)}
    text = novel_examples(OPEN, QUESTION, pool, scores, k=5, seed=1)
    shown = {block.split("\n")[0] for block in text.split("\n\n")[:-1]}
    assert shown == {f"Question: Q{i}" for i in range(45, 50)}


# -- chat, asking for novelty, denial ---------------------------------------------------------


def test_chat_is_the_instruction_as_a_user_message() -> None:
    assert chat(OPEN, QUESTION) == [{"role": "user", "content": "Name a river spirit."}]


def test_ask_novelty_text() -> None:
    assert ask_novelty(OPEN, QUESTION) == [{"role": "user", "content": (
        "Your task is to answer an open-ended request that has many good answers.\n\n"
        "Question: Name a river spirit.\n\n"
        "Write an answer of high quality that is also original: avoid the first idea that comes to "
        "mind and the plots, images or solutions that most people would come up with, while still doing "
        "exactly what the task asks. First think about several possible answers and choose the one "
        "that is the most original and still good. Then write your final answer between asterisks, "
        "like this: *your answer*. Do not use asterisks anywhere else."
    )}]


def test_denial_round_prompts() -> None:
    first = denial(STORY, Prompt("s", "story", "Ana had a kite."))
    assert first == [{"role": "user", "content": (
        "Your task is to continue a short story for young children from its opening.\n\n"
        "Story opening: Ana had a kite.\n\n"
        "Write only your answer, between asterisks, like this: *your answer*."
    )}]
    later = denial(STORY, Prompt("s", "story", "Ana had a kite."), ["a lost kite", "friendship", "Friendship "])
    assert later[0]["content"] == (
        "Your task is to continue a short story for young children from its opening.\n\n"
        "Story opening: Ana had a kite.\n\n"
        "Earlier answers already used the concepts below (the characters, the plot arc and the themes). "
        "Your answer must not use any of them; find different ones.\n"
        "- a lost kite\n"
        "- friendship\n\n"
        "Write only your answer, between asterisks, like this: *your answer*."
    )


@pytest.mark.parametrize(
    ("task", "phrase"),
    [
        ("story", "the characters, the plot arc and the themes"),
        ("poetry", "the literary devices (such as a metaphor, a simile or personification) and the rhyme"),
        ("tool", "how each item is used and the overall plan"),
        ("open", "the main ideas and choices"),
    ],
)
def test_concept_prompt_asks_for_the_task_s_concepts(task: str, phrase: str) -> None:
    prompt = Prompt("p", task, "Some input.")
    content = concept_prompt(get_task(task), prompt, "  Some answer.\n")[0]["content"]
    assert f"List the high-level concepts this answer uses: {phrase}." in content
    assert "Answer:\nSome answer.\n\n" in content


def test_concept_prompt_text() -> None:
    assert concept_prompt(OPEN, QUESTION, "Reedmother.")[0]["content"] == (
        "Here is a task and an answer to it.\n\n"
        "Task: answer an open-ended request that has many good answers.\n"
        "Question: Name a river spirit.\n\n"
        "Answer:\nReedmother.\n\n"
        "List the high-level concepts this answer uses: the main ideas and choices. "
        "Name each one as a short, general phrase that could be forbidden in a new answer, not a quotation. "
        'Write one concept per line, each line starting with "- ", and nothing else.'
    )


@pytest.mark.parametrize(
    ("reply", "concepts"),
    [
        ("- a lost kite\n- **friendship**\n- Friendship.\n", ["a lost kite", "friendship"]),
        ("Here they are:\n1. a talking fox\n2) sharing food", ["a talking fox", "sharing food"]),
        ('["rhyme on -ight", "moon as a coin"]', ["rhyme on -ight", "moon as a coin"]),
        ("the rope as a lasso; the bucket as a step", ["the rope as a lasso", "the bucket as a step"]),
        ("kindness\ncourage", ["kindness", "courage"]),
        ("None", []),
        ("", []),
    ],
)
def test_parse_concepts(reply: str, concepts: list[str]) -> None:
    assert parse_concepts(reply) == concepts


def test_merge_concepts_accumulates_rounds() -> None:
    assert merge_concepts(["a fox", "a river"], ["A  fox", "the moon"]) == ["a fox", "a river", "the moon"]


# -- answers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("I could write about a fox... I choose the owl.\n\n*The owl kept the keys of the night.*",
         "The owl kept the keys of the night."),
        ("**Idea 1**: a fox. **Idea 2**: an owl.\n\n**The owl kept the keys.**", "The owl kept the keys."),
        ("Thoughts:\n* one\n* two\n\n*Line one.\nLine two.*", "Line one.\nLine two."),
        ("Five * three is fifteen, so *fifteen*", "fifteen"),
        ("No asterisks at all.", None),
        ("An unclosed *answer", None),
    ],
)
def test_extract_between_asterisks(reply: str, answer: str | None) -> None:
    assert extract_between_asterisks(reply) == answer


def test_extract_answer_per_method() -> None:
    raw = " Reedmother.\n\nQuestion: next"
    assert extract_answer("few-shot", OPEN, QUESTION, raw) == "Reedmother."
    assert extract_answer("novel-examples", OPEN, QUESTION, raw) == "Reedmother."
    assert extract_answer("chat", OPEN, QUESTION, "Answer: Reedmother.\n\nShe sings.") == "Reedmother.\n\nShe sings."
    assert extract_answer("ask-novelty", OPEN, QUESTION, "Hmm, *Reedmother*") == "Reedmother"
    assert extract_answer("denial", OPEN, QUESTION, "no stars") == ""
    poem = Prompt("p", "poetry", "Write a line.")
    assert extract_answer("denial", get_task("poetry"), poem, '*"Line one"\nextra*') == "Line one"
    with pytest.raises(ConfigError, match="did you mean 'few-shot'"):
        extract_answer("fewshot", OPEN, QUESTION, raw)


# -- a suite's inputs -------------------------------------------------------------------------


def test_build_inputs_for_each_method() -> None:
    prompts = [QUESTION]
    assert build_inputs(suite("few-shot"), prompts) == ["Question: Name a river spirit.\nAnswer:"]
    assert build_inputs(suite("chat"), prompts) == [chat(OPEN, QUESTION)]
    assert build_inputs(suite("ask-novelty"), prompts) == [ask_novelty(OPEN, QUESTION)]
    assert build_inputs(suite("denial"), prompts) == [denial(OPEN, QUESTION)]
    assert build_inputs(suite("denial"), prompts, forbidden={"q": ["spirits of water"]}) == [
        denial(OPEN, QUESTION, ["spirits of water"])
    ]
    assert set(METHODS) == {"few-shot", "chat", "ask-novelty", "denial", "novel-examples"}


def test_build_inputs_loads_the_held_out_examples_of_the_source() -> None:
    [text] = build_inputs(suite("few-shot", examples=3), [QUESTION])
    blocks = text.split("\n\n")
    assert len(blocks) == 4 and blocks[-1] == "Question: Name a river spirit.\nAnswer:"
    assert all(b.startswith("Question: ") and "\nAnswer: " in b for b in blocks[:-1])


def test_build_inputs_for_novel_examples() -> None:
    given = [*SHOTS]
    scores = {"e1": 0.9, "e2": 0.1, "e3": 0.5}
    [text] = build_inputs(suite("novel-examples", examples=1), [QUESTION], examples=given, example_scores=scores)
    assert text == "Question: Name a cloud.\nAnswer: Puffin.\n\nQuestion: Name a river spirit.\nAnswer:"
    with pytest.raises(ConfigError, match="needs novelty scores"):
        build_inputs(suite("novel-examples", examples=1), [QUESTION], examples=given)
    with pytest.raises(ConfigError, match="needs at least 1 example"):
        build_inputs(suite("novel-examples", examples=0), [QUESTION])


def test_build_inputs_without_solved_examples_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bare.jsonl"
    path.write_text('{"id": "a", "text": "Name a bird."}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"few-shot needs solved examples.*set prompting.examples = 0"):
        build_inputs(suite("few-shot", examples=2, source=f"jsonl:{path}"), [QUESTION])
