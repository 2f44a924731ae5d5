"""One identity per index, whatever its spelling: cached originality answers follow the index's content.

The score cache of originality answers is keyed by the index's identity; these tests go through
the pipeline's own lookup (``pipeline.scores.lookup``) against real indexes built here, so a stale
answer shows as "0 lookups" and the old numbers.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from pytest_novelty.pipeline.config import RunConfig
from pytest_novelty.pipeline.models import SessionModels
from pytest_novelty.pipeline.scores import lookup
from pytest_novelty.scoring.originality import BACKENDS, INFO_FILE, MatchBounds, build_index
from pytest_novelty.scoring.originality.tokenization import Encoding, SurfaceWords
from tests.conftest import small_corpus
from tests.file_opens import opened_under

CORPUS_A = small_corpus(1500, seed=0)
# Other templates over other words: none of corpus A's 4-grams recur here.
CORPUS_B = [
    f"Captain {i % 97} sailed north beyond cold grey cliffs where seals sang loudly, number {i}."
    for i in range(1500)
]
TEXTS = [CORPUS_A[0], CORPUS_A[1], "Purple waves hum beneath quiet stars tonight again."]


def _build(corpus: list[str] | list[Path], out: Path) -> Path:
    build_index(corpus, out, tokenizer="words", progress=False)
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Indexes of corpus A and corpus B, built once; tests copy them where they need them."""
    root = tmp_path_factory.mktemp("identity-indexes")
    return {"a": _build(CORPUS_A, root / "a"), "b": _build(CORPUS_B, root / "b")}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME, so ``~/idx`` is a folder of this test."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    return folder


def _session(cache: Path) -> SessionModels:
    """A fresh session (as a new run would open) over ``cache``."""
    return SessionModels(RunConfig(model="unused", cache_dir=cache))


def _originality(cache: Path, spec: str) -> tuple[list[float | None], int]:
    """Originality at n = 4 of :data:`TEXTS` and how many texts were looked up (not cached)."""
    rows, looked_up = lookup(_session(cache), spec, TEXTS, [4], "test")
    return [row["originality"]["4"] for row in rows], looked_up


