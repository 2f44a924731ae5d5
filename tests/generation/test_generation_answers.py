"""``answers:FILE``: answers generated elsewhere, read through the generation layer's Protocols.

Real files in a temporary folder, in our own format and as lm-evaluation-harness writes them
(``tests/lm_eval_samples.py``); the source is opened the way a run opens it
(:func:`~pytest_novelty.generation.backends.open_generator`) and read by :func:`~pytest_novelty.generation.generate`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.generation import PromptRequest, generate, is_recorded
from pytest_novelty.generation.answer_files import FORMAT, answer_record, lm_eval_settings, read_answer_file
from pytest_novelty.generation.backends import open_generator
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.hashing import memo_at
from pytest_novelty.suites.schema import GenerationSettings
from tests.lm_eval_samples import Document, chat_context, gen_kwargs_of, write_samples, write_samples_0_4_2

SETTINGS = GenerationSettings(samples=2, temperature=1.0, max_new_tokens=16, stop=("\n",))
PROMPTS = {"p0": "Lily and Tom went to the park.", "p1": "Mia and Ben went to the garden."}
ANSWERS = {"p0": [" They saw a dog.", " It rained."], "p1": [" A bird sang.", " Ben ran.", " Mia hid."]}


def ours(path: Path, run: str = "story", *, settings: GenerationSettings = SETTINGS, **changes: Any) -> Path:
    """Our own file for ``PROMPTS``; ``changes`` replace fields of every record (None: leave it out)."""
    lines = []
    for prompt_id, text in PROMPTS.items():
        record = answer_record(run, prompt_id, text, ANSWERS[prompt_id], settings)
        record.update(changes)
        lines.append(json.dumps({k: v for k, v in record.items() if v is not None}))
    path.write_text("\n".join(lines) + "\n")
    return path


def documents(settings: GenerationSettings = SETTINGS, texts: dict[str, str] = PROMPTS) -> list[Document]:
    kwargs = gen_kwargs_of(settings)
    return [Document({"id": pid, "text": text}, text, ANSWERS[pid], kwargs) for pid, text in texts.items()]


def request(run: str = "story", settings: GenerationSettings = SETTINGS, repeat: int = 0) -> PromptRequest:
    return PromptRequest(run, repeat, list(PROMPTS), list(PROMPTS.values()), settings)


def read(spec: str, req: PromptRequest | None = None) -> list[list[str]]:
    """Open ``spec`` as a run does, check the request's prompts, and read them through generate()."""
    req = req or request()
    source = open_generator(spec)
    assert is_recorded(source)
    source.check_prompts(req)
    answers, stats = generate(source, list(req.texts), req.settings)
    assert stats.read_rows == len(req.texts) * req.settings.samples and stats.rows == 0 and stats.cached_rows == 0
    return answers


