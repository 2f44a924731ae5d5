"""The classes of bad input of the fault matrix, and how each bad value is made.

A class applies to the kinds of value it can break (:data:`pytest_novelty.pipeline.values.KINDS`)
and expects one exit status: bad input is 4 (the user can fix the value), a broken environment 8
(a full disk, a server that refuses, hangs or answers garbage). Each ``make`` builds its bad value
in a scratch folder of the case and returns the text given on the command line.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS, USAGE_EXIT_STATUS
from pytest_novelty.pipeline.values import Takes

Make = Callable[["Scratch", Takes, "str | None"], str]


@dataclass
class Scratch:
    """A case's folders: ``root`` (everything the case makes lives under it), and the helpers that
    make what a class needs: a tmpfs (read-only or full), a server."""

    root: Path
    mounts: object = None
    """:class:`tests.file_systems.Mounts` of the case (root only), or None."""
    servers: list[object] = field(default_factory=list)
    """Servers started for the case, stopped when it ends."""

    def path(self, name: str) -> Path:
        return self.root / "given" / name


@dataclass(frozen=True)
class Fault:
    """One class of bad input (see the module doc)."""

    name: str
    kinds: tuple[str, ...]
    make: Make
    status: int = USAGE_EXIT_STATUS
    needs: str = ""
    """``root``: a tmpfs mount; ``valid``: a valid value of the option to break (truncated)."""

    def applies(self, takes: Takes, valid: str | None) -> bool:
        if takes.kind not in self.kinds or (self.needs == "valid" and valid is None):
            return False
        if self.name == "zero":
            return takes.low is not None and takes.low > 0
        if self.name == "negative":
            return takes.low is not None and takes.low >= 0
        if self.name == "above-maximum":
            return takes.high is not None
        if self.name == "not-finite":
            return not takes.whole
        return True


def _given(scratch: Scratch, name: str) -> Path:
    path = scratch.path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _missing(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    return str(_given(scratch, "no-such-" + takes.kind.replace("-", "")))


def _empty(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    path = _given(scratch, "empty.jsonl")
    path.write_bytes(b"")
    return str(path)


def _a_folder(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    path = _given(scratch, "a-folder")
    path.mkdir()
    (path / "kept.txt").write_text("earlier work in the folder\n")
    return str(path)


def _a_file(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    path = _given(scratch, "a-file.txt")
    path.write_text("earlier work, in the way\n")
    return str(path)


def _dangling(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    path = _given(scratch, "dangling")
    path.symlink_to(scratch.root / "given" / "gone")
    return str(path)


def _unreadable(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    if takes.kind == "folder":
        path = _given(scratch, "closed")
        path.mkdir()
        (path / "inside.txt").write_text("x")
    else:
        path = _given(scratch, "closed.jsonl")
        path.write_text('{"a": 1}\n')
    path.chmod(0)
    return str(path)


def _garbage(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    path = _given(scratch, "garbage.bin")
    path.write_bytes(b"\x00\xff\xfe garbage \x1b[2J \x89PNG\r\n" * 64)
    return str(path)


def _truncated(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    assert valid is not None
    raw = Path(valid).read_bytes()
    path = _given(scratch, "cut-" + Path(valid).name)
    path.write_bytes(raw[: max(1, len(raw) * 2 // 3 - 7)])  # mid-record: a line format can tell only then
    return str(path)


def _huge_line(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    path = _given(scratch, "huge.jsonl")
    with path.open("wb") as handle:
        for _ in range(64):
            handle.write(b"a" * 2**17)  # 8 MB on one line, no newline
    return str(path)


def _named_pipe(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    path = _given(scratch, "pipe.jsonl")
    os.mkfifo(path)
    return str(path)


def _read_only(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    mounts = scratch.mounts
    assert mounts is not None
    folder = mounts.tmpfs(_given(scratch, "read-only"), size="1m", read_only=True)  # type: ignore[attr-defined]
    return str(folder / ("out.json" if takes.kind == "out-file" else "dst"))


def _full(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    mounts = scratch.mounts
    assert mounts is not None
    folder = mounts.full(_given(scratch, "full"), size="1m")  # type: ignore[attr-defined]
    return str(folder / ("out.json" if takes.kind == "out-file" else "dst"))


def _missing_parent(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    return str(_given(scratch, "x") / "no" / "such" / "folder" / "out.json")


def _text(value: str) -> Make:
    return lambda scratch, takes, valid: value


def _above(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    assert takes.high is not None
    return str(int(takes.high) + 1) if takes.whole else repr(takes.high * 10 + 1)


def _misspelt(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    return takes.choices[0] + "x"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _refuses(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    return f"http://127.0.0.1:{_closed_port()}/v1"


def _hangs(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    from tests.servers.base import SilentServer

    server = SilentServer("/v1").start()
    scratch.servers.append(server)
    return server.url


def _garbage_server(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    from tests.faults.garbage_server import GarbageServer

    server = GarbageServer().start()
    scratch.servers.append(server)
    return server.url


def _misspelt_spec(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    prefix, _, rest = (valid or "rules").partition(":")
    return f"{prefix[:-1]}x" + (f":{rest}" if rest else "")


def _no_checkpoint(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    path = _given(scratch, "not-a-checkpoint")
    path.mkdir()
    (path / "notes.txt").write_text("no config.json here\n")
    return str(path)


def _garbage_config(scratch: Scratch, takes: Takes, valid: str | None) -> str:
    path = _given(scratch, "garbled-checkpoint")
    path.mkdir()
    (path / "config.json").write_bytes(b"\x00\xff{not json")
    return str(path)


HARNESS = HARNESS_EXIT_STATUS
PATHS_READ = ("file", "folder", "paths")
FAULTS: tuple[Fault, ...] = (
    Fault("not-a-number", ("number",), _text("many")),
    Fault("zero", ("number",), _text("0")),
    Fault("negative", ("number",), _text("-1")),
    Fault("above-maximum", ("number",), _above),
    Fault("not-finite", ("number",), _text("nan")),
    Fault("misspelt-choice", ("choice",), _misspelt),
    Fault("missing", (*PATHS_READ, "model"), _missing),
    Fault("empty", ("file",), _empty),
    Fault("folder-for-a-file", ("file", "out-file"), _a_folder),
    Fault("file-for-a-folder", ("folder", "out-folder"), _a_file),
    Fault("dangling-link", (*PATHS_READ, "out-folder", "model"), _dangling),
    Fault("unreadable", ("file", "folder"), _unreadable, needs="unprivileged"),
    Fault("garbage-bytes", ("file", "paths"), _garbage),
    Fault("truncated", ("file",), _truncated, needs="valid"),
    Fault("huge-line", ("file",), _huge_line),
    Fault("named-pipe", ("file",), _named_pipe),
    Fault("read-only", ("out-folder", "out-file"), _read_only, needs="root"),
    Fault("full-disk", ("out-folder", "out-file"), _full, status=HARNESS, needs="root"),
    Fault("missing-parent", ("out-file",), _missing_parent),
    Fault("not-a-url", ("url",), _text("localhost:8000/v1")),
    Fault("refuses", ("url",), _refuses, status=HARNESS),
    Fault("hangs", ("url",), _hangs, status=HARNESS),
    Fault("answers-garbage", ("url",), _garbage_server, status=HARNESS),
    Fault("misspelt-spec", ("spec",), _misspelt_spec, needs="valid"),
    Fault("not-a-checkpoint", ("model",), _no_checkpoint),
    Fault("garbage-config", ("model",), _garbage_config),
)
"""Every class of bad input the matrix applies (see :class:`Fault`)."""
