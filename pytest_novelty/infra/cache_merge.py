"""Merging cache folders, and one file of a cache, for gates spread over machines without a shared disk.

A cache (:mod:`pytest_novelty.infra.cache`) is a set of entries, each a small JSON file named by a
hash of its key and carrying a checksum of its value. Keys are content keys (a generation row by
its checkpoint's content, input text, settings and sample index; an originality answer by its
index and text), so the union of two caches is exact: an entry means the same wherever it was
written. :func:`merge_caches` takes that union into a destination folder:

- every source entry is verified by its own checksum, and by its name (the hash of the key it
  holds); one that fails is left out and counted (:attr:`MergeCounts.damaged`);
- an entry the destination lacks is added; one it holds with the same payload is counted as
  already there; one it holds with another payload keeps the destination's (the first: the
  destination's, then the sources' in the order given) and is counted (:attr:`MergeCounts.conflicting`);
  a damaged destination entry is replaced by the sound one;
- entries are placed under the cache's own rules, so a merge can run while other runs use the
  destination: each is written to a temporary file and hard-linked into place only where no entry
  exists (readers see a whole entry or none, and the first writer wins, as ``Namespace.put`` does);
  a write that meets a concurrent clear is retried;
- the built demo (``demo-*`` folders), leftovers of a clear (``.trash-*``) and temporary files are
  not entries and are left alone: each machine builds its own demo.

:func:`pack_cache` writes a cache's sound entries to one file, a tar archive compressed with
zstandard (``.tar.zst``), for an artifact upload; :func:`merge_caches` reads such a file as it reads
a folder (``pytest-novelty cache unpack FILE --into DST`` is a merge of one file). Unpacking never
writes what the archive says: a pack is read through and checked before anything is written, and
refused whole when any member is not an entry (a regular file named like one, of at most
:data:`MAX_ENTRY_BYTES`: an absolute name, ``..``, a link or a device is a pack this tool did not
write) or fails its checksum; its entries are then placed like any merged entry.
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from pytest_novelty.infra.cache import is_demo, link_new, sound_entry
from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.infra.storage import atomic_write, folder_error, write_temp

__all__ = ["MAX_ENTRY_BYTES", "PACK_SUFFIX", "MergeCounts", "merge_caches", "pack_cache"]

PACK_SUFFIX = ".tar.zst"
"""The usual name ending of a packed cache."""
PACK_MARK = ".pytest-novelty-pack.json"
"""The first member of a packed cache: its format and how many entries it holds."""
PACK_FORMAT = 1
MAX_ENTRY_BYTES = 64 * 2**20
"""The largest entry a pack may hold (a row or a score is a few kilobytes)."""
_ENTRY = re.compile(r"^(?:[^./][^/]*/)+(?P<dir>[0-9a-f]{2})/(?P<digest>[0-9a-f]{40})\.json$")
_ATTEMPTS = 3
_NAMED = 5  # damaged entries named in the summary


@dataclass
class MergeCounts:
    """What a merge (or a pack) did with the entries it read."""

    added: int = 0
    same: int = 0
    """Already in the destination with the same payload."""
    conflicting: int = 0
    """In the destination with another payload for the same key: the destination's (the first) kept."""
    replaced: int = 0
    """A damaged destination entry replaced by the sound one."""
    damaged: int = 0
    """Source entries that failed their check: left out."""
    skipped: int = 0
    """Files that are no entries (temporary files, links, other names): left alone."""
    damaged_names: list[str] = field(default_factory=list)
    """The first few damaged entries, as ``SOURCE: path``."""

    def add(self, outcome: str) -> None:
        setattr(self, outcome, getattr(self, outcome) + 1)

    def note_damaged(self, where: str) -> None:
        self.damaged += 1
        if len(self.damaged_names) < _NAMED:
            self.damaged_names.append(where)

    def summary(self) -> str:
        """``1,204 entries added, 96 already there, 1 damaged left out, 0 conflicting (the first kept)``."""
        parts = [f"{self.added:,} entries added", f"{self.same:,} already there"]
        if self.replaced:
            parts.append(f"{self.replaced:,} damaged ones replaced")
        parts.append(f"{self.damaged:,} damaged left out")
        parts.append(f"{self.conflicting:,} conflicting (the first kept)")
        if self.skipped:
            parts.append(f"{self.skipped:,} other files skipped")
        return ", ".join(parts)


def _relative_entry(name: str) -> tuple[str, str] | None:
    """(name, digest) when ``name`` (a relative POSIX path) is where an entry lives, else None."""
    match = _ENTRY.match(name)
    if match is None or match["digest"][:2] != match["dir"] or ".." in name.split("/"):
        return None
    return name, match["digest"]


