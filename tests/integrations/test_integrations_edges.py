"""Trackers are edges like every other: checked before anything is generated, bounded while they
log, and a failure is one line with the exit status the report records.

Against real destinations on this machine: MLflow's own client talking to servers on 127.0.0.1 (a
closed port, a socket that accepts and never answers, a server answering 500, a fake MLflow server
that fails while the run logs), TensorBoard folders on tmpfs mounts made read-only or full, and W&B's
own client against a silent server. Each case was reproduced on the code before this change: a bad
URI was found after the gate (exit 8), a closed port took minutes of retries after it, a silent
server hung the run after its table, a read-only folder passed the check, and the reports said
``exit status: 0`` while the run exited 8.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS, ConfigError, PreflightError
from pytest_novelty.integrations import TrackedRun, check_trackers, log_run
from pytest_novelty.integrations.base import CALL_RETRIES, CALL_TIMEOUT, DEADLINE, within
from tests.integrations.test_integrations_run import _report
from tests.servers.base import SilentServer
from tests.servers.mlflow_api import FakeMlflow
from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder

REPO = Path(__file__).resolve().parents[2]
SECRET = "hunter2secret"
# A tracking server's refusal as MLflow's client reports it: the HTTP status up to 3.17, the server's own
# error (its JSON body, without the status) from 3.18.
REFUSED_503 = r"the tracking server (answered HTTP 503|refused the request: INTERNAL_ERROR: injected status 503)"
MLFLOW_SETTINGS = (*(f"MLFLOW_HTTP_REQUEST_{name}" for name in ("TIMEOUT", "MAX_RETRIES", "BACKOFF_FACTOR")),
                   "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT")  # fmt: skip


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def mlflow_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's own request settings as a new user has them: none set (its defaults: 120 s, 7 retries)."""
    pytest.importorskip("mlflow", reason="needs the mlflow extra")
    for name in MLFLOW_SETTINGS:
        monkeypatch.delenv(name, raising=False)


QUICK = 2
"""Seconds a request may wait where the test is about what a front end does with a silent tracker,
not the default bound (held on MLflow's defaults by the preflight test): the user's own setting."""


@pytest.fixture
def mlflow_quick(mlflow_defaults: None, monkeypatch: pytest.MonkeyPatch) -> int:
    """A user who set MLflow's request timeout to :data:`QUICK` s themselves: it wins over the gate's."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", str(QUICK))
    return QUICK


@contextmanager
def tmpfs(folder: Path, options: str) -> Iterator[Path]:
    """``folder`` as a small tmpfs mount (``ro``, or ``size=...``), unmounted afterwards; skips
    where this process cannot mount (not root, no mount command)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> None:
    """Write into ``folder`` until its file system has no space left."""
    with (folder / "filler").open("wb", buffering=0) as fh, suppress(OSError):
        while True:
            fh.write(b"\0" * 4096)


class _Refusing:
    """An HTTP server on 127.0.0.1 that answers every request with one status and one raw body."""

    def __init__(self, status: int, body: bytes) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> _Refusing:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- the preflight -------------------------------------------------------------------------------


def test_a_uri_mlflow_has_no_store_for_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow", reason="needs the mlflow extra")
    with pytest.raises(ConfigError, match=r"^--novelty-log: mlflow:bogus://x: MLflow has no store for this URI"):
        check_trackers(["mlflow:bogus://x"])
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    with pytest.raises(ConfigError, match=r"opens a folder store only with MLFLOW_ALLOW_FILE_STORE=true; set it"):
        check_trackers([f"mlflow:{tmp_path / 'mlruns'}"])
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    check_trackers([f"mlflow:{tmp_path / 'mlruns'}"])  # a folder store that takes a write


