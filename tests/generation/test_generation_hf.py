"""Batched, seeded, cached generation on a real tiny checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_novelty.generation import Batch, generate, plan_batches
from pytest_novelty.generation.backends import open_generator
from pytest_novelty.generation.checkpoint import check_checkpoint
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.identity import checkpoint_identity
from pytest_novelty.suites.schema import GenerationSettings

pytestmark = pytest.mark.slow

TEXTS = ["Lily went to the park.", "Tom had a red ball.", "Mia saw a big dog near the tree.", "Ben ran."]
SETTINGS = GenerationSettings(samples=3, max_new_tokens=8, batch_size=4, seed=7)


@pytest.fixture(scope="module")
def generator(tiny_checkpoint: Path):  # type: ignore[no-untyped-def]
    import torch

    torch.set_num_threads(1)
    return open_generator(str(tiny_checkpoint), device="cpu")


def test_plan_groups_rows_by_length_and_covers_every_row() -> None:
    lengths = [5, 2, 9, 2, 7]
    plan = plan_batches(lengths, lambda n: 99, batch_size=2)
    assert sorted(i for batch in plan for i in batch) == [0, 1, 2, 3, 4]
    assert plan[0] == [1, 3]  # the two shortest first
    assert all(len(b) <= 2 for b in plan)


def test_auto_plan_asks_the_backend_how_many_rows_fit() -> None:
    lengths = [10] * 5 + [100] * 5
    allowed = lambda n: 4 if n <= 10 else 2  # noqa: E731
    plan = plan_batches(lengths, allowed)
    assert [len(b) for b in plan] == [4, 2, 2, 2]
    assert all(len(b) <= allowed(max(lengths[i] for i in b)) for b in plan)


def test_samples_per_prompt_reproducible_and_cached(generator, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first, stats = generate(generator, TEXTS, SETTINGS, cache_dir=tmp_path)
    assert (stats.batches, stats.rows, stats.cached_rows) == (3, 12, 0)
    assert stats.tokens > 0 and stats.tokens == generator.tokens_generated - (generator.tokens_generated - stats.tokens)
    assert [len(s) for s in first] == [3, 3, 3, 3]
    assert all(isinstance(t, str) for s in first for t in s)
    # Sampling is real: the three samples of a prompt are not all identical.
    assert any(len(set(s)) > 1 for s in first)
    again, stats_again = generate(generator, TEXTS, SETTINGS, cache_dir=tmp_path)
    assert (stats_again.batches, stats_again.rows, stats_again.cached_rows) == (0, 0, 12) and again == first
    fresh, _ = generate(generator, TEXTS, SETTINGS, cache_dir=None)
    assert fresh == first


def test_answers_do_not_depend_on_the_batch(generator) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    batched, _ = generate(generator, TEXTS, replace(SETTINGS, batch_size=12))
    one_by_one, stats = generate(generator, TEXTS, replace(SETTINGS, batch_size=1))
    automatic, _ = generate(generator, TEXTS, replace(SETTINGS, batch_size=0))
    assert stats.batches == 12
    assert batched == one_by_one == automatic


def test_more_samples_keep_the_first_ones(generator, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    two, _ = generate(generator, TEXTS, replace(SETTINGS, samples=2), cache_dir=tmp_path)
    five, stats = generate(generator, TEXTS, replace(SETTINGS, samples=5), cache_dir=tmp_path)
    assert [s[:2] for s in five] == two
    assert (stats.rows, stats.cached_rows) == (12, 8)


def test_resume_after_partial_cache(generator, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    full, _ = generate(generator, TEXTS, SETTINGS, cache_dir=tmp_path)
    files = sorted(tmp_path.rglob("*.json"))
    assert len(files) == len(TEXTS) * SETTINGS.samples  # one entry per row
    files[0].unlink()  # as if the run had been killed before this row was written
    files[5].unlink()
    resumed, stats = generate(generator, TEXTS, SETTINGS, cache_dir=tmp_path)
    assert stats.rows == 2 and resumed == full


def test_other_seed_gives_other_samples(generator) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    a, _ = generate(generator, TEXTS, SETTINGS)
    b, _ = generate(generator, TEXTS, replace(SETTINGS, seed=8))
    assert a != b


def test_greedy_rows_equal_transformers_generate(generator) -> None:  # type: ignore[no-untyped-def]
    """At temperature 0 the decode loop must give exactly what ``model.generate`` gives."""
    from dataclasses import replace

    import torch

    settings = replace(SETTINGS, temperature=0.0, samples=1, max_new_tokens=12)
    ours, _ = generate(generator, TEXTS, settings)
    tok = generator.tokenizer
    for text, (answer,) in zip(TEXTS, ours, strict=True):
        enc = tok([text], return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            out = generator.model.generate(**enc, do_sample=False, max_new_tokens=12, pad_token_id=tok.pad_token_id)
        assert answer == tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)


def test_stop_strings_end_rows_early(generator) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    seeds = list(range(100, 100 + len(TEXTS)))
    settings = replace(SETTINGS, max_new_tokens=24)
    free = generator.sample(Batch(TEXTS, seeds, settings))
    # An ASCII letter that some answer writes after its first few characters (token pieces decoded one
    # by one are exact for ASCII; the tiny model also writes partial multi-byte characters).
    stop = next(c for a in free for c in a[4:] if c.isascii() and c.isalpha())
    before = generator.tokens_generated
    stopped = generator.sample(Batch(TEXTS, seeds, replace(settings, stop=(stop,))))
    assert generator.tokens_generated - before < sum(len(generator.tokenizer(a)["input_ids"]) for a in free)
    cut = 0
    for a, b in zip(free, stopped, strict=True):
        # The same draws up to the stop: the stopped answer is a prefix of the free one.
        assert a.startswith(b)
        if stop in a.lstrip():
            assert stop in b and len(b) < len(a)
            cut += 1
    assert cut >= 1


def test_chat_input_needs_a_chat_template(generator) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="no chat template"):
        generator.render([{"role": "user", "content": "hi"}])


def test_fingerprint_follows_content(tiny_checkpoint: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(tiny_checkpoint, copy)
    assert checkpoint_identity(str(copy)).id == checkpoint_identity(str(tiny_checkpoint)).id
    (copy / "config.json").write_text((copy / "config.json").read_text().replace("0.02", "0.03"))
    assert checkpoint_identity(str(copy)).id != checkpoint_identity(str(tiny_checkpoint)).id


@pytest.mark.parametrize("name", ["org/model", "gpt2-org/tiny.v1", "org/model@v2"])
def test_hub_ids_not_in_the_cache_offline_name_the_fix(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match="huggingface-cli download"):
        check_checkpoint(name)


def test_trust_remote_code_needs_opt_in(tiny_checkpoint: Path, tmp_path: Path) -> None:
    import json
    import shutil

    custom = tmp_path / "custom"
    shutil.copytree(tiny_checkpoint, custom)
    config = json.loads((custom / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_custom.CustomModel"}
    config["model_type"] = "custom-novelty-test"
    (custom / "config.json").write_text(json.dumps(config))
    (custom / "modeling_custom.py").write_text("raise RuntimeError('remote code must not run')\n")
    with pytest.raises(ConfigError, match="--trust-remote-code"):
        open_generator(str(custom), device="cpu")
