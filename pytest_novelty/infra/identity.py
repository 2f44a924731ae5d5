"""What exactly is this checkpoint? A content identity for cache keys and reports.

A local checkpoint folder is identified by the BLAKE3 digest of every byte of exactly the files a
model is loaded from: the config and generation config, the tokenizer files, every weight shard and its
index, adapter files (and, for an adapter, the identity of its base model), and the Python files
of a checkpoint that ships its own code. Nothing else in the folder counts: an originality index
saved beside the weights (``novelty-index/``), logs, optimizer state and READMEs change nothing.
So a fine-tune saved over the same folder gets a new identity even when every file keeps its size
and only a middle layer changed, and a folder that only gained an index keeps its cached answers.

Hashing runs at the disk's speed: helper threads read the next blocks of a file at their own
offsets (several requests before the disk at once) while BLAKE3 hashes the current block on every
core (both release the GIL); two shards go at once; and a *memo* remembers each file's digest under
its (digest name, path, size, mtime_ns, ctime_ns, inode), so an unchanged multi-gigabyte checkpoint
is read once. BLAKE3 runs at about 5 GB/s a core here against SHA-256's 1.9 (which cannot split a
file); SHA-256 stays for what records it (the checksums of an index, :func:`hash_files`' default).
Identities are of format 2 (format 1 hashed the files with SHA-256): the format and the digest's
name open the hashed text, so no identity of one format equals one of another, and answers
cached under an old identity are generated again, never misread. A memo is any object with
``get(key) -> value | None`` and ``put(key, value)`` (the namespaces of the cache layer offer
exactly that); :func:`memo_at` gives one in a cache folder.

A hub id (``org/name`` or ``org/name@revision``) is identified by its commit sha, resolved through
``huggingface_hub``: from the hub when it can be reached, else from the local Hugging Face cache
(``refs/REVISION``), in which case one line says that cached answers are used on trust. Whether the
hub can be reached is decided within seconds (``HF_HUB_OFFLINE``, then one TCP connection), before
anything is loaded; a model that is neither reachable nor cached is one :class:`ConfigError` that
says how to pre-download it.
"""

from __future__ import annotations

import collections
import contextlib
import fnmatch
import functools
import hashlib
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from pytest_novelty.infra.cache import Cache, Namespace
from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.infra.progress import notice
from pytest_novelty.infra.storage import read_json

__all__ = [
    "HubRevision",
    "Identity",
    "Memo",
    "checkpoint_identity",
    "file_digest",
    "file_sha256",
    "hash_files",
    "hub_reachable",
    "identity_memo",
    "loaded_files",
    "memo_at",
    "resolve_hub",
    "split_revision",
    "stat_key",
]

READ_SIZE = 4 << 20  # bytes per read: large enough for the disk, small enough to be hashed from the CPU's cache
DIGESTS = ("sha256", "blake3")
"""The file digests :func:`hash_files` computes: SHA-256 (index checksums) and BLAKE3 (checkpoints)."""
CHECKPOINT_DIGEST = "blake3"
"""The digest of a checkpoint's files: BLAKE3 runs at about 5 GB/s per core here, SHA-256 at 1.9."""
READ_AHEAD = 4  # blocks of one file read at once, ahead of the hashing (the disk sees several requests)
BLAKE3_FILES = 2  # files hashed at once with BLAKE3 (each block is already hashed on every core)
REPORT_AFTER = 1.0  # seconds of hashing before progress is shown
HUB_TIMEOUT = 3.0  # seconds to wait for a TCP connection to the hub before working offline
_SHA = re.compile(r"^[0-9a-f]{40}$")

# The files transformers, tokenizers and peft read from a checkpoint folder (top level only).
_LOADED_NAMES = frozenset(
    {
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        "vocab.txt",
        "merges.txt",
        "tokenizer.model",
        "spiece.model",
        "chat_template.jinja",
        "chat_template.json",
        "preprocessor_config.json",
        "adapter_config.json",
    }
)
_LOADED_PATTERNS = (
    "*.safetensors",
    "*.safetensors.index.json",
    "pytorch_model*.bin",
    "pytorch_model*.bin.index.json",
    "adapter_model.*",
    "*.tiktoken",
    "sentencepiece*.model",
)
_TEMPLATE_FOLDER = "additional_chat_templates"  # transformers 5 reads extra chat templates from here


