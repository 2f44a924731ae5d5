"""``--model answers:FILE`` under pytest: answers generated elsewhere are gated like a checkpoint's.

The plugin gates the tiny checkpoint on a story suite; its own answers are then written to files
(``pytest-novelty answers export`` from the cache, lm-evaluation-harness samples written the way
that harness writes them, and ``pytest-novelty run --output``) and gated as ``answers:FILE``: the
table, its intervals and the verdicts are exactly those of the checkpoint's run. Every mismatch
between a file and the suite is exit 4 with one line naming the prompt and the file, before
anything is scored.

The checkpoint's own run is made once for the module (``own_run``) and exported once; a test that
runs more work in its cache gets a private copy of that warm cache, so every answers file is gated
against the scores the checkpoint's run cached, as when each test made the run itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.generation.answer_files import answer_record
from pytest_novelty.suites.suite_file import load_suite
from pytest_novelty.suites.tasks import get_task
from tests.child_pytest import copy_cache, run_pytest
from tests.lm_eval_samples import Document, gen_kwargs_of, write_samples, write_samples_0_4_2
from tests.plugin.conftest import PROMPTS
from tests.suite_text import suite_toml, write_story_suite_folder

pytestmark = pytest.mark.slow

Change = Callable[[dict[str, Any]], dict[str, Any] | None]

# The quality floor fails the untrained checkpoint: the same verdicts include a failure.
SUITE = suite_toml(thresholds=[("originality@4", 0.0), ("coverage@4", 0.5), ("quality", 0.9)])


@pytest.fixture
def suite_dir(suite_dir: Path) -> Path:
    (suite_dir / "story.toml").write_text(SUITE)
    return suite_dir


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``pytest-novelty ARGS`` in its own process."""
    return subprocess.run([sys.executable, "-m", "pytest_novelty.cli", *args], capture_output=True, text=True)


def table(out: str) -> list[str]:
    """The gate's table (after pytest's header line, when there is one), without the lines that name
    the model (they must differ)."""
    lines = out.split("novelty gate", 1)[-1].splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("suite ")):]
    body = [line for line in lines if not line.startswith("suite ")]
    end = next(i for i, line in enumerate(body) if line.startswith("novelty work done"))
    return body[:end]


def with_model(args: list[str], model: str) -> list[str]:
    """``novelty_args`` with another ``--model``."""
    i = args.index("--model")
    return [*args[:i], f"--model={model}", *args[i + 2 :]]


def export(args: list[str], out: Path, *, cached: bool = True) -> list[dict[str, Any]]:
    """``pytest-novelty answers export`` of the run ``args`` describe (``cached``: every answer is in its
    cache already, so nothing loads); its records."""
    options = dict(a.split("=", 1) for a in args if a.startswith("--novelty-") or a.startswith("--originality"))
    model = args[args.index("--model") + 1]
    done = cli("answers", "export", "--model", model, "--suites", options["--novelty-suites"],
               "--cache", options["--novelty-cache"], "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"answers of {model} to 6 prompts written to {out}" in done.stderr
    assert ("[novelty] loading" in done.stderr) is not cached
    return [json.loads(line) for line in out.read_text().splitlines()]


@dataclass(frozen=True)
class OwnRun:
    """The checkpoint's own run of the suite: its result, its (warm) cache, and its answers exported
    from that cache."""

    result: pytest.RunResult
    cache: Path
    answers: Path

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.answers.read_text().splitlines()]


