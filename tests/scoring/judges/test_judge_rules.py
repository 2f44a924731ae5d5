"""The offline rules judge: each documented check, per task."""

from __future__ import annotations

import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.scoring.judges import JudgeItem, RulesJudge, open_judge
from pytest_novelty.scoring.judges.rules import DESCRIPTION, explain, rhymes, rime

OPENING = "Once upon a time, a girl named Lily had a red ball. She played with it in the park."
STORY = (
    "One day, Lily kicked the ball too hard and it rolled into the pond. She was sad. "
    "Her friend Tom came and helped her get it back with a long stick. "
    "Lily smiled and said thank you. They played together until the sun went down."
)


def points(item: JudgeItem) -> float:
    [result] = RulesJudge().score([item])
    assert len(result.scores) == 1 and result.quality == result.scores[0] / 5
    return result.scores[0]


def test_labelled_as_a_heuristic() -> None:
    judge = open_judge("rules", samples=5)
    assert isinstance(judge, RulesJudge) and judge.spec == "rules"
    assert DESCRIPTION == "rules (offline heuristic, not an LLM judge)"
    assert judge.description == DESCRIPTION
    assert judge.planned_calls([JudgeItem("story", OPENING, STORY)]) == 0


def test_a_good_story_passes_every_check() -> None:
    assert explain(JudgeItem("story", OPENING, STORY)) == dict.fromkeys(
        ("characters", "length", "no degeneration", "ending", "sentences"), True
    )


@pytest.mark.parametrize(
    ("response", "failed"),
    [
        ("One day, a boy named Max went to school. He read a book. He was happy to learn.", "characters"),
        ("Lily smiled.", "length"),
        ("Lily ran. " + "The ball went round and round. " * 8, "no degeneration"),
        ("Lily kicked the ball into the pond and then she looked around for help and", "ending"),
        ("lily kicked the ball. it rolled away. she ran after it. she found it under a tree.", "sentences"),
    ],
)
def test_each_story_check_can_fail_alone(response: str, failed: str) -> None:
    checks = explain(JudgeItem("story", OPENING, response))
    assert not checks[failed]
    assert sum(checks.values()) == 4, checks


def test_story_characters_from_meta_win() -> None:
    item = JudgeItem("story", OPENING, STORY, meta={"characters": ["Zed"]})
    assert not explain(item)["characters"]


def test_degenerate_story_scores_lower_than_a_good_one() -> None:
    loop = "Lily said the ball is red. " * 20
    assert points(JudgeItem("story", OPENING, loop)) < points(JudgeItem("story", OPENING, STORY)) == 5


def test_poetry_constraints_from_the_instruction() -> None:
    prompt = "Write a poetic sentence that contains the word 'rays' and ending in 'color'"
    assert points(JudgeItem("poetry", prompt, "The morning rays spill gold across the sky in color")) == 5
    missing = explain(JudgeItem("poetry", prompt, "The morning light spills gold across the sky in blue"))
    assert not missing["contains"] and not missing["ending"]
    assert explain(JudgeItem("poetry", prompt, "The rays paint the houses with new colors,"))["ending"]


def test_poetry_rhyme_and_form() -> None:
    prompt = "Write a poetic sentence that ends in a word which rhymes with 'late'"
    assert points(JudgeItem("poetry", prompt, "We waited by the old iron gate")) == 5
    checks = explain(JudgeItem("poetry", prompt, "We waited by the river\nfor hours"))
    assert not checks["one line"] and not checks["ending"]
    assert not explain(JudgeItem("poetry", prompt, "Gate"))["length"]
    repeated = explain(JudgeItem("poetry", prompt, "the night is long the night is long the night is late"))
    assert not repeated["no repetition"]


