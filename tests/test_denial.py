"""Denial prompting: the rounds loop with stand-ins, then end to end on a tiny checkpoint and index."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.pipeline.denial import open_extractor_for, run_denial
from pytest_novelty.pipeline.results import SuiteAnswers, SuiteMetrics, SuiteScores
from pytest_novelty.pipeline.runner import RunConfig, Runner, SuiteResult
from pytest_novelty.scoring.concepts import ConceptItem, OpenAIConceptExtractor, open_concept_extractor
from pytest_novelty.suites.prompting import build_inputs
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.schema import Suite
from pytest_novelty.suites.suite_file import load_suite
from tests.servers.openai_api import FakeOpenAI, default_reply

SUITE = """
task = "story"
[prompts]
source = "jsonl:prompts.jsonl"
[prompting]
method = "{method}"
rounds = {rounds}
[generation]
samples = 1
max_new_tokens = 3
batch_size = 4
[scoring]
ngrams = [4]
judge = "rules"
judge_samples = 1
[[thresholds]]
metric = "novelty@4"
min = 0.0
"""

PROMPTS = [
    Prompt("p0", "story", "Lily went to the park with her red ball.", meta={"characters": ["Lily"]}),
    Prompt("p1", "story", "Tom and Mia saw a bird.", meta={"characters": ["Tom", "Mia"]}),
]
CONCEPTS = {
    "p0": ["a girl who loses her ball", "a rainy afternoon"],
    "p1": ["two friends who follow a bird", "flying away"],
}


def write_suite(folder: Path, *, method: str = "denial", rounds: int = 2) -> Suite:
    lines = [{"id": p.id, "text": p.text, "meta": dict(p.meta)} for p in PROMPTS]
    (folder / "prompts.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    path = folder / "story-denial.toml"
    path.write_text(SUITE.format(method=method, rounds=rounds))
    return load_suite(path)


# -- the loop, with a scripted runner and extractor ---------------------------------------------


class ScriptedRunner:
    """Answers each round from a script and records the inputs it was given."""

    def __init__(self, answers: list[list[list[str]]]) -> None:
        self.answers = answers
        self.inputs: list[Any] = []

    def run(self, suite: Suite, *, inputs: list[Any] | None = None) -> SuiteResult:
        self.inputs.append(inputs)
        answers = self.answers[len(self.inputs) - 1]
        shape = (len(PROMPTS), len(answers[0]))
        metrics = {"novelty@4": 0.5}
        scores = SuiteScores(originality={4: np.zeros(shape)}, quality=np.ones(shape))
        measured = SuiteMetrics(metrics, {}, {}, order=4, novelty={4: np.zeros(shape)})
        return SuiteResult(SuiteAnswers(suite, "m", PROMPTS, answers), scores, measured)


class ListingExtractor:
    """Gives the concepts listed for each answer and records what it was asked."""

    spec = "scripted"

    def __init__(self, concepts: dict[str, list[str]]) -> None:
        self.listed = concepts
        self.asked: list[list[ConceptItem]] = []

    def concepts(self, items: Sequence[ConceptItem]) -> list[list[str]]:
        self.asked.append(list(items))
        return [self.listed[item.answer] for item in items]


def test_each_round_forbids_the_concepts_of_all_earlier_answers(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, rounds=3)
    runner = ScriptedRunner(
        [
            [["*a ball*", "a kite"], ["a bird", ""]],  # round 1: two samples per prompt, one answer missing
            [["a boat"], ["a nest"]],
            [["a cake"], ["a tree"]],
        ]
    )
    extractor = ListingExtractor(
        {
            "*a ball*": ["a lost ball"],
            "a kite": ["a kite", "A lost  ball"],  # the same concept again, written differently
            "a bird": ["a bird"],
            "a boat": ["sailing"],
            "a nest": ["a bird", "home"],
        }
    )
    results = run_denial(runner, suite, extractor)

    assert [r.denial.number for r in results] == [1, 2, 3]  # type: ignore[union-attr]
    assert runner.inputs[0] is None  # round 1: the suite's own inputs, nothing forbidden
    round2 = {"p0": ["a lost ball", "a kite"], "p1": ["a bird"]}
    round3 = {"p0": ["a lost ball", "a kite", "sailing"], "p1": ["a bird", "home"]}
    assert runner.inputs[1] == build_inputs(suite, PROMPTS, forbidden=round2)
    assert runner.inputs[2] == build_inputs(suite, PROMPTS, forbidden=round3)
    counts = [r.denial.counts for r in results]  # type: ignore[union-attr]
    assert counts == [{"p0": 0, "p1": 0}, {"p0": 2, "p1": 1}, {"p0": 3, "p1": 2}]
    assert results[2].denial.forbidden == round3  # type: ignore[union-attr]
    # Empty answers are not sent, and the last round's answers are not examined.
    assert [[(i.prompt.id, i.answer) for i in asked] for asked in extractor.asked] == [
        [("p0", "*a ball*"), ("p0", "a kite"), ("p1", "a bird")],
        [("p0", "a boat"), ("p1", "a nest")],
    ]
    assert all(r.metrics == {"novelty@4": 0.5} for r in results)


def test_one_round_asks_for_no_concepts(tmp_path: Path) -> None:
    extractor = ListingExtractor({})
    results = run_denial(ScriptedRunner([[["a"], ["b"]]]), write_suite(tmp_path, rounds=1), extractor)
    assert len(results) == 1 and extractor.asked == []


def test_denial_needs_the_denial_method(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"prompting\.method: denial rounds need prompting\.method = \"denial\""):
        run_denial(ScriptedRunner([]), write_suite(tmp_path, method="chat"), ListingExtractor({}))


def test_the_extractor_of_a_run_is_its_chat_judge(tmp_path: Path) -> None:
    suite = write_suite(tmp_path)
    with pytest.raises(ConfigError, match=r"scoring\.judge: denial prompting needs a chat model"):
        open_extractor_for(RunConfig(model="m", cache_dir=tmp_path), suite)
    config = RunConfig(model="m", cache_dir=tmp_path, judge="openai:judge-model", judge_base_url="http://127.0.0.1:9/v1")
    extractor = open_extractor_for(config, suite)
    assert isinstance(extractor, OpenAIConceptExtractor)
    assert extractor.spec == "openai:judge-model" and extractor.base_url == "http://127.0.0.1:9/v1"
    assert extractor.cache.path is not None and extractor.cache.path.parent == tmp_path / "concepts"


# -- end to end ---------------------------------------------------------------------------------

ANSWER = "a red kite"
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


@pytest.fixture(scope="module")
def chat_checkpoint(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoint as a chat model that answers ``*a red kite*`` to anything.

    Its tokenizer gains a chat template and one token for the answer, its context grows to 1024
    positions (the denial prompts are long) and its final layer norm and head are set so that it
    emits that token at every step.
    """
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from transformers import AutoTokenizer, GPT2LMHeadModel

    token = f" *{ANSWER}*"
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    tokenizer.add_tokens([token])
    tokenizer.chat_template = CHAT_TEMPLATE
    model = GPT2LMHeadModel.from_pretrained(tiny_checkpoint)
    model.resize_token_embeddings(len(tokenizer))
    old = model.transformer.wpe.weight
    positions = torch.nn.Embedding(1024, old.shape[1])
    with torch.no_grad():
        positions.weight.zero_()
        positions.weight[: old.shape[0]] = old
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.zero_()
        model.transformer.ln_f.bias[0] = 1.0
        model.lm_head.weight.zero_()
        model.lm_head.weight[tokenizer.convert_tokens_to_ids(token), 0] = 50.0
    model.transformer.wpe = positions
    model.config.n_positions = 1024
    folder = tmp_path_factory.mktemp("denial") / "tiny-chat"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def list_concepts(request: str, choice: int) -> str:
    """The fake judge: the concepts of the prompt whose opening the request quotes."""
    prompt = next(p for p in PROMPTS if p.text in request)
    return "\n".join(f"- {concept}" for concept in CONCEPTS[prompt.id])


