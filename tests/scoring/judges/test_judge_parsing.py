"""Reading the score out of a judge's reply."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_novelty.scoring.judges import UnparsableScore, parse_score


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("Relevant and coherent, but the ending is abrupt.\nScore: 4", 4.0),
        ("It meets every criterion.\n\n**Score:** 5", 5.0),
        ("Score: **3**/5", 3.0),
        ("## Score: 2", 2.0),
        ("`Score: 1`", 1.0),
        ("Score: 4 out of 5", 4.0),
        ("Score: 4 points", 4.0),
        ("Final score: four", 4.0),
        ("score = 0", 0.0),
        ("Score: 3.5", 3.5),
        ("Criterion 1 met (Score: 1). Criterion 2 met (Score: 1).\nScore: 2", 2.0),
        ("The total is clear.\nTotal: 4/5", 4.0),
        ("I award it 3 points.", 3.0),
        ("the score is 2.", 2.0),
    ],
)
def test_accepted_forms(reply: str, score: float) -> None:
    assert parse_score(reply) == score


# Each reason a reply is refused for, with replies refused for it.
REJECTED = {
    "no 'Score: N' line": ["A fine story, I liked it.", ""],
    "outside 0-5": ["Score: 7", "Score: -1"],
    "not on the 0-5 scale": ["Score: 8/10", "Total: 9/10"],
}


@pytest.mark.parametrize(("reply", "reason"), [(reply, why) for why, replies in REJECTED.items() for reply in replies])
def test_rejected_replies_say_why(reply: str, reason: str) -> None:
    with pytest.raises(UnparsableScore, match=reason):
        parse_score(reply)


@given(st.text(alphabet=st.characters(blacklist_characters="0123456789"), max_size=200), st.integers(0, 5))
def test_a_final_score_line_wins_over_any_preamble(preamble: str, points: int) -> None:
    assert parse_score(f"{preamble}\nScore: {points}") == points


@given(st.text(alphabet=st.characters(blacklist_characters="0123456789"), max_size=200))
def test_text_without_digits_or_number_words_never_parses(text: str) -> None:
    lowered = text.lower()
    if any(word in lowered for word in ("zero", "one", "two", "three", "four", "five")):
        return
    with pytest.raises(UnparsableScore):
        parse_score(text)
