"""Checkpoint identity: every byte of what the model loads from, nothing else; memoised; hub ids pinned."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_novelty.generation import generate
from pytest_novelty.generation.backends import open_generator
from pytest_novelty.generation.checkpoint import check_checkpoint
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.suites.schema import GenerationSettings
from tests.conftest import REPO, build_tiny_checkpoint, small_corpus
from tests.file_opens import opened_under

TEXTS = ["Lily went to the park.", "Tom had a red ball."]
SETTINGS = GenerationSettings(samples=2, max_new_tokens=6, batch_size=4, seed=3)

# -- checkpoints ------------------------------------------------------------------------------


def _save_bigger_model(folder: Path, *, seed: int) -> None:
    """Replace the tiny weights by 6 layers of width 128 (about 5 MB), so a middle layer is far
    from both ends of the weight file."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    old = GPT2Config.from_pretrained(folder)
    config = GPT2Config(
        vocab_size=old.vocab_size, n_embd=128, n_layer=6, n_head=2, n_positions=64,
        bos_token_id=old.bos_token_id, eos_token_id=old.eos_token_id, pad_token_id=old.pad_token_id,
    )  # fmt: skip
    GPT2LMHeadModel(config).save_pretrained(folder)


@pytest.fixture(scope="module")
def base_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = build_tiny_checkpoint(tmp_path_factory.mktemp("ident") / "model", small_corpus(300))
    _save_bigger_model(folder, seed=1)
    return folder


@pytest.fixture
def checkpoint(base_checkpoint: Path, tmp_path: Path) -> Path:
    """A private copy, free to edit."""
    return Path(shutil.copytree(base_checkpoint, tmp_path / "ckpt"))


def _fine_tune_one_middle_layer(folder: Path) -> None:
    """Noise on one middle layer, saved over the same folder (as a partial fine-tune would be)."""
    import torch
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(folder)
    with torch.no_grad():
        model.transformer.h[3].mlp.c_fc.weight.add_(0.05 * torch.randn_like(model.transformer.h[3].mlp.c_fc.weight))
    model.save_pretrained(folder)


def _fingerprint(folder: Path, cache: Path) -> str:
    import torch

    torch.set_num_threads(1)
    return open_generator(str(folder), device="cpu", memo=_memo(cache)).identity_id


def _memo(cache: Path):  # type: ignore[no-untyped-def]
    from pytest_novelty.infra.hashing import identity_memo

    return identity_memo(cache)


def test_a_layer_edited_in_place_gets_a_new_identity_and_is_generated_again(checkpoint: Path, tmp_path: Path) -> None:
    import torch

    torch.set_num_threads(1)
    weights = checkpoint / "model.safetensors"
    size = weights.stat().st_size
    assert size > 4 << 20  # the edited layer lies far from the first and last MiB
    cache = tmp_path / "cache"
    gen = open_generator(str(checkpoint), device="cpu")
    _, first = generate(gen, TEXTS, SETTINGS, cache_dir=cache / "generations")
    assert first.rows == 4
    _fine_tune_one_middle_layer(checkpoint)
    assert weights.stat().st_size == size
    edited = open_generator(str(checkpoint), device="cpu")
    assert edited.identity_id != gen.identity_id
    _, again = generate(edited, TEXTS, SETTINGS, cache_dir=cache / "generations")
    assert (again.rows, again.cached_rows) == (4, 0)


def test_the_memo_does_not_hide_an_edit_in_place(checkpoint: Path, tmp_path: Path) -> None:
    memo_cache = tmp_path / "cache"
    before = _fingerprint(checkpoint, memo_cache)
    assert _fingerprint(checkpoint, memo_cache) == before
    _fine_tune_one_middle_layer(checkpoint)
    assert _fingerprint(checkpoint, memo_cache) != before


def test_files_beside_the_weights_change_nothing(checkpoint: Path, tmp_path: Path, tiny_index: Path) -> None:
    import torch

    torch.set_num_threads(1)
    cache = tmp_path / "cache"
    gen = open_generator(str(checkpoint), device="cpu")
    first, _ = generate(gen, TEXTS, SETTINGS, cache_dir=cache / "generations")
    shutil.copytree(tiny_index, checkpoint / "novelty-index")
    (checkpoint / "train.log").write_text("step 100 loss 2.3\n")
    (checkpoint / "optimizer.pt").write_bytes(os.urandom(4096))
    (checkpoint / "README.md").write_text("# my fine-tune\n")
    (checkpoint / "checkpoint-500").mkdir()
    (checkpoint / "checkpoint-500" / "model.safetensors").write_bytes(os.urandom(1024))
    again = open_generator(str(checkpoint), device="cpu")
    assert again.identity_id == gen.identity_id
    answers, stats = generate(again, TEXTS, SETTINGS, cache_dir=cache / "generations")
    assert (stats.rows, stats.cached_rows) == (0, 4) and answers == first


