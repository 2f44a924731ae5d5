"""Suite-file validation: every error names the file, the key and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.suites.suite_file import load_suite, load_suites

MINIMAL = """
task = "story"
[prompts]
source = "builtin:story"
[[thresholds]]
metric = "novelty@5"
min = 0.3
"""


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_minimal_suite_gets_defaults(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, MINIMAL))
    assert suite.name == "s"
    assert suite.task == "story"
    assert suite.scoring.ngrams == (4, 5, 6)
    assert suite.generation.samples == 1
    (threshold,) = suite.thresholds
    assert (threshold.metric, threshold.op, threshold.value) == ("novelty@5", ">=", 0.3)
    assert threshold.label == "novelty@5>=0.3"
    assert threshold.holds(0.3) and not threshold.holds(0.29) and not threshold.holds(float("nan"))


def test_bundled_suites_load() -> None:
    suites = load_suites(Path(__file__).parents[2] / "suites")
    assert {s.task for s in suites} == {"story", "poetry", "tool", "open"}


@pytest.mark.parametrize(
    ("text", "field", "fragment"),
    [
        (MINIMAL.replace('task = "story"', 'task = "stroy"'), "task", "did you mean 'story'"),
        (MINIMAL + "\n[generation]\ntemprature = 0.5\n", "generation.temprature", "did you mean 'temperature'"),
        (MINIMAL + "\n[generation]\ntemperature = 'hot'\n", "generation.temperature", "expected float"),
        (MINIMAL + "\n[generation]\nsamples = 0\n", "generation.samples", "between 1 and"),
        (MINIMAL.replace("min = 0.3", "min = 1.5"), "thresholds[0].min", "can never be met"),
        (MINIMAL.replace("novelty@5", "novelty@7"), "thresholds[0].metric", "not in scoring.ngrams"),
        (MINIMAL.replace("novelty@5", "novelity@5"), "thresholds[0].metric", "did you mean 'novelty'"),
        (MINIMAL.replace("novelty@5", "distinct_k"), "thresholds[0].metric", "generation.samples >= 2"),
        (MINIMAL.replace("novelty@5", "q_at_tail@1.5"), "thresholds[0].metric", "tail fraction"),
        (MINIMAL.replace("min = 0.3", "min = 0.3\nmax = 0.9"), "thresholds[0].min", "exactly one"),
        (MINIMAL.replace('source = "builtin:story"', ""), "prompts.source", "missing"),
        ('task = "story"\n[prompts]\nsource = "x"\n', "thresholds", "at least one"),
        (MINIMAL + "\n[prompting]\nmethod = 'fewshot'\n", "prompting.method", "did you mean 'few-shot'"),
        (MINIMAL + "\n[scoring]\nngrams = []\n", "scoring.ngrams", "non-empty"),
        (MINIMAL + "\n[scoring]\ncreativity_lengths = [12, 5]\n", "scoring.creativity_lengths", "shortest <="),
        (MINIMAL + "\n[scoring]\ncreativity_lengths = [5]\n", "scoring.creativity_lengths", "[shortest, longest]"),
        (MINIMAL.replace("novelty@5", "uniqueness@13"), "thresholds[0].metric", "outside scoring.creativity_lengths"),
        (MINIMAL.replace("novelty@5", "uniqueness"), "thresholds[0].metric", "needs a span length L"),
        (MINIMAL.replace("novelty@5", "creativity_index@5"), "thresholds[0].metric", "takes no @ argument"),
        (MINIMAL.replace("novelty@5", "creativity_index").replace("0.3", "9"), "thresholds[0].min",
         "lies between 0 and 8"),
        (MINIMAL.replace("novelty@5", "creativity_indx"), "thresholds[0].metric", "did you mean 'creativity_index'"),
    ],
)
def test_bad_suites_name_file_field_and_fix(tmp_path: Path, text: str, field: str, fragment: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    assert info.value.field == field
    assert info.value.path == str(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {field}: ")
    assert fragment in message


def test_the_creativity_index_is_gated_over_its_range_and_only_then_searched(tmp_path: Path) -> None:
    plain = load_suite(write(tmp_path, MINIMAL))
    assert plain.scoring.creativity_range == tuple(range(5, 13)) and plain.scored_lengths == ()
    text = MINIMAL.replace("novelty@5", "creativity_index").replace("0.3", "3") + (
        "\n[[thresholds]]\nmetric = \"uniqueness@4\"\nmin = 0.5\n[scoring]\ncreativity_lengths = [4, 6]\n")
    gated = load_suite(write(tmp_path, text, "c.toml"))
    assert gated.scored_lengths == (4, 5, 6)  # the index then lies in [0, 3]: min = 3 can be met
    assert [t.metric for t in gated.thresholds] == ["creativity_index", "uniqueness@4"]


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "task = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_suite(path)


def test_duplicate_suite_names_rejected(tmp_path: Path) -> None:
    write(tmp_path, 'name = "x"\n' + MINIMAL, "a.toml")
    write(tmp_path, 'name = "x"\n' + MINIMAL, "b.toml")
    with pytest.raises(ConfigError, match="also used by"):
        load_suites(tmp_path)


def test_missing_folder_and_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="suite folder not found"):
        load_suites(tmp_path / "nope")
    with pytest.raises(ConfigError, match="no suite files"):
        load_suites(tmp_path)


def test_sweep_expands_into_one_suite_per_value(tmp_path: Path) -> None:
    text = MINIMAL + "\n[sweep]\nparameter = 'generation.temperature'\nvalues = [0.5, 1.0, 1.5]\n"
    suite = load_suite(write(tmp_path, text))
    assert suite.sweep == ("generation.temperature", (0.5, 1.0, 1.5))
    runs = suite.runs()
    assert [r.name for r in runs] == ["s[temperature=0.5]", "s[temperature=1]", "s[temperature=1.5]"]
    assert [r.generation.temperature for r in runs] == [0.5, 1.0, 1.5]
    assert [r.sweep_value for r in runs] == [0.5, 1.0, 1.5]
    assert load_suite(write(tmp_path, MINIMAL, "plain.toml")).runs()[0].name == "plain"


@pytest.mark.parametrize(
    ("sweep", "fragment"),
    [
        ("parameter = 'generation.temprature'\nvalues = [1.0]", "did you mean 'generation.temperature'"),
        ("parameter = 'generation.temperature'\nvalues = []", "non-empty list"),
        ("parameter = 'generation.temperature'\nvalues = [1.0, 99.0]", "value 99.0 of the sweep is invalid"),
    ],
)
def test_bad_sweeps(tmp_path: Path, sweep: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match="sweep") as info:
        load_suite(write(tmp_path, MINIMAL + "\n[sweep]\n" + sweep + "\n"))
    assert fragment in str(info.value)


def test_denial_suite_has_one_case_set_per_round(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, MINIMAL + "\n[prompting]\nmethod = 'denial'\nrounds = 3\n"))
    assert [(r.name, r.denial_round) for r in suite.runs()] == [("s[round=1]", 1), ("s[round=2]", 2), ("s[round=3]", 3)]
