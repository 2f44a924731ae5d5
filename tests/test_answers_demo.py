"""The demo's answers, gated from files, give the demo's table: every suite and metric family.

``pytest --model demo`` on the shared demo cache, then its raw answers exported
(``pytest-novelty answers export``) and written as lm-evaluation-harness samples (one task per
suite, as its code writes them); gating either with ``--model answers:...`` over the demo's own
index must give exactly the demo's table, intervals and verdicts, open's partition included.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from tests.cli_in_process import run_cli
from tests.lm_eval_samples import Document, write_samples

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


def gate(pytester: pytest.Pytester, cache: Path, *extra: str) -> tuple[int, list[str]]:
    """Exit status and table (the suite header lines, which name the model, left out) of a demo-suite run."""
    result = pytester.runpytest_subprocess(
        f"--novelty-suites={REPO / 'suites'}", f"--novelty-cache={cache}", "-p", "no:cacheprovider", *extra,
        timeout=900,
    )  # fmt: skip
    out = result.stdout.str()
    assert "novelty gate" in out, out[-3000:]
    body = out.split("novelty gate", 1)[1].splitlines()
    end = next(i for i, line in enumerate(body) if line.startswith("novelty work done"))
    return int(result.ret), [line for line in body[:end] if not line.startswith("suite ")]


def test_the_demos_answers_from_files_give_the_demos_table(
    pytester: pytest.Pytester, demo_run_cache: Path, tmp_path: Path
) -> None:
    status, table = gate(pytester, demo_run_cache, "--model=demo")
    file = tmp_path / "demo-answers.jsonl"
    done = run_cli("answers", "export", "--model", "demo", "--suites", str(REPO / "suites"), "--cache",
                   str(demo_run_cache), "--out", str(file))  # fmt: skip
    assert done.returncode == 0, done.stderr
    index = next(demo_run_cache.glob("demo-*/index"))
    originality = f"--originality=infini-gram:{index}"
    assert gate(pytester, demo_run_cache, f"--model=answers:{file}", originality) == (status, table)

    by_suite: dict[str, list[Document]] = defaultdict(list)
    for line in file.read_text().splitlines():
        record = json.loads(line)
        s = record["settings"]
        kwargs = {"until": s["stop"], "do_sample": True, "temperature": s["temperature"], "top_p": s["top_p"],
                  "max_gen_toks": s["max_new_tokens"]}
        by_suite[record["suite"]].append(Document({"id": record["id"]}, record["prompt"], record["answers"], kwargs))
    folder = tmp_path / "lm-eval" / "demo"
    for suite, docs in by_suite.items():
        write_samples(folder, f"novelty_{suite}", docs)
    assert gate(pytester, demo_run_cache, f"--model=answers:{folder}", originality) == (status, table)


def _series(cache: Path, spec: str, report: Path, *extra: str) -> tuple[int, list[str], dict, list]:  # type: ignore[type-arg]
    """``pytest-novelty run --model-series SPEC`` on the bundled story suite: its exit status, the series
    tables it printed, ``report.json``'s series and its case records (their headers, which name the
    model, left out)."""
    from dataclasses import replace

    from pytest_novelty.report.json_report import read_records

    done = run_cli("run", "--model-series", spec, "--suites", str(REPO / "suites"), "--suite", "story", "--cache",
                   str(cache), "--report", str(report), *extra)  # fmt: skip
    assert "Series of suite" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Series of suite"))
    end = next(i for i, line in enumerate(lines) if line.startswith("novelty work done"))
    data = json.loads((report / "report.json").read_text())
    series = [{k: v for k, v in entry.items() if k != "model"} for entry in data["series"]]
    return done.returncode, lines[start:end], {"series": series}, [replace(r, header="") for r in read_records(data)]


def test_a_series_of_answer_files_gives_the_live_series_table_and_verdicts(
    demo_run_cache: Path, tmp_path: Path
) -> None:
    """The demo's two checkpoints as a run (demo-early at step 100, demo at 400), gated live and from
    their exported answers laid out as the run is (``checkpoint-<step>/``): the same series tables,
    series entries and case verdicts."""
    from pytest_novelty.pipeline import demo

    root = demo.demo_dir(demo_run_cache)
    index = f"--originality=infini-gram:{root / 'index'}"
    run, answers = tmp_path / "run", tmp_path / "answers-run"
    for step, model in ((100, "demo-early"), (400, "demo")):
        (run / f"checkpoint-{step}").parent.mkdir(exist_ok=True)
        (run / f"checkpoint-{step}").symlink_to(root / model, target_is_directory=True)
        out = answers / f"checkpoint-{step}" / "answers.jsonl"
        out.parent.mkdir(parents=True)
        done = run_cli("answers", "export", "--model", model, "--suites", str(REPO / "suites"), "--suite", "story",
                       "--cache", str(demo_run_cache), "--out", str(out))  # fmt: skip
        assert done.returncode == 0, done.stderr
    live = _series(demo_run_cache, str(run), tmp_path / "live", index)
    read = _series(demo_run_cache, f"answers:{answers}", tmp_path / "read", index)
    assert read == live
    _, tables, series, records = read
    assert [e["step"] for e in series["series"]] == [100, 400] and len(records) >= 6
    assert sum("| checkpoint-400 |" in line for line in tables) == 1, tables  # one table per suite, named by entry