def test_every_loaded_file_counts(checkpoint: Path) -> None:
    from pytest_novelty.infra.identity import checkpoint_identity

    before = checkpoint_identity(checkpoint)
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(before.files)
    config = checkpoint / "generation_config.json"
    config.write_text(config.read_text().replace("}", ', "repetition_penalty": 1.3}', 1))
    after = checkpoint_identity(checkpoint)
    assert after.id != before.id
    assert [n for n in after.files if after.files[n] != before.files[n]] == ["generation_config.json"]
    assert after.description == f"ckpt @ {after.id[:8]}"


def test_the_memo_makes_a_second_call_read_no_checkpoint_file(checkpoint: Path, tmp_path: Path) -> None:
    from pytest_novelty.infra.hashing import identity_memo
    from pytest_novelty.infra.identity import checkpoint_identity

    memo = identity_memo(tmp_path / "cache")
    with opened_under(checkpoint) as opened:
        first = checkpoint_identity(checkpoint, memo=memo)
    assert str((checkpoint / "model.safetensors").resolve()) in opened
    with opened_under(checkpoint) as opened:
        second = checkpoint_identity(checkpoint, memo=memo)
    assert second == first and opened == []
    # Touching a file (same bytes, new mtime) makes it read again, and only it.
    os.utime(checkpoint / "config.json")
    with opened_under(checkpoint) as opened:
        third = checkpoint_identity(checkpoint, memo=memo)
    assert third == first and [Path(p).name for p in opened] == ["config.json"]


def test_the_runner_keeps_the_memo_in_its_cache(checkpoint: Path, tmp_path: Path) -> None:
    from pytest_novelty.infra.hashing import identity_memo, stat_key
    from pytest_novelty.pipeline.runner import RunConfig, Runner

    cache = tmp_path / "cache"
    gen = Runner(RunConfig(model=str(checkpoint), cache_dir=cache, device="cpu")).generator()
    weights = checkpoint / "model.safetensors"
    assert identity_memo(cache).get(stat_key(weights, "blake3")) == gen.identity.files["model.safetensors"]
    assert gen.identity.description == f"ckpt @ {gen.identity_id[:8]}"


def test_progress_hears_every_byte(checkpoint: Path) -> None:
    from pytest_novelty.infra.identity import checkpoint_identity, loaded_files

    calls: list[tuple[int, int]] = []
    checkpoint_identity(checkpoint, on_progress=lambda done, total: calls.append((done, total)))
    total = sum(p.stat().st_size for p in loaded_files(checkpoint))
    assert calls and calls[-1] == (total, total)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_adapter_identity_covers_its_base(checkpoint: Path, tmp_path: Path) -> None:
    from pytest_novelty.infra.identity import checkpoint_identity

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(f'{{"base_model_name_or_path": "{checkpoint}", "r": 8}}')
    (adapter / "adapter_model.safetensors").write_bytes(b"\0" * 64)
    before = checkpoint_identity(adapter)
    assert set(before.files) == {"adapter_config.json", "adapter_model.safetensors"}
    _fine_tune_one_middle_layer(checkpoint)
    assert checkpoint_identity(adapter).id != before.id


# -- hub ids ----------------------------------------------------------------------------------

SHA_MAIN = "0123456789abcdef0123456789abcdef01234567"
SHA_V1 = "89abcdef0123456789abcdef0123456789abcdef"


