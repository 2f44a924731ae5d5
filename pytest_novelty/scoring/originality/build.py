"""Building an infini-gram index of a corpus (``pytest-novelty index build``).

The indexer of the ``infini-gram`` package (``python -m infini_gram.indexing``) builds the suffix
array; we tokenise ourselves and write its input files (``tokenized.0``: per document a separator
token 0xFFFF then its token ids, little-endian uint16; ``offset.0``: the uint64 byte offset of each
separator), so it only builds ``table.0``. ``novelty-index.json`` beside them is described in
:mod:`.index`.

Traps of infini-gram 2.6.0, all handled here:

- each part of a build must hold at least 100,000 bytes, else the indexer exits 0 with a wrong
  table: the CPUs are chosen so that every part holds twice that;
- the engine and the indexer recognise files by substring of the full path: see
  :func:`~.index.engine_path`;
- the indexer raises the open-files limit to ``--ulimit``, which must not exceed the hard limit;
- the Rust indexer allocates 32 GiB for 32-bit tokens whatever the corpus size, so ``words`` mode
  stays within 16 bits (rare words take two tokens, see ``WordCodec``) and a tokenizer with more
  than 65,535 ids is refused on smaller machines.

A build happens in a hidden sibling folder renamed into place at the end, so an interrupted build
leaves no half-written index.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.infra.hashing import hash_files
from pytest_novelty.infra.progress import notice
from pytest_novelty.infra.storage import atomic_write_text
from pytest_novelty.scoring.originality.corpus import Document, iter_documents
from pytest_novelty.scoring.originality.index import (
    FORMAT,
    INFO_FILE,
    engine_path,
    is_index,
    pointer_bytes,
)
from pytest_novelty.scoring.originality.tokenization import (
    SEPARATOR_U16,
    HFTokenizer,
    WordCodec,
    load_hf_tokenizer,
    words_fingerprint,
)
from pytest_novelty.scoring.text import WORD_PATTERN, normalize

__all__ = ["MIN_PART_BYTES", "build_index"]

MIN_PART_BYTES = 200_000  # twice the indexer's hard minimum of 100,000 bytes per part
_SEP32 = 0xFFFFFFFF
_CHUNK = 1 << 22


def _say(progress: bool, message: str) -> None:
    if progress:
        notice(f"[novelty] {message}")


class _TokenFile:
    """Appends documents to ``tokenized.0`` and records each separator's byte offset."""

    def __init__(self, folder: Path, dtype: type[np.unsignedinteger[Any]]) -> None:
        self.dtype = dtype
        self.width = np.dtype(dtype).itemsize
        self.handle = (folder / "tokenized.0").open("wb")
        self.offsets = (folder / "offset.0").open("wb")
        self.bytes = 0

    def write(self, tokens: np.ndarray, separator_positions: np.ndarray) -> None:
        """Write a run of tokens in which ``separator_positions`` are the documents' separators."""
        data = np.ascontiguousarray(tokens, dtype=self.dtype)
        offsets = (self.bytes + separator_positions.astype(np.uint64) * self.width).astype("<u8")
        self.handle.write(data.astype(np.dtype(self.dtype).newbyteorder("<"), copy=False).tobytes())
        self.offsets.write(offsets.tobytes())
        self.bytes += data.nbytes

    def close(self) -> None:
        for handle in (self.handle, self.offsets):
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()


class _Tally:
    """Counts documents per source and hashes their texts, in reading order."""

    def __init__(self) -> None:
        self.sha = hashlib.sha256()
        self.docs = 0
        self.sources: list[dict[str, Any]] = []

    def add(self, doc: Document) -> str:
        self.sha.update(doc.text.encode("utf-8", "surrogatepass"))
        self.sha.update(b"\x00")
        if not self.sources or self.sources[-1]["name"] != doc.source:
            self.sources.append({"name": doc.source, "first_doc": self.docs, "docs": 0})
        self.sources[-1]["docs"] += 1
        self.docs += 1
        return doc.text


def _documents(corpus: Iterable[Path] | Iterable[str], tally: _Tally, progress: bool) -> Iterator[str]:
    from tqdm import tqdm

    docs = iter_documents(corpus)
    for doc in tqdm(docs, desc="[novelty] tokenising", unit=" docs", disable=not progress, file=sys.stderr):
        yield tally.add(doc)


