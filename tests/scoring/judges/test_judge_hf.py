"""The hf: judge on tiny causal LMs built in the test (loading, chat template, batching, parsing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.scoring.judges import HFJudge, JudgeItem, open_judge
from tests.scoring.judges.judge_helpers import tiny_causal_lm

ITEMS = [
    JudgeItem("story", "Lily had a kite.", "Lily flew the kite."),
    JudgeItem("story", "Lily had a red kite and a blue ball in the park " * 3, "She flew the kite all day long."),
    JudgeItem("poetry", "Write a line that ends with 'sky'.", "The kite flew high into the sky"),
]


@pytest.fixture(scope="module")
def scoring_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_causal_lm(tmp_path_factory.mktemp("hf") / "scores-4", emits="Score:4")


def _record_prefills(judge: HFJudge) -> list[Any]:
    """Wrap the loaded model's forward pass to record the attention mask of each batch's prompt pass."""
    model = judge._load().model
    calls: list[Any] = []
    original = model.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        if kwargs["input_ids"].shape[1] > 1:  # the prompt pass; decoding steps feed one token per row
            calls.append(kwargs["attention_mask"].clone())
        return original(*args, **kwargs)

    model.forward = forward
    return calls


def test_scores_parsed_from_generated_replies(scoring_lm: Path, tmp_path: Path) -> None:
    judge = open_judge(f"hf:{scoring_lm}", cache_dir=tmp_path, samples=3, max_new_tokens=3, batch_size=6, device="cpu")
    assert isinstance(judge, HFJudge)
    calls = _record_prefills(judge)
    results = judge.score(ITEMS)
    assert [r.scores for r in results] == [(4.0, 4.0, 4.0)] * 3
    assert all(r.quality == pytest.approx(0.8) and r.judge == f"hf:{scoring_lm}" for r in results)
    # 9 rows (3 prompts x 3 samples) in batches of 6 rows, left padded: each row's last position is
    # a real token, and a prompt's three samples share one prompt pass (2 prompts, then 1, each pass
    # filled up to the batch-invariant decoding's floor of rows with copies of its last prompt).
    floor = judge._generator.floor
    assert [mask.shape[0] for mask in calls] == [max(2, floor), max(1, floor)]
    assert all(bool(mask[:, -1].all()) for mask in calls)
    assert any(not bool(mask[:, 0].all()) for mask in calls)
    assert judge.sequences_generated == 9

    again = HFJudge(str(scoring_lm), cache_dir=tmp_path, samples=3, max_new_tokens=3, batch_size=2, device="cpu")
    assert again.planned_calls(ITEMS) == 0
    assert again.score(ITEMS) == results
    assert again.sequences_generated == 0 and again._generator is None  # nothing loaded


def test_chat_template_and_plain_fallback(scoring_lm: Path, tmp_path: Path) -> None:
    judge = HFJudge(str(scoring_lm), samples=1, max_new_tokens=2, device="cpu")
    rendered = judge._render(ITEMS[0])
    assert rendered.startswith("system: ") and rendered.endswith("assistant:")
    plain = tiny_causal_lm(tmp_path / "plain", emits="Score:4", chat_template=None)
    judge = HFJudge(str(plain), samples=2, max_new_tokens=2, device="cpu")
    assert judge._render(ITEMS[0]).endswith("Evaluation:")
    assert [r.scores for r in judge.score([ITEMS[0], ITEMS[0]])] == [(4.0, 4.0)] * 2
    assert judge.sequences_generated == 2  # identical items are judged once


def test_unparsable_replies_are_reasked_then_unscored(tmp_path: Path) -> None:
    silent = tiny_causal_lm(tmp_path / "silent", emits="kite")
    judge = HFJudge(str(silent), samples=2, max_new_tokens=3, max_reasks=1, device="cpu", cache_dir=tmp_path)
    results = judge.score(ITEMS[:2])
    assert all(r.quality is None and r.scores == () for r in results)
    assert all("no score in reply (reply has no 'Score: N' line, asked 2 times)" in (r.error or "") for r in results)
    assert judge.sequences_generated == 2 * 2 * 2  # items x samples x (1 + re-asks)
    assert judge.planned_calls(ITEMS[:2]) == 0  # failures are cached too


def test_missing_checkpoint_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="hf:"):
        open_judge(f"hf:{tmp_path / 'nowhere'}")


def test_unloadable_tokenizer_is_an_error_not_a_plain_prompt(scoring_lm: Path, tmp_path: Path) -> None:
    """The plain-prompt fallback is for base models without a chat template, not for broken checkpoints."""
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(scoring_lm, broken)
    (broken / "tokenizer.json").write_text("{")
    judge = HFJudge(str(broken), samples=1, max_new_tokens=2, device="cpu")
    with pytest.raises(ConfigError, match="cannot load the tokenizer"):
        judge._render(ITEMS[0])


def test_a_local_judge_hashes_unchanged_weights_once_across_runs(scoring_lm: Path, tmp_path: Path) -> None:
    """The judge's checkpoint is fingerprinted through the cache's memo: a later run (a new judge on
    the same cache) hashes no weight file again, neither when it opens nor when it loads its generator.
    Both runs still read the weights' header (the cheap checkpoint check)."""
    from tests.file_opens import opened_under

    weights = str((scoring_lm / "model.safetensors").resolve())

    def opens(cache_dir: Path | None) -> tuple[int, str]:
        with opened_under(scoring_lm) as opened:
            judge = HFJudge(str(scoring_lm), cache_dir=cache_dir)
            identity = judge._load().identity  # the generator the judge samples with
        assert judge.identity_id == identity.id
        return opened.count(weights), judge.identity_id

    no_memo, identity_id = opens(None)  # hashed on every open, twice: judge and generator
    opens(tmp_path / "judge")  # fills the memo
    with_memo, same = opens(tmp_path / "judge")
    assert same == identity_id
    assert with_memo == no_memo - 2  # the two hashes are spared, the two header checks remain
