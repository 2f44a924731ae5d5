"""The task definitions: completion formats, answer cutting, and the text helpers of each task."""

from __future__ import annotations

import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.suites.prompts import TASKS, Prompt
from pytest_novelty.suites.tasks import Task, find_characters, get_task, parse_instruction, parse_items, split_opening

STORY = Prompt("s1", "story", "Nell the hedgehog found a red mitten on the path. ")
POEM = Prompt("p1", "poetry", "Write a poetic sentence that contains the word 'kettle' and ends in 'dawn'.")
TOOL = Prompt("t1", "tool", "Your hat blew onto a roof. You have a broom, a rope and a bucket. How do you get it?")
OPEN = Prompt("o1", "open", "Name a new colour.")


@pytest.mark.parametrize("name", TASKS)
def test_every_task_is_registered_and_implements_the_interface(name: str) -> None:
    task = get_task(name)
    assert isinstance(task, Task)
    assert task.name == name
    assert task.stop and task.description and task.concepts


def test_unknown_task_names_the_choices_and_a_close_match() -> None:
    with pytest.raises(ConfigError, match=r"unknown task 'poetyr'.*did you mean 'poetry'"):
        get_task("poetyr")


@pytest.mark.parametrize(
    ("prompt", "prefix"),
    [
        (STORY, "Nell the hedgehog found a red mitten on the path."),
        (POEM, "Instruction: " + POEM.text + "\nPoem line:"),
        (TOOL, "Problem: " + TOOL.text + "\nSolution:"),
        (OPEN, "Question: Name a new colour.\nAnswer:"),
    ],
)
def test_completion_prefixes(prompt: Prompt, prefix: str) -> None:
    assert get_task(prompt.task).completion_prefix(prompt) == prefix


def test_a_rendered_example_is_the_prefix_a_space_and_the_answer() -> None:
    story = get_task("story")
    assert story.render_example(STORY, " She put it on her nose. ") == (
        "Nell the hedgehog found a red mitten on the path. She put it on her nose."
    )
    assert get_task("open").render_example(OPEN, "Glimmer.") == "Question: Name a new colour.\nAnswer: Glimmer."


def test_a_rendered_example_holds_no_stop_sequence() -> None:
    tool = get_task("tool").render_example(TOOL, "Step 1: Tie the rope.\n\n\nStep 2: Pull.")
    assert tool.endswith("Solution: Step 1: Tie the rope.\nStep 2: Pull.")
    poem = get_task("poetry").render_example(POEM, "The kettle sings\nat dawn")
    assert poem.endswith("Poem line: The kettle sings at dawn")
    for text, task in ((tool, "tool"), (poem, "poetry")):
        prefix = get_task(task).completion_prefix(TOOL if task == "tool" else POEM)
        assert not any(stop in text[len(prefix):] for stop in get_task(task).stop)


def test_cut_stops_at_the_first_stop_sequence() -> None:
    raw = " She sniffed it.\nIt smelled of soup.\n\nQuestion: more"
    assert get_task("story").cut(STORY, raw) == "She sniffed it.\nIt smelled of soup."
    assert get_task("open").cut(OPEN, " Glimmer, a blue that hums.\n\nQuestion: Name") == "Glimmer, a blue that hums."


def test_cut_takes_the_first_non_empty_poem_line() -> None:
    poetry = get_task("poetry")
    line = "The kettle hums its song at dawn."
    assert poetry.cut(POEM, f"\n  {line}\nInstruction: x") == line
    assert poetry.cut(POEM, "") == ""


def test_cut_strips_an_echo_of_the_input() -> None:
    tool = get_task("tool")
    full = tool.completion_prefix(TOOL) + " Sweep the hat down.\n\nProblem: next"
    assert tool.cut(TOOL, full) == "Sweep the hat down."
    assert get_task("story").cut(STORY, STORY.text.strip() + " Then she ran home.") == "Then she ran home."


def test_chat_cut_keeps_paragraphs_and_drops_labels_and_quotes() -> None:
    story = get_task("story")
    assert story.cut(STORY, "She ran.\n\nShe laughed.", chat=True) == "She ran.\n\nShe laughed."
    assert get_task("tool").cut(TOOL, "Solution: Use the broom.", chat=True) == "Use the broom."
    poetry = get_task("poetry")
    assert poetry.cut(POEM, '"The kettle sighs at dawn."\nHope you like it!', chat=True) == "The kettle sighs at dawn."
    assert poetry.cut(POEM, "“The kettle sighs at dawn.”", chat=True) == "The kettle sighs at dawn."
    assert poetry.cut(POEM, "Poem line: Steam rises at dawn.", chat=True) == "Steam rises at dawn."


