"""Every declared option and argument of both front ends against every class of bad input it can take.

Each case gives one option one bad value (:mod:`tests.faults.faults`) in an otherwise valid call
and holds the run to what bad input must get: the documented exit status (4 for bad input, 8 for
a broken environment), one line naming the option as given, the value and the fix, no traceback
and no INTERNALERROR, nothing written outside the run's own folders, and nothing that was there
before lost or changed. pytest's cases run in this process (``pytester.runpytest_inprocess``), the
command line's through its ``main``; a case that needs a read-only or full disk mounts a small
tmpfs (root only), one that needs an unreadable file runs as an unprivileged user in a forked child.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_novelty.cli import build_parser, main
from pytest_novelty.pipeline.options import OPTIONS
from tests.faults.faults import Scratch
from tests.faults.matrix import CLI, PYTEST, Base, Case, Target, cases, command_targets, table_targets, undeclared

REPO = Path(__file__).resolve().parents[2]
ROOT = os.geteuid() == 0
FIX = re.compile(r"\b(give|use|pass|create|make|remove|drop|set|check|choose|restore|install|run|delete|free|"
                 r"point|name|write|fix|start|serve|try|copy|pack|rename|wait|save)\b|did you mean|\?\)?$", re.I)
"""Words a line uses to say what to do, or a question it ends on (is the server running and the URL right?)."""


# -- what valid calls look like ------------------------------------------------------------------

VALID_TABLE = {
    "model": "demo",
    "baseline-model": "demo-early",
    "originality": "infini-gram:{index}",
    "judge": "rules",
    "log": "tensorboard:{scratch}/tb",
    "device": "cpu",
}
"""A valid value of table options whose classes need one (misspelling a spec)."""
TABLE_CONTEXT = {
    "model-base-url": ("--model", "openai:demo-model", "--originality", "infini-gram:{index}"),
    "judge-base-url": ("--judge", "openai:judge-model"),
    "adaptive-minutes": ("--adaptive", "100"),
    "model-revision": ("--model", "org/name"),
    "snapshot-dir": ("--snapshot-update",),
}
"""Other options that make a table option meaningful (given in each front end's spelling)."""
BASE_PYTEST = ("--model=demo", "-k", "story", "-p", "no:cacheprovider", "-q")
BASE_RUN = ("run", "--model", "demo", "--suite", "story")
BASES: dict[tuple[str, ...], Base] = {
    ("cache", "info"): Base(("cache", "info")),
    ("cache", "clear"): Base(("cache", "clear", "--cache", "{scratch}/cleared")),
    ("cache", "merge"): Base(("cache", "merge", "{cache}", "--into", "{scratch}/merged"), valid={"SRC": "{cache}"}),
    ("cache", "pack"): Base(("cache", "pack", "{cache}", "--out", "{scratch}/out.tar.zst"), valid={"DIR": "{cache}"}),
    ("cache", "unpack"): Base(("cache", "unpack", "{pack}", "--into", "{scratch}/unpacked"), valid={"FILE": "{pack}"},
                              statuses={("FILE", "truncated"): 8}),
    ("demo", "build"): Base(("demo", "build")),
    ("demo", "path"): Base(("demo", "path")),
    ("index", "build"): Base(("index", "build", "{corpus}", "--out", "{scratch}/index"), valid={"CORPUS": "{corpus}"}),
    ("originality",): Base(("originality", "--index", "infini-gram:{index}", "{texts}"),
                           valid={"--index": "infini-gram:{index}", "INPUT": "{texts}"}),
    ("judge",): Base(("judge", "{pairs}", "--task", "story"), valid={"INPUT.jsonl": "{pairs}", "--judge": "rules"},
                     context={"--base-url": ("--judge", "openai:judge-model")}),
    ("judge", "calibrate"): Base(("judge", "calibrate", "{graded}", "--task", "story"),
                                 valid={"FILE": "{graded}", "--judge": "rules"},
                                 context={"--base-url": ("--judge", "openai:judge-model")}),
    ("judge", "calibration-file"): Base(("judge", "calibration-file", "--from", "noveltybench:{nb}", "--out",
                                         "{scratch}/graded.jsonl"), valid={"--from": "noveltybench:{nb}"}),
    ("answers", "export"): Base(("answers", "export", "--model", "demo", "--suite", "story", "--out",
                                 "{scratch}/answers.jsonl"), valid={"--model": "demo"}),
    ("tail", "build"): Base(("tail", "build", "suites/story.toml", "--pool", "demo", "--alpha", "0.1", "--out",
                             "{scratch}/tail.json"), valid={"--pool": "demo", "--originality": "infini-gram:{index}"}),
    ("tail", "agreement"): Base(("tail", "agreement", "suites/story.toml", "--model", "demo", "--model", "demo-early",
                                 "--model", "x={noisy}", "--reference", "{reference}", "--originality",
                                 "infini-gram:{index}"),
                                valid={"--reference": "{reference}", "--model": "demo",
                                       "--originality": "infini-gram:{index}"}),
}
"""A valid call of each subcommand, and valid values of its arguments (``{name}``: a file of
:func:`valid_files`)."""


@pytest.fixture(scope="session")
def valid_files(tmp_path_factory: pytest.TempPathFactory, demo_assets: Path) -> dict[str, str]:
    """A valid file for every file-taking argument: a cache and its pack, JSON Lines of texts, of
    (prompt, response) pairs and of graded pairs, a corpus, a reference ranking, NoveltyBench sample data."""
    from pytest_novelty.infra.cache import Cache
    from pytest_novelty.infra.cache_merge import pack_cache

    folder = tmp_path_factory.mktemp("valid")
    cache = folder / "cache"
    Cache(cache).namespace("generations").put("k", {"answer": "a story"})
    pack_cache(cache, folder / "valid.tar.zst")
    rows = [{"id": f"p{i}", "prompt": f"Once upon a time {i}", "response": "there was a small red fox.",
             "human": i % 3, "text": "there was a small red fox who ran"} for i in range(6)]  # fmt: skip
    for name in ("texts", "pairs", "graded"):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"text": f"a fox ran home {i} times"}) + "\n"
                                                 for i in range(2000)))  # fmt: skip
    (folder / "reference.json").write_text(json.dumps({"ranks": {"demo": 1, "demo-early": 3, "x": 2}}))
    (folder / "nb.jsonl").write_text("".join(json.dumps({"id": str(i), "prompt": "p", "generations": ["a", "b"],
                                                         "scores": [1, 2]}) + "\n" for i in range(3)))  # fmt: skip
    import sys

    sys.path.insert(0, str(REPO))
    from fixtures.noisy_checkpoint import noisy_copy

    noisy_copy(demo_assets / "demo", folder / "noisy")
    files = {name: str(folder / f"{name}.jsonl") for name in ("texts", "pairs", "graded", "corpus", "nb")}
    return {**files, "cache": str(cache), "pack": str(folder / "valid.tar.zst"), "reference": str(folder /
            "reference.json"), "index": str(demo_assets / "index"), "noisy": str(folder / "noisy")}  # fmt: skip


