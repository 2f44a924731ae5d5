"""Prompt loaders: the real dataset files, the bundled prompts, and clear errors for broken input."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.infra.resources import bundled_path
from pytest_novelty.suites.loaders import load_prompts
from pytest_novelty.suites.prompts import TASKS, Prompt
from pytest_novelty.suites.tasks import find_characters, parse_instruction, parse_items

REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO.parent / "shared" / "datasets"


def shared(relative: str) -> Path:
    """A file of the shared dataset samples; the test skips when it is not on this machine."""
    path = DATASETS / relative
    if not path.exists():
        pytest.skip(f"{path} is not available (the shared dataset samples are absent on this machine)")
    return path


def load(source: str, **options: Any) -> list[Prompt]:
    return load_prompts(source, base_dir=DATASETS, **options)


def write_lines(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# -- TinyStories ------------------------------------------------------------------------------


def test_tinystories_text_file_gives_openings_and_continuations() -> None:
    path = shared("tinystories/TinyStories-valid.first-stories.txt")
    stories = [s.strip() for s in path.read_text(encoding="utf-8").split("<|endoftext|>") if s.strip()]
    prompts = load("tinystories:tinystories/TinyStories-valid.first-stories.txt", split="all")
    assert len(prompts) == len(stories) == 112
    for prompt, story in zip(prompts, stories, strict=True):
        assert prompt.task == "story" and prompt.reference
        assert f"{prompt.text} {prompt.reference}".split() == story.split()
        assert prompt.text[-1] in ".!?\"”'"
        assert all(name in prompt.text for name in prompt.meta["characters"])
    assert sum(bool(p.meta["characters"]) for p in prompts) > 80


def test_tinystories_jsonl_matches_the_text_file_and_skips_partial_stories() -> None:
    shared("tinystories/TinyStories-valid.first-stories.jsonl")
    from_text = load("tinystories:tinystories/TinyStories-valid.first-stories.txt", split="all")
    from_jsonl = load("tinystories:tinystories/TinyStories-valid.first-stories.jsonl", split="all")
    assert [p.id for p in from_jsonl] == [p.id for p in from_text[1:]]  # story 0 starts mid-story
    assert from_jsonl == from_text[1:]
    with_partial = load("tinystories:tinystories/TinyStories-valid.first-stories.jsonl", split="all",
                        skip_partial=False)
    assert len(with_partial) == 112


def test_tinystories_opening_by_word_count() -> None:
    shared("tinystories/cs336_tinystories_sample.txt")
    prompts = load("tinystories:tinystories/cs336_tinystories_sample.txt", split="all", opening_words=8)
    assert len(prompts) == 5
    for prompt in prompts:
        assert len(prompt.text.split()) == 8
    two = load("tinystories:tinystories/cs336_tinystories_sample.txt", split="all", opening_sentences=2)
    assert all(len(b.text) > len(a.text) for a, b in zip(load("tinystories:tinystories/cs336_tinystories_sample.txt",
                                                              split="all"), two, strict=True))


# -- CoPoet -----------------------------------------------------------------------------------


def test_copoet_test_sets_parse_their_constraints() -> None:
    shared("copoet/test_sets")
    prompts = load("copoet:copoet/test_sets", split="all")
    assert len(prompts) == 78 + 82 + 82
    assert {p.id.rsplit("-", 1)[0] for p in prompts} == {"compositional", "ki_ke", "ki_ue"}
    assert all(p.task == "poetry" for p in prompts)
    for prompt in prompts:
        assert prompt.meta == parse_instruction(prompt.text)
        if "rhymes with" in prompt.text and "ends in a word" in prompt.text:
            assert "rhymes_with" in prompt.meta, prompt.text
        if "contains the word" in prompt.text:
            assert "contains" in prompt.meta, prompt.text
    assert sum("rhymes_with" in p.meta for p in prompts) >= 40
    assert sum("ends_with" in p.meta for p in prompts) >= 60
    assert any(p.reference is None for p in prompts)  # an empty en2 becomes no reference


def test_copoet_single_file() -> None:
    shared("copoet/test_sets/ki_ke.json")
    prompts = load("copoet:copoet/test_sets/ki_ke.json", split="all")
    assert len(prompts) == 82
    assert prompts[0].id == "ki_ke-1"


# -- MacGyver ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def macgyver_workbook() -> list[Prompt]:
    shared("macgyver/problem_solution_pair.xlsx")
    return load("macgyver:macgyver/problem_solution_pair.xlsx", split="all")


def test_macgyver_workbook_keeps_solvable_problems(macgyver_workbook: list[Prompt]) -> None:
    assert len(macgyver_workbook) == 1306
    assert all(p.task == "tool" and p.meta["solvable"] for p in macgyver_workbook)
    assert macgyver_workbook[0].id == "macgyver-541"
    for prompt in macgyver_workbook:
        assert prompt.reference and "<br>" not in prompt.reference and "\n\n" not in prompt.reference
        assert all(item.split()[-1].lower() in prompt.text.lower() for item in prompt.meta["items"])
    with_items = sum(1 for p in macgyver_workbook if len(p.meta["items"]) >= 2)
    assert with_items / len(macgyver_workbook) > 0.9


def test_macgyver_jsonl_conversion_matches_the_workbook(macgyver_workbook: list[Prompt]) -> None:
    shared("macgyver/problem_solution_pair.jsonl")
    assert load("macgyver:macgyver/problem_solution_pair.jsonl", split="all") == macgyver_workbook


def test_macgyver_filters() -> None:
    shared("macgyver/problem_solution_pair.jsonl")
    everything = load("macgyver:macgyver/problem_solution_pair.jsonl", split="all", solvable_only=False)
    assert len(everything) == 1683
    unconventional = load("macgyver:macgyver/problem_solution_pair.jsonl", split="all", unconventional_only=True)
    assert len(unconventional) == 956
    assert all(p.meta["unconventional"] is True for p in unconventional)


def test_macgyver_additional_solutions_are_merged_per_problem() -> None:
    shared("macgyver/additional_human_solutions.jsonl")
    prompts = load("macgyver:macgyver/additional_human_solutions.jsonl", split="all", solvable_only=False)
    assert len(prompts) == 273
    assert len({p.id for p in prompts}) == 273
    assert any(p.meta.get("other_references") for p in prompts)


# -- NoveltyBench -----------------------------------------------------------------------------


def test_noveltybench_curated_and_wildchat() -> None:
    shared("noveltybench/data/curated.jsonl")
    curated = load("noveltybench:noveltybench/data/curated.jsonl")
    assert len(curated) == 100  # no references, so nothing is held out
    assert curated[0].id == "curated-0" and curated[0].task == "open"
    assert curated[0].meta["category"] == "Creativity"
    assert len(curated[0].meta["paraphrases"]) == 10
    wildchat = load("noveltybench:noveltybench/data/wildchat-1k.jsonl")
    assert len(wildchat) == 1000
    assert all(p.text for p in wildchat)


# -- splits, limits and seeds -----------------------------------------------------------------


def test_held_out_split_is_disjoint_and_fixed(tmp_path: Path) -> None:
    stories = "\n<|endoftext|>\n".join(f"Story {i} begins. It goes on and ends." for i in range(40))
    path = tmp_path / "stories.txt"
    path.write_text(stories, encoding="utf-8")
    everything = load_prompts(f"tinystories:{path}", base_dir=tmp_path, split="all")
    test = load_prompts(f"tinystories:{path}", base_dir=tmp_path)
    held = load_prompts(f"tinystories:{path}", base_dir=tmp_path, split="examples")
    assert len(held) == 4  # 10 % of 40
    assert {p.id for p in test} | {p.id for p in held} == {p.id for p in everything}
    assert not {p.id for p in test} & {p.id for p in held}
    subset = load_prompts(f"tinystories:{path}", base_dir=tmp_path, split="examples", limit=2, seed=3)
    assert {p.id for p in subset} <= {p.id for p in held}


def test_limit_keeps_a_seeded_subset_in_file_order() -> None:
    a = load_prompts("builtin:story", base_dir=REPO, limit=10, seed=1)
    b = load_prompts("builtin:story", base_dir=REPO, limit=10, seed=1)
    c = load_prompts("builtin:story", base_dir=REPO, limit=10, seed=2)
    assert a == b and a != c and len(a) == 10
    everything = [p.id for p in load_prompts("builtin:story", base_dir=REPO)]
    assert [p.id for p in a] == sorted((p.id for p in a), key=everything.index)
    assert len(load_prompts("builtin:story", base_dir=REPO, limit=10_000)) == len(everything)
    with pytest.raises(ConfigError, match="limit must be a whole number"):
        load_prompts("builtin:story", base_dir=REPO, limit=0)


# -- the bundled prompts ----------------------------------------------------------------------

MINIMUM = {"story": 100, "poetry": 100, "tool": 50, "open": 50}


@pytest.mark.parametrize("task", TASKS)
def test_bundled_prompt_sets(task: str) -> None:
    test = load_prompts(f"builtin:{task}", base_dir=REPO)
    examples = load_prompts(f"builtin:{task}", base_dir=REPO, split="examples")
    assert len(test) >= MINIMUM[task]
    assert len(examples) >= 5 and all(p.reference for p in examples)
    ids = [p.id for p in test + examples]
    assert len(set(ids)) == len(ids)
    texts = [p.text for p in test + examples]
    assert len(set(texts)) == len(texts)
    assert all(p.task == task for p in test + examples)


def test_bundled_story_openings_name_their_characters() -> None:
    for prompt in load_prompts("builtin:story", base_dir=REPO, split="all"):
        assert 1 <= prompt.text.count(".") + prompt.text.count("!") <= 3, prompt.text
        assert prompt.meta["characters"] == find_characters(prompt.text), prompt.id
        assert prompt.meta["characters"], prompt.id


def test_bundled_tool_problems_list_their_items() -> None:
    for prompt in load_prompts("builtin:tool", base_dir=REPO, split="all"):
        assert len(prompt.meta["items"]) >= 3
        assert parse_items(prompt.text) == prompt.meta["items"], prompt.id


def test_bundled_poetry_instructions_state_their_constraints() -> None:
    for prompt in load_prompts("builtin:poetry", base_dir=REPO, split="all"):
        parsed = parse_instruction(prompt.text)
        for key in ("contains", "ends_with", "rhymes_with"):
            assert parsed.get(key) == prompt.meta.get(key), prompt.id
        if prompt.reference and "ends_with" in prompt.meta:
            assert prompt.reference.rstrip(".").endswith(prompt.meta["ends_with"])


def test_poetry_file_is_what_the_generator_writes() -> None:
    script = bundled_path("fixtures") / "prompts" / "make_poetry_prompts.py"
    spec = importlib.util.spec_from_file_location("make_poetry_prompts", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = (bundled_path("suites") / "data" / "poetry.jsonl").read_text(encoding="utf-8")
    assert module.render(module.build()) == committed, "run fixtures/prompts/make_poetry_prompts.py"


def test_jsonl_source_reads_the_project_format(tmp_path: Path) -> None:
    write_lines(tmp_path / "mine.jsonl", [
        {"id": "a", "text": "Name a bird.", "task": "open"},
        {"id": "b", "text": "Name a fish.", "reference": "A carp.", "split": "examples"},
    ])
    prompts = load_prompts("jsonl:mine.jsonl", base_dir=tmp_path, task="open", split="all")
    assert prompts == [Prompt("a", "open", "Name a bird."), Prompt("b", "open", "Name a fish.", "A carp.")]
    assert [p.id for p in load_prompts("jsonl:mine.jsonl", base_dir=tmp_path, task="open")] == ["a"]


def test_task_option_names_the_task_and_must_fit_the_source(tmp_path: Path) -> None:
    write_lines(tmp_path / "mine.jsonl", [{"id": "a", "text": "Name a bird."}])
    assert load_prompts("jsonl:mine.jsonl", base_dir=tmp_path, task="open")[0].task == "open"
    assert load_prompts("builtin:tool", base_dir=tmp_path, task="tool", limit=1)[0].task == "tool"
    write_lines(tmp_path / "bench.jsonl", [{"id": "1", "prompt": "Hi"}])
    assert load_prompts("noveltybench:bench.jsonl", base_dir=tmp_path, task="open")[0].task == "open"
    with pytest.raises(ConfigError, match=r"task: noveltybench sources hold open prompts, not story prompts"):
        load_prompts("noveltybench:bench.jsonl", base_dir=tmp_path, task="story")


def test_bundled_folders_are_found_in_the_checkout() -> None:
    assert bundled_path("suites") == REPO / "suites"
    assert bundled_path("fixtures") == REPO / "fixtures"
    with pytest.raises(ConfigError, match="did you mean 'suites'"):
        bundled_path("suite")


def test_bundled_folders_in_an_installed_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_novelty.infra import resources

    package = tmp_path / "site-packages" / "pytest_novelty"
    (package / "_bundled" / "suites").mkdir(parents=True)
    (tmp_path / "site-packages" / "fixtures").mkdir()  # someone else's folder: never picked up
    monkeypatch.setattr(resources, "_PACKAGE", package)
    assert bundled_path("suites") == package / "_bundled" / "suites"
    with pytest.raises(HarnessError, match="the bundled 'fixtures' folder is missing"):
        bundled_path("fixtures")


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("tinystoriez:x.txt", r"unknown prompt source 'tinystoriez:x.txt'.*did you mean 'tinystories'"),
        ("story", r"did you mean 'builtin:story'"),
        ("copoet:", r"names no file"),
        ("builtin:storey", r"no built-in prompt set 'storey'.*did you mean 'story'"),
        ("jsonl:missing.jsonl", r"missing.jsonl: file not found"),
        ("jsonl:hf:someone/data", r"hub ids work for the dataset kinds"),
    ],
)
def test_bad_sources(tmp_path: Path, source: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_prompts(source, base_dir=tmp_path)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"opening_word": 3}, r"unknown option 'opening_word'.*did you mean 'opening_words'"),
        ({"opening_words": "three"}, r"options.opening_words: expected int, got 'three'"),
        ({"opening_words": 0}, r"options.opening_words: must be at least 1, got 0"),
        ({"skip_partial": 1}, r"expected bool"),
        ({"split": "train"}, r"unknown split 'train'"),
        ({"holdout": 1.5}, r"must be at least 0 and below 1"),
        ({"hub_split": "train"}, r"apply to hub ids"),
    ],
)
def test_bad_options(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    (tmp_path / "s.txt").write_text("A story. It ends.", encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_prompts("tinystories:s.txt", base_dir=tmp_path, **options)


def test_empty_files_are_rejected(tmp_path: Path) -> None:
    for name, kind in (("a.jsonl", "jsonl"), ("b.txt", "tinystories"), ("c.json", "copoet"), ("d.jsonl", "macgyver")):
        (tmp_path / name).write_text("\n  \n", encoding="utf-8")
        with pytest.raises(ConfigError, match=rf"{name}: the file is empty; expected"):
            load_prompts(f"{kind}:{name}", base_dir=tmp_path, task="open") if kind == "jsonl" else \
                load_prompts(f"{kind}:{name}", base_dir=tmp_path)


def test_broken_json_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bench.jsonl"
    path.write_text('{"id": "1", "prompt": "Hi"}\n\n{"id": "2", "prompt": \n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bench.jsonl: line 3: broken JSON .*each line must be one JSON object"):
        load_prompts("noveltybench:bench.jsonl", base_dir=tmp_path)


def test_missing_fields_are_named(tmp_path: Path) -> None:
    write_lines(tmp_path / "bench.jsonl", [{"id": "1", "promt": "Hi"}])
    with pytest.raises(ConfigError, match=r"line 1: missing 'prompt' \(found: 'id', 'promt'\).*did you mean 'promt'"):
        load_prompts("noveltybench:bench.jsonl", base_dir=tmp_path)
    write_lines(tmp_path / "poems.json", [{"translation": {"en2": "a line"}}])
    with pytest.raises(ConfigError, match=r"poems.json: line 1: expected \{\"translation\""):
        load_prompts("copoet:poems.json", base_dir=tmp_path)
    write_lines(tmp_path / "stories.jsonl", [{"story": "Once."}])
    with pytest.raises(ConfigError, match=r"missing 'text'"):
        load_prompts("tinystories:stories.jsonl", base_dir=tmp_path)
    write_lines(tmp_path / "array.jsonl", [[1, 2]])
    with pytest.raises(ConfigError, match=r"line 1: expected a JSON object, got list"):
        load_prompts("noveltybench:array.jsonl", base_dir=tmp_path)


def test_project_format_errors(tmp_path: Path) -> None:
    cases = [
        ([{"id": "a", "text": "x", "refrence": "y"}], r"unknown field 'refrence'.*did you mean 'reference'"),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], r"line 2: id 'a' repeats the one on line 1"),
        ([{"id": "a", "text": "x", "split": "train"}], r"split must be 'test' or 'examples'"),
        ([{"id": "a", "text": "x", "meta": [1]}], r"meta must be a JSON object"),
        ([{"id": "a", "text": "x", "task": "essay"}], r"no task"),
    ]
    for records, message in cases:
        write_lines(tmp_path / "p.jsonl", records)
        with pytest.raises(ConfigError, match=message):
            load_prompts("jsonl:p.jsonl", base_dir=tmp_path, task="open")
    write_lines(tmp_path / "p.jsonl", [{"id": "a", "text": "x"}])
    with pytest.raises(ConfigError, match=r"no task"):
        load_prompts("jsonl:p.jsonl", base_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"unknown task 'opne'.*did you mean 'open'"):
        load_prompts("jsonl:p.jsonl", base_dir=tmp_path, task="opne")


def test_workbook_with_wrong_columns(tmp_path: Path) -> None:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.append(["ID", "Question", "Solvable", "Solution"])
    sheet.append([1, "A problem.", "Yes", "A solution."])
    workbook.save(tmp_path / "bad.xlsx")
    with pytest.raises(ConfigError, match=r"bad.xlsx: row 2: missing column\(s\) 'Problem', 'Solvable\?'.*"
                                          r"did you mean 'Solvable'.*columns ID, Problem, Solvable\?"):
        load_prompts("macgyver:bad.xlsx", base_dir=tmp_path)
    empty = openpyxl.Workbook()
    empty.save(tmp_path / "empty.xlsx")
    with pytest.raises(ConfigError, match=r"empty.xlsx: the first sheet is empty"):
        load_prompts("macgyver:empty.xlsx", base_dir=tmp_path)
    (tmp_path / "fake.xlsx").write_text("not a workbook", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"fake.xlsx: cannot read the workbook"):
        load_prompts("macgyver:fake.xlsx", base_dir=tmp_path)


def test_workbook_written_by_hand_loads(tmp_path: Path) -> None:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.append(["ID", "Problem", "Solvable?", "Unconventional?", "Solution", None])
    sheet.append([7, "A cup fell in a well. You have a rope, a hook and a torch. How?", "Yes", "conventional",
                  "Step1: Tie the hook to the rope. <br>\nStep2: Fish the cup out."])
    sheet.append([8, "Fly to the moon. You have a spoon and a cup. How?", "No", "N/A", "Unsolvable."])
    workbook.save(tmp_path / "mine.xlsx")
    prompts = load_prompts("macgyver:mine.xlsx", base_dir=tmp_path, split="all")
    assert prompts == [Prompt(
        "macgyver-7", "tool", "A cup fell in a well. You have a rope, a hook and a torch. How?",
        "Step1: Tie the hook to the rope.\nStep2: Fish the cup out.",
        {"items": ["rope", "hook", "torch"], "solvable": True, "unconventional": False},
    )]


def test_hub_ids_need_the_datasets_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes ``import datasets`` fail
    with pytest.raises(ConfigError, match=r"'roneneldan/TinyStories' from the Hugging Face hub needs the 'datasets'"):
        load_prompts("tinystories:hf:roneneldan/TinyStories", base_dir=tmp_path)


def test_hub_rows_go_through_the_same_conversion(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[tuple[Any, ...]] = []

    class FakeDatasets:
        @staticmethod
        def load_dataset(name: str, config: str | None, split: str) -> list[dict[str, Any]]:
            calls.append((name, config, split))
            return [{"id": "x-1", "prompt": "Invent a game."}]

    monkeypatch.setitem(sys.modules, "datasets", FakeDatasets)
    prompts = load_prompts("noveltybench:hf:novelty-bench/novelty-bench", base_dir=tmp_path)
    assert prompts == [Prompt("x-1", "open", "Invent a game.")]
    assert calls == [("novelty-bench/novelty-bench", None, "curated")]
