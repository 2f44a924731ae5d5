"""The one cache layer: damaged entries dropped and counted, first writer wins, clears safe under load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_novelty.infra.cache import Cache, clear_cache, repaired

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def test_entries_round_trip_and_put_answers_what_get_will(tmp_path: Path) -> None:
    ns = Cache(tmp_path).namespace("things")
    assert ns.get("k") is None
    assert ns.put("k", {"b": (1, 2), "a": "x"}) == {"a": "x", "b": [1, 2]}
    assert ns.get("k") == {"a": "x", "b": [1, 2]}
    assert ns.put(["any", 1, "json"], 3.5) == 3.5 and ns.get(["any", 1, "json"]) == 3.5
    with pytest.raises(ValueError):
        ns.put("none", None)
    entry = json.loads(ns.path("k").read_text())
    assert set(entry) == {"format", "version", "key", "sha256", "value"} and entry["key"] == "k"


def test_first_writer_wins(tmp_path: Path) -> None:
    ns = Cache(tmp_path).namespace("answers")
    assert ns.put("k", "first") == "first"
    assert ns.put("k", "second") == "first"
    assert ns.get("k") == "first"


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda raw: raw[: len(raw) // 2], id="truncated"),
        pytest.param(lambda raw: raw[:10] + os.urandom(40) + raw[50:], id="random-bytes"),
        pytest.param(lambda raw: b"", id="empty"),
        pytest.param(lambda raw: raw.replace(b'"value": "forty-two"', b'"value": "forty-three"'), id="value-edited"),
        pytest.param(lambda raw: raw.replace(b'"version": 1', b'"version": 7'), id="other-version"),
        pytest.param(lambda raw: b'["forty-two"]', id="other-layout"),
        pytest.param(lambda raw: json.dumps({"answer": "forty-two"}).encode(), id="old-style"),
    ],
)
def test_damaged_entry_is_dropped_counted_once_and_replaced(tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    ns = Cache(tmp_path).namespace("answers")
    ns.put("k", "forty-two")
    path = ns.path("k")
    damaged = damage(path.read_bytes())
    assert damaged != path.read_bytes()
    path.write_bytes(damaged)
    before = repaired()
    assert ns.get("k") is None and ns.get("k") is None
    assert repaired() == before + 1  # counted once, however often it is read
    assert ns.put("k", "recomputed") == "recomputed"  # a damaged entry does not win
    assert ns.get("k") == "recomputed"


def test_an_entry_copied_under_another_key_is_not_trusted(tmp_path: Path) -> None:
    ns = Cache(tmp_path).namespace("answers")
    ns.put("a", "answer of a")
    ns.path("b").parent.mkdir(parents=True, exist_ok=True)
    ns.path("b").write_bytes(ns.path("a").read_bytes())
    assert ns.get("b") is None


def test_a_namespace_checks_the_layout_of_its_values(tmp_path: Path) -> None:
    loose = Cache(tmp_path).namespace("rows")
    loose.put("k", {"originality": "not a dict"})
    strict = Cache(tmp_path).namespace("rows", validate=lambda v: isinstance(v.get("originality"), dict))
    assert strict.get("k") is None
    assert strict.put("k", {"originality": {"4": 0.5}}) == {"originality": {"4": 0.5}}


def test_clear_renames_aside_and_later_writes_recreate_folders(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    ns = cache.namespace("generations")
    ns.put("k", "v")
    (tmp_path / "demo-1-abc").mkdir()
    removed = clear_cache(tmp_path)
    assert removed > 0 and sorted(p.name for p in tmp_path.iterdir()) == [".clear.lock", "demo-1-abc"]
    assert ns.get("k") is None
    assert ns.put("k", "w") == "w" and ns.get("k") == "w"
    ns.clear()
    ns.clear()  # clearing what is gone is fine
    assert ns.get("k") is None


_WRITER = """
import sys, time
from pytest_novelty.infra.cache import Cache
root, me, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
ns = Cache(root).namespace("answers")
while time.time() < start:
    pass