# -- the matrix ------------------------------------------------------------------------------------


def _table_targets() -> list[Target]:
    return table_targets(OPTIONS, valid=VALID_TABLE.get, context=lambda name: TABLE_CONTEXT.get(name, ()))


def _covered_by_the_table(command: tuple[str, ...], action: object) -> bool:
    """``run`` and the table's options other subcommands take (destination ``novelty_NAME``): the
    table's rows cover them, through the one check of their declaration both front ends make."""
    return command == ("run",) or str(getattr(action, "dest", "")).startswith("novelty_")


def _command_targets() -> list[Target]:
    return command_targets(build_parser(), BASES, skip=_covered_by_the_table)


CASES = cases([*_table_targets(), *_command_targets()])


def test_every_option_and_argument_declares_what_it_takes() -> None:
    """A new option or argument joins the matrix by being declared; one that declares nothing fails here."""
    missing = undeclared(build_parser())
    missing += [f"--novelty-{o.name} (the options table)" for o in OPTIONS if getattr(o, "takes", None) is None]
    assert not missing, "declare what these take (pytest_novelty.pipeline.values.Takes):\n" + "\n".join(missing)


def test_every_subcommand_has_a_valid_call_to_break() -> None:
    commands = {command for target in _command_targets() for command in [target.command]}
    assert not commands - set(BASES), f"tests/faults: no valid call of {sorted(commands - set(BASES))}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gets_one_line_and_its_exit_status(
    case: Case, tmp_path: Path, valid_files: dict[str, str], demo_run_cache: Path, pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problems = run_case(case, tmp_path, valid_files, demo_run_cache, pytester, monkeypatch)
    assert not problems, f"{case.id}:\n" + "\n".join(problems)


# -- running one case ------------------------------------------------------------------------------


def _fill(text: str, files: dict[str, str], scratch: Path) -> str:
    return text.format(scratch=scratch, **files)


