"""``pytest --model demo`` and ``pytest-novelty run --model demo`` decide every case alike.

Both front ends call the one case decision (``gate/case.py``) on one results session
(``pipeline/session.py``), so each case has the same outcome, value, comparison and exit status:
plain, against a baseline checkpoint, against human references, and against the accepted snapshots
(the command line reads and writes the very files syrupy does). Bad input is exit 4 and a broken
harness exit 8 in both.
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.cli import main as cli_main
from pytest_novelty.report.json_report import read_records
from tests.child_pytest import run_pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


def main(args: list[str]) -> int:
    """``pytest-novelty ARGS``; its exit status. In this process: what is compared is the two front
    ends' decisions, not a process boundary, and each child process would pay Python's, torch's and
    transformers' start-up again (the pytest front end keeps its own process, as pytest runs it)."""
    return cli_main(args)


@pytest.fixture
def child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder the pytest runs start in (:func:`tests.child_pytest.run_pytest`, pytester's own
    environment), the test's working directory and ``HOME`` as under pytester. Not pytester itself:
    it drops the modules a test imported when the test ends, and the command line run in this
    process imports torch, numpy and the tokenizers' Rust extension, which load once per process."""
    folder = tmp_path / "child"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture
def demo_cache(demo_run_cache: Path) -> Path:
    """The shared cache of the demo's runs (see tests/conftest.py)."""
    return demo_run_cache


def _outcomes(report: Path) -> dict[tuple[str, str, str], tuple[Any, ...]]:
    """Each case of a report: whether it passed, its value, its comparison's status and delta."""
    cases = read_records(json.loads((report / "report.json").read_text()))
    return {
        (c.suite, c.metric, c.op or ""): (c.passed, c.outcome, c.value, c.status,
                                          None if c.compared is None else c.compared.delta,
                                          None if c.compared is None else c.compared.against)
        for c in cases
    }  # fmt: skip


def _both(
    child: Path, cache: Path, suites: Path, *args: str, cli: tuple[str, ...] = ()
) -> tuple[
    tuple[int, dict[tuple[str, str, str], tuple[Any, ...]]], tuple[int, dict[tuple[str, str, str], tuple[Any, ...]]]
]:
    """Run the same gate through pytest and through the command line; their exit statuses and cases."""
    via_pytest, via_cli = child / "report-pytest", child / "report-cli"
    result = run_pytest(
        child,
        "--model", "demo", f"--novelty-suites={suites}", f"--novelty-cache={cache}",
        f"--novelty-report={via_pytest}", "-p", "no:cacheprovider", *args,
    )  # fmt: skip
    status = main(["run", "--model", "demo", "--suites", str(suites), "--cache", str(cache),
                   "--report", str(via_cli), *(cli or args)])  # fmt: skip
    return (int(result.ret), _outcomes(via_pytest)), (status, _outcomes(via_cli))


def test_plain_and_baseline_cases_agree(child: Path, demo_cache: Path) -> None:
    suites = REPO / "suites"
    (ret, cases), (status, same) = _both(child, demo_cache, suites)
    assert ret == status == 0 and cases == same and len(cases) == 19
    # Against the weaker checkpoint of the same run, as a baseline: paired comparisons on every case.
    (ret, cases), (status, same) = _both(child, demo_cache, suites, "--baseline-model", "demo-early")
    assert cases == same and ret == status
    assert {case[5] for case in cases.values()} == {"baseline"}
    assert all(case[3] is not None for case in cases.values())  # every case was compared


def test_reference_cases_agree(child: Path, demo_cache: Path, tmp_path: Path) -> None:
    """A suite compared with its prompts' human references decides alike in both front ends."""
    folder = tmp_path / "suites"
    folder.mkdir()
    prompts = [json.loads(line) for line in (REPO / "suites" / "data" / "story.jsonl").read_text().splitlines()][:12]
    rows = [{**p, "reference": f"{p['meta']['characters'][0]} smiled. They played all day and it was fun."}
            for p in prompts]  # fmt: skip
    (folder / "refs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    story = (REPO / "suites" / "story.toml").read_text()
    story = story.replace('source = "builtin:story"', 'source = "jsonl:refs.jsonl"').replace("limit = 100", "")
    story = story.replace('tail = "data/story-tail.json"', "reference = true")
    (folder / "story.toml").write_text(story)
    (ret, cases), (status, same) = _both(child, demo_cache, folder)
    assert cases == same and ret == status
    assert {case[5] for case in cases.values()} == {"references"}


def test_snapshot_cases_agree_on_the_same_files(child: Path, demo_cache: Path, tmp_path: Path) -> None:
    """Snapshots accepted under pytest are read by the command line, and the other way round."""
    suites = tmp_path / "suites"
    shutil.copytree(REPO / "suites", suites)
    snapshots = tmp_path / "snapshots"
    accept = run_pytest(
        child, "--model", "demo", f"--novelty-suites={suites}", f"--novelty-cache={demo_cache}",
        f"--novelty-snapshot-dir={snapshots}", "--snapshot-update", "-p", "no:cacheprovider",
    )  # fmt: skip
    assert accept.ret == 0 and len(list(snapshots.rglob("*.novelty.jsonc"))) == 19
    (ret, cases), (status, same) = _both(
        child, demo_cache, suites, "--novelty-snapshots", f"--novelty-snapshot-dir={snapshots}",
        "--model", "demo-early", cli=("--snapshots", "--snapshot-dir", str(snapshots), "--model", "demo-early"),
    )  # fmt: skip
    assert cases == same and ret == status == 1  # the early checkpoint regresses against demo's snapshots
    assert {case[5] for case in cases.values()} == {"snapshot"}
    assert any(case[3] == "regressed" for case in cases.values())
    # The command line accepts new snapshots in the same files; pytest then compares with them.
    for path in snapshots.rglob("*.novelty.jsonc"):
        path.unlink()
    assert main(["run", "--model", "demo", "--suites", str(suites), "--cache", str(demo_cache),
                 "--snapshot-update", "--snapshot-dir", str(snapshots)]) == 0  # fmt: skip
    assert len(list(snapshots.rglob("*.novelty.jsonc"))) == 19
    again = run_pytest(
        child, "--model", "demo", f"--novelty-suites={suites}", f"--novelty-cache={demo_cache}", "--novelty-snapshots",
        f"--novelty-snapshot-dir={snapshots}", "-p", "no:cacheprovider",
    )  # fmt: skip
    assert again.ret == 0
    again.stdout.no_fnmatch_line("*no snapshot for this case*")


def test_bad_input_and_harness_errors_give_the_same_status(child: Path, demo_cache: Path, tmp_path: Path) -> None:
    suites = tmp_path / "suites"
    shutil.copytree(REPO / "suites", suites)
    (ret, _), (status, _) = _both_status(child, demo_cache, suites, "--judge", "rulez")
    assert ret == status == 4
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"  # nothing listens once closed
    args = ("--judge", "openai:judge-model", "--judge-base-url", dead)
    (ret, _), (status, _) = _both_status(child, demo_cache, suites, *args)
    assert ret == status == 8


def _both_status(child: Path, cache: Path, suites: Path, *args: str) -> tuple[tuple[int, None], ...]:
    result = run_pytest(
        child, "--model", "demo", f"--novelty-suites={suites}", f"--novelty-cache={cache}", "-p", "no:cacheprovider",
        *args,
    )  # fmt: skip
    status = main(["run", "--model", "demo", "--suites", str(suites), "--cache", str(cache), *args])
    return (int(result.ret), None), (status, None)