def failure(spec: str, req: PromptRequest | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        open_generator(spec).check_prompts(req or request())
    message = str(caught.value)
    assert "\n" not in message
    return message


# -- reading the formats ------------------------------------------------------------------------


def test_our_own_file_gives_each_prompt_its_first_samples_answers(tmp_path: Path) -> None:
    assert read(f"answers:{ours(tmp_path / 'a.jsonl')}") == [ANSWERS["p0"], ANSWERS["p1"][:2]]


def test_both_shapes_lm_evaluation_harness_writes_are_read_alike(tmp_path: Path) -> None:
    new = write_samples(tmp_path / "new", "story_gate", documents())
    old = write_samples_0_4_2(tmp_path / "old", "pretrained=org/model,dtype=float32", "story_gate", documents())
    assert json.loads(new.read_text().splitlines()[0])["arguments"]["gen_args_0"]["arg_0"] == PROMPTS["p0"]
    assert json.loads(old.read_text())[0]["arguments"][0][0] == PROMPTS["p0"]  # a JSON array, arguments as lists
    expected = [ANSWERS["p0"], ANSWERS["p1"][:2]]
    assert read(f"answers:{new}") == read(f"answers:{old}") == expected


def test_lm_evaluation_harness_filtered_answers_are_read_on_request(tmp_path: Path) -> None:
    path = write_samples(tmp_path, "story_gate", documents())
    one = replace(SETTINGS, samples=1)
    assert read(f"answers:{path}?filtered=true", request(settings=one)) == [ANSWERS["p0"][:1], ANSWERS["p1"][:1]]
    assert "2 fewer answers than generation.samples = 2 (p0 at " in failure(f"answers:{path}?filtered=true")


def test_a_folder_reads_every_jsonl_file_in_it_and_nothing_else(tmp_path: Path) -> None:
    folder = tmp_path / "lm-eval-out" / "org__model"
    write_samples(folder, "story_gate", documents(texts={"p0": PROMPTS["p0"]}))
    write_samples(folder, "story_more", documents(texts={"p1": PROMPTS["p1"]}))
    (folder / f"results_{'x'}.json").write_text('{"results": {}}')  # the aggregated results: not answers
    source = open_generator(f"answers:{folder}")
    assert source.source == "org__model/ (2 files)"
    assert read(f"answers:{folder}") == [ANSWERS["p0"], ANSWERS["p1"][:2]]


def test_a_chat_model_behind_an_api_logs_its_messages_which_match_the_suites(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": PROMPTS["p0"]}]
    docs = [Document({"id": "p0"}, chat_context(messages), ANSWERS["p0"], gen_kwargs_of(SETTINGS))]
    path = write_samples(tmp_path, "story_chat", docs)
    source = open_generator(f"answers:{path}")
    text = source.render(messages)
    source.check_prompts(PromptRequest("story", 0, ["p0"], [text], SETTINGS))
    assert generate(source, [text], SETTINGS)[0] == [ANSWERS["p0"]]


def test_lm_evaluation_harness_settings_are_read_as_it_reads_them() -> None:
    assert lm_eval_settings({"until": ["\n\n"], "do_sample": False}) == {"temperature": 0.0, "stop": ("\n\n",)}
    assert lm_eval_settings({"max_gen_toks": 32})["temperature"] == 0.0  # no temperature, no do_sample: greedy
    assert lm_eval_settings({"temperature": 0.8, "max_tokens": 10, "max_gen_toks": 64}) == {
        "temperature": 0.8, "max_new_tokens": 64}  # max_gen_toks comes before its aliases
    assert lm_eval_settings({"do_sample": True, "top_k": 40, "until": "###"}) == {"top_k": 40, "stop": ("###",)}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"format": FORMAT, "version": 2}, "version 2 was written by a newer pytest-novelty; this one reads version 1"),
        ({"format": "other"}, "format is 'other'; answers of this kind say \"format\": \"pytest-novelty.answers\""),
        ({"format": FORMAT, "version": 1, "suite": "s", "id": "p", "answers": ["a"], "promt": "x"},
         "unknown key 'promt' (did you mean 'prompt'?)"),
        ({"format": FORMAT, "version": 1, "suite": "s", "id": "p", "answers": []}, "answers must be a non-empty list"),
        ({"format": FORMAT, "version": 1, "suite": "s", "id": "p", "answers": ["a"], "settings": {"temprature": 1}},
         "settings has no 'temprature' (did you mean 'temperature'?)"),
        ({"doc_id": 0, "arguments": {"gen_args_0": {"arg_0": "ctx", "arg_1": " continuation"}}, "resps": [["-1.5"]]},
         "document 0 is not a generate_until sample"),
        ({"text": "hello"}, "neither a pytest-novelty answer"),
    ],
    ids=["newer-version", "other-format", "misspelt-key", "no-answers", "misspelt-setting", "loglikelihood", "other"],
)
def test_a_bad_record_is_one_line_naming_the_file_and_line(tmp_path: Path, line: dict[str, Any], message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n" + json.dumps(line) + "\n")
    with pytest.raises(ConfigError) as caught:
        read_answer_file(path)
    assert str(caught.value).startswith(f"{path}: line 2: ") and message in str(caught.value)


# -- matching and the mismatches ----------------------------------------------------------------


def test_a_prompt_without_answers_names_the_prompt_and_the_file(tmp_path: Path) -> None:
    path = ours(tmp_path / "a.jsonl")
    path.write_text(path.read_text().splitlines()[0] + "\n")  # p1 is gone
    assert failure(f"answers:{path}") == (f"{path}: suite story: answers for 1 of 2 prompts; 1 without answers (p1); "
                                          "answer every prompt, or gate only those answered with ?only_answered=true")


def test_only_answered_gates_the_prompts_the_file_covers_and_says_so(tmp_path: Path) -> None:
    path = ours(tmp_path / "a.jsonl")
    path.write_text(path.read_text().splitlines()[0] + "\n")  # p1 is gone
    source = open_generator(f"answers:{path}?only_answered=true")
    assert source.check_prompts(request()) == "gated on the 1 of 2 prompts a.jsonl answers (only_answered=true)"
    assert source.answered == {"story": frozenset({"p0"})}
    assert generate(source, [PROMPTS["p0"]], SETTINGS)[0][0] == ANSWERS["p0"][:2]
    empty = ours(tmp_path / "b.jsonl", "other")
    with pytest.raises(ConfigError, match="answers for 0 of 2 prompts"):  # nothing to gate is still refused
        open_generator(f"answers:{empty}?only_answered=true").check_prompts(request())


def test_every_mismatch_is_in_one_line_with_the_first_few_by_id_and_line(tmp_path: Path) -> None:
    """Missing, edited, short and contradicting prompts are counted and named at once, not one a run."""
    ids = [f"q{i}" for i in range(8)]
    texts = {i: f"Prompt number {i} about a small red fox who went home." for i in ids}
    rows = [{"format": "pytest-novelty.answers", "version": 1, "suite": "story", "id": i, "prompt": texts[i],
             "answers": ["a", "b"]} for i in ids[:6]]  # q6, q7 have no answers
    rows[0]["prompt"] = texts["q0"].replace("small", "tiny")  # edited
    rows[1]["answers"] = ["a"]  # short
    rows[2]["settings"] = {"temperature": 0.2}  # contradicts
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    message = failure(f"answers:{path}", PromptRequest("story", 0, ids, [texts[i] for i in ids], SETTINGS))
    assert message.startswith(f"{path}: suite story: answers for 3 of 8 prompts; 2 without answers (q6, q7); ")
    assert f"1 another prompt text (q0 at {path}: line 1: at character 26: 'tiny red fox who wen' here, " in message
    assert f"1 fewer answers than generation.samples = 2 (q1 at {path}: line 2: 1)" in message
    assert f"1 answered with other settings (q2 at {path}: line 3: temperature 0.2; the suite has 1" in message
    assert message.endswith("or gate only those answered with ?only_answered=true") and "\n" not in message


def test_answers_for_another_suite_say_which_suites_the_file_holds(tmp_path: Path) -> None:
    message = failure(f"answers:{(path := ours(tmp_path / 'a.jsonl', 'stroy'))}")
    assert message == (f"{path}: suite story: answers for 0 of 2 prompts; 2 without answers (p0, p1); the files "
                       "answer suites stroy (did you mean 'stroy'?); answer every prompt, or gate only those answered "
                       "with ?only_answered=true")


def test_fewer_answers_than_the_suite_samples_names_the_line(tmp_path: Path) -> None:
    path = ours(tmp_path / "a.jsonl")
    three = replace(SETTINGS, samples=3)
    assert failure(f"answers:{path}", request(settings=three)) == (
        f"{path}: suite story: answers for 1 of 2 prompts; 1 fewer answers than generation.samples = 3 (p0 at "
        f"{path}: line 1: 2)")


def test_a_prompt_text_that_differs_is_refused_unless_accepted_and_then_said(tmp_path: Path) -> None:
    path = ours(tmp_path / "a.jsonl")
    sent = PromptRequest("story", 0, list(PROMPTS), [PROMPTS["p0"], "Mia and Ben went to the beach."], SETTINGS)
    message = failure(f"answers:{path}", sent)
    assert message == (f"{path}: suite story: answers for 1 of 2 prompts; 1 another prompt text (p1 at {path}: line "
                       "2: at character 25: 'garden.' here, 'beach.' in the suite); generate the answers from the "
                       "suite's prompts, or accept theirs with ?accept_prompt_text=true")
    source = open_generator(f"answers:{path}?accept_prompt_text=true")
    note = source.check_prompts(sent)
    assert note == ("1 of 2 prompt texts in a.jsonl differ from the ones the suite sends "
                    "(accepted: accept_prompt_text=true)")
    assert generate(source, list(sent.texts), SETTINGS)[0][1] == ANSWERS["p1"][:2]


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        (replace(SETTINGS, temperature=0.7), "temperature 1; the suite has 0.7 (generation.temperature)"),
        (replace(SETTINGS, max_new_tokens=32), "max_new_tokens 16; the suite has 32 (generation.max_new_tokens)"),
        (replace(SETTINGS, stop=()), "the stop string '\\n', which the suite does not stop at"),
    ],
    ids=["temperature", "new-tokens", "stop"],
)
def test_settings_that_contradict_the_suites_name_the_setting(
    tmp_path: Path, settings: GenerationSettings, said: str
) -> None:
    path = ours(tmp_path / "a.jsonl")
    message = failure(f"answers:{path}", request(settings=settings))
    assert message.startswith(f"{path}: suite story: answers for 0 of 2 prompts; 2 answered with other settings (p0 "
                              f"at {path}: line 1: ") and said in message


