"""`[gate] reference = true`: the candidate is compared, paired, with the dataset's human references."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_untrained_model_loses_to_human_references(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    prompts = suite_dir / "prompts.jsonl"
    # Twelve prompts (the six twice): six could give no p-value below 2/2⁶ = 0.031, above the run's alpha.
    six = [json.loads(line) for line in prompts.read_text().splitlines()]
    with_refs = [
        {**p, "id": f"{p['id']}-{copy}",
         "reference": f"{p['meta']['characters'][0]} smiled and they played together until dinner. It was fun."}
        for copy in (1, 2) for p in six
    ]  # fmt: skip
    prompts.write_text("".join(json.dumps(p) + "\n" for p in with_refs))
    suite = suite_dir / "story.toml"
    suite.write_text(suite.read_text() + "\n[gate]\nreference = true\n")
    result = pytester.runpytest_subprocess(*novelty_args)
    result.stdout.fnmatch_lines(
        ["story quality: regression", "*references value 1.0000, new value 0.*",
         "*over 12 paired prompts, p-value 0.0005*"]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
