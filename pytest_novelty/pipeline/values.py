"""What an option's value is, declared once beside the option, and the one check of it.

Every option of the run's table (:mod:`pytest_novelty.pipeline.options`) and every argument of the
command line's subcommands declares what it takes (:class:`Takes`): a kind of value and, for a
number, its range. Both front ends check every given value by its declaration before anything
else runs (:meth:`Takes.check`: bad input is one line naming the option as the user spelled it,
the value and the fix, exit 4), and the fault matrix of the test suite (``tests/faults/``) reads the
same declarations to know which classes of bad input each option must meet: an option joins the
matrix by being declared, and one that takes none of the classes says why in its declaration.

What the check covers is what a value alone shows: a number's type and range, a choice, a URL's
shape, a path's existence, type and permissions, a destination's parent and a read-only file
system. What only the value's reader can tell (a file's content: garbage, truncated, a huge line;
a server that refuses, hangs or answers garbage; a disk that fills up) is that reader's to refuse,
and the matrix holds each reader to it.
"""

from __future__ import annotations

import argparse
import math
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pytest_novelty.infra.errors import ConfigError, HarnessError, did_you_mean

__all__ = ["KINDS", "OUTPUTS", "Checked", "Takes", "declared", "written_by"]

KINDS = {
    "flag": "nothing: it is on or off",
    "text": "free text that no class of bad input applies to (its ``why`` says what checks it)",
    "number": "a number in a range (``low`` to ``high``; ``whole`` for integers)",
    "choice": "one of ``choices``",
    "file": "an existing file to read",
    "folder": "an existing folder to read",
    "paths": "existing files or folders to read (one or more)",
    "out-file": "a file to write, in an existing folder",
    "out-folder": "a folder to write, created when missing",
    "url": "an http(s) URL of a server",
    "spec": "a spec its reader parses and refuses: a backend's ``NAME:ARGUMENT``, a device, a shard",
    "model": "a checkpoint: a local folder, a hub id, the demo, a served model or files of answers",
}
"""Every kind of value, and what it is."""