def test_greedy_lm_evaluation_harness_answers_contradict_a_sampling_suite(tmp_path: Path) -> None:
    greedy = [replace(d, gen_kwargs={"until": ["\n"], "do_sample": False}) for d in documents()]
    path = write_samples(tmp_path, "story_gate", greedy)
    assert "answered with other settings (p0 at " in (message := failure(f"answers:{path}"))
    assert "line 1: temperature 0 (greedy); the suite has 1 (generation.temperature)" in message


def test_samples_of_a_sweep_are_told_apart_by_their_settings(tmp_path: Path) -> None:
    cold, hot = replace(SETTINGS, temperature=0.5), replace(SETTINGS, temperature=1.5)
    cool_docs = [replace(d, answers=[a.upper() for a in d.answers]) for d in documents(cold)]
    path = write_samples(tmp_path, "story_gate", [*cool_docs, *documents(hot)])
    assert read(f"answers:{path}", request("story[temperature=0.5]", cold))[0] == [a.upper() for a in ANSWERS["p0"]]
    assert read(f"answers:{path}", request("story[temperature=1.5]", hot))[0] == ANSWERS["p0"]


def test_two_samples_with_the_same_prompt_and_settings_but_other_answers_are_ambiguous(tmp_path: Path) -> None:
    other = [replace(d, answers=[a + "!" for a in d.answers]) for d in documents()]
    path = write_samples(tmp_path, "story_gate", [*documents(), *other])
    assert "answered differently twice (same prompt, same settings: keep one)" in failure(f"answers:{path}")


