"""Concept extractors: openai: against a real HTTP server on 127.0.0.1, hf: on a tiny local model."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.scoring.concepts import (
    ConceptExtractor,
    ConceptItem,
    HFConceptExtractor,
    OpenAIConceptExtractor,
    open_concept_extractor,
)
from pytest_novelty.scoring.judges.cache import NAMESPACE
from pytest_novelty.suites.prompting import concept_prompt
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.tasks import get_task
from tests.scoring.judges.judge_helpers import SECRET, tiny_causal_lm
from tests.servers.openai_api import FakeOpenAI

KITE = Prompt("kite", "story", "Lily found a red kite in the park.")
BOAT = Prompt("boat", "story", "Tom built a small boat from a box.")

# What the fake model answers, by a marker in the answer being examined.
LISTS = {
    "flew": "Here are the concepts:\n- Lily, a brave girl\n- a lost kite found again\n- **friendship**.",
    "sailed": '["a boy who builds things", "a voyage on a pond"]',
    "numbered": "1. a storm at sea\n2) courage",
    "none": "None",
    "blank": "",
}


def reply_for(prompt: str, choice: int) -> str:
    """The fake endpoint's reply to a concept request: the list whose marker the answer holds."""
    answer = prompt.split("Answer:\n", 1)[1]
    return next((text for marker, text in LISTS.items() if marker in answer), "- something else")


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(api_key=SECRET, reply=reply_for) as fake:
        yield fake


def extractor(server: FakeOpenAI, cache_dir: Path | None = None, **options: object) -> ConceptExtractor:
    fast = {"api_key": SECRET, "timeout": 2.0, "backoff": 0.01, "max_backoff": 0.05, **options}
    return open_concept_extractor("openai:concept-model", cache_dir=cache_dir, base_url=server.url, **fast)


def test_lists_are_parsed_per_answer(server: FakeOpenAI) -> None:
    items = [
        ConceptItem("story", KITE, "Lily flew the kite with her friend."),
        ConceptItem("story", BOAT, "Tom sailed the boat on the pond."),
        ConceptItem("story", BOAT, "A numbered reply follows."),
    ]
    assert extractor(server).concepts(items) == [
        ["Lily, a brave girl", "a lost kite found again", "friendship"],
        ["a boy who builds things", "a voyage on a pond"],
        ["a storm at sea", "courage"],
    ]
    assert server.request_count == 3 and all(server.authorized)
    assert all(body["model"] == "concept-model" and body["temperature"] == 0.0 for body in server.requests)
    sent = [body["messages"] for body in server.requests]  # concurrent: in any order
    assert concept_prompt(get_task("story"), KITE, "Lily flew the kite with her friend.") in sent


def test_replies_are_cached_and_identical_answers_asked_once(server: FakeOpenAI, tmp_path: Path) -> None:
    item = ConceptItem("story", KITE, "Lily flew the kite.")
    first = extractor(server, tmp_path).concepts([item, item])
    assert server.request_count == 1
    again = extractor(server, tmp_path)  # a new extractor, the same folder
    assert again.concepts([item]) == first[:1]
    assert server.request_count == 1
    assert (tmp_path / NAMESPACE).exists()
    stored = b"".join(file.read_bytes() for file in tmp_path.rglob("*") if file.is_file())  # every entry
    assert b"friendship" in stored and SECRET.encode() not in stored
    assert SECRET not in repr(again) and SECRET not in repr(vars(again))


@pytest.mark.parametrize("marker", ["blank", "none"])
def test_a_reply_without_a_list_is_asked_again_then_gives_no_concepts(server: FakeOpenAI, marker: str) -> None:
    items = [ConceptItem("story", KITE, f"The {marker} answer."), ConceptItem("story", BOAT, "Tom sailed away.")]
    assert extractor(server, max_reasks=2).concepts(items) == [[], ["a boy who builds things", "a voyage on a pond"]]
    assert server.request_count == 1 + 3  # the list once; the empty reply 1 + 2 re-asks


def test_a_list_on_the_second_ask_is_kept() -> None:
    replies = iter(["", "- a kite"])
    with FakeOpenAI(reply=lambda prompt, choice: next(replies)) as fake:
        found = open_concept_extractor("openai:m", base_url=fake.url).concepts(
            [ConceptItem("story", KITE, "Lily flew the kite.")]
        )
        assert found == [["a kite"]] and fake.request_count == 2


def test_a_500_is_retried(server: FakeOpenAI) -> None:
    server.inject("status", status=500, times=1)
    assert extractor(server).concepts([ConceptItem("story", KITE, "Lily flew away.")]) == [
        ["Lily, a brave girl", "a lost kite found again", "friendship"]
    ]
    assert server.request_count == 2