class Memo(Protocol):
    """Where file digests are remembered between runs."""

    def get(self, key: str) -> Any | None:
        """The value stored under ``key``, or None."""
        ...

    def put(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``."""
        ...


def memo_at(folder: Path) -> Namespace:
    """A memo of file digests kept in ``folder``: a namespace of the one cache layer
    (:mod:`pytest_novelty.infra.cache`), so its entries are checksummed, written atomically and shared
    safely by concurrent runs; a damaged entry is a miss, recomputed and counted."""
    folder = Path(folder)
    return Cache(folder.parent).namespace(folder.name)


def identity_memo(cache_dir: Path) -> Namespace:
    """The memo of file digests inside a pytest-novelty cache folder."""
    return memo_at(Path(cache_dir) / "identity")


@dataclass(frozen=True)
class Identity:
    """What a checkpoint is: ``id`` (hex, for cache keys), ``description`` (for people).

    ``source`` and ``revision`` are what to load: a local folder (``revision`` None), or a hub
    repository at a commit sha. ``files`` maps each file that counted to its BLAKE3 digest (local
    folders), ``trusted`` is True when a hub revision was read from the local cache without
    checking the hub.
    """

    id: str
    description: str
    source: str
    revision: str | None = None
    files: dict[str, str] = field(default_factory=dict, compare=False)
    trusted: bool = False

    @property
    def load_options(self) -> dict[str, str]:
        """Keyword arguments for ``from_pretrained`` (the pinned ``revision`` of a hub model)."""
        return {} if self.revision is None else {"revision": self.revision}


# -- local folders ------------------------------------------------------------------------------


def loaded_files(folder: Path) -> list[Path]:
    """The files of ``folder`` a model is loaded from, sorted by name (see the module docstring)."""
    folder = Path(folder)
    chosen = []
    for entry in folder.iterdir():
        if not entry.is_file():
            continue
        name = entry.name
        if name in _LOADED_NAMES or any(fnmatch.fnmatchcase(name, p) for p in _LOADED_PATTERNS):
            chosen.append(entry)
    templates = folder / _TEMPLATE_FOLDER
    if templates.is_dir():
        chosen.extend(p for p in templates.iterdir() if p.is_file() and p.suffix in (".jinja", ".json"))
    code = [p for p in folder.glob("*.py") if p.is_file()]
    if code and _ships_code(folder):  # only a checkpoint that maps to its own code runs these
        chosen.extend(code)
    return sorted(set(chosen), key=lambda p: p.relative_to(folder).as_posix())


def _ships_code(folder: Path) -> bool:
    for name in ("config.json", "tokenizer_config.json"):
        data = read_json(folder / name)
        if isinstance(data, dict) and data.get("auto_map"):
            return True
    return False


def stat_key(path: Path, algorithm: str = "sha256") -> str:
    """The memo key of a file's ``algorithm`` digest: the algorithm, the file's real path, size,
    mtime_ns, ctime_ns and inode.

    Any write changes mtime or ctime (ctime cannot be set back by tools that restore mtimes),
    and a file replaced by a rename gets a new inode. The algorithm leads the key, so a digest of
    one kind is never read back as another (both are 64 hex digits).
    """
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
    """The ``algorithm`` digest (hex) of a whole file, read in :data:`READ_SIZE` blocks.

    Reading runs ahead of hashing: :data:`READ_AHEAD` helper threads read the next blocks (each
    at its own offset, so the disk sees several requests at once) while this thread hashes the
    current one in order; reads and hashing release the GIL, so a file is hashed at the speed of
    the slower of the two rather than the sum of both. BLAKE3 also hashes each block on every core.
    """
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


def file_sha256(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    """SHA-256 of a whole file (:func:`file_digest`)."""
    return file_digest(path, "sha256", on_bytes)


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
    files: list[Path],
    *,
    memo: Memo | None = None,
    what: str = "files",
    on_progress: Callable[[int, int], None] | None = None,
    quiet: bool = False,
    algorithm: str = "sha256",
) -> dict[Path, str]:
    """The ``algorithm`` digest of each file, from ``memo`` where its stat is unchanged, else read.

    Files are hashed largest first. SHA-256 cannot split a file, so files run on up to two threads
    per core; BLAKE3 hashes each block on every core, so :data:`BLAKE3_FILES` files at a time keep
    the disk and the cores busy. ``on_progress(done, total)`` hears of the bytes read, and without
    it one notice (:func:`~pytest_novelty.infra.progress.notice`) says so once hashing has taken
    more than a second, and another when it ends (none when ``quiet``).
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


def _folder_identity(
    folder: Path,
    *,
    memo: Memo | None,
    on_progress: Callable[[int, int], None] | None,
    base: str | None,
) -> Identity:
    files = loaded_files(folder)
    digests = hash_files(files, memo=memo, what=folder.name, on_progress=on_progress, algorithm=CHECKPOINT_DIGEST)
    # Format 2: the files' BLAKE3 digests (format 1 used SHA-256). The format and the digest's name
    # open the hashed text, so no identity of one format can equal one of another: answers cached
    # under a format-1 identity are never found again, rather than misread.
    total = hashlib.sha256(f"pytest-novelty checkpoint identity 2 {CHECKPOINT_DIGEST}\0".encode())
    named = {f.relative_to(folder).as_posix(): digests[f] for f in files}
    for name, digest in sorted(named.items()):
        total.update(f"{name}\0{digest}\0".encode())
    base_model = _adapter_base(folder, base)
    if base_model is not None:
        base_id = checkpoint_identity(base_model, memo=memo, on_progress=on_progress)
        total.update(f"base\0{base_id.id}\0".encode())
    hex_id = total.hexdigest()[:24]
    return Identity(hex_id, f"{folder.name} @ {hex_id[:8]}", str(folder), None, named)


def _adapter_base(folder: Path, base: str | None) -> str | None:
    """The base model of an adapter folder: ``base`` if given, else its ``base_model_name_or_path``."""
    if not (folder / "adapter_config.json").is_file():
        return None
    if base is not None:
        return base
    data = read_json(folder / "adapter_config.json")
    name = data.get("base_model_name_or_path") if isinstance(data, dict) else None
    return str(name) if name else None


# -- hub ids ------------------------------------------------------------------------------------


def split_revision(model: str) -> tuple[str, str | None]:
    """``org/name@revision`` -> (``org/name``, ``revision``); without ``@``, the revision is None."""
    name, sep, revision = model.partition("@")
    return name, (revision or None) if sep else None


def looks_like_hub_id(model: str) -> bool:
    """Whether ``model`` reads as ``org/name`` or ``org/name@revision`` (and not as a path)."""
    name, revision = split_revision(model)
    parts = name.split("/")
    return (
        len(parts) == 2
        and all(parts)
        and not name.startswith((".", "/", "~"))
        and all(c.isalnum() or c in "-_." for c in name.replace("/", ""))
        and (revision is None or bool(re.fullmatch(r"[\w.\-/]+", revision)))
    )


def _offline_by_setting() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def hub_reachable(timeout: float = HUB_TIMEOUT) -> bool:
    """False when ``HF_HUB_OFFLINE`` is set or no TCP connection to the hub (or the proxy) opens in time."""
    if _offline_by_setting():
        return False
    from huggingface_hub import constants

    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    url = urlparse(proxy if proxy else constants.ENDPOINT)
    host = url.hostname
    port = url.port or (443 if url.scheme == "https" else 80)
    return bool(host) and _connects(str(host), port, timeout)


@functools.lru_cache(maxsize=8)
def _connects(host: str, port: int, timeout: float) -> bool:
    """Whether a TCP connection opens (asked once per process: the answer holds for a run)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _hub_cache() -> Path:
    """The Hugging Face hub cache folder, read from the environment now (as huggingface_hub would)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


@dataclass(frozen=True)
class HubRevision:
    """A hub model pinned to a commit: ``snapshot`` is its complete local copy, when there is one."""

    repo: str
    revision: str
    sha: str
    snapshot: Path | None
    trusted: bool  # a moving revision (a branch or tag) read from the local cache without asking the hub
    offline: bool  # the hub was not reachable: load ``snapshot`` itself


def _cached_snapshot(repo: str, revision: str) -> tuple[str | None, Path | None]:
    """(commit sha, snapshot folder) of ``repo`` at ``revision`` in the local cache, when known."""
    folder = _hub_cache() / ("models--" + repo.replace("/", "--"))
    sha = revision if _SHA.match(revision) else None
    if sha is None:
        try:
            sha = (folder / "refs" / revision).read_text(encoding="utf-8").strip() or None
        except OSError:
            return None, None
    snapshot = folder / "snapshots" / str(sha)
    complete = any((snapshot / name).is_file() for name in ("config.json", "adapter_config.json"))
    return sha, (snapshot if complete else None)


def _download_hint(repo: str, revision: str | None) -> str:
    pin = f" --revision {revision}" if revision else ""
    return f"pre-download it with `huggingface-cli download {repo}{pin}`, or pass a local checkpoint folder"


@functools.lru_cache(maxsize=64)
def _resolve(repo: str, revision: str | None, cache: str, offline: bool) -> HubRevision:
    wanted = revision or "main"
    why = "HF_HUB_OFFLINE is set" if _offline_by_setting() else "the hub cannot be reached"
    if _SHA.match(wanted):  # pinned: nothing to ask
        _, snapshot = _cached_snapshot(repo, wanted)
        if offline and snapshot is None:
            raise ConfigError(
                f"{why} and commit {wanted[:8]} is not in the local cache ({cache}); "
                + _download_hint(repo, wanted),
                path=f"{repo}@{wanted}",
                field="--model",
            )
        return HubRevision(repo, wanted, wanted, snapshot, trusted=False, offline=offline)
    answered = False  # the hub answered, with a server error: not bad input when nothing is cached
    if not offline:
        sha, trouble = _ask_hub(repo, wanted)
        if sha is not None:
            return HubRevision(repo, wanted, sha, _cached_snapshot(repo, sha)[1], trusted=False, offline=False)
        why, answered = trouble, trouble.startswith("the hub answered")
    sha, snapshot = _cached_snapshot(repo, wanted)
    if sha is None or snapshot is None:
        message = f"{why} and revision {wanted!r} is not in the local Hugging Face cache ({cache}); "
        if answered:
            raise HarnessError(f"{repo}: {message}try again later, or " + _download_hint(repo, revision))
        raise ConfigError(message + _download_hint(repo, revision), path=repo, field="--model")
    notice(
        f"[novelty] {repo}: hub not checked ({'offline' if not answered else why}); using cached revision {wanted} "
        f"= {sha[:8]}; cached answers are used on trust (pin {repo}@{sha} to make that explicit)"
    )
    return HubRevision(repo, wanted, sha, snapshot, trusted=True, offline=True)


def _ask_hub(repo: str, revision: str) -> tuple[str | None, str]:
    """The commit sha of ``repo`` at ``revision`` from the hub, or (None, why) when it gave none.

    Only trouble that says nothing about the model lets the caller fall back to the local cache:
    no connection or no answer in time (``the hub cannot be reached``), a server error or a rate
    limit (``the hub answered HTTP 503``). An answer about the model (no such repository or
    revision, gated, a refused token) is bad input; anything else (a reply that cannot be read,
    an unexpected status, an error of the client) is a harness error naming what happened, never
    taken for "offline".
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        info = HfApi().model_info(repo, revision=revision, timeout=10)
    except RevisionNotFoundError:
        raise ConfigError(f"the hub has no revision {revision!r} of this model", path=repo, field="--model") from None
    except GatedRepoError:
        raise ConfigError(
            "a gated model: accept its conditions on the hub, then log in with `huggingface-cli login` or set HF_TOKEN",
            path=repo,
            field="--model",
        ) from None
    except RepositoryNotFoundError:
        raise ConfigError(
            "no such model on the hub (or it is private: log in with `huggingface-cli login` or set HF_TOKEN)",
            path=repo,
            field="--model",
        ) from None
    except HfHubHTTPError as exc:
        status = getattr(exc.response, "status_code", None)
        if status is not None and (status >= 500 or status == 429):
            return None, f"the hub answered HTTP {status}"
        if status in (401, 403):
            raise ConfigError(
                f"the hub refused the request (HTTP {status}): check HF_TOKEN, or log in with `huggingface-cli login`",
                path=repo,
                field="--model",
            ) from None
        raise HarnessError(f"{repo}: the hub answered HTTP {status}: {_first_line(exc)}") from None
    except Exception as exc:
        if _network_trouble(exc):
            return None, "the hub cannot be reached"
        raise HarnessError(
            f"{repo}: asking the hub for revision {revision!r} failed: {type(exc).__name__}: {_first_line(exc)}"
        ) from None
    if not info.sha:
        raise HarnessError(f"{repo}: the hub's answer for revision {revision!r} names no commit")
    return str(info.sha), ""


def _network_trouble(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection or a timeout failing (the hub client's transport: httpx's
    errors, or the ``OSError`` family that sockets raise), not an answer."""
    import httpx

    return isinstance(exc, (httpx.TransportError, OSError))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def resolve_hub(model: str) -> HubRevision:
    """Pin a hub id (``org/name`` or ``org/name@revision``) to its commit sha, within seconds.

    Online: the hub's answer. Offline (``HF_HUB_OFFLINE`` set, or no connection to the hub within
    :data:`HUB_TIMEOUT` seconds): the local cache's ``refs/REVISION``, with one line saying so
    (once per process). A model neither reachable nor cached raises :class:`ConfigError`.
    """
    repo, revision = split_revision(model)
    return _resolve(repo, revision, str(_hub_cache()), not hub_reachable())


# -- the entry point ----------------------------------------------------------------------------


def checkpoint_identity(
    model: str | Path,
    *,
    memo: Memo | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    base: str | None = None,
) -> Identity:
    """The identity of a checkpoint folder or hub id (see the module docstring).

    ``memo`` remembers file digests between calls (see :func:`memo_at`); ``on_progress(done,
    total)`` hears of hashed bytes, and without it one notice says so when hashing takes more
    than a second. ``base`` overrides an adapter's ``base_model_name_or_path``.
    """
    path = Path(model).expanduser()
    if path.is_dir():
        return _folder_identity(path.resolve(), memo=memo, on_progress=on_progress, base=base)
    text = str(model)
    if not looks_like_hub_id(text):
        raise ConfigError(
            "checkpoint folder not found; pass a Hugging Face folder (with config.json), a hub id "
            "such as org/name or org/name@revision, or 'demo'",
            path=text,
            field="--model",
        )
    hub = resolve_hub(text)
    description = f"{hub.repo} @ {hub.sha[:8]}" + (" (cached, unchecked)" if hub.trusted else "")
    if hub.offline and hub.snapshot is not None:
        # Offline: load the cached snapshot folder itself, so transformers never tries the network.
        return Identity(hub.sha, description, str(hub.snapshot), None, trusted=hub.trusted)
    return Identity(hub.sha, description, hub.repo, hub.sha)


# -- data folders -------------------------------------------------------------------------------
# The identity of data that is not a checkpoint (an originality index built by other tools), by
# the same means: every file's SHA-256, remembered in a memo under its stat.


def data_files(path: Path) -> list[Path]:
    """The files of a data folder, every level, sorted by relative name (``path`` itself when it is
    a file). Hidden entries (names starting with ``.``: locks, editor and OS litter) do not count;
    symbolic links to files are followed, links to folders are not (no cycles)."""
    path = Path(path)
    if path.is_file():
        return [path]
    found: list[Path] = []
    for folder, subfolders, names in os.walk(path):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        found.extend(Path(folder) / name for name in names if not name.startswith("."))
    files = [f for f in found if f.is_file()]
    return sorted(files, key=lambda f: f.relative_to(path).as_posix())


def content_identity(
    path: Path,
    *,
    memo: Memo | None = None,
) -> str:
    """A hex identity of the data file or folder ``path`` by content: the SHA-256 over each file's
    relative name and SHA-256 (:func:`data_files`), so any changed byte, added, removed or renamed
    file gives a new identity and the place or spelling of ``path`` none. Each file is read once
    per stat through ``memo`` (:func:`hash_files`): an unchanged folder costs one ``stat`` per file.
    """
    path = Path(path).expanduser().resolve()
    files = data_files(path)
    digests = hash_files(files, memo=memo, what=path.name)
    total = hashlib.sha256(b"pytest-novelty data identity 1\0")
    for file in files:
        name = "" if file == path else file.relative_to(path).as_posix()  # a lone file: its name does not count
        total.update(f"{name}\0{digests[file]}\0".encode())
    return total.hexdigest()[:24]