def _argv(case: Case, value: str, files: dict[str, str], scratch: Path) -> list[str]:
    """The call of the case: its front end's valid call, the option's context, and the bad value."""
    target = case.target
    fill = lambda text: _fill(text, files, scratch)  # noqa: E731
    if target.front == PYTEST:
        base = [a for a in BASE_PYTEST if not (target.flag == "--novelty-model" and a.startswith("--model"))]
        context = [f"--novelty-{c[2:]}" if c.startswith("--") and c != "--snapshot-update" else c  # syrupy's own
                   for c in target.context]
        if target.flag in ("--novelty-model-series", "--novelty-model-base-url", "--novelty-model-revision"):
            base = [a for a in base if not a.startswith("--model")]
        return [*base, *map(fill, context), f"{target.flag}={value}"]
    if target.command == ("run",):
        base = list(BASE_RUN)
        if target.flag in ("--model", "--model-series") or "--model" in target.context:
            base = ["run", "--suite", "story"]
        return [*base, *map(fill, target.context), target.flag, value]
    args = [fill(a) for a in BASES[target.command].args]
    context = [fill(a) for a in target.context]
    if target.positional:
        valid = BASES[target.command].valid.get(target.flag)
        given = fill(valid) if valid else None
        if given in args:
            args[args.index(given)] = value
        else:
            args.append(value)
        return [*args, *context]
    if target.flag in args:
        at = args.index(target.flag)
        return [*args[:at], *args[at + 2:], *context, target.flag, value]
    return [*args, *context, target.flag, value]