got = [ns.put(f"k{i}", f"{me}-{i}") for i in range(200)]
print("|".join(got))
"""


def test_two_processes_writing_the_same_keys_end_with_one_answer_that_both_use(tmp_path: Path) -> None:
    start = time.time() + 2.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path), name, str(start)], env=ENV, stdout=subprocess.PIPE, text=True
        )
        for name in ("a", "b")
    ]
    outputs = [p.communicate(timeout=120)[0].strip().split("|") for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outputs[0] == outputs[1]  # each process used the answer that was stored first
    ns = Cache(tmp_path).namespace("answers")
    assert [ns.get(f"k{i}") for i in range(200)] == outputs[0]


def _fill(root: Path, files: int = 3000) -> None:
    """Many entries across folders, as a used cache holds them."""
    for kind in ("generations", "originality-scores", "judge"):
        for i in range(files // 3):
            folder = root / kind / f"{i % 97:02x}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{i:08x}.json").write_text('{"x": 1}')


@pytest.mark.parametrize("round_", range(3))
def test_two_concurrent_clears_both_succeed(tmp_path: Path, round_: int) -> None:
    _fill(tmp_path)
    command = [sys.executable, "-m", "pytest_novelty.cli", "cache", "clear", "--cache", str(tmp_path)]
    procs = [subprocess.Popen(command, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        assert b"Traceback" not in err
    assert [p.name for p in tmp_path.iterdir()] == [".clear.lock"]  # the lock the clears took turns on


_GENERATOR = """
import json, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from pytest_novelty.generation import generate
from pytest_novelty.generation.backends import open_generator
from pytest_novelty.suites.schema import GenerationSettings
gen = open_generator(sys.argv[1], device="cpu")
texts = [f"Story {i}: Lily saw a {w}." for i, w in enumerate("abcdefghijkl")]
out = []
for seed in range(3):
    settings = GenerationSettings(samples=2, max_new_tokens=6, batch_size=1, seed=seed)
    out.append(generate(gen, texts, settings, cache_dir=Path(sys.argv[2]) / "generations")[0])
print(json.dumps(out))
"""


@pytest.mark.slow
def test_a_clear_during_another_process_writes_breaks_neither(tmp_path: Path, tiny_checkpoint: Path) -> None:
    root = tmp_path / "cache"
    reference, writer = (
        subprocess.Popen([sys.executable, "-c", _GENERATOR, str(tiny_checkpoint), str(folder)],
                         env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for folder in (tmp_path / "reference", root)
    )  # fmt: skip  # the undisturbed run beside the disturbed one
    clears = 0
    while writer.poll() is None:
        clear_cache(root)  # must not raise while the writer creates and replaces files
        clears += 1
        time.sleep(0.005)  # the writer gets the cores between clears, which come no less often than its writes
    out, err = writer.communicate()
    expected, reference_err = reference.communicate(timeout=300)
    assert writer.returncode == 0, err
    assert reference.returncode == 0, reference_err
    assert json.loads(out) == json.loads(expected)  # the cleared run's answers are whole and right
    assert clears > 10


_CLEAR = """
import sys, time
from pytest_novelty.cli import main
root, start = sys.argv[1], float(sys.argv[2])
while time.time() < start:
    pass
sys.exit(main(["cache", "clear", "--cache", root]))
"""


@pytest.mark.parametrize("round_", range(3))
def test_two_clears_at_once_each_say_what_they_removed_themselves(tmp_path: Path, round_: int) -> None:
    """Two `pytest-novelty cache clear` started at the same instant on a real cache: between them
    they report exactly what the cache held, and no byte twice (clears take turns, so the second
    finds the cache empty; the old code let them split it and count what the other deleted)."""
    for kind in ("generations", "originality-scores", "judge"):
        namespace = Cache(tmp_path).namespace(kind)
        for i in range(250):
            namespace.put(f"k{i}", "x" * 400)
    total = sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file())
    start = time.time() + 2.0
    procs = [
        subprocess.Popen([sys.executable, "-c", _CLEAR, str(tmp_path), str(start)], env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    said = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "Traceback" not in err, err
        said.append(float(out.split()[1]))  # "removed 0.4 MB from DIR"
    assert sorted(said) == [0.0, round(total / 1e6, 1)] and total > 0.2e6
    assert [p.name for p in tmp_path.iterdir()] == [".clear.lock"]


def test_clearing_a_read_only_cache_is_one_line(tmp_path: Path) -> None:
    from tests.file_systems import mounts

    with mounts() as made:
        frozen = made.tmpfs(tmp_path / "frozen")
        Cache(frozen).namespace("generations").put("k", "an answer")
        made.remount_read_only(frozen)  # a cache on a disk that became read-only: nothing can be removed
        done = subprocess.run([sys.executable, "-m", "pytest_novelty.cli", "cache", "clear", "--cache", str(frozen)],
                              env=ENV, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 4
    assert done.stderr.strip() == (f"pytest-novelty: error: {frozen}: --cache: the cache folder cannot be written: a "
                                   "read-only file system; give a writable folder")
