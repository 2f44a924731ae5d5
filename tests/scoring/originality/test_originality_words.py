"""The ``words`` tokenisation and the 16-bit word codec."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_novelty.scoring.originality.tokenization import (
    SEPARATOR_U16,
    UNKNOWN_TOKEN,
    SurfaceWords,
    WordCodec,
    WordsTokenizer,
)
from pytest_novelty.scoring.text import normalize, word_spans, words


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Don't stop!", ["Don", "'", "t", "stop", "!"]),
        ("  Hello,\tworld\n", ["Hello", ",", "world"]),
        ("snake_case and CamelCase 42x", ["snake_case", "and", "CamelCase", "42x"]),
        ("ｆｕｌｌ width ﬁne", ["full", "width", "fine"]),  # NFKC: full-width letters, ligature
        ("naïve café — déjà vu…", ["naïve", "café", "—", "déjà", "vu", ".", ".", "."]),
        ("", []),
        ("日本語のテキスト。", ["日本語のテキスト", "。"]),
    ],
)
def test_words(text: str, expected: list[str]) -> None:
    assert words(text) == expected


@given(st.text(max_size=60))
def test_spans_cover_words(text: str) -> None:
    normalized, spans = word_spans(text)
    assert normalized == normalize(text)
    assert [normalized[a:b] for a, b in spans] == words(text)


@settings(max_examples=60)
@given(
    vocab=st.integers(1, 300),
    single=st.integers(1, 300),
    ranks=st.lists(st.integers(-1, 299), max_size=40),
)
def test_codec_round_trip(vocab: int, single: int, ranks: list[int]) -> None:
    codec = WordCodec.for_vocab(vocab, single)
    ranks_arr = np.array([r if r < vocab else r % vocab for r in ranks], dtype=np.int64)
    ids, unit_pos = codec.encode_ranks(ranks_arr)
    assert unit_pos[0] == 0 and unit_pos[-1] == len(ids)
    assert (ids < SEPARATOR_U16).all()
    assert ((ids == UNKNOWN_TOKEN) == np.repeat(ranks_arr < 0, np.diff(unit_pos))).all()
    known = ranks_arr[ranks_arr >= 0]
    known_ids, _ = codec.encode_ranks(known)
    stream = np.concatenate([[SEPARATOR_U16], known_ids, [SEPARATOR_U16]]).astype(np.uint16)
    decoded = codec.decode_tokens(stream)
    assert decoded[0] == decoded[-1] == 0xFFFFFFFF
    assert decoded[1:-1].tolist() == known.tolist()


def test_codec_one_token_per_word_when_they_fit() -> None:
    assert WordCodec.for_vocab(65534).one_token_per_word
    big = WordCodec.for_vocab(65535)
    assert not big.one_token_per_word and big.single == 32768
    ids, unit_pos = big.encode_ranks(np.array([0, 32767, 32768, 65534]))
    assert np.diff(unit_pos).tolist() == [1, 1, 2, 2]
    assert ids.max() < UNKNOWN_TOKEN


def test_words_tokenizer_maps_unknown_words_to_a_token_never_indexed() -> None:
    tokenizer = WordsTokenizer(["the", "cat", "."], WordCodec.for_vocab(3))
    enc = tokenizer.encode(["The cat sat on the cat."])[0]
    assert enc.units.tolist() == [-1, 1, -1, -1, 0, 1, 2]
    assert enc.ids.tolist() == [UNKNOWN_TOKEN, 1, UNKNOWN_TOKEN, UNKNOWN_TOKEN, 0, 1, 2]
    assert enc.surface(4, 3) == "the cat."


def test_surface_words_keep_the_text() -> None:
    enc = SurfaceWords().encode(["ｆｏｏ  bar,\nfoo"])[0]
    assert enc.text == "foo  bar,\nfoo"
    assert enc.units.tolist() == [0, 1, 2, 0]
    assert enc.surface(1, 3) == "bar,\nfoo"