def _folder_files(root: Path, command: str) -> Iterator[tuple[str, Path]]:
    """Every file under a cache folder, as (relative POSIX path, path), the demo and trash left out."""
    try:
        tops = sorted(root.iterdir())
    except FileNotFoundError:
        raise ConfigError(f"{root}: no such cache folder", field=command) from None
    except NotADirectoryError:
        raise ConfigError(f"{root}: not a cache folder", field=command) from None
    except OSError as exc:
        raise ConfigError(f"{root}: the cache folder cannot be read ({exc.strerror}); make it readable",
                          field=command) from None
    for top in tops:
        if is_demo(top.name) or top.name.startswith("."):
            continue
        if top.is_file():
            yield top.name, top
            continue
        for base, dirs, files in os.walk(top):
            dirs.sort()
            for file in sorted(files):
                path = Path(base) / file
                yield path.relative_to(root).as_posix(), path


def _read_folder(root: Path, counts: MergeCounts, command: str) -> Iterator[tuple[str, str, bytes]]:
    """(relative path, digest, bytes) of every entry-named file of a cache folder."""
    for name, path in _folder_files(root, command):
        found = _relative_entry(name)
        if found is None or path.is_symlink():
            counts.skipped += 1
            continue
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            continue  # removed meanwhile (a clear of the source)
        except OSError:
            counts.note_damaged(f"{root}: {name}")
            continue
        yield name, found[1], raw


def _read_pack(pack: Path, command: str) -> Iterator[tuple[str, str, bytes]]:
    """(relative path, digest, bytes) of every entry of a packed cache, read through once.

    A file that is no pack, or a pack this tool did not write (a member other than an entry: an
    absolute name, ``..``, a link, a device, a folder), is bad input naming the first foreign
    member; a pack cut short or damaged (an entry that fails its checksum, fewer entries than it
    declares) is a :class:`HarnessError`. :func:`merge_caches` reads a pack through once before it
    writes anything, so neither is ever half applied.
    """
    import zstandard

    try:
        handle = pack.open("rb")
    except FileNotFoundError:
        raise ConfigError(f"{pack}: no such file", field=command) from None
    declared: int | None = None
    read = 0

    def damaged(why: str) -> HarnessError:
        return HarnessError(f"{command}: {pack}: the pack is damaged ({why}); nothing was merged from it: pack the "
                            "cache again")

    with handle, zstandard.ZstdDecompressor().stream_reader(handle) as stream:
        try:
            with tarfile.open(fileobj=stream, mode="r|") as archive:
                for member in archive:
                    if declared is None:
                        declared = _pack_mark(pack, member, archive, command)
                        continue
                    read += 1
                    found = _relative_entry(member.name)
                    if found is None or not member.isreg():
                        raise ConfigError(
                            f"{pack}: not a pack this tool wrote: its member {member.name!r} is not a cache entry "
                            f"({_kind(member)}); nothing was written", field=command)
                    if member.size > MAX_ENTRY_BYTES:
                        raise damaged(f"{member.name} holds {member.size:,} bytes, more than an entry can")
                    data = archive.extractfile(member)
                    raw = b"" if data is None else data.read()
                    if sound_entry(raw, found[1]) is None:
                        raise damaged(f"{member.name} fails its checksum")
                    yield member.name, found[1], raw
        except (tarfile.TarError, zstandard.ZstdError, EOFError, OSError) as exc:
            if declared is None and not _zstd(pack):
                raise ConfigError(f"{pack}: not a packed pytest-novelty cache ({exc}); give a file written by "
                                  "pytest-novelty cache pack", field=command) from None
            where = "before its first entry" if declared is None else f"after {read:,} of its {declared:,} entries"
            raise damaged(f"unreadable {where}: {exc}; cut short?") from None
    if declared is None:
        raise ConfigError(f"{pack}: not a packed pytest-novelty cache (it is empty)", field=command)
    if read != declared:
        raise damaged(f"it ends after {read:,} of its {declared:,} entries; cut short?")


def _kind(member: tarfile.TarInfo) -> str:
    """What a foreign member of an archive is, in words."""
    if member.issym() or member.islnk():
        return f"a link to {member.linkname}"
    if member.isdev() or member.isfifo():
        return "a device or a pipe"
    if member.isdir():
        return "a folder"
    if member.name.startswith("/"):
        return "an absolute name"
    return "a name climbing out of the cache" if ".." in member.name.split("/") else "no entry's name"


def _zstd(path: Path) -> bool:
    """Whether the file starts as a zstandard frame does (then a failure to read it is damage)."""
    with path.open("rb") as handle:
        return handle.read(4) == b"\x28\xb5\x2f\xfd"