class RecordingRunner(Runner):
    """The real runner, noting the inputs of each run."""

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.inputs: list[Any] = []

    def run(self, suite: Suite, **options: Any) -> SuiteResult:
        self.inputs.append(options.get("inputs"))
        return super().run(suite, **options)


@pytest.fixture
def concept_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(reply=list_concepts) as server:
        yield server


@pytest.mark.slow
def test_denial_rounds_end_to_end(
    chat_checkpoint: Path, tiny_index: Path, concept_server: FakeOpenAI, tmp_path: Path, notices: list[str]
) -> None:
    suite = write_suite(tmp_path)
    logs = notices
    config = RunConfig(
        model=str(chat_checkpoint),
        cache_dir=tmp_path / "cache",
        device="cpu",
        originality=f"infini-gram:{tiny_index}",
    )
    runner = RecordingRunner(config)
    extractor = open_concept_extractor(
        "openai:judge-model", cache_dir=tmp_path / "concepts", base_url=concept_server.url, backoff=0.01
    )
    results = run_denial(runner, suite, extractor)

    assert [r.denial.number for r in results] == [1, 2]  # type: ignore[union-attr]
    assert [r.answers for r in results] == [[[ANSWER], [ANSWER]]] * 2
    # One concept request per answer of round 1; none after the last round.
    assert concept_server.request_count == 2
    assert all(f"Answer:\n{ANSWER}\n" in body["messages"][-1]["content"] for body in concept_server.requests)
    assert [r.denial.counts for r in results] == [{"p0": 0, "p1": 0}, {"p0": 2, "p1": 2}]  # type: ignore[union-attr]
    assert results[1].denial.forbidden == CONCEPTS  # type: ignore[union-attr]

    # What the model saw in round 2 forbids exactly its own prompt's concepts.
    assert runner.inputs[0] is None
    rendered = [runner.generator().render(x) for x in runner.inputs[1]]
    for text, prompt, other in zip(rendered, PROMPTS, reversed(PROMPTS), strict=True):
        assert prompt.text in text
        assert all(f"- {concept}\n" in text for concept in CONCEPTS[prompt.id])
        assert not any(concept in text for concept in CONCEPTS[other.id])

    for result in results:
        assert "novelty@4" in result.metrics
        assert len(result.per_prompt["novelty@4"]) == 2
        assert result.quality.shape == (2, 1) and result.originality[4].shape == (2, 1)
        assert result.generated.work.batches == 1  # each round's inputs differ: nothing cached
    assert sum("story-denial: 2 prompts x 1 samples" in line for line in logs) == 2