def test_persistent_failures_raise_after_caching_the_rest(server: FakeOpenAI, tmp_path: Path) -> None:
    server.inject("status", status=503, times=-1, match="Tom sailed")
    items = [ConceptItem("story", KITE, "Lily flew."), ConceptItem("story", BOAT, "Tom sailed.")]
    with pytest.raises(HarnessError, match=r"failed on 1 of 2 answers \(gave up after 3 attempts: HTTP 503"):
        extractor(server, tmp_path, max_attempts=3).concepts(items)
    assert server.request_count == 1 + 3
    server.clear_faults()
    assert extractor(server, tmp_path).concepts(items)[1] == ["a boy who builds things", "a voyage on a pond"]
    assert server.request_count == 1 + 3 + 1  # only the failed answer is asked again


def test_a_rejected_key_stops_the_run_without_showing_it(server: FakeOpenAI) -> None:
    wrong = "sk-wrong-0123456789abcdef"
    with pytest.raises(HarnessError, match="refused the API key") as caught:
        extractor(server, api_key=wrong).concepts([ConceptItem("story", KITE, "Lily flew.")])
    assert wrong not in str(caught.value) and SECRET not in str(caught.value)
    assert server.request_count == 1


def test_an_error_that_echoes_the_key_is_scrubbed(server: FakeOpenAI) -> None:
    server.inject("status", status=400, times=-1, message=f"bad request from key {SECRET}")
    with pytest.raises(HarnessError, match=r"rejected: HTTP 400: bad request from key \*\*\*") as caught:
        extractor(server).concepts([ConceptItem("story", KITE, "Lily flew.")])
    assert SECRET not in str(caught.value)
    assert server.request_count == 1  # a 400 is not retried


def test_an_unreachable_endpoint_is_a_harness_error() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    closed = open_concept_extractor("openai:m", base_url=f"http://127.0.0.1:{port}/v1", max_attempts=2, backoff=0.01)
    with pytest.raises(HarnessError, match=rf"gave up after 2 attempts: cannot reach http://127.0.0.1:{port}/v1"):
        closed.concepts([ConceptItem("story", KITE, "Lily flew.")])


def test_a_model_that_rejects_temperature_is_asked_without_it() -> None:
    with FakeOpenAI(reject_temperature=True, reply=reply_for) as fake:
        found = open_concept_extractor("openai:m", base_url=fake.url).concepts(
            [ConceptItem("story", KITE, "Lily flew.")]
        )
        assert found[0][-1] == "friendship"
        assert ["temperature" in body for body in fake.requests] == [True, False]


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("opnai:gpt", {}, r"unknown concept extractor 'opnai:gpt' \(did you mean 'openai'\?\)"),
        ("rules", {}, r"unknown concept extractor 'rules'; use openai:MODEL or hf:PATH"),
        ("openai:", {}, r"needs a MODEL, as in openai:MODEL"),
        ("hf:", {}, r"needs a PATH, as in hf:PATH"),
        ("openai:m", {"max_attempt": 2}, r"no option 'max_attempt' \(did you mean 'max_attempts'\?\)"),
        ("hf:/nowhere/at/all", {}, r"hf:/nowhere/at/all: .*checkpoint folder not found"),
    ],
)
def test_bad_specs(spec: str, options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        open_concept_extractor(spec, **options)


def test_open_concept_extractor_kinds(tmp_path: Path) -> None:
    opened = open_concept_extractor(" openai:gpt-x ", base_url="http://user:pw@127.0.0.1:9/v1")
    assert isinstance(opened, OpenAIConceptExtractor) and isinstance(opened, ConceptExtractor)
    assert opened.spec == "openai:gpt-x" and "pw" not in repr(opened)


# -- hf: ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kite_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny chat model that answers "kite kite ..." to anything."""
    return tiny_causal_lm(tmp_path_factory.mktemp("concepts") / "kite-lm", emits="kite")


def test_hf_batches_parses_and_caches(kite_lm: Path, tmp_path: Path) -> None:
    items = [ConceptItem("story", KITE, "Lily flew."), ConceptItem("story", BOAT, "Tom sailed.")]
    options = {"max_new_tokens": 2, "batch_size": 2, "device": "cpu"}
    first = open_concept_extractor(f"hf:{kite_lm}", cache_dir=tmp_path, **options)
    assert isinstance(first, HFConceptExtractor)
    assert first.concepts([*items, items[0]]) == [["kite kite"]] * 3
    assert first.sequences_generated == 2  # greedy: identical requests once, no re-asks
    again = HFConceptExtractor(str(kite_lm), cache_dir=tmp_path, **options)  # type: ignore[arg-type]
    assert again.concepts(items) == [["kite kite"]] * 2
    assert again.sequences_generated == 0 and again._generator is None  # nothing loaded


def test_hf_without_chat_template_continues_a_plain_list(tmp_path: Path) -> None:
    plain = tiny_causal_lm(tmp_path / "plain", emits="kite", chat_template=None)
    extractor = HFConceptExtractor(str(plain), max_new_tokens=1, device="cpu")
    assert extractor.concepts([ConceptItem("story", KITE, "Lily flew.")]) == [["kite"]]
