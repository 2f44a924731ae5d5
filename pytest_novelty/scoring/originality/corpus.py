"""Reading a training corpus as a stream of documents.

A corpus is either an iterable of document strings, or files (a folder stands for every file
below it, in sorted order):

- ``*.jsonl`` / ``*.json``: one JSON object per line, the document in its ``text`` field;
- anything else is plain text: one document per file, or several separated by lines that read
  ``<|endoftext|>`` (the TinyStories convention);
- any of these may be compressed: ``.gz`` (gzip) or ``.zst`` (Zstandard).

Documents keep their order: document ``k`` of the index is the ``k``-th document read, counting
empty ones, so that a document number in a report can be traced back to its file and line.
"""

from __future__ import annotations

import gzip
import io
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.jsonlines import json_lines

__all__ = ["DOC_SEPARATOR_LINE", "Document", "iter_documents", "list_files"]

DOC_SEPARATOR_LINE = "<|endoftext|>"


@dataclass(frozen=True)
class Document:
    """One document: its text and where it came from (``source`` file, 1-based ``line``)."""

    text: str
    source: str
    line: int


def list_files(paths: Iterable[Path]) -> list[Path]:
    """The files named by ``paths``, folders expanded (sorted, hidden files skipped)."""
    files: list[Path] = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            if not found:
                raise ConfigError("the corpus folder holds no files", path=path)
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise ConfigError("no such corpus file or folder", path=path)
    return files


def _open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    if path.suffix == ".zst":
        import zstandard

        raw = path.open("rb")
        stream = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
        return io.TextIOWrapper(io.BufferedReader(stream), encoding="utf-8")
    return path.open(encoding="utf-8")


def _kind(path: Path) -> str:
    suffixes = [s for s in path.suffixes if s not in (".gz", ".zst")]
    return "jsonl" if suffixes and suffixes[-1] in (".jsonl", ".json") else "text"


def _read_jsonl(path: Path, handle: IO[str]) -> Iterator[Document]:
    for number, record in json_lines(handle, path, objects=False):
        text = record.get("text") if isinstance(record, dict) else None
        if not isinstance(text, str):
            raise ConfigError(f"line {number} has no string field 'text'", path=path)
        yield Document(text, str(path), number)


def _read_text(path: Path, handle: IO[str]) -> Iterator[Document]:
    lines: list[str] = []
    start = 1
    for number, line in enumerate(handle, 1):
        if line.strip() == DOC_SEPARATOR_LINE:
            yield Document("".join(lines), str(path), start)
            lines, start = [], number + 1
        else:
            lines.append(line)
    if lines or start == 1:
        yield Document("".join(lines), str(path), start)


def iter_documents(corpus: Iterable[Path] | Iterable[str]) -> Iterator[Document]:
    """Every document of ``corpus`` (``Path`` items files or folders, ``str`` items documents), streamed."""
    stream = iter(corpus)
    first = next(stream, None)
    if first is None:
        return
    if isinstance(first, Path):
        rest = list(stream)
        if not all(isinstance(p, Path) for p in rest):
            raise ConfigError("mix of files and document strings; pass one or the other", field="corpus")
        yield from _read_files(list_files([first, *rest]))  # type: ignore[list-item]
        return
    for number, item in enumerate(itertools.chain([first], stream), 1):
        yield _as_document(item, number)


def _as_document(item: object, number: int) -> Document:
    if not isinstance(item, str):
        raise ConfigError(
            f"corpus item {number} is a {type(item).__name__}; pass Path objects for files, str for documents",
            field="corpus",
        )
    return Document(item, "<documents>", number)


def _read_files(paths: list[Path]) -> Iterator[Document]:
    for path in paths:
        reader = _read_jsonl if _kind(path) == "jsonl" else _read_text
        try:
            with _open_text(path) as handle:
                yield from reader(path, handle)
        except UnicodeDecodeError as exc:
            raise ConfigError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=path) from exc
        except (OSError, EOFError) as exc:
            raise ConfigError(f"cannot read the file: {exc}", path=path) from exc
