"""The versioned rubrics every LLM judge sends."""

from __future__ import annotations

import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.scoring.judges import RUBRICS, JudgeItem
from pytest_novelty.scoring.judges.rubrics import rubric_for
from pytest_novelty.suites.prompts import TASKS

# Changing a rubric's wording changes its fingerprint: bump its version (old cached answers
# belong to the old wording), then record both here.
RECORDED = {
    "story": ("story/1", "d3781fa3353f"),
    "poetry": ("poetry/1", "c4aa5fb733cf"),
    "tool": ("tool/1", "16522391fd58"),
    "open": ("open/1", "ea8e8e9b66fe"),
}


def test_every_task_has_a_rubric() -> None:
    assert set(RUBRICS) == set(TASKS)


@pytest.mark.parametrize("task", sorted(RECORDED))
def test_wording_changes_come_with_a_version_bump(task: str) -> None:
    rubric = RUBRICS[task]
    assert (rubric.version, rubric.fingerprint) == RECORDED[task], "rubric wording changed: bump its version"


@pytest.mark.parametrize("task", TASKS)
def test_messages_hold_the_item_and_five_criteria(task: str) -> None:
    item = JudgeItem(task, "PROMPT-TEXT", "RESPONSE-TEXT")
    system, user = rubric_for(task).messages(item)
    assert system["role"] == "system" and user["role"] == "user"
    assert "PROMPT-TEXT" in user["content"] and "RESPONSE-TEXT" in user["content"]
    assert user["content"].index("PROMPT-TEXT") < user["content"].index("RESPONSE-TEXT")
    assert all(f"\n{i}. " in user["content"] for i in range(1, 6))
    assert "Score: <points>" in user["content"]


def test_unknown_task_suggests_a_known_one() -> None:
    with pytest.raises(ConfigError, match="did you mean 'story'"):
        rubric_for("stroy")
