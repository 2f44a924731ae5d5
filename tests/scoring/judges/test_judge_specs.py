"""Opening judges by spec string, and the dry run."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.scoring.judges import Judge, JudgeItem, OpenAIJudge, RulesJudge, dry_run, open_judge
from tests.spec_errors import check_unknown_kind


def test_rules_and_openai_specs(tmp_path: Path) -> None:
    rules = open_judge("rules", cache_dir=tmp_path, samples=3, temperature=1.0)
    assert isinstance(rules, RulesJudge) and isinstance(rules, Judge)
    judge = open_judge("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1", samples=2, budget=7, timeout=3.0)
    assert isinstance(judge, OpenAIJudge) and isinstance(judge, Judge)
    assert (judge.spec, judge.samples, judge.budget, judge.connection.timeout) == ("openai:gpt-4o-mini", 2, 7, 3.0)
    assert judge.model == "gpt-4o-mini"


@pytest.mark.parametrize(("spec", "close"), [("rule", "rules"), ("opneai:gpt", "openai"), ("rewards:rm", "reward"),
                                             ("bleu", None)])
def test_an_unknown_kind_lists_the_kinds_and_names_a_close_one(spec: str, close: str | None) -> None:
    check_unknown_kind(open_judge, spec, "rules, openai:MODEL, hf:PATH or reward:PATH", close)


@pytest.mark.parametrize(
    ("spec", "message"),
    [("reward", "needs a PATH"), ("openai:", "needs a MODEL"), ("hf:", "needs a PATH"),
     ("rules:extra", "takes no argument")],
)
def test_bad_arguments(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        open_judge(spec)


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match="did you mean 'timeout'"):
        open_judge("openai:m", timout=3)
    with pytest.raises(ConfigError, match="no option 'thresholds'"):
        open_judge("openai:m", thresholds=(1,))
    with pytest.raises(ConfigError, match="samples must be at least 1"):
        open_judge("rules", samples=0)


def test_dry_run_counts_without_calling() -> None:
    items = [JudgeItem("story", f"p{i}", "r") for i in range(4)]
    assert dry_run(open_judge("rules"), items) == 0
    judge = open_judge("openai:m", base_url="http://127.0.0.1:9/v1", budget=3)
    assert dry_run(judge, items) == 3  # capped by the budget
    assert dry_run(open_judge("openai:m", base_url="http://127.0.0.1:9/v1"), items) == 4