@pytest.fixture(scope="module")
def own_run(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path, tiny_index: Path) -> OwnRun:
    """The checkpoint's own run (the plugin generates and scores every answer), made once for the
    module in a folder laid out as a test's (``gate-suites`` beside the run), then exported."""
    folder = tmp_path_factory.mktemp("own-run")
    suites = write_story_suite_folder(folder / "gate-suites", PROMPTS, SUITE)
    cache = folder / "cache"
    args = ["--model", str(tiny_checkpoint), f"--novelty-suites={suites}", f"--novelty-cache={cache}",
            f"--originality=infini-gram:{tiny_index}", "-p", "no:cacheprovider"]
    result = run_pytest(folder, *args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    answers = folder / "answers.jsonl"
    export(args, answers)
    return OwnRun(result, cache, answers)


@pytest.fixture
def gated(own_run: OwnRun, novelty_args: list[str]) -> pytest.RunResult:
    """The checkpoint's own run, its cache copied into this test's (``novelty_args``' ``--novelty-cache``)."""
    copy_cache(own_run.cache, Path(dict(a.split("=", 1) for a in novelty_args if "=" in a)["--novelty-cache"]))
    return own_run.result


def same_gate(pytester: pytest.Pytester, args: list[str], model: str, reference: pytest.RunResult) -> str:
    """Gate ``model`` with ``args``: the same exit status and table as ``reference``; its output."""
    result = pytester.runpytest_subprocess(*with_model(args, model))
    out = result.stdout.str()
    assert result.ret == reference.ret, out
    assert table(out) == table(reference.stdout.str())
    assert "FAIL" in "\n".join(table(out))  # the failing verdict is among the compared ones
    return out


def test_the_plugins_own_answers_gated_from_a_file_give_the_same_table_intervals_and_verdicts(
    pytester: pytest.Pytester, novelty_args: list[str], gated: pytest.RunResult, own_run: OwnRun
) -> None:
    file = own_run.answers
    records = own_run.records()
    assert [r["id"] for r in records] == [f"p{i}" for i in range(6)] and all(len(r["answers"]) == 2 for r in records)
    out = same_gate(pytester, novelty_args, f"answers:{file}", gated)
    assert "story: 6 prompts x 2 samples; 12 answers read from answers.jsonl" in out and "nothing generated" in out
    assert "0 samples generated in 0 batches (0 from cache), 0 originality lookups, 0 judge requests, " \
           "12 answers read from files" in out  # the scores of the same texts were cached by the first run


def test_lm_evaluation_harness_samples_of_the_same_answers_give_the_same_table(
    pytester: pytest.Pytester, novelty_args: list[str], gated: pytest.RunResult, suite_dir: Path, tmp_path: Path,
    own_run: OwnRun,
) -> None:
    records = own_run.records()
    suite = load_suite(suite_dir / "story.toml")
    settings = replace(suite.generation, stop=tuple(get_task("story").stop))
    docs = [Document({"id": r["id"], "text": r["prompt"]}, r["prompt"], r["answers"], gen_kwargs_of(settings))
            for r in records]
    new = write_samples(tmp_path / "lm-eval" / "tiny", "story_gate", docs)
    old = write_samples_0_4_2(tmp_path / "lm-eval-0.4.2", "pretrained=tiny,dtype=float32", "story_gate", docs)
    out = same_gate(pytester, novelty_args, f"answers:{new.parent}", gated)  # the folder lm-evaluation-harness fills
    assert "12 answers read from tiny/ (1 file)" in out
    same_gate(pytester, novelty_args, f"answers:{old}", gated)


def test_the_command_lines_output_file_gates_to_the_same_table(
    pytester: pytest.Pytester, novelty_args: list[str], gated: pytest.RunResult, suite_dir: Path, tmp_path: Path
) -> None:
    options = dict(a.split("=", 1) for a in novelty_args if a.startswith("--novelty-") or a.startswith("--orig"))
    common = ["--suites", options["--novelty-suites"], "--cache", options["--novelty-cache"],
              "--originality", options["--originality"]]
    output = tmp_path / "output.json"
    run = cli("run", "--model", novelty_args[novelty_args.index("--model") + 1], *common, "--output", str(output))
    assert run.returncode == 1, run.stdout + run.stderr
    exported = json.loads(output.read_text())["story"]
    settings = load_suite(suite_dir / "story.toml").generation
    lines = [answer_record("story", pid, None, rows, settings) for pid, rows in
             zip(exported["prompts"], exported["answers"], strict=True)]
    file = tmp_path / "from-output.jsonl"  # the answers as the task cut them: cutting them again changes nothing
    file.write_text("".join(json.dumps(r) + "\n" for r in lines))
    again = cli("run", "--model", f"answers:{file}", *common)
    assert again.returncode == 1, again.stdout + again.stderr
    assert table(again.stdout) == table(run.stdout)


def test_a_baseline_from_a_file_is_compared_as_a_baseline_checkpoint_is(
    pytester: pytest.Pytester, novelty_args: list[str], gated: pytest.RunResult, own_run: OwnRun
) -> None:
    file = own_run.answers
    checkpoint = novelty_args[novelty_args.index("--model") + 1]
    by_checkpoint = pytester.runpytest_subprocess(*novelty_args, f"--baseline-model={checkpoint}")
    by_file = pytester.runpytest_subprocess(*novelty_args, f"--baseline-model=answers:{file}")
    assert by_file.ret == by_checkpoint.ret == pytest.ExitCode.TESTS_FAILED
    compared = table(by_file.stdout.str())
    assert compared == table(by_checkpoint.stdout.str())
    assert any("delta" in line for line in compared), compared  # a baseline comparison, not the plain table


# -- mismatches: exit 4, one line naming the prompt and the file ---------------------------------


def usage_error(pytester: pytest.Pytester, args: list[str], model: str) -> str:
    result = pytester.runpytest_subprocess(*with_model(args, model))
    text = "\n".join(result.outlines + result.errlines)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1 and "Traceback" not in text, text
    return errors[0]


def edited(records: list[dict[str, Any]], path: Path, change: Change) -> Path:
    """``records`` changed by ``change`` (None: left out), written as JSON Lines to ``path``."""
    path.write_text("".join(json.dumps(r) + "\n" for r in map(change, records) if r is not None))
    return path


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda r: None if r["id"] == "p3" else r, "answers for 5 of 6 prompts; 1 without answers (p3)"),
        (lambda r: {**r, "answers": r["answers"][:1]} if r["id"] == "p2" else r,
         "1 fewer answers than generation.samples = 2 (p2 at "),
        (lambda r: {**r, "prompt": r["prompt"] + " Then"} if r["id"] == "p1" else r, "1 another prompt text (p1 at "),
        (lambda r: {**r, "settings": {**r["settings"], "temperature": 0.7}},
         "6 answered with other settings (p0 at "),
    ],
    ids=["missing-prompt", "fewer-answers", "other-prompt-text", "other-settings"],
)
def test_each_mismatch_is_exit_4_with_one_line_naming_the_prompt_and_file(
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path, change: Change, expected: str, own_run: OwnRun
) -> None:
    file = edited(own_run.records(), tmp_path / "answers.jsonl", change)
    line = usage_error(pytester, novelty_args, f"answers:{file}")
    assert expected in line and (str(file) in line or "answers.jsonl:" in line), line