@dataclass(frozen=True)
class Takes:
    """What one option takes (see the module doc and :data:`KINDS`)."""

    kind: str
    low: float | None = None
    high: float | None = None
    whole: bool = True
    """A number: whole numbers only."""
    above: bool = False
    """A number: above ``low``, not at it (a fraction in (0, 1])."""
    stdin: bool = False
    """A file: ``-`` reads standard input."""
    what: str = ""
    """A path: what to give, in the messages' fixes (``the folder of suite files (*.toml)``)."""
    choices: tuple[str, ...] = ()
    why: str = ""
    """For ``text``: why none of the classes of bad input applies, and what checks the value."""
    read_by: str = ""
    """The reader that checks the value itself (a run folder's finder, a model's source), in words: the
    check of its kind is left to it, and the matrix holds it to the kind's classes all the same."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind of value {self.kind!r}; one of {', '.join(KINDS)}")
        if self.kind == "text" and not self.why:
            raise ValueError("a text option says why no class of bad input applies to it (why=...)")

    @property
    def range_words(self) -> str:
        """``a whole number from 1 to 1,000,000``, ``a number above 0``."""
        what = "a whole number" if self.whole else "a number"
        low, high = (None if b is None else (f"{b:,.0f}" if self.whole else f"{b:,g}") for b in (self.low, self.high))
        if self.above and high is not None:
            return f"{what} above {low} and at most {high}"
        if low is not None and high is not None:
            return f"{what} from {low} to {high}"
        return f"{what} of at least {low}" if low is not None else f"{what} of at most {high}" if high else what

    def check(self, value: Any, option: str, *, space: bool = False) -> Any:
        """``value`` as the option uses it (a number converted; anything else as given), or one
        :class:`ConfigError` line about ``option`` (spelled as the user typed it). ``space``: a
        destination on a full file system is a :class:`HarnessError` now (the run's own folders
        are probed by the preflight instead, which says it as a run's harness error)."""
        if value is None or value is False or value is True or self.read_by:
            return value
        if isinstance(value, list):
            return [self.check(v, option, space=space) for v in value]
        if self.kind in ("out-file", "out-folder"):
            return getattr(self, "_" + self.kind.replace("-", "_"))(value, option, space)
        check = getattr(self, "_" + self.kind.replace("-", "_"), None)
        return value if check is None else check(value, option)

    def argument(self, *, append: bool = False) -> dict[str, Any]:
        """The ``add_argument`` keywords of a command-line argument declared so: a :class:`Checked`
        action (``append``: each given value is added to a list)."""
        return {"action": Checked, "takes": self, "append": append}

    # -- one check per kind ---------------------------------------------------------------------

    def _number(self, value: Any, option: str) -> float | int:
        text = str(value).strip()
        try:
            number: float | int = int(text) if self.whole else float(text)
        except ValueError:
            what = "a whole number" if self.whole else "a number"
            raise ConfigError(f"{text!r} is not {what}; give {self.range_words}", field=option) from None
        below = self.low is not None and (number <= self.low if self.above else number < self.low)
        if not math.isfinite(number) or below or (self.high is not None and number > self.high):
            raise ConfigError(f"{text} is out of range: give {self.range_words}", field=option)
        return number

    def _choice(self, value: Any, option: str) -> str:
        text = str(value)
        if text not in self.choices:
            raise ConfigError(f"{text!r} is not one of {', '.join(self.choices)}{did_you_mean(text, self.choices)}",
                              field=option)
        return text

    def _url(self, value: Any, option: str) -> str:
        text = str(value)
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"{text!r} is not an http(s) URL of a server; give one such as http://HOST:PORT/v1",
                              field=option)
        try:
            parts.port  # noqa: B018  (a port that is no number raises here)
        except ValueError:
            raise ConfigError(f"{text!r} has a port that is no number; give one such as http://HOST:8000/v1",
                              field=option) from None
        return text

    def _file(self, value: Any, option: str) -> str:
        if self.stdin and value == "-":
            return "-"
        path = _existing(str(value), option, "file")
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise ConfigError("a folder, not a file; give a file", path=value, field=option)
        if not stat.S_ISREG(mode):
            raise ConfigError(f"{_special(mode)}, not a regular file; give a file", path=value, field=option)
        _readable(path, option)
        if path.stat().st_size == 0:
            raise ConfigError("an empty file; give the file in full", path=value, field=option)
        return str(value)

    def _folder(self, value: Any, option: str) -> str:
        path = _existing(str(value), option, "folder", self.what)
        if not path.is_dir():
            raise ConfigError(f"a file, not a folder; give {self.what or 'a folder'}", path=value, field=option)
        _readable(path, option)
        return str(value)

    def _paths(self, value: Any, option: str) -> str:
        path = _existing(str(value), option, "file or folder")
        return self._folder(value, option) if path.is_dir() else self._file(value, option)

    def _out_folder(self, value: Any, option: str, space: bool) -> str:
        path = Path(str(value)).expanduser()
        if path.is_symlink() and not path.exists():
            raise ConfigError(f"a dangling link (to {os.readlink(path)}); give a folder", path=value, field=option)
        if path.exists() and not path.is_dir():
            raise ConfigError("a file is in the way of the folder; give a folder", path=value, field=option)
        _writable(path, path if path.exists() else _nearest(path), self.what or "folder", option, space)
        return str(value)

    def _out_file(self, value: Any, option: str, space: bool) -> str:
        path = Path(str(value)).expanduser()
        if path.is_dir():
            raise ConfigError("a folder, not a file; give the file to write", path=value, field=option)
        if not path.parent.is_dir():
            raise ConfigError(f"its folder {path.parent} does not exist; create it first, or give a file in an "
                              "existing folder", path=value, field=option)
        _writable(path, path.parent, f"folder of {self.what or 'the file'}", option, space)
        return str(value)