def _replace_index(source: Path, target: Path) -> None:
    """Put a copy of the index ``source`` at ``target`` (as a rebuild at that path would)."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)


def test_an_index_rebuilt_at_a_tilde_path_is_not_served_stale_answers(
    built: dict[str, Path], home: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    _build(CORPUS_A, home / "idx")
    first, looked_up = _originality(cache, "infini-gram:~/idx")
    assert looked_up == len(TEXTS) and first[0] == 0.0  # copied from corpus A

    _build(CORPUS_B, home / "idx")  # rebuilt at the same path from another corpus
    second, looked_up = _originality(cache, "infini-gram:~/idx")
    assert looked_up == len(TEXTS), "the rebuilt index was answered from the old index's cache"
    assert second[0] == 1.0 and second != first

    third, looked_up = _originality(cache, "infini-gram:~/idx")
    assert (third, looked_up) == (second, 0)  # the same index again: all from the cache


def test_every_spelling_of_a_folder_is_one_index(
    built: dict[str, Path], home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _replace_index(built["a"], home / "idx")
    (home / "link").symlink_to(home / "idx", target_is_directory=True)
    monkeypatch.chdir(home)
    spellings = [
        "infini-gram:~/idx",
        "infini-gram:idx",
        "infini-gram:./idx/",
        f"infini-gram:{home}/idx/",
        f"infini-gram:{home}//idx",
        "infini-gram:link",
        f"infini-gram:{home}/link/",
    ]
    cache = tmp_path / "cache"
    identities = {spec: _session(cache).index_identity(spec) for spec in spellings}
    assert len(set(identities.values())) == 1, identities
    first, looked_up = _originality(cache, spellings[0])
    assert looked_up == len(TEXTS)
    for spec in spellings[1:]:
        assert _originality(cache, spec) == (first, 0), spec
    # What is not the same index is not: another backend over the folder, other options, other folders.
    others = {
        "ngram-set:~/idx",
        "infini-gram:~/idx?method=creativity",
        f"infini-gram:{built['b']}",
        f"infini-gram:~/idx,{built['b']}",
    }
    assert len({_session(cache).index_identity(spec) for spec in others} | set(identities.values())) == 5


def test_the_identity_is_the_content_not_the_build(built: dict[str, Path], tmp_path: Path) -> None:
    """Two builds of one corpus (other timings, other places) are one index; a damaged one is refused."""
    cache = tmp_path / "cache"
    corpus = tmp_path / "elsewhere" / "stories.jsonl"
    corpus.parent.mkdir()
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in CORPUS_A))
    again = _build([corpus], tmp_path / "elsewhere" / "a-again")
    metas = [json.loads((folder / INFO_FILE).read_text()) for folder in (again, built["a"])]
    assert metas[0]["sources"] != metas[1]["sources"] and metas[0]["checksums"] == metas[1]["checksums"]
    assert _session(cache).index_identity(f"infini-gram:{again}") == _session(cache).index_identity(
        f"infini-gram:{built['a']}"
    )
    damaged = Path(shutil.copytree(built["a"], tmp_path / "damaged"))
    with (damaged / "table.0").open("r+b") as fh:
        fh.seek(100)
        fh.write(b"\0" * 64)
    from pytest_novelty.infra.errors import HarnessError

    with pytest.raises(HarnessError, match=r"table\.0 is damaged"):
        _session(cache).index_identity(f"infini-gram:{damaged}")


def test_an_index_without_checksums_is_identified_by_its_files(built: dict[str, Path], tmp_path: Path) -> None:
    """An older build (no checksums recorded): a changed file, even of the same size, is a new index."""
    index = Path(shutil.copytree(built["a"], tmp_path / "old-build"))
    meta = json.loads((index / INFO_FILE).read_text())
    del meta["checksums"]
    (index / INFO_FILE).write_text(json.dumps(meta))
    cache = tmp_path / "cache"
    before = _session(cache).index_identity(f"infini-gram:{index}")
    # The same metadata over other tokens of the same length: the sizes still check out.
    tokens = np.fromfile(index / "tokenized.0", dtype="<u2")
    tokens[tokens != 0xFFFF] = tokens[tokens != 0xFFFF][::-1]
    tokens.tofile(index / "tokenized.0")
    assert _session(cache).index_identity(f"infini-gram:{index}") != before


# -- an index of another format, read by a backend another package registers ----------------------


class PlainFolderBackend:
    """Word n-grams of the ``*.txt`` files of a folder (a backend of some other package, say)."""

    def __init__(self, folder: str, *, max_n: int = 8) -> None:
        self.spec = f"plain-folder:{folder}"
        self.max_n = max_n
        self.tokenizer = SurfaceWords()
        self.seen: set[tuple[str, ...]] = set()
        for file in sorted(Path(folder).expanduser().glob("*.txt")):
            for line in file.read_text().splitlines():
                w = line.split()
                self.seen.update(tuple(w[i : i + n]) for n in range(1, max_n + 1) for i in range(len(w) - n + 1))

    def match_bounds(self, encodings: Sequence[Encoding], ns: Sequence[int], *, progress: bool = False) -> list:
        out = []
        for enc in encodings:
            w = enc.surface(0, len(enc)).split()
            lengths = []
            for i in range(len(w)):
                k = 0
                while k < self.max_n and i + k < len(w) and tuple(w[i : i + k + 1]) in self.seen:
                    k += 1
                lengths.append(k)
            out.append(MatchBounds.exact(np.array(lengths, dtype=np.int64)))
        return out

    def locate(self, spans: Sequence[tuple[Encoding, int, int]]) -> list[int | None]:
        return [None] * len(spans)

    def close(self) -> None:
        pass


@pytest.fixture
def plain_folder() -> Iterator[None]:
    BACKENDS.register("plain-folder", argument="DIR", needs="a folder of text files", options={"max_n": int})(
        PlainFolderBackend
    )
    yield
    BACKENDS.unregister("plain-folder")


def test_a_foreign_index_is_identified_by_its_content_memoised_by_stat(
    plain_folder: None, home: Path, tmp_path: Path
) -> None:
    corpus = home / "plain"
    corpus.mkdir()
    (corpus / "part-0.txt").write_text("\n".join(CORPUS_A[:200]) + "\n")
    (corpus / "part-1.txt").write_text("\n".join(CORPUS_B[:200]) + "\n")
    cache = tmp_path / "cache"
    spec = "plain-folder:~/plain"
    first, looked_up = _originality(cache, spec)
    assert looked_up == len(TEXTS) and first[0] == 0.0
    assert _originality(cache, f"plain-folder:{corpus}/") == (first, 0)

    # Warm: the files' digests are remembered under their stat; nothing is read again.
    with opened_under(corpus) as opened:
        _session(cache).index_identity(spec)
    assert opened == []

    # Another corpus in the same file, of the very same size (each line written backwards).
    part = corpus / "part-0.txt"
    size = part.stat().st_size
    part.write_text("\n".join(line[::-1] for line in CORPUS_A[:200]) + "\n")
    assert part.stat().st_size == size
    second, looked_up = _originality(cache, spec)
    assert looked_up == len(TEXTS), "an edited foreign index was answered from the cache"
    assert second[0] == 1.0
    os.remove(corpus / "part-1.txt")
    assert _originality(cache, spec)[1] == len(TEXTS)  # a file gone: a different index again