@pytest.mark.usefixtures("mlflow_defaults")
def test_a_tracking_server_that_cannot_be_reached_is_a_harness_error_at_once() -> None:
    """Nothing listening, a socket that never answers, a server answering 500: each is one line
    before the run, within MLflow's request bound (the old check reached no server at all)."""
    with pytest.raises(PreflightError, match=r"cannot reach the tracking server \(connection refused\)$"):
        check_trackers([f"mlflow:http://127.0.0.1:{closed_port()}"])
    with SilentServer() as silent:
        with pytest.raises(PreflightError) as caught:
            check_trackers([f"mlflow:{silent.url.rstrip('/')}"])
        assert silent.connections == 1 + CALL_RETRIES  # MLflow's own retries, bounded through its settings
    assert str(caught.value).endswith(f"accepts connections but did not answer within {CALL_TIMEOUT} s")
    with _Refusing(500, b"\x00internal \xff error") as broken, pytest.raises(PreflightError, match=r"HTTP 500(: .*)?$"):
        check_trackers([f"mlflow:{broken.url}"])
    with _Refusing(200, b"{}") as plain, pytest.raises(PreflightError, match=r"over TLS \(the handshake failed"):
        check_trackers([f"mlflow:{plain.url.replace('http://', 'https://')}"])
    assert not any(name in os.environ for name in MLFLOW_SETTINGS)  # set for the call only


@pytest.mark.usefixtures("mlflow_defaults")
def test_a_refusing_server_is_named_with_its_reply_printable_and_the_variables_to_set() -> None:
    with _Refusing(401, b"\x00denied \xff\xfe\x1b[2J") as refusing, pytest.raises(PreflightError) as caught:
        check_trackers([f"mlflow:{refusing.url}"])
    message = str(caught.value)
    assert message.isprintable(), message
    # MLflow's client decoded the body, bytes that are not UTF-8 as U+FFFD: shown as its escape
    assert "answered HTTP 401: \\x00denied \\ufffd\\ufffd\\x1b[2J; MLflow reads the credentials from" in message
    assert "MLFLOW_TRACKING_TOKEN" in message


def test_a_check_that_never_returns_is_given_up_on() -> None:
    """The whole check or log of a tracker is bounded, whatever its client does (here: waits forever)."""
    release = threading.Event()
    try:
        with pytest.raises(PreflightError, match=r"^x:y: the tracker's log did not finish within 0.2 s; gave up"):
            within("x:y", "log", release.wait, seconds=0.2)
    finally:
        release.set()
    assert within("x:y", "log", lambda: "done") == "done"
    with pytest.raises(KeyError):  # its own error, as raised
        within("x:y", "log", lambda: {}["k"])
    assert DEADLINE >= 2 * CALL_TIMEOUT * (1 + CALL_RETRIES)  # a bounded request fails before the deadline


def test_a_tensorboard_folder_that_cannot_be_written_is_found_before_the_run(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="needs the tensorboard extra")
    with tmpfs(tmp_path / "ro", "ro,size=1m") as ro, pytest.raises(ConfigError, match=r"read-only file system$"):
        check_trackers([f"tensorboard:{ro}"])
    with tmpfs(tmp_path / "full", "size=64k") as full:
        fill(full)
        with pytest.raises(PreflightError, match=r"cannot be written now: no space left on the device$"):
            check_trackers([f"tensorboard:{full / 'tb'}"])
    check_trackers([f"tensorboard:{tmp_path / 'fine'}"])
    assert list((tmp_path / "fine").iterdir()) == []  # the write check leaves nothing behind