def test_an_accepted_prompt_text_is_gated_and_said_in_the_report(
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path
) -> None:
    records = export(novelty_args, tmp_path / "own.jsonl", cached=False)
    file = edited(records, tmp_path / "answers.jsonl",
                  lambda r: {**r, "prompt": r["prompt"] + " Then"} if r["id"] in ("p1", "p4") else r)
    report = tmp_path / "report"
    result = pytester.runpytest_subprocess(*with_model(novelty_args, f"answers:{file}?accept_prompt_text=true"),
                                f"--novelty-report={report}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()  # the quality floor, as before
    note = ("2 of 6 prompt texts in answers.jsonl differ from the ones the suite sends "
            "(accepted: accept_prompt_text=true)")
    assert note in result.stdout.str()  # under the suite's header in the table
    assert note in (report / "report.md").read_text()
    info = json.loads((report / "report.json").read_text())
    assert note in json.dumps(info)


def test_answers_are_compared_with_the_checkpoints_snapshots_under_xdist_too(
    pytester: pytest.Pytester, novelty_args: list[str], gated: pytest.RunResult, own_run: OwnRun
) -> None:
    update = pytester.runpytest_subprocess(*novelty_args, "--snapshot-update")
    assert update.ret == pytest.ExitCode.TESTS_FAILED, update.stdout.str()  # the quality floor still fails
    file = own_run.answers
    against = pytester.runpytest_subprocess(*with_model(novelty_args, f"answers:{file}"), "--novelty-snapshots",
                                            "-n", "2")
    out = against.stdout.str()
    assert against.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "no snapshot for this case" not in out
    rows = table(out)
    compared = [line for line in rows if ">= " in line and "[" in line]
    assert len(compared) == 3 and all(line.endswith("unchanged") for line in compared), rows  # against the snapshots
    assert "[novelty gw" in out and "answers read from answers.jsonl" in out  # the workers read the file


def test_a_partial_file_says_how_much_it_answers_and_only_answered_gates_that_part(
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path, gated: pytest.RunResult, own_run: OwnRun
) -> None:
    """lm-evaluation-harness's ``--limit`` answers a suite's first documents: the count is said, and
    ``?only_answered=true`` gates those prompts, the subset and an answer longer than the suite lets a
    model write said under the suite's header."""
    def change(record: dict[str, Any]) -> dict[str, Any] | None:
        if record["id"] in ("p4", "p5"):
            return None
        return {**record, "answers": [record["answers"][0] * 40, *record["answers"][1:]]} if record["id"] == "p0" \
            else record

    file = edited(own_run.records(), tmp_path / "answers.jsonl", change)
    line = usage_error(pytester, novelty_args, f"answers:{file}")
    assert "answers for 4 of 6 prompts; 2 without answers (p4, p5)" in line and "?only_answered=true" in line
    result = pytester.runpytest_subprocess(*with_model(novelty_args, f"answers:{file}?only_answered=true"))
    out = result.stdout.str()
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), out
    assert "gated on the 4 of 6 prompts answers.jsonl answers (only_answered=true)" in out
    assert "1 answers in answers.jsonl are longer than generation.max_new_tokens" in out


def test_rows_of_an_unknown_suite_a_named_pipe_and_a_baseline_of_the_same_answers_are_said(
    tmp_path: Path, novelty_args: list[str], gated: pytest.RunResult, own_run: OwnRun, suite_dir: Path,
    tiny_index: Path,
) -> None:
    from tests.cli_in_process import run_cli

    cache = dict(a.split("=", 1) for a in novelty_args if "=" in a)["--novelty-cache"]
    run = ["run", "--suites", str(suite_dir), "--cache", cache, "--originality", f"infini-gram:{tiny_index}"]
    misspelt = edited(own_run.records(), tmp_path / "misspelt.jsonl", lambda r: {**r, "suite": "stroy"})
    done = run_cli(*run, "--model", f"answers:{misspelt}")
    assert done.returncode == 4, done.stderr
    assert f"{misspelt}: --model: the files answer suite 'stroy' (did you mean 'story'?), which the suites folder " \
           "does not have (it has story)" in done.stderr
    pipe = tmp_path / "pipe.jsonl"
    os.mkfifo(pipe)
    done = run_cli(*run, "--model", f"answers:{pipe}")
    assert done.returncode == 4 and "a named pipe" in done.stderr and "no such file" not in done.stderr
    same = run_cli(*run, "--model", f"answers:{own_run.answers}", "--baseline-model", f"answers:{own_run.answers}")
    assert "--baseline-model names the same answers as --model" in same.stderr, same.stderr
