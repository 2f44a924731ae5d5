"""Index building (formats, metadata, atomic replacement, traps) and opening backends by spec."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
import zstandard

from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.scoring.originality import (
    INFO_FILE,
    build_index,
    is_index,
    open_backend,
    read_index,
    score_texts,
)
from pytest_novelty.scoring.originality.build import MIN_PART_BYTES, _safe_cpus
from tests.scoring.originality.originality_helpers import random_corpus, train_tokenizer

DOCS = ["The cat sat on the mat.", "A dog ran.", "", "The cat ran to the dog!"]


@pytest.fixture(scope="module")
def words_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("orig-index") / "idx"
    build_index(DOCS, out, progress=False)
    return out


def test_build_facts_and_metadata(words_index: Path) -> None:
    info = read_index(words_index)
    meta = info.meta
    assert meta["tokenizer"] == "words" and meta["dtype"] == "u16"
    assert meta["docs"] == 4 and meta["tokens"] == 7 + 4 + 0 + 7
    # by frequency, ties by first appearance
    assert meta["words"]["vocab"] == ["The", "cat", "the", ".", "dog", "ran", "sat", "on", "mat", "A", "to", "!"]
    assert len(meta["corpus_sha256"]) == 64
    assert sorted(p.name for p in words_index.iterdir()) == [INFO_FILE, "offset.0", "table.0", "tokenized.0"]
    assert not (words_index / "metadata.json").exists()  # the engine would crash on it
    assert is_index(words_index)


def test_every_file_format_gives_the_same_index(tmp_path: Path, words_index: Path) -> None:
    jsonl = "".join(json.dumps({"text": d, "id": i}) + "\n" for i, d in enumerate(DOCS))
    text = "\n<|endoftext|>\n".join(DOCS)
    (tmp_path / "a.jsonl").write_text(jsonl)
    with gzip.open(tmp_path / "b.jsonl.gz", "wt") as handle:
        handle.write(jsonl)
    (tmp_path / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(jsonl.encode()))
    (tmp_path / "d.txt").write_text(text)
    with gzip.open(tmp_path / "e.txt.gz", "wt") as handle:
        handle.write(text)
    (tmp_path / "f.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
    reference = read_index(words_index).meta
    for name in ("a.jsonl", "b.jsonl.gz", "c.jsonl.zst", "d.txt", "e.txt.gz", "f.txt.zst"):
        facts = build_index([tmp_path / name], tmp_path / f"idx-{name.replace('.', '-')}", progress=False)
        assert facts["docs"] == reference["docs"], name
        assert facts["tokens"] == reference["tokens"], name
        if name.endswith("jsonl") or ".jsonl." in name:
            assert facts["corpus_sha256"] == reference["corpus_sha256"], name
        assert facts["sources"] == [{"name": str(tmp_path / name), "first_doc": 0, "docs": 4}]


def test_folder_corpus_and_sources(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "one.txt").write_text("alpha beta gamma")
    (corpus / "sub" / "two.jsonl").write_text('{"text": "beta gamma delta"}\n\n{"text": "x"}\n')
    facts = build_index([corpus], tmp_path / "idx", progress=False)
    assert facts["docs"] == 3
    assert [s["docs"] for s in facts["sources"]] == [1, 2]
    backend = open_backend(f"infini-gram:{tmp_path / 'idx'}")
    result = score_texts(backend, ["beta gamma delta"], [2])[0]
    assert result.originality[2] == 0.0 and result.longest_span == 3 and result.longest_span_doc == 1


def test_rebuild_replaces_an_index_atomically(tmp_path: Path) -> None:
    out = tmp_path / "idx"
    build_index(["one two three"], out, progress=False)
    first = read_index(out).meta["corpus_sha256"]
    build_index(["four five six"], out, progress=False)
    assert read_index(out).meta["corpus_sha256"] != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # no staging or old folders left


def test_failed_build_leaves_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"txt": "oops"}\n')
    with pytest.raises(ConfigError, match="line 2 has no string field 'text'"):
        build_index([bad], tmp_path / "idx", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


@pytest.mark.parametrize(
    ("corpus", "message"),
    [([], "no text to index"), (["", "   "], "no text to index"), ([Path("/no/such/file")], "no such corpus")],
)
def test_bad_corpora(tmp_path: Path, corpus: list, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_index(corpus, tmp_path / "idx", progress=False)


def test_paths_the_engine_misreads_go_through_a_neutral_link(tmp_path: Path) -> None:
    """A folder path holding "table" (say /home/me/stable/...) would be misread by the engine."""
    from pytest_novelty.scoring.originality import open_backend, score_texts
    from pytest_novelty.scoring.originality.index import engine_path

    docs = ["the cat sat on the mat today", "a dog ran in the park at noon"]
    plain = tmp_path / "plain"
    trapped = tmp_path / "stable" / "my_table_dir"
    build_index(docs, plain, progress=False)
    build_index(docs, trapped, progress=False)
    alias = engine_path(trapped)
    assert alias != trapped and "table" not in str(alias) and alias.resolve() == trapped.resolve()
    assert engine_path(trapped) == alias and engine_path(plain) == plain.resolve()
    texts = ["the cat sat on the mat today and then", "something else entirely new here"]
    for method in ("suffix-array", "creativity"):
        a = score_texts(open_backend(f"infini-gram:{plain}?method={method}"), texts, [2, 3])
        b = score_texts(open_backend(f"infini-gram:{trapped}?method={method}"), texts, [2, 3])
        assert [r.originality for r in a] == [r.originality for r in b]
        assert a[0].originality[3] < 1.0  # the copied opening is found through the link


def test_refuses_a_busy_output_folder(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="other files in it"):
        build_index(["a b c"], tmp_path / "busy", progress=False)


def test_cpus_keep_every_part_large_enough() -> None:
    assert _safe_cpus(1000, 2, 8) == 1
    assert _safe_cpus(3 * MIN_PART_BYTES, 2, 8) == min(os.cpu_count() or 1, 3)
    cpus = _safe_cpus(10**9, 2, 1)  # memory forces several batches
    assert 10**9 // (cpus * 8) >= MIN_PART_BYTES


def test_reading_broken_indexes(tmp_path: Path, words_index: Path) -> None:
    with pytest.raises(ConfigError, match="no index folder here; build one with"):
        read_index(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="not an index folder"):
        read_index(tmp_path / "empty")
    broken = tmp_path / "broken"
    build_index(["a b c d e f"], broken, progress=False)
    with open(broken / "table.0", "r+b") as handle:
        handle.truncate(5)
    with pytest.raises(HarnessError, match=r"shard 0 is damaged.*rebuild the index"):
        open_backend(f"infini-gram:{broken}")
    (broken / INFO_FILE).write_text("{not json")
    with pytest.raises(HarnessError, match="unreadable"):
        read_index(broken)


def test_spec_errors(words_index: Path) -> None:
    with pytest.raises(ConfigError, match="did you mean 'infini-gram'"):
        open_backend(f"infinigram:{words_index}")
    with pytest.raises(ConfigError, match=r"no option 'worker'.*did you mean 'workers'"):
        open_backend(f"infini-gram:{words_index}?worker=2")
    with pytest.raises(ConfigError, match="takes a int"):
        open_backend(f"infini-gram:{words_index}", workers="many")
    with pytest.raises(ConfigError, match="needs an index folder"):
        open_backend("ngram-set:")
    with pytest.raises(ConfigError, match="unknown originality backend"):
        open_backend("nonsense")


def test_options_in_the_spec(words_index: Path) -> None:
    backend = open_backend(f"infini-gram:{words_index}?workers=1&load_to_ram=true")
    assert backend.workers == 1  # type: ignore[attr-defined]
    assert score_texts(backend, ["The cat ran."], [2])[0].originality[2] == 0.0


def test_tokenizer_must_match(tmp_path: Path, words_index: Path) -> None:
    corpus = random_corpus(5)
    tok = train_tokenizer(corpus, tmp_path / "tok")
    other = train_tokenizer(corpus[:5], tmp_path / "tok-other", vocab_size=30)
    build_index(corpus, tmp_path / "bpe", tokenizer=str(tok), progress=False)
    assert (tmp_path / "bpe" / "tokenizer.json").is_file()
    open_backend(f"infini-gram:{tmp_path / 'bpe'}", tokenizer=str(tok))  # same one: fine
    with pytest.raises(ConfigError, match="built with tokenizer"):
        open_backend(f"infini-gram:{tmp_path / 'bpe'}", tokenizer=str(other))
    with pytest.raises(ConfigError, match="built with tokenizer 'words'"):
        open_backend(f"ngram-set:{words_index}", tokenizer=str(tok))
    with pytest.raises(ConfigError, match="shards disagree"):
        open_backend(f"infini-gram:{words_index},{tmp_path / 'bpe'}")
