"""Real folders that cannot be written, for the tests of the file system's faults: tmpfs mounts
made read-only or filled to the last pages, and a run as an unprivileged user for "no permission".

Mounting needs root (``mount -t tmpfs``); where it is not permitted the test is skipped, with the
reason. Every mount is unmounted when the test ends, whatever happened.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

PAGE = 4096
"""tmpfs counts its space in pages: every file with data takes at least one."""


def _mount(folder: Path, options: str) -> None:
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or 'mount failed'}): these tests need root")


def _unmount(folder: Path) -> None:
    subprocess.run(["umount", str(folder)], capture_output=True, check=False)


class Mounts:
    """tmpfs folders made for one test; unmounted by :func:`mounts` when it ends."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack

    def tmpfs(self, folder: Path, *, size: str = "2m", read_only: bool = False) -> Path:
        """A fresh tmpfs at ``folder`` (created when missing)."""
        folder.mkdir(parents=True, exist_ok=True)
        _mount(folder, f"size={size}" + (",ro" if read_only else ""))
        self._stack.callback(_unmount, folder)
        return folder

    def full(self, folder: Path, *, size: str = "2m", free_pages: int = 0) -> Path:
        """A tmpfs at ``folder`` filled by one file until ``free_pages`` pages are left."""
        self.tmpfs(folder, size=size)
        fill(folder, free_pages)
        return folder

    def remount_read_only(self, folder: Path) -> None:
        """Make a mounted tmpfs read-only, its files kept (a warm cache on a read-only disk)."""
        done = subprocess.run(["mount", "-o", "remount,ro", str(folder)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.skip(f"cannot remount {folder} read-only: {done.stderr.strip()}")


def fill(folder: Path, free_pages: int = 0) -> Path:
    """Fill the file system of ``folder`` with one file (``.fill``) until ``free_pages`` pages are
    free; returns the file (removing it frees the space again)."""
    stats = os.statvfs(folder)
    spare = stats.f_bavail * stats.f_frsize - free_pages * PAGE
    filler = folder / ".fill"
    with filler.open("wb") as fh:
        try:
            fh.write(b"\0" * max(0, spare))
            fh.flush()
        except OSError:
            pass  # the last partial page: the disk is as full as it gets
    return filler


@contextmanager
def mounts() -> Iterator[Mounts]:
    """A :class:`Mounts` whose folders are unmounted on exit."""
    with ExitStack() as stack:
        yield Mounts(stack)


def unprivileged(command: Sequence[str]) -> list[str]:
    """``command`` run as an unprivileged user, so a folder without write permission refuses it
    (root writes anywhere): as it is when this process is not root, through ``setpriv`` as
    ``nobody`` when it is; skips the test when neither can be done."""
    if os.geteuid() != 0:
        return list(command)
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv is not installed: no user to whom chmod denies writing")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *command]


def world_readable_folder() -> Path:
    """A new folder under ``/tmp`` that an unprivileged user may enter (pytest's own are root's only)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="novelty-perm-", dir="/tmp"))
    folder.chmod(0o755)
    return folder