def test_poetry_meta_overrides_the_instruction() -> None:
    item = JudgeItem("poetry", "Write a line.", "The moon is a lantern over the sea", meta={"ends_with": "sea"})
    assert explain(item)["ending"]
    item = JudgeItem("poetry", "Write a line.", "The moon is a lantern over the sea", meta={"contains": ["sun"]})
    assert not explain(item)["contains"]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("time", "rhyme", True),
        ("late", "gate", True),
        ("night", "light", True),
        ("day", "away", True),
        ("restricted", "contradicted", True),
        ("disappoint", "reappoint", True),
        ("cat", "dog", False),
        ("late", "great", False),  # a spelling heuristic: sound-alike spellings are missed
        ("gate", "gate", False),
    ],
)
def test_rhyme_heuristic(a: str, b: str, expected: bool) -> None:
    assert rhymes(a, b) is expected


def test_rime_examples() -> None:
    assert rime("rhyme") == rime("time") == "ime"
    assert rime("back") == "ak"


TOOL = (
    "You spilled wine on the carpet. Tools available: a bottle of water, a white towel, a bar of soap, "
    "a toothbrush. How do you clean the stain?"
)


def test_a_plausible_tool_solution_passes() -> None:
    solution = (
        "Step1: Pour some water from the bottle onto the towel.\n"
        "Step2: Dab the stain with the wet towel.\n"
        "Step3: Rub soap on the toothbrush and scrub gently, then rinse with water."
    )
    assert points(JudgeItem("tool", TOOL, solution)) == 5


def test_tool_solution_with_outside_objects_or_none_of_the_items() -> None:
    outside = "Step1: Use a vacuum cleaner to lift the stain.\nStep2: Spray the carpet with a stain remover."
    checks = explain(JudgeItem("tool", TOOL, outside))
    assert not checks["only listed items"] and not checks["uses an item"]
    listed = explain(JudgeItem("tool", TOOL, "Use a sponge and the towel to soak up the wine from the carpet."))
    assert not listed["only listed items"] and listed["uses an item"]
    assert explain(
        JudgeItem("tool", "Fix the chair.", "Wrap the rope around the leg twice.", meta={"items": ["rope"]})
    )["uses an item"]


def test_tool_refusal_is_not_actionable() -> None:
    checks = explain(JudgeItem("tool", TOOL, "It is not possible, as none of these items is suitable for it."))
    assert not checks["actionable"]


def test_open_task_checks() -> None:
    prompt = "Name a good hobby for a rainy weekend and say why."
    good = "Baking bread is a good hobby for a rainy weekend: it is slow, warm and ends with something to eat."
    assert points(JudgeItem("open", prompt, good)) == 5
    assert points(JudgeItem("open", prompt, "")) == 0
    off_topic = explain(JudgeItem("open", prompt, "The capital of France is Paris."))
    assert not off_topic["on topic"] and off_topic["ending"]
    cut = explain(JudgeItem("open", prompt, "Baking bread is a good hobby because"))
    assert not cut["ending"]
    listing = "Good hobbies for a rainy weekend:\n- baking\n- reading"
    assert explain(JudgeItem("open", prompt, listing))["ending"]


def test_deterministic_and_unknown_task() -> None:
    item = JudgeItem("story", OPENING, STORY)
    assert RulesJudge().score([item, item]) == RulesJudge().score([item, item])
    with pytest.raises(ConfigError, match="did you mean 'poetry'"):
        RulesJudge().score([JudgeItem("poetri", "x", "y")])


@pytest.mark.parametrize(
    "response",
    [
        "Lily went home. She was happy and ate her cake.\nSolution: Use the rope to tie the box.",
        "Lily went home with her big sisterLet's go. She was happy and ate her cake with Tom.",
        "Lily went home with her \ufffd sister. She was happy and ate her cake with Tom today.",
    ],
)
def test_story_with_broken_generation_loses_the_sentences_point(response: str) -> None:
    from pytest_novelty.scoring.judges import JudgeItem
    from pytest_novelty.scoring.judges.rules import explain

    clean = "Lily went home with her big sister. She was happy and ate her cake with Tom."
    prompt = "Lily and Tom went to the park."
    assert explain(JudgeItem("story", prompt, clean, {"characters": ["Lily"]}))["sentences"]
    assert not explain(JudgeItem("story", prompt, response, {"characters": ["Lily"]}))["sentences"]
