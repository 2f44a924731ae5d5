"""docs/answers.md's examples are what the code reads and prints.

Each fenced block after a ``<!-- checked: NAME -->`` marker is checked against the bundled ``story``
suite: the example of our format is a valid file for its first prompts, the lm-evaluation-harness
sample is read as the page says, and every mismatch line is the one the code raises for the
change the page describes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.generation import PromptRequest, generate
from pytest_novelty.generation.backends import open_generator
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.resources import bundled_path
from pytest_novelty.pipeline.answers import build_model_inputs, load_prompts, model_texts
from pytest_novelty.pipeline.config import RunConfig
from pytest_novelty.suites.suite_file import load_suite

PAGE = Path(__file__).resolve().parents[1] / "docs" / "answers.md"
BLOCK = re.compile(r"<!-- checked: (?P<name>[\w-]+) -->\n```\w*\n(?P<body>.*?)\n```", re.S)
BLOCKS = {m["name"]: m["body"] for m in BLOCK.finditer(PAGE.read_text(encoding="utf-8"))}


def request(spec: str, count: int, tmp_path: Path) -> tuple[Any, PromptRequest]:
    """The source of ``spec`` and the request of the bundled story suite's first ``count`` prompts."""
    suite = load_suite(bundled_path("suites") / "story.toml")
    prompts = load_prompts(suite)[:count]
    source = open_generator(spec)
    texts, settings = model_texts(RunConfig(model=spec, cache_dir=tmp_path), source, suite,
                                  build_model_inputs(suite, prompts))
    return source, PromptRequest(suite.run_key, 0, [p.id for p in prompts], texts, settings)


def records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in BLOCKS["answers-example"].splitlines()]


def write(folder: Path, lines: list[dict[str, Any]]) -> Path:
    path = folder / "answers.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    return path


def test_every_checked_block_is_on_the_page() -> None:
    assert set(BLOCKS) == {"answers-example", "lm-eval-example", "mismatch-errors"}


def test_the_example_of_our_format_answers_the_story_suites_first_prompts(tmp_path: Path) -> None:
    path = write(tmp_path, records())
    source, req = request(f"answers:{path}", 2, tmp_path)
    assert source.check_prompts(req) == ""
    answers, _ = generate(source, list(req.texts), req.settings)
    assert answers == [r["answers"] for r in records()]


def test_the_lm_evaluation_harness_example_is_read_as_the_page_says(tmp_path: Path) -> None:
    path = tmp_path / "samples_story_gate_2026-08-21T10-56-54.123456.jsonl"
    path.write_text(BLOCKS["lm-eval-example"] + "\n", encoding="utf-8")
    source, req = request(f"answers:{path}", 1, tmp_path)
    source.check_prompts(req)
    assert generate(source, list(req.texts), req.settings)[0] == [records()[0]["answers"]]
    by_id, req = request(f"answers:{path}?id_field=id", 1, tmp_path)
    by_id.check_prompts(req)


CHANGES = [
    (3, lambda rs: rs),  # the suite's third prompt is not in the file
    (2, lambda rs: [rs[0], {**rs[1], "answers": rs[1]["answers"][:1]}]),
    (2, lambda rs: [{**rs[0], "prompt": rs[0]["prompt"].replace("toast", "bread")}, rs[1]]),
    (2, lambda rs: [{**rs[0], "settings": {**rs[0]["settings"], "temperature": 0.7}}, rs[1]]),
]


@pytest.mark.parametrize("case", range(len(CHANGES)), ids=["missing", "fewer", "prompt-text", "settings"])
def test_each_mismatch_line_on_the_page_is_the_one_the_code_raises(case: int, tmp_path: Path) -> None:
    shown = BLOCKS["mismatch-errors"].splitlines()[case].removeprefix("ERROR: ")
    count, change = CHANGES[case]
    path = write(tmp_path, change(records()))
    source, req = request(f"answers:{path}", count, tmp_path)
    with pytest.raises(ConfigError) as caught:
        source.check_prompts(req)
    assert str(caught.value).replace(f"{tmp_path}/", "") == shown