# -- every round, in the command line and against a baseline ------------------------------------


def concepts_or_score(request: str, choice: int) -> str:
    """One fake chat model for both roles: concepts for a concept request, else a judge's score."""
    if "List the high-level concepts this answer uses" in request:
        return list_concepts(request, choice)
    return default_reply(request, choice)


@pytest.mark.slow
def test_the_command_line_runs_every_sweep_value_and_every_denial_round(
    chat_checkpoint: Path, tiny_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_novelty.cli import main

    suites = tmp_path / "suites"
    suites.mkdir()
    write_suite(suites, rounds=3)
    sweep = '[sweep]\nparameter = "generation.temperature"\nvalues = [0.5, 1.0]\n'
    (suites / "story-sweep.toml").write_text(SUITE.format(method="chat", rounds=1) + sweep)
    out = tmp_path / "out.json"
    with FakeOpenAI(reply=concepts_or_score) as server:
        status = main([
            "run", "--model", str(chat_checkpoint), "--suites", str(suites), "--device", "cpu",
            "--cache", str(tmp_path / "cache"), "--originality", f"infini-gram:{tiny_index}",
            "--judge", "openai:judge-model", "--judge-base-url", server.url, "--output", str(out),
        ])  # fmt: skip
        concept_requests = sum("List the high-level concepts" in str(b["messages"]) for b in server.requests)
    assert status == 0, capsys.readouterr()
    runs = json.loads(out.read_text())
    assert sorted(runs) == sorted([
        "story-denial[round=1]", "story-denial[round=2]", "story-denial[round=3]",
        "story-sweep[temperature=0.5]", "story-sweep[temperature=1]",
    ])  # fmt: skip
    assert concept_requests == 2  # round 1's answers; later rounds' identical answers come from the cache
    table = capsys.readouterr().out
    assert "story-denial[round=3]" in table and "story-sweep[temperature=1]" in table


class ConfiguredRunner(ScriptedRunner):
    """A scripted runner with a run configuration, as the session builds one per checkpoint."""

    def __init__(self, config: RunConfig, answers: list[list[list[str]]]) -> None:
        super().__init__(answers)
        self.config = config


def test_a_denial_baseline_is_compared_round_by_round(tmp_path: Path, concept_server: FakeOpenAI) -> None:
    """With --baseline-model, the candidate's round k is paired with the baseline's round k: the
    baseline runs its own rounds, each forbidding the concepts of its own earlier answers."""
    from pytest_novelty.pipeline.export import suite_data
    from pytest_novelty.pipeline.session import ResultsSession

    suite = write_suite(tmp_path, rounds=2)
    config = RunConfig(model="cand", cache_dir=tmp_path / "cache", judge="openai:judge-model",
                       judge_base_url=concept_server.url)  # fmt: skip
    runners = {
        "cand": ConfiguredRunner(config, [[["a"], ["b"]], [["c"], ["d"]]]),
        "base": ConfiguredRunner(replace(config, model="base"), [[["e"], ["f"]], [["g"], ["h"]]]),
    }
    session = ResultsSession(lambda model: replace(config, model=model), model="cand", baseline_model="base")
    session.runner = runners.__getitem__  # type: ignore[assignment,method-assign]
    round2 = suite.runs()[1]

    found = session.baseline(round2)
    assert found is not None and found.kind == "baseline"
    baseline = found.result
    assert baseline.answers == [["g"], ["h"]]
    assert baseline.denial is not None and baseline.denial.forbidden == CONCEPTS
    assert runners["base"].inputs == [None, build_inputs(round2, PROMPTS, forbidden=CONCEPTS)]
    candidate = session.result(round2)
    assert candidate.answers == [["c"], ["d"]] and candidate.denial is not None and candidate.denial.number == 2
    data = suite_data(candidate, baseline)
    assert data.info.round == 2 and data.baseline is not None
