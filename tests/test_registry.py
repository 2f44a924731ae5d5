"""The backend registry: the spec grammar and its errors, and backends registered outside the package.

Each ``open_*`` function must find a backend that a test registers with one decorator, pass it the
settings its signature names and the options its spec carries, and name an unknown prefix with a
suggestion. The backends registered here are small but real: they are used end to end (a judge
scores items, an originality backend goes through :func:`score_texts`, an equivalence check
partitions generations, a generator goes through :func:`generate`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from pytest_novelty.generation import Batch, LoadSettings, generate
from pytest_novelty.generation.backends import GENERATOR_BACKENDS, MODEL_SOURCES, open_generator
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.registry import Registry
from pytest_novelty.scoring.concepts import CONCEPT_EXTRACTORS
from pytest_novelty.scoring.equivalence import EQUIVALENCE_CHECKS, Equivalence, open_equivalence
from pytest_novelty.scoring.judges import JUDGES, Judge, JudgeItem, JudgeResult, open_judge
from pytest_novelty.scoring.originality import BACKENDS, MatchBounds, open_backend, score_texts
from pytest_novelty.scoring.originality.tokenization import Encoding, SurfaceWords
from pytest_novelty.suites.schema import GenerationSettings

# -- the grammar, on a registry of its own ---------------------------------------------------------


@pytest.fixture
def shapes() -> Registry[tuple[str, ...]]:
    registry: Registry[tuple[str, ...]] = Registry("shape", field="--shape", settings=("colour",))

    @registry.register("dot")
    def dot() -> tuple[str, ...]:
        return ("dot",)

    @registry.register("line", argument="LENGTH", needs="a length", options={"width": int, "dashed": bool})
    def line(length: str, *, colour: str = "black", width: int = 1, dashed: bool = False) -> tuple[str, ...]:
        return ("line", length, colour, str(width), str(dashed))

    return registry


def test_a_spec_opens_its_backend_with_the_settings_it_names(shapes: Registry[tuple[str, ...]]) -> None:
    assert shapes.open("dot", colour="red") == ("dot",)  # a setting it does not name is left out
    assert shapes.open("line:3?width=2&dashed=yes", colour="red") == ("line", "3", "red", "2", "True")
    assert shapes.open("line:3?width=2", options={"width": 5}) == ("line", "3", "black", "5", "False")
    assert shapes.usage() == "dot or line:LENGTH"


def test_a_setting_the_registry_does_not_pass_is_an_error_not_dropped(shapes: Registry[tuple[str, ...]]) -> None:
    """A misspelt setting used to vanish (the factory did not name it, so it was left out)."""
    with pytest.raises(TypeError, match=r"shape factories take no setting 'color' \(did you mean 'colour'\?\)"):
        shapes.open("line:3", color="red")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("dott", r"^--shape: unknown shape 'dott' \(did you mean 'dot'\?\); use dot or line:LENGTH$"),
        ("circle", r"^--shape: unknown shape 'circle'; use dot or line:LENGTH$"),
        ("", "a shape spec must be one of dot or line:LENGTH"),
        ("line", "shape line needs a length, as in line:LENGTH; got 'line'"),
        ("line: ", "shape line needs a length"),
        ("dot:3", "shape dot takes no argument: write 'dot', got 'dot:3'"),
        ("line:3?widht=2", r"has no option 'widht' \(did you mean 'width'\?\); its options: dashed, width"),
        ("line:3?width=wide", "option width of shape line takes a int, got 'wide'"),
        ("line:3?dashed=maybe", "option dashed of shape line takes a bool"),
        ("line:3?width", "option 'width' needs a value, as in width=VALUE"),
    ],
)
def test_every_bad_spec_is_one_line(shapes: Registry[tuple[str, ...]], spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        shapes.open(spec)
    assert "\n" not in str(caught.value)


def test_a_name_is_registered_once(shapes: Registry[tuple[str, ...]]) -> None:
    with pytest.raises(ValueError, match="already registered"):

        @shapes.register("dot")
        def another_dot() -> tuple[str, ...]:
            return ("another",)

    with pytest.raises(ValueError, match="plain word"):
        shapes.register("a:b")


# -- each open_* finds what a test registers --------------------------------------------------------


class LengthJudge:
    """Quality = min(1, words / target): a real judge, if a crude one."""

    def __init__(self, target: str, *, samples: int = 5, floor: float = 0.0) -> None:
        self.spec = f"length:{target}"
        self.target = int(target)
        self.samples = samples
        self.floor = floor

    def score(self, items: Sequence[JudgeItem], *, progress: bool = False) -> list[JudgeResult]:
        results = []
        for item in items:
            quality = max(self.floor, min(1.0, len(item.response.split()) / self.target))
            results.append(JudgeResult(quality=quality, scores=(quality,), judge=self.spec))
        return results


@pytest.fixture
def length_judge() -> Iterator[None]:
    JUDGES.register("length", argument="WORDS", options={"floor": float})(LengthJudge)
    yield
    JUDGES.unregister("length")


def test_open_judge_finds_a_registered_judge(length_judge: None) -> None:
    judge = open_judge("length:4?floor=0.1", samples=3, budget=9, base_url="http://127.0.0.1:9/v1")
    assert isinstance(judge, LengthJudge) and isinstance(judge, Judge)
    assert (judge.samples, judge.floor) == (3, 0.1)  # budget and base_url are not its settings
    items = [JudgeItem(task="story", prompt="p", response=text) for text in ("one two", "", "a b c d e f")]
    assert [r.quality for r in judge.score(items)] == [0.5, 0.1, 1.0]
    with pytest.raises(ConfigError, match=r"unknown judge 'lenght:4' \(did you mean 'length'\?\).*length:WORDS"):
        open_judge("lenght:4")


def test_an_unregistered_judge_is_gone(length_judge: None) -> None:
    JUDGES.unregister("length")
    with pytest.raises(ConfigError, match="unknown judge 'length:4'"):
        open_judge("length:4")


class WordListBackend:
    """``wordlist:FILE``: the corpus is a text file held as a set of word n-grams (up to ``max_n``)."""

    def __init__(self, path: str, *, max_n: int = 8, cache_dir: Path | None = None) -> None:
        self.spec = f"wordlist:{path}"
        self.tokenizer = SurfaceWords()
        self.max_n = max_n
        words = Path(path).read_text().split()
        self.seen = {tuple(words[i : i + n]) for n in range(1, max_n + 1) for i in range(len(words) - n + 1)}
        self.closed = False

    def match_bounds(
        self, encodings: Sequence[Encoding], ns: Sequence[int], *, progress: bool = False
    ) -> list[MatchBounds]:
        bounds = []
        for enc in encodings:
            words = enc.surface(0, len(enc)).split()
            lengths = []
            for i in range(len(words)):
                length = 0
                while length < self.max_n and i + length < len(words) and tuple(words[i : i + length + 1]) in self.seen:
                    length += 1
                lengths.append(length)
            bounds.append(MatchBounds.exact(np.array(lengths, dtype=np.int64)))
        return bounds

    def locate(self, spans: Sequence[tuple[Encoding, int, int]]) -> list[int | None]:
        return [None] * len(spans)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def wordlist() -> Iterator[None]:
    BACKENDS.register("wordlist", argument="FILE", needs="a text file", options={"max_n": int})(WordListBackend)
    yield
    BACKENDS.unregister("wordlist")


def test_open_backend_finds_a_registered_backend(wordlist: None, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat and the dog sat on the log")
    backend = open_backend(f"wordlist:{corpus}?max_n=6", cache_dir=tmp_path)
    assert isinstance(backend, WordListBackend) and backend.max_n == 6
    copied, fresh = score_texts(backend, ["the cat sat on the mat", "purple waves hum beneath quiet stars"], ns=(4,))
    assert copied.originality[4] == 0.0 and copied.longest_span == 6
    assert fresh.originality[4] == 1.0 and fresh.longest_span == 0
    with pytest.raises(ConfigError, match=r"did you mean 'wordlist'"):
        open_backend(f"wordlists:{corpus}")
    with pytest.raises(ConfigError, match="originality backend wordlist needs a text file"):
        open_backend("wordlist:")


class FirstWordEquivalence:
    """Equivalent when the two texts start with the same word (after the threshold's worth of letters)."""

    kind = "first-word"

    def __init__(self, *, threshold: float | None = None) -> None:
        self.threshold = 0.5 if threshold is None else threshold

    def matches(self, representative: str, candidates: Sequence[str]) -> list[bool]:
        head = representative.split()[:1]
        return [candidate.split()[:1] == head for candidate in candidates]

    def __call__(self, representative: str, candidate: str) -> bool:
        return self.matches(representative, [candidate])[0]


def test_open_equivalence_finds_a_registered_check() -> None:
    EQUIVALENCE_CHECKS.register("first-word")(FirstWordEquivalence)
    try:
        check = open_equivalence("first-word", threshold=0.25, device="cpu", batch_size=4)
        assert isinstance(check, FirstWordEquivalence) and isinstance(check, Equivalence)
        assert check.threshold == 0.25
        assert check.matches("once upon a time", ["once more", "twice upon", "once"]) == [True, False, True]
        with pytest.raises(ConfigError, match=r"did you mean 'first-word'"):
            open_equivalence("firstword")
    finally:
        EQUIVALENCE_CHECKS.unregister("first-word")


class EchoGenerator:
    """A generator backend that answers every row with its prompt reversed and its seed's parity."""

    def __init__(self, model: str, load: LoadSettings | None = None) -> None:
        self.name = model
        self.identity_id = f"echo:{model}"
        self.tokens_generated = 0
        self.load = load or LoadSettings()

    @property
    def device(self) -> str:
        return self.load.device

    def render(self, model_input: str | Sequence[dict[str, str]]) -> str:
        return model_input if isinstance(model_input, str) else " ".join(m["content"] for m in model_input)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def max_rows(self, prompt_tokens: int, settings: GenerationSettings) -> int:
        return 2

    def sample(self, batch: Batch) -> list[str]:
        answers = [f"{text[::-1]} {seed % 2}" for text, seed in zip(batch.texts, batch.seeds, strict=True)]
        self.tokens_generated += len(answers)
        return answers


def test_open_generator_finds_a_registered_backend_and_model_source(tmp_path: Path) -> None:
    GENERATOR_BACKENDS.register("echo")(EchoGenerator)
    MODEL_SOURCES.register("echo-served", argument="NAME")(lambda name: EchoGenerator(f"served-{name}"))
    try:
        generator = open_generator(str(tmp_path), backend="echo", device="cpu", gpus=3, memo=None)
        assert isinstance(generator, EchoGenerator) and generator.load == LoadSettings(device="cpu", gpus=3)
        settings = GenerationSettings(samples=2, batch_size=0)
        answers, stats = generate(generator, ["abc", "hello"], settings, cache_dir=tmp_path / "cache")
        assert [a[0].split()[0] for a in answers] == ["cba", "olleh"] and stats.rows == 4
        again, warm = generate(generator, ["abc", "hello"], settings, cache_dir=tmp_path / "cache")
        assert again == answers and warm.rows == 0
        served = open_generator("echo-served:big", backend="hf", base_url="http://127.0.0.1:9/v1")
        assert isinstance(served, EchoGenerator) and served.name == "served-big"
        with pytest.raises(ConfigError, match=r"--generator: unknown generator 'ecco' \(did you mean 'echo'\?\)"):
            open_generator(str(tmp_path), backend="ecco")
    finally:
        GENERATOR_BACKENDS.unregister("echo")
        MODEL_SOURCES.unregister("echo-served")


def test_builtin_prefixes_are_listed_in_order() -> None:
    assert JUDGES.names()[:4] == ("rules", "openai", "hf", "reward")
    assert BACKENDS.names()[:4] == ("infini-gram", "ngram-set", "infini-gram-api", "infini-gram-mini")
    assert EQUIVALENCE_CHECKS.names()[:3] == ("unigram", "classifier", "embedding")
    assert GENERATOR_BACKENDS.names()[:2] == ("hf", "vllm")
    assert MODEL_SOURCES.names()[:1] == ("openai",)
    assert CONCEPT_EXTRACTORS.names()[:2] == ("openai", "hf")