def _tokenise_words(
    corpus: Iterable[Path] | Iterable[str], folder: Path, tally: _Tally, progress: bool, single: int | None
) -> dict[str, Any]:
    """``words`` mode: number words by first appearance, then re-number them by frequency."""
    vocab: dict[str, int] = {}
    setdefault = vocab.setdefault
    scratch = folder / "words.scratch"
    buffer: list[int] = []
    with scratch.open("wb") as out:
        for text in _documents(corpus, tally, progress):
            buffer.append(_SEP32)
            buffer.extend([setdefault(w, len(vocab)) for w in WORD_PATTERN.findall(normalize(text))])
            if len(buffer) >= _CHUNK:
                out.write(np.array(buffer, dtype="<u4").tobytes())
                buffer.clear()
        out.write(np.array(buffer, dtype="<u4").tobytes())
    if not vocab:
        raise ConfigError("the corpus has no text to index", field="corpus")
    provisional = np.memmap(scratch, dtype="<u4", mode="r")
    counts = np.zeros(len(vocab), dtype=np.int64)
    for lo in range(0, len(provisional), _CHUNK):
        chunk = provisional[lo : lo + _CHUNK]
        counts += np.bincount(chunk[chunk != _SEP32], minlength=len(vocab))
    order = np.lexsort((np.arange(len(vocab)), -counts))  # by frequency, ties by first appearance
    rank_of = np.empty(len(vocab), dtype=np.int64)
    rank_of[order] = np.arange(len(vocab))
    by_pid = list(vocab)
    ranked = [by_pid[p] for p in order]
    codec = WordCodec.for_vocab(len(ranked), single)
    if codec.single < 1 and ranked:
        raise ConfigError("single_token_words must be at least 1", field="single_token_words")
    writer = _TokenFile(folder, np.uint16)
    units = 0
    for lo in range(0, len(provisional), _CHUNK):
        chunk = np.asarray(provisional[lo : lo + _CHUNK])
        sep = chunk == _SEP32
        ranks = np.where(sep, 0, rank_of[np.where(sep, 0, chunk)])
        ids, unit_pos = codec.encode_ranks(ranks)
        starts = unit_pos[:-1][sep]
        ids[starts] = SEPARATOR_U16
        writer.write(ids, starts)
        units += int((~sep).sum())
    writer.close()
    del provisional
    scratch.unlink()
    return {"tokenizer": "words", "tokenizer_fingerprint": words_fingerprint(ranked, codec.single), "dtype": "u16",
            "units": units, "words": {"single": codec.single, "vocab_size": len(ranked), "vocab": ranked}}


def _tokenise_hf(
    corpus: Iterable[Path] | Iterable[str], folder: Path, tally: _Tally, progress: bool, tokenizer: HFTokenizer
) -> dict[str, Any]:
    """Tokenizer mode: the tokenizer's ids, no special tokens, documents encoded in batches."""
    wide = tokenizer.vocab_size > SEPARATOR_U16
    if wide:
        _check_memory_for_u32()
    writer = _TokenFile(folder, np.uint32 if wide else np.uint16)
    separator = 0xFFFFFFFF if wide else SEPARATOR_U16
    units = 0
    batch: list[str] = []

    def flush() -> None:
        nonlocal units
        if not batch:
            return
        encoded = tokenizer.encode_ids(batch)
        lengths = np.array([len(ids) + 1 for ids in encoded], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        tokens = np.full(int(lengths.sum()), separator, dtype=np.int64)
        for start, ids in zip(starts, encoded, strict=True):
            tokens[start + 1 : start + 1 + len(ids)] = ids
        writer.write(tokens, starts)
        units += int(lengths.sum()) - len(batch)
        batch.clear()

    for text in _documents(corpus, tally, progress):
        batch.append(text)
        if len(batch) >= 1024:
            flush()
    flush()
    writer.close()
    (folder / "tokenizer.json").write_text(tokenizer.json, encoding="utf-8")
    return {"tokenizer": tokenizer.spec, "tokenizer_fingerprint": tokenizer.fingerprint,
            "dtype": "u32" if wide else "u16", "units": units, "vocab_size": tokenizer.vocab_size}


def _total_memory_gib() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**30)
    except (ValueError, OSError, AttributeError):
        return 4