def _pack_mark(pack: Path, member: tarfile.TarInfo, archive: tarfile.TarFile, command: str) -> int:
    """The number of entries the pack declares in its first member."""
    data = archive.extractfile(member) if member.isreg() and member.name == PACK_MARK else None
    try:
        mark = json.loads(data.read(2**16)) if data is not None else None
    except ValueError:
        mark = None
    if not isinstance(mark, dict) or mark.get("format") != PACK_FORMAT or not isinstance(mark.get("entries"), int):
        raise ConfigError(f"{pack}: not a packed pytest-novelty cache (no {PACK_MARK} of format {PACK_FORMAT} first)",
                          field=command)
    return int(mark["entries"])


def _entries(source: Path, counts: MergeCounts, command: str) -> Iterator[tuple[str, str, bytes]]:
    return _read_pack(source, command) if source.is_file() else _read_folder(source, counts, command)


def _place(path: Path, raw: bytes, entry: dict[str, Any], digest: str) -> str:
    """Put a sound entry at ``path`` under the cache's rules; what happened (a :class:`MergeCounts` field)."""
    for _ in range(_ATTEMPTS):
        try:
            tmp = write_temp(path, raw, sync=False)
        except FileNotFoundError:
            continue  # a clear renamed the folder away between its creation and our write
        try:
            if link_new(tmp, path):
                return "added"
            try:
                existing = sound_entry(path.read_bytes(), digest)
            except FileNotFoundError:
                continue  # cleared meanwhile: write again
            if existing is None:
                os.replace(tmp, path)
                return "replaced"
            same = existing["version"] == entry["version"] and existing["sha256"] == entry["sha256"]
            return "same" if same else "conflicting"
        finally:
            Path(tmp).unlink(missing_ok=True)
    return "added"  # clears kept coming: as if each had come just after our write


def merge_caches(sources: Iterable[Path], into: Path, *, command: str = "cache merge") -> MergeCounts:
    """Merge every sound entry of ``sources`` (cache folders, or files :func:`pack_cache` wrote) into
    the cache folder ``into``, under the rules of the module doc; ``command`` (``cache merge``,
    ``cache unpack``) is what its errors are about.

    Every source is checked before anything is written (a pack is read through once, see
    :func:`_read_pack`): one that does not exist or is no cache is bad input (:class:`ConfigError`),
    a damaged pack a :class:`HarnessError`, and neither leaves anything behind, not even ``into``. A
    destination that cannot be written is a :class:`HarnessError` (the entries placed before it stay).
    """
    counts = MergeCounts()
    into = Path(into)
    sources = [Path(s) for s in sources]
    for source in sources:
        if not source.exists():
            raise ConfigError(f"{source}: no such cache folder or pack", field=command)
        if source.is_file():
            for _ in _read_pack(source, command):
                pass
        elif not source.is_dir():
            raise ConfigError(f"{source}: neither a cache folder nor a pack", field=command)
    try:
        into.mkdir(parents=True, exist_ok=True)
        for source in sources:
            for name, digest, raw in _entries(source, counts, command):
                entry = sound_entry(raw, digest)
                if entry is None:
                    counts.note_damaged(f"{source}: {name}")
                    continue
                counts.add(_place(into / name, raw, entry, digest))
    except OSError as exc:  # the sources' own read errors are counted where they are read
        error = folder_error(into, "cache folder", exc, named_by="--into")
        raise type(error)(f"{command}: {error}; the entries placed before it stay (a merge can be run again)") from None
    return counts


def pack_cache(root: Path, out: Path, *, level: int = 6) -> MergeCounts:
    """Write every sound entry of the cache folder ``root`` to ``out``, one zstandard-compressed tar
    (see the module doc), atomically; damaged entries are left out and counted (``added``: packed).

    The archive's bytes depend only on the entries (sorted names, no times or owners), so the same
    cache packs to the same file.
    """
    import zstandard

    counts = MergeCounts()
    root, out = Path(root), Path(out)
    if not root.is_dir():
        raise ConfigError(f"{root}: no such cache folder", field="cache pack")
    sound = []
    for name, digest, raw in _read_folder(root, counts, "cache pack"):
        if sound_entry(raw, digest) is None:
            counts.note_damaged(f"{root}: {name}")
        else:
            sound.append((name, raw))

    def write(handle: BinaryIO) -> None:
        compressor = zstandard.ZstdCompressor(level=level)
        with (
            compressor.stream_writer(handle, closefd=False) as stream,
            tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as archive,
        ):
            mark = json.dumps({"format": PACK_FORMAT, "entries": len(sound)}).encode()
            archive.addfile(_member(PACK_MARK, len(mark)), io.BytesIO(mark))
            for name, raw in sound:
                archive.addfile(_member(name, len(raw)), io.BytesIO(raw))

    try:
        atomic_write(out, write)
    except OSError as exc:
        raise folder_error(out, "pack", exc, named_by="--out") from None
    counts.added = len(sound)
    return counts


def _member(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = size, 0o644, 0, 0, 0, "", ""
    return info
