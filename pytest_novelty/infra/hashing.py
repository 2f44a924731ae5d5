"""File digests at the disk's speed, remembered by stat, and the content identity of a data folder.

BLAKE3 runs at about 5 GB/s a core here against SHA-256's 1.9 (which cannot split a file):
checkpoints use BLAKE3, what records SHA-256 (an index's checksums, the demo's) keeps it. A
:class:`Memo` (a cache namespace, :func:`memo_at`) remembers each digest under the file's stat
(:func:`stat_key`), so an unchanged file is read once.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from pytest_novelty.infra.cache import Cache, Namespace
from pytest_novelty.infra.progress import notice

__all__ = ["Memo", "content_identity", "data_files", "file_digest", "hash_files", "identity_memo", "memo_at",
           "stat_key"]

READ_SIZE = 4 << 20  # bytes per read: large enough for the disk, small enough to be hashed from the CPU's cache
DIGESTS = ("sha256", "blake3")
"""The file digests :func:`hash_files` computes: SHA-256 (index checksums) and BLAKE3 (checkpoints)."""
READ_AHEAD = 4  # blocks of one file read at once, ahead of the hashing (the disk sees several requests)
BLAKE3_FILES = 2  # files hashed at once with BLAKE3 (each block is already hashed on every core)
REPORT_AFTER = 1.0  # seconds of hashing before progress is shown


class Memo(Protocol):
    """Where file digests are remembered between runs."""

    def get(self, key: str) -> Any | None:
        """The value stored under ``key``, or None."""
        ...

    def put(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``."""
        ...


def memo_at(folder: Path) -> Namespace:
    """A memo of file digests kept in ``folder``: a namespace of the one cache."""
    folder = Path(folder)
    return Cache(folder.parent).namespace(folder.name)


def identity_memo(cache_dir: Path) -> Namespace:
    """The memo of file digests inside a pytest-novelty cache folder."""
    return memo_at(Path(cache_dir) / "identity")


def stat_key(path: Path, algorithm: str = "sha256") -> str:
    """The memo key of a file's ``algorithm`` digest: the algorithm (so one kind is never read back as
    another), real path, size, mtime_ns, ctime_ns (which tools that restore mtimes cannot set back)
    and inode (new for a file replaced by a rename)."""
    st = os.stat(path)
    return f"{algorithm}\0{os.path.realpath(path)}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}"


def _hasher(algorithm: str) -> Any:
    """A fresh hash object of ``algorithm`` (see :data:`DIGESTS`)."""
    if algorithm == "sha256":
        return hashlib.sha256()
    if algorithm == "blake3":
        import blake3

        # Rust threads hash the chunks of one large update in parallel (the GIL is released).
        return blake3.blake3(max_threads=blake3.blake3.AUTO)
    raise ValueError(f"unknown digest {algorithm!r}; one of {', '.join(DIGESTS)}")