def _check_memory_for_u32() -> None:
    have = _total_memory_gib()
    if have < 36:
        raise HarnessError(
            "the tokenizer has more than 65,535 ids, so the index needs 32-bit tokens, and the infini-gram "
            f"indexer allocates 32 GiB for those; this machine has {have} GiB. Index with a smaller "
            "tokenizer or with --tokenizer words, or build on a larger machine"
        )


def _safe_cpus(ds_size: int, width: int, mem_gib: int) -> int:
    """The most CPUs for which every indexer part still holds ``MIN_PART_BYTES`` (at least 1)."""
    batches = 1
    per_batch = (mem_gib * 2**30) // (12 if width == 1 else 8)
    while batches * per_batch < ds_size:
        batches *= 2
    return max(1, min(os.cpu_count() or 1, ds_size // (batches * MIN_PART_BYTES)))


def _open_files_limit() -> int:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return 1048576 if hard == resource.RLIM_INFINITY else int(hard)


def _build_suffix_array(folder: Path, dtype: str, progress: bool) -> None:
    ds_size = (folder / "tokenized.0").stat().st_size
    width = 2 if dtype == "u16" else 4
    mem_gib = max(1, _total_memory_gib() // 2)
    cpus = _safe_cpus(ds_size, width, mem_gib)
    _say(progress, f"building the suffix array ({ds_size / 1e6:.1f} MB of tokens, {cpus} CPU)")
    seen = engine_path(folder)  # the indexer, too, reads file roles from the path
    command = [
        sys.executable, "-m", "infini_gram.indexing",
        "--data_dir", str(seen), "--save_dir", str(seen), "--temp_dir", str(seen),
        "--token_dtype", dtype, "--cpus", str(cpus), "--mem", str(mem_gib), "--ulimit", str(_open_files_limit()),
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    table = folder / "table.0"
    expected = ds_size // width * pointer_bytes(ds_size)
    if proc.returncode != 0 or not table.is_file() or table.stat().st_size != expected:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-8:]
        raise HarnessError(
            "the infini-gram indexer failed (exit code {}, suffix array {} of {} bytes):\n  {}".format(
                proc.returncode, table.stat().st_size if table.is_file() else "missing", expected, "\n  ".join(tail)
            )
        )


def _spot_check(folder: Path, dtype: str) -> None:
    """Count a few n-grams taken from the corpus: each must occur, or the table is wrong."""
    from infini_gram.engine import InfiniGramEngine

    tokens = np.memmap(folder / "tokenized.0", dtype="<u2" if dtype == "u16" else "<u4", mode="r")
    separator = 0xFFFF if dtype == "u16" else 0xFFFFFFFF
    engine = InfiniGramEngine(
        index_dir=str(engine_path(folder)), eos_token_id=0, vocab_size=separator, token_dtype=dtype, load_to_ram=False
    )
    total = engine.count(input_ids=[])
    if total.get("count") != len(tokens):
        raise HarnessError(f"the new index of {folder} reports {total} tokens, not {len(tokens)}: the build is wrong")
    rng = np.random.default_rng(len(tokens))
    for start in rng.integers(0, len(tokens), size=min(24, len(tokens))):
        window = [int(t) for t in tokens[start : start + 4]]
        if separator in window:
            window = window[: window.index(separator)]
        if window and not engine.count(input_ids=window).get("count"):
            raise HarnessError(f"the new index of {folder} cannot find its own text: the build is wrong")


def _checksums(folder: Path, progress: bool) -> dict[str, dict[str, Any]]:
    """Size and SHA-256 of every file of a finished build, checked whenever the index is opened."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name != INFO_FILE)
    digests = hash_files(files, what="the new index", quiet=not progress)
    return {p.name: {"bytes": p.stat().st_size, "sha256": digests[p]} for p in files}


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # a folder that cannot be opened or synced here is left as it is
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _install(staging: Path, out_dir: Path) -> None:
    """Move the finished build into place, replacing an older index there."""
    _fsync_dir(staging)
    old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
    if is_index(out_dir):
        out_dir.rename(old)
    elif out_dir.exists():
        out_dir.rmdir()  # checked empty before building
    staging.rename(out_dir)
    shutil.rmtree(old, ignore_errors=True)
    _fsync_dir(out_dir.parent)


def _check_out_dir(out_dir: Path) -> None:
    if out_dir.exists():
        if not out_dir.is_dir():
            raise ConfigError("exists and is not a folder; choose a new folder for the index", path=out_dir)
        if not is_index(out_dir) and any(out_dir.iterdir()):
            raise ConfigError(
                "is a folder with other files in it; choose a new or empty folder for the index", path=out_dir
            )


def build_index(
    corpus: Sequence[Path] | Iterable[str],
    out_dir: Path,
    *,
    tokenizer: str = "words",
    progress: bool = True,
    single_token_words: int | None = None,
) -> dict[str, Any]:
    """Build an infini-gram index of ``corpus`` (files or folders as :mod:`.corpus` reads them, or
    document strings) in ``out_dir``, replacing an index there once the new one is complete.
    ``tokenizer``: ``words`` (:mod:`pytest_novelty.scoring.text`) or a Hugging Face tokenizer (a folder,
    a ``tokenizer.json`` or a hub id). ``single_token_words`` caps the words of one token each in
    ``words`` mode (default: all when they fit in 16 bits). Returns the facts of ``novelty-index.json``
    but the vocabulary and checksums (``tokens`` counts no separator, ``units`` words or tokens).
    """
    start = time.perf_counter()
    out_dir = Path(out_dir).expanduser().absolute()
    _check_out_dir(out_dir)
    hf = None if tokenizer == "words" else load_hf_tokenizer(tokenizer)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = out_dir.with_name(f".{out_dir.name}.building-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        facts = _build_in(staging, corpus, hf, progress, single_token_words, start)
        _install(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    summary = {k: v for k, v in facts.items() if k not in ("words", "checksums")}
    if "words" in facts:
        summary["vocab_size"] = facts["words"]["vocab_size"]
    summary["path"] = str(out_dir)
    _say(progress, f"indexed {facts['docs']:,} documents, {facts['tokens']:,} tokens in {facts['seconds']}s "
                   f"({facts['bytes_per_token']} bytes/token) -> {out_dir}")
    return summary


def _build_in(
    staging: Path, corpus: Sequence[Path] | Iterable[str], hf: HFTokenizer | None, progress: bool,
    single_token_words: int | None, start: float,
) -> dict[str, Any]:
    """Tokenise ``corpus`` into ``staging``, build and check its suffix array, and write its facts
    (:data:`INFO_FILE`, fsync'd); the facts."""
    tally = _Tally()
    if hf is None:
        facts = _tokenise_words(corpus, staging, tally, progress, single_token_words)
    else:
        facts = _tokenise_hf(corpus, staging, tally, progress, hf)
    ds_size = (staging / "tokenized.0").stat().st_size
    tokens = ds_size // (2 if facts["dtype"] == "u16" else 4) - tally.docs
    if tally.docs == 0 or tokens == 0:
        raise ConfigError("the corpus has no text to index", field="corpus")
    _build_suffix_array(staging, facts["dtype"], progress)
    _spot_check(staging, facts["dtype"])
    checksums = _checksums(staging, progress)
    index_bytes = sum(entry["bytes"] for entry in checksums.values())
    facts.update(format=FORMAT, tokens=tokens, docs=tally.docs, corpus_sha256=tally.sha.hexdigest(),
                 sources=tally.sources, shard_bytes=[ds_size], index_bytes=index_bytes,
                 bytes_per_token=round(index_bytes / max(tokens, 1), 2),
                 seconds=round(time.perf_counter() - start, 1), engine=_engine_version(), checksums=checksums)
    atomic_write_text(staging / INFO_FILE, json.dumps(facts, ensure_ascii=False) + "\n")
    return facts


def _engine_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"infini-gram {version('infini-gram')}"
    except PackageNotFoundError:
        return "infini-gram"