def test_instructions_ask_for_the_answer_alone() -> None:
    assert get_task("open").instruction(OPEN) == "Name a new colour."
    assert get_task("poetry").instruction(POEM) == POEM.text + "\nReply with the poetic sentence only, on one line."
    assert get_task("story").instruction(STORY) == (
        "Here is the beginning of a short story for young children:\n\n"
        "Nell the hedgehog found a red mitten on the path.\n\n"
        "Continue the story from where it stops, in simple words and with the same characters. "
        "Reply with the continuation only."
    )
    assert get_task("tool").instruction(TOOL).startswith(TOOL.text + "\nExplain step by step")


def test_labelled_inputs() -> None:
    assert get_task("story").labelled_input(STORY) == "Story opening: " + STORY.text.strip()
    assert get_task("tool").labelled_input(TOOL) == "Problem: " + TOOL.text


# -- story helpers ----------------------------------------------------------------------------


def test_split_opening_by_sentences() -> None:
    story = 'Once, a crow named Pell lived on a roof. Mr. Pike fed him. "Thanks!" said Pell. He flew off.'
    assert split_opening(story) == ("Once, a crow named Pell lived on a roof.", story[41:])
    opening, rest = split_opening(story, sentences=3) or ("", "")
    assert opening == 'Once, a crow named Pell lived on a roof. Mr. Pike fed him. "Thanks!"'
    assert rest == "said Pell. He flew off."


def test_split_opening_by_words_keeps_the_rest_as_written() -> None:
    assert split_opening("One two three\nfour five.", words=3) == ("One two three", "four five.")


def test_split_opening_needs_a_continuation() -> None:
    assert split_opening("Just one sentence here.") is None
    assert split_opening("Too short", words=5) is None
    with pytest.raises(ValueError):
        split_opening("A. B.", sentences=0)


def test_find_characters() -> None:
    opening = "Once upon a time, a goat named Tibbs and his friend Oona went to the market."
    assert find_characters(opening) == ["Tibbs", "Oona"]
    # A word that also occurs in lower case in the story is no name.
    assert find_characters("Snow fell on Tibbs.", "Snow fell on Tibbs. The snow was deep.") == ["Tibbs"]
    assert find_characters("Wow, Pim's hat is red! Instead, Pim sang on Sunday.") == ["Pim"]
    assert find_characters("The dog ran. It was happy.") == []


# -- poetry helpers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instruction", "expected"),
    [
        ("Write a poetic sentence that contains the word 'lamp' and ending in 'tomorrow''",
         {"contains": "lamp", "ends_with": "tomorrow", "form": "poetic sentence"}),
        ("Generate a poetic sentence that ends in a word which rhymes with 'pillow'",
         {"rhymes_with": "pillow", "form": "poetic sentence"}),
        ("Write a poetic sentence about the tide that ends in a word that rhymes with 'shell'.",
         {"rhymes_with": "shell", "form": "poetic sentence"}),
        ("Write a haiku about 'paper cranes' and ending in 'wind'",
         {"topic": "paper cranes", "ends_with": "wind", "form": "haiku"}),
        ("Write a next sentence in a poetry given the previous sentence 'The cat's bell rang twice' and "
         "including the word 'gate'",
         {"previous_line": "The cat's bell rang twice", "contains": "gate", "form": "next sentence"}),
        ("Write a simile about 'fog' and starting in 'Fog creeps'",
         {"topic": "fog", "starts_with": "Fog creeps", "form": "simile"}),
        ("Write a poetic sentence ending in 'sleep.", {"ends_with": "sleep", "form": "poetic sentence"}),
        ("Write a metaphor that includes the word 'a harp'", {"contains": "a harp", "form": "metaphor"}),
        ("Say something nice.", {}),
    ],
)
def test_parse_instruction(instruction: str, expected: dict[str, str]) -> None:
    assert parse_instruction(instruction) == expected


# -- tool helpers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("problem", "items"),
    [
        ("Your cart is stuck. You have a plank, two bricks and a rope. How do you free it?",
         ["plank", "two bricks", "rope"]),
        ("The gutter is blocked. Tools available: a ladle, a garden hose, and some twine. How do you clear it?",
         ["ladle", "garden hose", "twine"]),
        ("Your cat is on the shed. Items available include a box, a sheet which is torn, and a tin of tuna. "
         "What do you do?", ["box", "sheet", "tin of tuna"]),
        ("You have a big exam tomorrow and your lamp broke. You have a candle, a mirror and a jar. What now?",
         ["candle", "mirror", "jar"]),
        ("You need to fix a chair. Available: a belt, glue, and a spoon. However, the glue is dry. How?",
         ["belt", "glue", "spoon"]),
        ("A door is stuck and nothing else is said.", []),
    ],
)
def test_parse_items(problem: str, items: list[str]) -> None:
    assert parse_items(problem) == items