def _existing(text: str, option: str, what: str, fix: str = "") -> Path:
    path = Path(text).expanduser()
    if path.is_symlink() and not path.exists():
        raise ConfigError(f"a dangling link (to {os.readlink(path)}); give the {what} itself, or restore what the "
                          "link points to", path=text, field=option)
    if not path.exists():
        raise ConfigError(f"no such {what}; check the path, or give {fix or 'an existing ' + what}", path=text,
                          field=option)
    return path


def _special(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def _readable(path: Path, option: str) -> None:
    """Read the file's first byte or list the folder (``os.access`` answers for the real user, and
    root's overrides may be dropped)."""
    try:
        if path.is_dir():
            os.scandir(path).close()
        else:
            with path.open("rb") as handle:
                handle.read(1)
    except OSError as exc:
        raise ConfigError(f"cannot be read: {(exc.strerror or str(exc)).lower()}; make it readable, or give another",
                          path=path, field=option) from None


def _nearest(path: Path) -> Path:
    """The nearest folder above ``path`` that exists (where a missing folder would be created)."""
    return next((parent for parent in path.absolute().parents if parent.exists()), Path("/"))


def _writable(given: Path, folder: Path, what: str, option: str, space: bool) -> None:
    """The folder ``folder`` (``given`` itself, or where a missing ``given`` would be made) can be written."""
    where = "" if folder == given else f" at {folder}"  # the nearest existing folder, or a file's own
    if _read_only(folder):
        cause = "a read-only file system"
    elif not os.access(folder, os.W_OK | os.X_OK):
        cause = "no permission to write there"
    elif space and _free_bytes(folder) < FULL:
        raise HarnessError(f"{given}: {option}: the {what} cannot be written: no space left on the device{where}; "
                           "free some space, or give another folder")
    else:
        return
    raise ConfigError(f"the {what} cannot be written: {cause}{where}; give a writable folder", path=given,
                      field=option)


FULL = 64 * 1024
"""Free bytes below which a destination's file system counts as full before anything is written to it
(found before the work whose result would not fit, not after)."""


def _free_bytes(folder: Path) -> int:
    try:
        stats = os.statvfs(folder)
    except OSError:
        return FULL
    return stats.f_bavail * stats.f_frsize


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


class Checked(argparse.Action):
    """An argument checked by its declaration as argparse reads it (argparse's documented seam for
    what happens to a value): bad input raises the :class:`ConfigError` line naming the argument as
    typed, out of ``parse_args``, for the command line to print like any other (``PATH: --out: why``)."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, takes: Takes, append: bool = False,
                 **settings: Any) -> None:
        super().__init__(option_strings, dest, **settings)
        self.takes, self.append = takes, append

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        name = option_string or str(self.metavar or self.dest)
        value = self.takes.check(values, name, space=True)
        if self.takes.kind in ("out-file", "out-folder"):  # what a failed write names (see written_by)
            vars(namespace).setdefault(OUTPUTS, {})[str(value)] = name
        if self.append:
            value = [*(getattr(namespace, self.dest, None) or []), value]
        setattr(namespace, self.dest, value)


OUTPUTS = "_novelty_outputs"
"""The namespace entry where :class:`Checked` keeps each destination the user named, and its argument."""


def written_by(args: Any, exc: OSError) -> tuple[str, str] | None:
    """(destination, argument) when the write that failed with ``exc`` was to a file or folder the user
    named on the command line, or beside it (a temporary file, a staging folder); else None."""
    named = getattr(args, OUTPUTS, None) or {}
    if not exc.filename:  # a write that ran out of space says no file: the one destination, if one
        return next(iter(named.items())) if len(named) == 1 else None
    failed = Path(str(exc.filename)).absolute()
    beside = (item for item in named.items() if failed.is_relative_to(Path(item[0]).expanduser().absolute().parent))
    return next(beside, None)


def declared(action: argparse.Action) -> Takes | None:
    """What an argparse argument is declared to take: its :class:`Checked` declaration, a
    flag's ``flag``; None for an argument that declares nothing (the fault matrix refuses those)."""
    if isinstance(action, Checked):
        return action.takes
    if action.nargs == 0:  # store_true and the like
        return Takes("flag")
    return None