@pytest.fixture
def hub_cache(tmp_path: Path, base_checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Hugging Face cache laid out as ``huggingface-cli download`` leaves it, offline."""
    from pytest_novelty.infra import hub

    root = tmp_path / "hf-hub"
    repo = root / "models--someorg--tiny"
    for ref, sha in (("main", SHA_MAIN), ("v1", SHA_V1)):
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(sha)
        shutil.copytree(base_checkpoint, repo / "snapshots" / sha)
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub._resolve.cache_clear()
    return root


def test_hub_id_is_its_commit_sha_and_loads_offline_from_the_cache(
    hub_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    from pytest_novelty.infra.identity import checkpoint_identity

    torch.set_num_threads(1)
    main = checkpoint_identity("someorg/tiny")
    assert main.id == SHA_MAIN and main.trusted and main.description.startswith("someorg/tiny @ 01234567")
    assert capsys.readouterr().err.count("on trust") == 1
    check_checkpoint("someorg/tiny@v1")  # the old code refused '@'
    gen = open_generator("someorg/tiny@v1", device="cpu")
    assert gen.identity_id == SHA_V1
    answers, stats = generate(gen, TEXTS, SETTINGS)
    assert stats.rows == 4 and all(len(a) == 2 for a in answers)
    trust = [line for line in capsys.readouterr().err.splitlines() if "on trust" in line]
    assert len(trust) == 1 and "revision v1" in trust[0]  # once per revision, however often it is resolved
    pinned = checkpoint_identity(f"someorg/tiny@{SHA_V1}")
    assert pinned.id == SHA_V1 and not pinned.trusted
    assert "on trust" not in capsys.readouterr().err  # never for a pinned sha


def test_hub_id_missing_offline_fails_fast_with_the_fix(hub_cache: Path) -> None:
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"HF_HUB_OFFLINE.*huggingface-cli download someorg/other"):
        check_checkpoint("someorg/other")
    with pytest.raises(ConfigError, match="revision 'v2' is not in the local"):
        check_checkpoint("someorg/tiny@v2")
    assert time.perf_counter() - start < 5


def test_offline_pytest_run_on_an_unknown_hub_model_ends_fast_in_few_lines(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty"), "PYTHONPATH": str(REPO)}
    env["PYTEST_NOVELTY_CACHE"] = str(tmp_path / "cache")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--model", "someorg/some-model", "-p", "no:cacheprovider"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    took = time.perf_counter() - start
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode != 0 and took < 30
    assert len(lines) <= 3, lines
    assert "huggingface-cli download someorg/some-model" in proc.stdout + proc.stderr


# -- hashing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["sha256", "blake3"])
@pytest.mark.parametrize("ahead", [1, 3])
def test_file_digests_read_ahead_equal_the_whole_file_hashed_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, algorithm: str, ahead: int
) -> None:
    """Blocks read at their own offsets on helper threads hash to the digest of the whole file, at
    every size around the block boundaries, and progress hears every byte."""
    import hashlib

    import blake3

    from pytest_novelty.infra import hashing

    block = 1024
    monkeypatch.setattr(hashing, "READ_SIZE", block)
    monkeypatch.setattr(hashing, "READ_AHEAD", ahead)
    data = os.urandom(7 * block + 3)
    for size in (0, 1, block - 1, block, block + 1, 3 * block, 7 * block + 3):
        path = tmp_path / f"f{size}"
        path.write_bytes(data[:size])
        heard: list[int] = []
        digest = hashing.file_digest(path, algorithm, heard.append)
        whole = hashlib.sha256(data[:size]) if algorithm == "sha256" else blake3.blake3(data[:size])
        assert digest == whole.hexdigest() and sum(heard) == size, size


def test_identity_format_2_never_meets_format_1(checkpoint: Path, tmp_path: Path) -> None:
    """Checkpoint files are hashed with BLAKE3 now: the identity differs from the SHA-256 one a
    cache may hold answers under (never misread), and a memo of SHA-256 digests (the old key, same
    length) is not taken for BLAKE3 ones: every file is read again."""
    import hashlib

    import blake3

    from pytest_novelty.infra.hashing import identity_memo, stat_key
    from pytest_novelty.infra.identity import checkpoint_identity, loaded_files

    files = loaded_files(checkpoint)
    memo = identity_memo(tmp_path / "cache")
    old = {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    for f, digest in old.items():
        memo.put(stat_key(f), digest)  # what format 1 remembered, under its key
    format_1 = hashlib.sha256(b"pytest-novelty checkpoint identity 1\0")
    for f in files:
        format_1.update(f"{f.relative_to(checkpoint).as_posix()}\0{old[f]}\0".encode())
    with opened_under(checkpoint) as opened:
        ident = checkpoint_identity(checkpoint, memo=memo)
    assert {Path(p).name for p in opened} == {f.name for f in files}  # the SHA-256 memo was not used
    blake = {f.relative_to(checkpoint).as_posix(): blake3.blake3(f.read_bytes()).hexdigest() for f in files}
    assert ident.files == blake
    assert ident.id != format_1.hexdigest()[:24]
    assert checkpoint_identity(checkpoint, memo=memo) == ident
