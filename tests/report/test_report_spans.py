"""What was copied, where a reviewer reads it: each suite's longest copied spans in ``report.md``,
with the answer they came from (its prompt and sample), and the passages behind its Creativity
Index, from a real tiny run and a report folder."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_novelty.pipeline.export import suite_data
from pytest_novelty.pipeline.runner import RunConfig, Runner
from pytest_novelty.pipeline.suite_data import SuiteInfo
from pytest_novelty.report import write_report
from pytest_novelty.report.spans import copied_spans, creativity_passages, spans_markdown
from pytest_novelty.suites.suite_file import load_suite
from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder

pytestmark = pytest.mark.slow


@pytest.fixture
def result(tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path):  # type: ignore[no-untyped-def]
    # Prompts taken from the corpus's own sentences, so that an untrained model's answers still
    # repeat a few of its words; three samples each.
    folder = write_story_suite_folder(tmp_path / "suite", story_prompts(4), suite_toml(samples=3, max_new_tokens=24))
    config = RunConfig(model=str(tiny_checkpoint), cache_dir=tmp_path / "cache", device="cpu",
                       originality=f"infini-gram:{tiny_index}")  # fmt: skip
    return Runner(config).run(load_suite(folder / "story.toml"))


def test_each_copied_span_names_its_answer_prompt_and_sample(result) -> None:  # type: ignore[no-untyped-def]
    entries = result.scores.longest_copied
    assert entries
    ids = [p.id for p in result.prompts]
    for entry in entries:
        assert result.answers[ids.index(entry["prompt"])][entry["sample"]] == entry["generation"]
        assert entry["longest_span_text"] in entry["generation"] or entry["longest_span"] == 0


def test_report_md_shows_the_longest_copied_spans_per_suite(result, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = {"story": suite_data(result, None)}
    files = write_report(tmp_path / "report", [], data, {"model": "tiny"}, step_summary=False)
    markdown = files.markdown.read_text()
    written = json.loads(files.json.read_text())["suites"]
    spans = copied_spans({name: SuiteInfo.from_json(suite["info"]) for name, suite in written.items()})["story"]
    assert spans and [s.length for s in spans] == sorted((s.length for s in spans), reverse=True)
    assert "### Longest copied spans" in markdown and "| length | copied text | corpus document | answer |" in markdown
    for span in spans:
        assert f"| {span.size} | {' '.join(span.text.split())} | {span.document} | prompt {span.prompt}, sample " \
               f"{span.sample}: " in markdown
    # A suite that copied nothing shows no table.
    none = {"story": data["story"].with_(info=replace(data["story"].info, longest_copied=[]))}
    empty = write_report(tmp_path / "r2", [], none, step_summary=False)
    assert "Longest copied spans" not in empty.markdown.read_text()


def test_spans_of_length_zero_are_left_out_and_the_longest_comes_first() -> None:
    info = {"units": "tokens", "longest_copied": [
        {"generation": "a b", "longest_span": 0, "longest_span_text": ""},
        {"generation": "x y z", "prompt": "q", "sample": 2, "longest_span": 2, "longest_span_doc": 5,
         "longest_span_text": "y z"},
        {"generation": "m n o p", "prompt": "r", "sample": 0, "longest_span": 3, "longest_span_doc": 9,
         "longest_span_text": "n o p"},
    ]}  # fmt: skip
    (spans,) = copied_spans({"tale": SuiteInfo.from_json(info)}).values()
    assert [(s.text, s.size, s.source) for s in spans] == [("n o p", "3 tokens", "prompt r, sample 0"),
                                                           ("y z", "2 tokens", "prompt q, sample 2")]
    assert replace(spans[0], answer="w " * 200).answer_excerpt().endswith("…")


def test_the_passages_behind_the_creativity_index_are_in_the_report(
    tmp_path: Path, tiny_corpus: list[str], tiny_index: Path
) -> None:
    """A suite that gates on the index: answers pieced from the corpus, one new; report.md shows the
    lowest-index answers' copied passages, each a run of its answer, and report.json keeps them."""
    thresholds = (("creativity_index", 1.0), ("uniqueness@5", 0.1))
    folder = write_story_suite_folder(tmp_path / "suite", story_prompts(2), suite_toml(thresholds=thresholds))
    suite = load_suite(folder / "story.toml")
    runner = Runner(RunConfig(model="pieces", cache_dir=tmp_path / "cache", originality=f"infini-gram:{tiny_index}"))
    novel = "Zorbly quenched seventeen violet harmonicas beneath the quiet humming glacier."
    answers = [[tiny_corpus[0], f"{tiny_corpus[1]} {novel}"], [novel, f"{novel} {tiny_corpus[2]}"]]
    result = runner.score(suite, runner.load_prompts(suite), answers)
    assert result.metrics["creativity_index"] == pytest.approx(sum(result.metrics[f"uniqueness@{n}"]
                                                                   for n in range(5, 13)))  # fmt: skip
    assert result.metrics["creativity_index"] < 8.0 and set(result.measured.intervals) >= {"creativity_index"}
    entries = result.scores.creativity_copied
    assert [e["creativity_index"] for e in entries] == sorted(e["creativity_index"] for e in entries)
    assert entries[0]["generation"] == tiny_corpus[0] and entries[0]["creativity_index"] == 0.0  # copied whole
    assert all(novel != e["generation"] for e in entries)  # copies nothing: no passage to show
    written = json.loads(json.dumps(suite_data(result, None).to_json()))  # report.json's entry of the suite
    assert written["metrics"]["creativity_index"] == pytest.approx(result.metrics["creativity_index"])
    infos = {"story": SuiteInfo.from_json(written["info"])}
    markdown = "\n".join(spans_markdown(infos))  # report.md's sections on what was copied
    assert "### Copied passages behind the Creativity Index" in markdown
    passages = creativity_passages(infos)["story"]
    assert passages and all(p.text in p.answer and p.longest is not None and 5 <= p.longest <= 12 for p in passages)
    for passage in passages:
        assert f"| {passage.source} | {' '.join(passage.text.split())} | {passage.size} | {passage.longest} |" \
            in markdown
    assert passages[0].source == "prompt p0, sample 0, creativity index 0.00"