def test_lm_evaluation_harness_samples_match_by_a_doc_field_when_asked(tmp_path: Path) -> None:
    reworded = {pid: text.replace("went to", "walked to") for pid, text in PROMPTS.items()}
    path = write_samples(tmp_path, "story_gate", documents(texts=reworded))
    assert "lm-evaluation-harness samples are matched by their exact prompt text; to match by a field of the " \
           "logged doc, add ?id_field=NAME to the answers: spec" in failure(f"answers:{path}")
    assert "2 another prompt text (p0 at " in failure(f"answers:{path}?id_field=id")  # found by id, then compared
    assert read(f"answers:{path}?id_field=id&accept_prompt_text=true")[0] == ANSWERS["p0"]
    assert "its doc has no field 'name' (id_field)" in failure(f"answers:{path}?id_field=name")


def test_a_repeat_needs_answers_of_its_own(tmp_path: Path) -> None:
    path = write_samples(tmp_path, "story_gate", documents())
    assert "a --novelty-repeat run needs answers of its own" in failure(
        f"answers:{path}", request("story#repeat=1", repeat=1))
    mine = ours(tmp_path / "repeat.jsonl", "story#repeat=1")
    assert read(f"answers:{mine}", request("story#repeat=1", repeat=1))[0] == ANSWERS["p0"]


# -- identity ------------------------------------------------------------------------------------


def test_the_identity_is_the_files_content_not_their_names(tmp_path: Path) -> None:
    first = ours(tmp_path / "a.jsonl")
    renamed = tmp_path / "elsewhere" / "b.jsonl"
    renamed.parent.mkdir()
    renamed.write_bytes(first.read_bytes())
    memo = memo_at(tmp_path / "memo")
    identity_id = open_generator(f"answers:{first}", memo=memo).identity_id
    assert identity_id.startswith("answers:")
    assert open_generator(f"answers:{renamed}", memo=memo).identity_id == identity_id
    renamed.write_bytes(first.read_bytes().replace(b"They saw a dog", b"They saw a cat"))
    assert open_generator(f"answers:{renamed}", memo=memo).identity_id != identity_id
    assert open_generator(f"answers:{first}?filtered=true").identity_id != identity_id  # other answers of one file


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("answers:{tmp}/missing.jsonl", "{tmp}/missing.jsonl: no such file or folder of answers"),
        ("answers:{tmp}", "{tmp}: the folder holds no *.jsonl files of answers"),
        ("answers:{tmp}/a.jsonl?acept_prompt_text=true", "has no option 'acept_prompt_text'"),
    ],
    ids=["missing", "empty-folder", "misspelt-option"],
)
def test_a_bad_spec_is_one_line_before_anything_runs(tmp_path: Path, spec: str, message: str) -> None:
    from pytest_novelty.generation.backends import check_model

    (tmp_path / "a.jsonl").write_text("")
    empty = tmp_path / "empty"
    empty.mkdir()
    tmp = str(empty) if "folder" in message else str(tmp_path)
    with pytest.raises(ConfigError, match=None) as caught:
        check_model(spec.format(tmp=tmp))
    assert message.format(tmp=tmp) in str(caught.value)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--model-base-url", "http://127.0.0.1:8000/v1"], "--model-base-url: applies to a served model"),
        (["--model-revision", "v2"], "--model-revision: does not apply to 'answers:{file}': answers are identified "
                                     "by their files' content"),
    ],
    ids=["base-url", "revision"],
)
def test_a_served_models_options_are_refused_for_answers(tmp_path: Path, option: list[str], message: str) -> None:
    import argparse

    from pytest_novelty.pipeline.options import add_arguments
    from pytest_novelty.pipeline.preflight import check_options

    file = ours(tmp_path / "a.jsonl")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--model", f"answers:{file}", *option])
    with pytest.raises(ConfigError) as caught:
        check_options(args, model=f"answers:{file}", front="cli")
    assert str(caught.value).startswith(message.format(file=file))