def file_digest(path: Path, algorithm: str = "sha256", on_bytes: Callable[[int], None] | None = None) -> str:
    """The ``algorithm`` digest (hex) of a whole file, read in :data:`READ_SIZE` blocks by
    :data:`READ_AHEAD` helper threads at their own offsets while this thread hashes in order (both
    release the GIL, so a file takes the slower of the two, not the sum)."""
    digest = _hasher(algorithm)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        size = os.fstat(fd).st_size
        if hasattr(os, "posix_fadvise"):
            with contextlib.suppress(OSError):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        blocks = -(-size // READ_SIZE)
        depth = max(1, min(READ_AHEAD, blocks))
        free = [bytearray(READ_SIZE) for _ in range(depth)]

        def read(block: int, buffer: bytearray) -> tuple[bytearray, int]:
            return buffer, _read_at(fd, buffer, block * READ_SIZE)

        with ThreadPoolExecutor(max_workers=depth, thread_name_prefix="novelty-read") as reader:
            pending = collections.deque(reader.submit(read, b, free.pop()) for b in range(depth))
            following = depth
            while pending:
                buffer, n = pending.popleft().result()
                digest.update(memoryview(buffer)[:n])
                if on_bytes is not None:
                    on_bytes(n)
                if following < blocks:
                    pending.append(reader.submit(read, following, buffer))
                    following += 1
        # A file that grew while it was read gets the bytes past the size it had (rare; exact).
        offset = blocks * READ_SIZE
        tail = bytearray(READ_SIZE)
        while n := _read_at(fd, tail, offset):
            digest.update(memoryview(tail)[:n])
            offset += n
            if on_bytes is not None:
                on_bytes(n)
    finally:
        os.close(fd)
    return str(digest.hexdigest())


def _read_at(fd: int, buffer: bytearray, offset: int) -> int:
    """Fill ``buffer`` from ``offset`` of ``fd`` (short only at the end of the file); the bytes read."""
    view = memoryview(buffer)
    done = 0
    while done < len(buffer):
        n = _pread_into(fd, view[done:], offset + done)
        if n == 0:
            break
        done += n
    return done


def _pread_into(fd: int, view: memoryview, offset: int) -> int:
    """One positioned read into ``view`` (no copy where the system has ``preadv``)."""
    if hasattr(os, "preadv"):
        return os.preadv(fd, [view], offset)
    data = os.pread(fd, len(view), offset)
    view[: len(data)] = data
    return len(data)


class _Progress:
    """Counts hashed bytes; reports through ``on_progress``, or says so (:func:`notice`) once hashing
    passes a second, unless ``quiet``."""

    def __init__(self, what: str, total: int, on_progress: Callable[[int, int], None] | None, quiet: bool) -> None:
        self.what, self.total, self.on_progress, self.quiet = what, total, on_progress, quiet
        self.done = 0
        self.start = time.perf_counter()
        self.announced = False
        self.lock = threading.Lock()

    def add(self, n: int) -> None:
        with self.lock:
            self.done += n
            done = self.done
            announce = not self.announced and time.perf_counter() - self.start > REPORT_AFTER
            self.announced = self.announced or announce
        if self.on_progress is not None:
            self.on_progress(done, self.total)
        elif announce and not self.quiet:
            notice(f"[novelty] hashing {self.what}: {self.total / 1e9:.1f} GB (remembered afterwards)")

    def finish(self) -> None:
        if self.announced and self.on_progress is None and not self.quiet:
            seconds = time.perf_counter() - self.start
            notice(f"[novelty] hashed {self.what} in {seconds:.1f}s ({self.done / 1e6 / seconds:,.0f} MB/s)")


def hash_files(
    files: list[Path], *, memo: Memo | None = None, what: str = "files",
    on_progress: Callable[[int, int], None] | None = None, quiet: bool = False, algorithm: str = "sha256",
) -> dict[Path, str]:
    """The ``algorithm`` digest of each file, from ``memo`` where its stat is unchanged, else read,
    largest first: SHA-256 on up to two threads per core, BLAKE3 (every core per block)
    :data:`BLAKE3_FILES` files at a time. ``on_progress(done, total)`` hears of the bytes; without it
    a :func:`notice` comes once hashing passes a second, and when it ends (none when ``quiet``).
    """
    if algorithm not in DIGESTS:
        raise ValueError(f"unknown digest {algorithm!r}; one of {', '.join(DIGESTS)}")
    keys = {f: stat_key(f, algorithm) for f in files}
    digests: dict[Path, str] = {}
    for f in files:
        known = None if memo is None else memo.get(keys[f])
        if isinstance(known, str) and len(known) == 64:
            digests[f] = known
    todo = sorted((f for f in files if f not in digests), key=lambda f: -f.stat().st_size)
    if not todo:
        return digests
    progress = _Progress(what, sum(f.stat().st_size for f in todo), on_progress, quiet)
    if algorithm == "blake3":
        workers = min(len(todo), BLAKE3_FILES)
    else:  # twice as many threads as cores, so that one thread's wait for the disk overlaps another's hashing
        workers = max(1, min(len(todo), 2 * (os.cpu_count() or 1), 16))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="novelty-hash") as pool:
        hashed = pool.map(lambda f: file_digest(f, algorithm, progress.add), todo)
        for f, digest in zip(todo, hashed, strict=True):
            digests[f] = digest
            if memo is not None:
                memo.put(keys[f], digest)
    progress.finish()
    return digests


def data_files(path: Path) -> list[Path]:
    """The files of a data folder, every level, sorted by relative name (``path`` itself when it is a
    file), without hidden entries (locks, litter); links to files are followed, to folders not."""
    path = Path(path)
    if path.is_file():
        return [path]
    found: list[Path] = []
    for folder, subfolders, names in os.walk(path):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        found.extend(Path(folder) / name for name in names if not name.startswith("."))
    files = [f for f in found if f.is_file()]
    return sorted(files, key=lambda f: f.relative_to(path).as_posix())


def content_identity(path: Path, *, memo: Memo | None = None) -> str:
    """A hex identity of the data file or folder ``path`` by content: the SHA-256 over each file's
    relative name and SHA-256, so a changed byte or an added, removed or renamed file changes it and
    the place of ``path`` does not; through ``memo`` an unchanged folder costs one ``stat`` a file."""
    path = Path(path).expanduser().resolve()
    files = data_files(path)
    digests = hash_files(files, memo=memo, what=path.name)
    total = hashlib.sha256(b"pytest-novelty data identity 1\0")
    for file in files:
        name = "" if file == path else file.relative_to(path).as_posix()  # a lone file: its name does not count
        total.update(f"{name}\0{digests[file]}\0".encode())
    return total.hexdigest()[:24]