def _tree(root: Path, skip: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for path in root.rglob("*"):
        if path.is_relative_to(skip) or path.is_symlink():
            continue
        with contextlib.suppress(OSError):
            info = path.stat()
            found[str(path.relative_to(root))] = (info.st_size, info.st_mtime_ns) if path.is_file() else (-1, 0)
    return found


def run_case(case: Case, tmp_path: Path, files: dict[str, str], cache: Path, pytester: pytest.Pytester,
             monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run one case; what it did wrong (empty when it met every rule)."""
    from tests.file_systems import mounts

    fault, target = case.fault, case.target
    if fault.needs == "root" and not ROOT:
        pytest.skip("a read-only or full tmpfs needs root to mount")
    if fault.name == "named-pipe" and sys.platform == "win32":
        pytest.skip("no named pipes")
    scratch_root = tmp_path / "case"
    (scratch_root / "home").mkdir(parents=True)
    (scratch_root / "work").mkdir()
    (scratch_root / "work" / "earlier.txt").write_text("what an earlier run left\n")
    monkeypatch.setenv("HOME", str(scratch_root / "home"))
    monkeypatch.setenv("PYTEST_NOVELTY_CACHE", str(cache))
    monkeypatch.setenv("PYTEST_NOVELTY_PREFLIGHT_TIMEOUT", "2")  # a silent server's case: 2 s, not the 10 s default
    with mounts() as mounted, _stopped_servers() as servers:
        scratch = Scratch(scratch_root, mounted, servers)
        valid = _fill(target.valid, files, scratch_root) if target.valid else None
        value = fault.make(scratch, target.takes, valid)
        argv = _argv(case, value, files, scratch_root)
        before = _tree(scratch_root, scratch_root / "given" / "full")
        if AGAINST:
            status, out, err = _against(case, argv, pytester.path, unprivileged=fault.needs == "unprivileged" and ROOT)
        elif fault.needs == "unprivileged" and ROOT:
            status, out, err = _without_overrides(case, argv, scratch_root)
        elif target.front == PYTEST:
            result = pytester.runpytest_inprocess(*argv)
            status, out, err = int(result.ret), result.stdout.str(), result.stderr.str()
        else:
            status, out, err = _cli(argv, monkeypatch=monkeypatch)
        after = _tree(scratch_root, scratch_root / "given" / "full")
    return judge(case, value, status, out, err, before, after)


@contextlib.contextmanager
def _stopped_servers() -> Iterator[list[object]]:
    servers: list[object] = []
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()  # type: ignore[attr-defined]


def _cli(argv: list[str], *, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.chdir(REPO)  # the subcommands' valid calls name the repository's suites
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exc:  # argparse's own exit
            status = int(exc.code or 0)
    return status, out.getvalue(), err.getvalue()


AGAINST = os.environ.get("NOVELTY_FAULTS_AGAINST", "")
"""Another checkout whose code the cases run against, each in a child process (how the matrix measured
the code before its fixes: ``NOVELTY_FAULTS_AGAINST=../old pytest tests/faults``); empty: this code."""


def _against(case: Case, argv: list[str], here: Path, *, unprivileged: bool) -> tuple[int, str, str]:
    import subprocess

    front = ["-m", "pytest", "-p", "no:cacheprovider"] if case.target.front == PYTEST else ["-m", "pytest_novelty.cli"]
    try:
        done = subprocess.run([sys.executable, *front, *argv], cwd=here if case.target.front == PYTEST else AGAINST,
                              env={**os.environ, "PYTHONPATH": AGAINST}, capture_output=True, text=True, timeout=120,
                              preexec_fn=_drop_file_overrides if unprivileged else None, check=False)  # fmt: skip
    except subprocess.TimeoutExpired as exc:  # the code under measure hung: a failed case, not a stuck matrix
        return -9, str(exc.stdout or ""), f"still running after {exc.timeout:g} s"
    return done.returncode, done.stdout, done.stderr


def _drop_file_overrides() -> None:
    """Root's file-permission overrides (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) dropped from this
    process's effective capabilities: from here on it reads what the files' modes let their owner read."""
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    libc = ctypes.CDLL(None, use_errno=True)
    header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    data[0].effective &= ~((1 << 1) | (1 << 2))
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _without_overrides(case: Case, argv: list[str], scratch: Path) -> tuple[int, str, str]:
    """The case in a forked child that cannot override file permissions (root reads every file)."""
    outputs = [scratch / "out.txt", scratch / "err.txt", scratch / "status.txt"]
    pid = os.fork()
    if pid == 0:  # the child: never returns into the test run
        try:
            _drop_file_overrides()
            with outputs[0].open("w") as o, outputs[1].open("w") as e, contextlib.redirect_stdout(o), \
                    contextlib.redirect_stderr(e):
                if case.target.front == PYTEST:
                    status = int(pytest.main(argv, plugins=[]))
                else:
                    try:
                        status = main(argv)
                    except SystemExit as exc:
                        status = int(exc.code or 0)
            outputs[2].write_text(str(status))
        except BaseException as exc:  # the child's own failure, for the parent to show
            with outputs[1].open("a") as e:
                e.write(f"the child failed: {exc!r}\n{traceback.format_exc()}")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    texts = [p.read_text() if p.exists() else "" for p in outputs]
    for path in outputs:
        path.unlink(missing_ok=True)
    return int(texts[2] or -1), texts[0], texts[1]


def judge(case: Case, value: str, status: int, out: str, err: str, before: dict[str, tuple[int, int]],
          after: dict[str, tuple[int, int]]) -> list[str]:
    """Every rule the case broke."""
    text = out + "\n" + err
    problems = []
    expected = BASES.get(case.target.command, Base(())).statuses.get((case.target.flag, case.fault.name),
                                                                       case.fault.status)
    if status != expected:
        problems.append(f"exit status {status}, expected {expected}")
    for word in ("Traceback", "INTERNALERROR"):
        if word in text:
            problems.append(f"{word} in the output")
    lines = [line for line in text.splitlines() if re.search(r"\berror\b|^ERROR:", line, re.I)]
    named = [line for line in lines if _names_value(line, value)]
    if len(named) != 1:
        problems.append(f"{len(named)} error lines name the value (one expected): {lines[:4]}")
    else:
        line = named[0]
        if not case.target.positional and not _names_option(line, case.target):
            problems.append(f"the line does not name {case.target.flag}: {line}")
        if not FIX.search(line.split(value, 1)[1] if value in line else line):
            problems.append(f"the line says no fix: {line}")
    lost = sorted(k for k, v in before.items() if after.get(k) != v and not k.startswith("home"))
    if lost:
        problems.append(f"changed or lost: {lost[:5]}")
    new = sorted(k for k in after if k not in before and not k.startswith(("home", "given/read-only")))
    if new:
        problems.append(f"written outside the run's own folders: {new[:5]}")
    if problems:
        problems.append("output: " + text[-1500:])
    return problems


def _names_value(line: str, value: str) -> bool:
    return value in line or (len(value) > 12 and Path(value).name in line)


def _names_option(line: str, target: Target) -> bool:
    flags = {target.flag}
    if target.front == PYTEST:
        from pytest_novelty.pipeline.options import OPTIONS

        flags |= {o.short for o in OPTIONS if o.long == target.flag and o.short}
    return any(flag in line for flag in flags)


def test_a_planted_option_without_handling_of_its_own_fails_the_matrix(
    tmp_path: Path, valid_files: dict[str, str], demo_run_cache: Path, pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new option that takes a file, declared in a temporary table and read by nobody, meets the
    matrix: the value checks its declaration buys pass, the classes only a reader can refuse fail."""
    from dataclasses import replace

    from pytest_novelty.pipeline import options as table
    from pytest_novelty.pipeline.values import Takes

    planted = replace(table.by_name("report"), name="planted-file", metavar="FILE", short=None, ini=None,
                      field=None, takes=Takes("file"), help="a planted option that nothing reads")
    monkeypatch.setattr(table, "OPTIONS", (*table.OPTIONS, planted))
    targets = [t for t in table_targets([planted], valid=lambda _: None, context=lambda _: ()) if t.front == CLI]
    outcomes = {c.fault.name: run_case(c, tmp_path / c.fault.name, valid_files, demo_run_cache, pytester, monkeypatch)
                for c in cases(targets)}
    assert not outcomes["missing"] and not outcomes["folder-for-a-file"]  # the declaration's own checks
    assert outcomes["garbage-bytes"] and outcomes["huge-line"]  # nobody reads the file: the run goes on