def _wandb_check(spec: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``check_trackers([spec])`` in a process of its own (W&B's client starts a service process)."""
    code = (
        "import sys\nfrom pytest_novelty.infra.errors import NoveltyError\n"
        "from pytest_novelty.integrations import check_trackers\n"
        f"try:\n    check_trackers([{spec!r}])\nexcept NoveltyError as e:\n"
        "    print(type(e).__name__, e)\n    sys.exit(1)\nprint('ok')\n"
    )
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)  # fmt: skip


def test_wandb_is_checked_as_its_mode_says(tmp_path: Path) -> None:
    """Online: W&B's own client must find a key (none: bad input) and reach its server (silent: a
    harness error); offline: the run's folder must take a write."""
    pytest.importorskip("wandb", reason="needs the wandb extra")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update({"HOME": str(home), "PYTHONPATH": str(REPO), "WANDB_MODE": "online"})
    with SilentServer() as silent:
        env["WANDB_BASE_URL"] = silent.url.rstrip("/")
        keyless = _wandb_check("wandb:proj", env)
        assert keyless.stdout.startswith("ConfigError --novelty-log: wandb:proj: W&B finds no API key"), keyless
        silenced = _wandb_check("wandb:proj", {**env, "WANDB_API_KEY": "0" * 40})
        assert silenced.stdout.startswith("PreflightError wandb:proj: W&B could not verify the key"), silenced
    with tmpfs(tmp_path / "ro", "ro,size=1m") as readonly:
        offline = _wandb_check("wandb:proj", {**env, "WANDB_MODE": "offline", "WANDB_DIR": str(readonly)})
    assert offline.stdout.strip().endswith("cannot be written: a read-only file system"), offline


# -- while the run logs ------------------------------------------------------------------------


@pytest.mark.usefixtures("mlflow_quick")
def test_a_server_that_stops_answering_while_the_run_logs_is_a_harness_error_in_seconds(tmp_path: Path) -> None:
    """The server passes the check, then never answers the metrics: MLflow's client would retry
    each request 7 times, waiting 120 s for each answer; here the request is tried twice, each for
    as long as the user's own MLflow setting says (else 10 s), and the run gets one line."""
    run = TrackedRun.from_report(_report())
    with FakeMlflow(tmp_path / "artifacts") as server:
        server.inject("hang", match="runs/log-batch", times=-1)
        box: dict[str, object] = {}
        worker = threading.Thread(target=lambda: box.update(logged=log_run([f"mlflow:{server.url}"], run)),
                                  daemon=True)  # fmt: skip
        worker.start()
        worker.join(DEADLINE + 120)  # the old client was still retrying after 16 minutes
        assert not worker.is_alive(), "logging to a silent tracking server did not end"
        batches = sum("runs/log-batch" in path for path in server.paths)
    logged = box["logged"]
    assert logged.status == HARNESS_EXIT_STATUS  # type: ignore[attr-defined]
    (line,) = logged.lines  # type: ignore[attr-defined]
    assert line == (f"novelty log harness error: mlflow:{server.url}: the tracking server accepts connections "
                    f"but did not answer within {QUICK} s")  # fmt: skip
    assert batches == 1 + CALL_RETRIES
    (failed,) = server.runs.values()
    assert failed["info"]["status"] == "FAILED"  # the run is closed as failed, not left running


# -- the front ends: what the run exits with is what its report records --------------------------


@pytest.fixture
def gate_args(tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path) -> list[str]:
    suites = write_story_suite_folder(tmp_path / "suites", story_prompts(2), suite_toml(samples=1))
    return [f"--novelty-model={tiny_checkpoint}", f"--novelty-suites={suites}", f"--novelty-cache={tmp_path / 'c'}",
            f"--novelty-originality=infini-gram:{tiny_index}", "-p", "no:cacheprovider"]


def _recorded(report: Path) -> tuple[object, str]:
    """The exit status report.json records, and report.md's text."""
    return json.loads((report / "report.json").read_text())["versions"].get("exit status"), (
        report / "report.md").read_text()  # fmt: skip


@pytest.mark.slow
@pytest.mark.usefixtures("mlflow_defaults")
def test_pytest_a_bad_uri_is_exit_4_before_any_model_loads(
    pytester: pytest.Pytester, gate_args: list[str], tmp_path: Path
) -> None:
    report = tmp_path / "report"
    result = pytester.runpytest_subprocess(*gate_args, "--novelty-log=mlflow:bogus://x", f"--novelty-report={report}")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    (error,) = [line for line in result.errlines if line.startswith("ERROR:")]
    assert error.startswith("ERROR: --novelty-log: mlflow:bogus://x: MLflow has no store for this URI")
    assert "generated" not in out and "Traceback" not in out and not (tmp_path / "c").exists()  # nothing ran
    status, markdown = _recorded(report)
    assert status == 4 and "no verdict" in markdown and "exit status: `4`" in markdown


@pytest.mark.slow
@pytest.mark.usefixtures("mlflow_quick")
def test_pytest_a_silent_tracking_server_stops_the_run_before_any_case(
    pytester: pytest.Pytester, gate_args: list[str], tmp_path: Path
) -> None:
    report = tmp_path / "report"
    with SilentServer() as silent:
        result = pytester.runpytest_subprocess(*gate_args, f"--novelty-log=mlflow:{silent.url.rstrip('/')}",
                                               f"--novelty-report={report}", timeout=600)  # fmt: skip
    out = result.stdout.str()
    assert result.ret == HARNESS_EXIT_STATUS, out[-3000:]
    result.stdout.fnmatch_lines(["novelty: harness error before any case ran: mlflow:http://127.0.0.1:*: the tracking "
                                 f"server accepts connections but did not answer within {QUICK} s"])
    result.assert_outcomes(deselected=1)  # no case ran, none counted as a verdict
    status, markdown = _recorded(report)
    assert status == HARNESS_EXIT_STATUS and "**no verdict**: harness error before any case ran" in markdown
    assert f"exit status: `{HARNESS_EXIT_STATUS}`" in markdown


@pytest.mark.slow
@pytest.mark.usefixtures("mlflow_defaults")
def test_pytest_a_tracker_failing_while_logging_is_the_status_the_report_records(
    pytester: pytest.Pytester, gate_args: list[str], tmp_path: Path
) -> None:
    """The gate passes; the tracking server then refuses the metrics: exit 8 with one line without
    the credentials, the other tracker still logs, and both report files say exit status 8."""
    pytest.importorskip("tensorboard", reason="needs the tensorboard extra")
    report = tmp_path / "report"
    with FakeMlflow(tmp_path / "artifacts") as server:
        server.inject("status", match="runs/log-batch", times=-1, status=503)
        url = server.url.replace("http://", f"http://gate:{SECRET}@")
        result = pytester.runpytest_subprocess(
            *gate_args, f"--novelty-log=mlflow:{url}", f"--novelty-log=tensorboard:{tmp_path / 'tb'}",
            f"--novelty-report={report}", timeout=600,
        )  # fmt: skip
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == HARNESS_EXIT_STATUS, out[-3000:]
    result.assert_outcomes(passed=1)  # the gate itself passed; its results could not all be logged
    (line,) = [line for line in out.splitlines() if line.startswith("novelty log harness error")]
    expected = r"novelty log harness error: mlflow:http://127\.0\.0\.1:\d+: " + REFUSED_503
    assert re.fullmatch(expected, line), line
    assert SECRET not in out
    assert any(line.startswith("novelty log: tensorboard:") for line in out.splitlines())
    status, markdown = _recorded(report)
    assert status == HARNESS_EXIT_STATUS and f"exit status: `{HARNESS_EXIT_STATUS}`" in markdown
    assert json.loads((report / "report.json").read_text())["summary"]["passed"] == 1


@pytest.mark.slow
@pytest.mark.usefixtures("mlflow_quick")
def test_cli_trackers_are_preflighted_and_their_status_recorded(
    tmp_path: Path, tiny_checkpoint: Path, tiny_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pytest-novelty run``: a silent server stops the run before any model loads, with a report
    saying so and the status; a tracker that fails while logging is the status the report records."""
    from pytest_novelty.cli import main

    suites = write_story_suite_folder(tmp_path / "suites", story_prompts(2), suite_toml(samples=1))
    report = tmp_path / "report"
    args = ["run", "--model", str(tiny_checkpoint), "--suites", str(suites), "--cache", str(tmp_path / "c"),
            "--originality", f"infini-gram:{tiny_index}", "--report", str(report)]  # fmt: skip
    with SilentServer() as silent:
        assert main([*args, "--log", f"mlflow:{silent.url.rstrip('/')}"]) == HARNESS_EXIT_STATUS
    err = capsys.readouterr().err
    assert f"the tracking server accepts connections but did not answer within {QUICK} s" in err
    assert not (tmp_path / "c").exists()  # stopped before anything was generated
    status, markdown = _recorded(report)
    assert status == HARNESS_EXIT_STATUS and "no verdict" in markdown
    with FakeMlflow(tmp_path / "artifacts") as server:
        server.inject("status", match="runs/log-batch", times=-1, status=503)
        assert main([*args, "--log", f"mlflow:{server.url}"]) == HARNESS_EXIT_STATUS
    out = capsys.readouterr().out
    assert re.search(r"novelty log harness error: mlflow:http://127\.0\.0\.1:\d+: " + REFUSED_503, out), out
    status, _ = _recorded(report)
    assert status == HARNESS_EXIT_STATUS
    assert json.loads((report / "report.json").read_text())["summary"]["passed"] == 1
