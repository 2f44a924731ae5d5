"""Equivalence checks for NoveltyBench partitioning: pre-filter, ROUGE-1, pair classifier, embeddings."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.metrics import distinct_k, partition
from pytest_novelty.scoring.equivalence import (
    ClassifierEquivalence,
    EmbeddingEquivalence,
    UnigramEquivalence,
    open_equivalence,
    prefilter_equivalence,
    rouge1_f1,
)
from tests.generation.tiny_models import layer_sizes
from tests.spec_errors import check_unknown_kind

# pre-filter


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("Paris", "  paris ", True),
        ("Paris", "London", False),
        ("red and blue", "blue and red", True),
        ("The answer is 42", "42", False),  # 2 × 1 shared < 4 words
        ("It is a cat", "it is a dog", True),  # 2 × 3 shared ≥ 4 words
        ("Paris.", "paris", False),  # punctuation stays part of the word
        ("", "", True),
        ("", "yes", False),
        ("one two three four five six", "one two three four five six", None),
        ("one two three four five six", "six", None),
    ],
)
def test_prefilter(first: str, second: str, expected: bool | None) -> None:
    assert prefilter_equivalence(first, second) is expected
    assert prefilter_equivalence(second, first) is expected


# ROUGE-1


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("the cat sat", "the cat ran", 2 / 3),
        ("Hello, World!", "hello world", 1.0),
        ("a a a b", "a b", 2 / 3),  # overlap counts min(3, 1) + 1; P = 1, R = 1/2
        ("New-York", "new york", 1.0),
        ("café", "caf", 1.0),  # only ASCII letters and digits form tokens
        ("", "anything", 0.0),
        ("!!!", "???", 0.0),
    ],
)
def test_rouge1_f1(first: str, second: str, expected: float) -> None:
    assert rouge1_f1(first, second) == pytest.approx(expected, abs=1e-15)
    assert rouge1_f1(second, first) == pytest.approx(expected, abs=1e-15)


# unigram check and partition


def test_unigram_threshold_is_strict() -> None:
    first, second = "a b c d e f", "a b c x y z"  # six words each, F1 exactly 0.5
    assert rouge1_f1(first, second) == 0.5
    assert not open_equivalence("unigram", threshold=0.5)(first, second)
    assert open_equivalence("unigram", threshold=0.49)(first, second)


def test_prefilter_decides_before_rouge() -> None:
    check = open_equivalence("unigram")
    assert isinstance(check, UnigramEquivalence)
    assert check.threshold == 0.458
    # ROUGE sees no tokens at all, but the pre-filter finds a shared word.
    assert check("!!! ???", "!!! ...")
    # ROUGE would call these identical, but the pre-filter compares whole words.
    assert not check("New-York", "new york")


LIGHTHOUSE = "The old lighthouse keeper watched the storm roll in over the grey sea"
LIGHTHOUSE_AGAIN = "The old lighthouse keeper watched the storm roll across the grey sea"
BAKER = "A young baker opened her shop before dawn and sold warm bread to the village"
BAKER_AGAIN = "A young baker opened her shop before dawn, selling warm bread to the village"


def test_unigram_partition_on_hand_made_generations() -> None:
    generations = [LIGHTHOUSE, LIGHTHOUSE_AGAIN, BAKER, "Paris", "paris", "London", BAKER_AGAIN]
    labels = partition(generations, open_equivalence("unigram"))
    assert labels == [0, 0, 1, 2, 2, 3, 1]
    assert distinct_k(labels) == 4


def test_unigram_partition_is_greedy() -> None:
    # b is close to both a and c, but a and c are far apart: c is compared with a only.
    a = "one two three four five six seven eight"
    b = "one two three four five alpha beta gamma"
    c = "alpha beta gamma delta epsilon five four three"
    check = open_equivalence("unigram")
    assert check(a, b) and check(b, c) and not check(a, c)
    assert partition([a, b, c], check) == [0, 0, 1]
    assert partition([b, a, c], check) == [0, 0, 0]


def test_batched_and_pairwise_answers_agree() -> None:
    check = open_equivalence("unigram")
    candidates = [LIGHTHOUSE_AGAIN, BAKER, "Paris", "", BAKER_AGAIN]
    assert check.matches(LIGHTHOUSE, candidates) == [check(LIGHTHOUSE, text) for text in candidates]


# specs


@pytest.mark.parametrize(("spec", "close"), [("unigrm", "unigram"), ("clasifier:/tmp/model", "classifier"),
                                             ("embeding:/tmp/model", "embedding"), ("bleu", None)])
def test_an_unknown_kind_lists_the_kinds_and_names_a_close_one(spec: str, close: str | None) -> None:
    check_unknown_kind(open_equivalence, spec, "unigram, classifier:PATH or embedding:PATH", close)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "must be one of"),
        ("classifier", "needs a model folder"),
        ("embedding:", "needs a model folder"),
        ("unigram:/tmp/model", "takes no argument"),
        ("classifier:/no/such/folder", "local model folder"),
    ],
)
def test_bad_arguments(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        open_equivalence(spec)


@pytest.mark.parametrize(("spec", "threshold"), [("unigram", 1.5), ("unigram", -0.1), ("unigram", math.nan)])
def test_bad_thresholds(spec: str, threshold: float) -> None:
    with pytest.raises(ConfigError, match="threshold"):
        open_equivalence(spec, threshold=threshold)


def test_a_folder_without_a_model(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="could not load"):
        open_equivalence(f"classifier:{tmp_path}")


# model-backed checks, on tiny models built here

WORDS = [
    *("the", "old", "lighthouse", "keeper", "watched", "storm", "roll", "in", "over", "grey", "sea"),
    *("a", "young", "baker", "opened", "her", "shop", "before", "dawn", "and", "sold", "warm", "bread"),
    *("to", "village", "paris", "london", "cat", "dog", "ran", "sat", "on", "mat", "quietly"),
]


def build_tokenizer(folder: Path) -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {token: index for index, token in enumerate([*specials, *dict.fromkeys(WORDS)])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    fast.save_pretrained(folder)
    return fast


def bert_config(vocab_size: int, **extra: Any) -> Any:
    from transformers import BertConfig

    return BertConfig(vocab_size=vocab_size, **layer_sizes(hidden=16, layers=1, heads=2, positions=300), **extra)


def build_classifier(folder: Path, *, p_equivalent: float | None = None, num_labels: int = 2) -> Path:
    """A tiny BERT pair classifier.

    With ``p_equivalent`` its head ignores the input and gives that probability of class 1.
    """
    import torch
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    tokenizer = build_tokenizer(folder)
    model = BertForSequenceClassification(bert_config(len(tokenizer), num_labels=num_labels))
    if p_equivalent is not None:
        with torch.no_grad():
            model.classifier.weight.zero_()
            model.classifier.bias.copy_(torch.tensor([0.0, math.log(p_equivalent / (1 - p_equivalent))]))
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def torch_one_thread() -> None:
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def classifiers(tmp_path_factory: pytest.TempPathFactory, torch_one_thread: None) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pair-classifiers")
    return {
        "random": build_classifier(root / "random"),
        "p=0.11": build_classifier(root / "above", p_equivalent=0.11),
        "p=0.09": build_classifier(root / "below", p_equivalent=0.09),
        "p=0.99": build_classifier(root / "always", p_equivalent=0.99),
    }


@pytest.mark.slow
def test_classifier_threshold_on_class_one(classifiers: dict[str, Path]) -> None:
    above = open_equivalence(f"classifier:{classifiers['p=0.11']}", device="cpu")
    below = open_equivalence(f"classifier:{classifiers['p=0.09']}", device="cpu")
    assert isinstance(above, ClassifierEquivalence) and above.threshold == 0.102
    assert above.probabilities([(LIGHTHOUSE, BAKER)]) == [pytest.approx(0.11, abs=1e-6)]
    assert above(LIGHTHOUSE, BAKER)
    assert not below(LIGHTHOUSE, BAKER)
    # Short texts are decided by the pre-filter whatever the model says.
    assert below("Paris", "paris")
    assert not open_equivalence(f"classifier:{classifiers['p=0.99']}")("Paris", "London")


@pytest.mark.slow
def test_classifier_partition(classifiers: dict[str, Path]) -> None:
    # The pre-filter decides only when both texts are short; a short and a long text go to the model.
    generations = ["Paris", "London", "paris", LIGHTHOUSE, BAKER, BAKER_AGAIN]
    always = open_equivalence(f"classifier:{classifiers['p=0.99']}", device="cpu")
    never = open_equivalence(f"classifier:{classifiers['p=0.09']}", device="cpu")
    assert partition(generations, always) == [0, 1, 0, 0, 0, 0]
    assert partition(generations, never) == [0, 1, 0, 2, 3, 4]


@pytest.mark.slow
def test_classifier_input_layout(classifiers: dict[str, Path]) -> None:
    check = open_equivalence(f"classifier:{classifiers['random']}", device="cpu")
    assert isinstance(check, ClassifierEquivalence)
    seen: dict[str, Any] = {}

    def capture(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        seen.update(kwargs)

    check.model.register_forward_pre_hook(capture, with_kwargs=True)
    long_text = " ".join(WORDS[index % len(WORDS)] for index in range(200))
    check.probabilities([(long_text, "the cat sat")])
    vocab = check.tokenizer.get_vocab()
    first = [vocab[word] for word in long_text.split()[:128]]
    second = [vocab[word] for word in ("the", "cat", "sat")]
    cls, sep = check.tokenizer.cls_token_id, check.tokenizer.sep_token_id
    assert seen["input_ids"][0].tolist() == [cls, *first, sep, *second, sep]
    assert seen["token_type_ids"][0].tolist() == [0] * 130 + [1] * 4
    assert seen["attention_mask"][0].tolist() == [1] * 134


@pytest.mark.slow
def test_classifier_batches_like_single_pairs(classifiers: dict[str, Path]) -> None:
    batched = ClassifierEquivalence(classifiers["random"], device="cpu", batch_size=8)
    single = ClassifierEquivalence(classifiers["random"], device="cpu", batch_size=1)
    candidates = [LIGHTHOUSE_AGAIN, BAKER, "the cat sat on the mat quietly", BAKER_AGAIN, "dog"]
    together = batched.scores(LIGHTHOUSE, candidates)
    alone = [single.scores(LIGHTHOUSE, [text])[0] for text in candidates]
    assert together == pytest.approx(alone, abs=1e-5)
    # The scores are the model's, not constants.
    assert max(together) - min(together) > 1e-6


@pytest.mark.slow
def test_classifier_needs_two_labels(tmp_path: Path, torch_one_thread: None) -> None:
    folder = build_classifier(tmp_path / "three", num_labels=3)
    with pytest.raises(ConfigError, match="two-class"):
        open_equivalence(f"classifier:{folder}")


def test_a_cuda_device_without_cuda_is_one_line(
    tmp_path: Path, torch_one_thread: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Equivalence models resolve ``--device`` like generators do (one resolver): asking for CUDA on a
    machine without it names the option and the fix instead of failing inside torch. A machine with
    CUDA is made to look like one without (torch says so), so the test runs everywhere."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    folder = build_classifier(tmp_path / "classifier")
    with pytest.raises(ConfigError, match=r"^--device: CUDA is not available on this machine; use --device cpu$"):
        open_equivalence(f"classifier:{folder}", device="cuda")
    assert open_equivalence(f"classifier:{folder}", device="auto").device == "cpu"  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory, torch_one_thread: None) -> Path:
    import torch
    from transformers import BertModel

    folder = tmp_path_factory.mktemp("embedder")
    torch.manual_seed(1)
    tokenizer = build_tokenizer(folder)
    BertModel(bert_config(len(tokenizer)), add_pooling_layer=False).save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_embedding_is_the_masked_mean(embedder: Path) -> None:
    import torch

    check = open_equivalence(f"embedding:{embedder}", device="cpu")
    assert isinstance(check, EmbeddingEquivalence) and check.threshold == 0.9
    short, long = "the cat sat", LIGHTHOUSE.lower()
    together = check.embed([short, long])  # the short text is padded in this batch
    encoded = check.tokenizer([short], return_tensors="pt")
    with torch.no_grad():
        hidden = check.model(**encoded).last_hidden_state[0]
    expected = torch.nn.functional.normalize(hidden.mean(dim=0), dim=-1)
    assert torch.allclose(together[0], expected, atol=1e-5)
    assert float(together[0].norm()) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.slow
def test_embedding_threshold(embedder: Path) -> None:
    check = open_equivalence(f"embedding:{embedder}", device="cpu")
    text, other = LIGHTHOUSE.lower(), BAKER.lower()
    similarity = check.scores(text, [other])[0]
    assert check.scores(text, [text])[0] == pytest.approx(1.0, abs=1e-5)
    assert check(text, text)
    assert open_equivalence(f"embedding:{embedder}", threshold=similarity - 1e-4)(text, other)
    assert not open_equivalence(f"embedding:{embedder}", threshold=min(similarity + 1e-4, 1.0))(text, other)
    with pytest.raises(ConfigError, match=r"\[-1, 1\]"):
        open_equivalence(f"embedding:{embedder}", threshold=-1.5)
