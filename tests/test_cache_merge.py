"""``pytest-novelty cache merge``, ``pack`` and ``unpack``: the union of caches, every entry checked.

Caches here are written by the cache layer itself (``Namespace.put``), so every entry is a real one;
damage is done to the files as a disk or a transfer would.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from pytest_novelty.infra.cache import Cache, repaired
from pytest_novelty.infra.cache_merge import PACK_MARK, merge_caches, pack_cache
from pytest_novelty.infra.errors import ConfigError, HarnessError


def _cache(root: Path, entries: dict[str, object], name: str = "generations") -> Path:
    store = Cache(root).namespace(name)
    for key, value in entries.items():
        store.put(key, value)
    return root


def _values(root: Path, keys: list[str], name: str = "generations") -> dict[str, object]:
    store = Cache(root).namespace(name)
    return {key: store.get(key) for key in keys}


def test_the_union_of_caches_is_exact(tmp_path: Path) -> None:
    a = _cache(tmp_path / "a", {"k1": "one", "k2": "two"})
    _cache(a, {"x": [1, 2]}, name="originality-scores")
    b = _cache(tmp_path / "b", {"k2": "two", "k3": "three"})
    _cache(b / "originality", {"nested": {"n": 1}}, name="index-checksums")  # a namespace below another folder
    counts = merge_caches([a, b], tmp_path / "dst")
    assert (counts.added, counts.same, counts.damaged, counts.conflicting) == (5, 1, 0, 0)
    dst = tmp_path / "dst"
    assert _values(dst, ["k1", "k2", "k3"]) == {"k1": "one", "k2": "two", "k3": "three"}
    assert Cache(dst).namespace("originality-scores").get("x") == [1, 2]
    assert Cache(dst / "originality").namespace("index-checksums").get("nested") == {"n": 1}
    again = merge_caches([a, b], dst)  # a second merge adds nothing
    assert (again.added, again.same) == (0, 6)


def test_a_damaged_entry_is_left_out_and_counted(tmp_path: Path) -> None:
    a = _cache(tmp_path / "a", {f"k{i}": f"answer {i}" for i in range(5)})
    victim = Cache(a).namespace("generations").path("k3")
    data = json.loads(victim.read_text())
    data["value"] = "answer 3, edited"  # the checksum no longer matches
    victim.write_text(json.dumps(data))
    torn = Cache(a).namespace("generations").path("k4")
    torn.write_bytes(torn.read_bytes()[:20])  # cut short
    counts = merge_caches([a], tmp_path / "dst")
    assert (counts.added, counts.damaged) == (3, 2)
    assert any("k" not in name and str(victim.name) in name for name in counts.damaged_names)
    values = _values(tmp_path / "dst", [f"k{i}" for i in range(5)])
    assert values == {"k0": "answer 0", "k1": "answer 1", "k2": "answer 2", "k3": None, "k4": None}


def test_an_entry_under_another_keys_name_is_damaged(tmp_path: Path) -> None:
    a = _cache(tmp_path / "a", {"k1": "one", "k2": "two"})
    store = Cache(a).namespace("generations")
    moved = store.path("k1").parent / (store.path("k1").name[:2] + "0" * 38 + ".json")
    moved.parent.mkdir(parents=True, exist_ok=True)
    moved.write_bytes(store.path("k2").read_bytes())  # a sound envelope, in the wrong place
    counts = merge_caches([a], tmp_path / "dst")
    assert counts.damaged == 1 and counts.added == 2


def test_two_payloads_for_one_key_keep_the_first(tmp_path: Path) -> None:
    dst = _cache(tmp_path / "dst", {"k": "the destination's"})
    a = _cache(tmp_path / "a", {"k": "the first source's", "j": "first"})
    b = _cache(tmp_path / "b", {"k": "the second source's", "j": "second"})
    counts = merge_caches([a, b], dst)
    assert (counts.conflicting, counts.added) == (3, 1)  # k twice against the destination's, j once against a's
    assert _values(dst, ["k", "j"]) == {"k": "the destination's", "j": "first"}


def test_a_damaged_destination_entry_is_replaced(tmp_path: Path) -> None:
    dst = _cache(tmp_path / "dst", {"k": "sound"})
    path = Cache(dst).namespace("generations").path("k")
    path.write_text("not json")
    counts = merge_caches([_cache(tmp_path / "a", {"k": "sound"})], dst)
    assert counts.replaced == 1
    assert _values(dst, ["k"]) == {"k": "sound"}


def test_the_demo_and_leftovers_are_not_merged(tmp_path: Path) -> None:
    a = _cache(tmp_path / "a", {"k": "v"})
    (a / "demo-v2-abc" / "demo").mkdir(parents=True)
    (a / "demo-v2-abc" / "demo" / "model.safetensors").write_bytes(b"weights")
    (a / ".trash-generations-1234").mkdir()
    folder = Cache(a).namespace("generations").path("k").parent
    (folder / ".entry.json.abc.tmp").write_text("half")  # a write in flight
    counts = merge_caches([a], tmp_path / "dst")
    assert counts.added == 1 and counts.skipped == 1 and counts.damaged == 0
    assert not (tmp_path / "dst" / "demo-v2-abc").exists()
    assert not (tmp_path / "dst" / ".trash-generations-1234").exists()


def test_a_merge_while_a_run_writes_the_destination(tmp_path: Path) -> None:
    """Merging into a cache a run is writing: every entry ends sound, one payload per key, none lost."""
    keys = [f"k{i}" for i in range(300)]
    source = _cache(tmp_path / "a", {key: f"merged {key}" for key in keys})
    dst = tmp_path / "dst"
    store = Cache(dst).namespace("generations")
    written: dict[str, object] = {}

    def run() -> None:  # another run computes the same keys meanwhile
        for key in reversed(keys):
            written[key] = store.put(key, f"computed {key}")

    thread = threading.Thread(target=run)
    thread.start()
    counts = merge_caches([source], dst)
    thread.join()
    before = repaired()
    final = _values(dst, keys)
    assert repaired() == before  # nothing damaged
    assert counts.added + counts.conflicting == len(keys)
    assert all(final[key] == written[key] for key in keys)  # what the run was told is what stays
    assert all(str(final[key]).endswith(key) for key in keys)


def test_a_pack_round_trips_and_is_the_same_bytes_each_time(tmp_path: Path) -> None:
    a = _cache(tmp_path / "a", {f"k{i}": {"answer": i} for i in range(50)})
    (a / "demo-v2-x").mkdir()
    (a / "demo-v2-x" / "big.bin").write_bytes(b"0" * 1000)
    first, second = tmp_path / "one.tar.zst", tmp_path / "two.tar.zst"
    assert pack_cache(a, first).added == 50
    pack_cache(a, second)
    assert first.read_bytes() == second.read_bytes()
    counts = merge_caches([first], tmp_path / "dst")
    assert counts.added == 50 and counts.damaged == 0
    assert _values(tmp_path / "dst", ["k7"]) == {"k7": {"answer": 7}}
    assert not (tmp_path / "dst" / "demo-v2-x").exists()


def _pack(path: Path, members: list[tuple[tarfile.TarInfo, bytes]], declared: int) -> Path:
    import zstandard

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        mark = json.dumps({"format": 1, "entries": declared}).encode()
        info = tarfile.TarInfo(PACK_MARK)
        info.size = len(mark)
        archive.addfile(info, io.BytesIO(mark))
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    path.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
    return path


def _foreign_pack(tmp_path: Path) -> tuple[Path, Path]:
    """A pack whose members climb out of the cache (``..``, an absolute name, a link to /etc/passwd)
    after a sound entry, and that entry's cache folder."""
    sound = _cache(tmp_path / "a", {"k": "v"})
    entry = Cache(sound).namespace("generations").path("k")
    name = entry.relative_to(sound).as_posix()
    good = tarfile.TarInfo(name)
    good.size = entry.stat().st_size
    members = [(good, entry.read_bytes())]
    for bad in ("../escape.json", "/etc/cron.d/x", f"generations/{name.split('/')[1]}/../../x.json"):
        info = tarfile.TarInfo(bad)
        info.size = 3
        members.append((info, b"bad"))
    link = tarfile.TarInfo(name)
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    members.append((link, b""))
    return _pack(tmp_path / "evil.tar.zst", members, declared=len(members)), sound


@pytest.mark.parametrize("command", ["cache merge", "cache unpack"])
def test_a_pack_this_tool_did_not_write_is_refused_before_anything_is_written(tmp_path: Path, command: str) -> None:
    pack, _ = _foreign_pack(tmp_path)
    dst = tmp_path / "dst"
    with pytest.raises(ConfigError) as caught:
        merge_caches([pack], dst, command=command)
    assert str(caught.value) == (f"{command}: {pack}: not a pack this tool wrote: its member '../escape.json' is not a "
                                 "cache entry (a name climbing out of the cache); nothing was written")
    assert not dst.exists()  # not even the destination folder: nothing of the pack was applied
    assert not (tmp_path / "escape.json").exists() and not (tmp_path / "x.json").exists()
    link_only = _pack(tmp_path / "link.tar.zst", [_foreign_link(tmp_path)], declared=1)
    with pytest.raises(ConfigError, match=r"its member '.*' is not a cache entry \(a link to /etc/passwd\)"):
        merge_caches([link_only], dst, command=command)
    assert not dst.exists()


def _foreign_link(tmp_path: Path) -> tuple[tarfile.TarInfo, bytes]:
    link = tarfile.TarInfo("generations/ab/" + "ab" + "0" * 38 + ".json")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return link, b""


def test_a_cut_short_or_damaged_pack_is_named_and_nothing_of_it_is_merged(tmp_path: Path) -> None:
    import random

    noise = random.Random(0)
    keys = [f"k{i}" for i in range(400)]
    a = _cache(tmp_path / "a", {key: "".join(noise.choice("abcdefgh") for _ in range(1500)) for key in keys})
    full = tmp_path / "full.tar.zst"
    pack_cache(a, full, level=1)
    cut = tmp_path / "cut.tar.zst"
    cut.write_bytes(full.read_bytes()[: len(full.read_bytes()) * 2 // 3])
    with pytest.raises(HarnessError, match=r"cut\.tar\.zst: the pack is damaged \(.*\); nothing was merged") as caught:
        merge_caches([cut], tmp_path / "dst")
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "dst").exists()  # not half applied
    early = tmp_path / "early.tar.zst"
    early.write_bytes(full.read_bytes()[:200])  # damaged before its first entry: still damage, not a wrong file
    with pytest.raises(HarnessError, match="before its first entry"):
        merge_caches([early], tmp_path / "dst2")
    one = _cache(tmp_path / "one", {"k": "v"})
    entry = Cache(one).namespace("generations").path("k")
    altered = tarfile.TarInfo(entry.relative_to(one).as_posix())
    raw = entry.read_bytes().replace(b'"v"', b'"w"')
    altered.size = len(raw)
    with pytest.raises(HarnessError, match=r"fails its checksum\); nothing was merged"):
        merge_caches([_pack(tmp_path / "altered.tar.zst", [(altered, raw)], declared=1)], tmp_path / "dst3")
    assert not (tmp_path / "dst3").exists()


def test_what_is_no_cache_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such cache folder or pack"):
        merge_caches([tmp_path / "absent"], tmp_path / "dst")
    junk = tmp_path / "junk.tar.zst"
    junk.write_bytes(b"this is not a pack")
    with pytest.raises(ConfigError, match="not a packed pytest-novelty cache"):
        merge_caches([junk], tmp_path / "dst")
    assert not (tmp_path / "dst").exists()  # a refused source leaves no empty destination behind


def test_each_command_names_itself_in_its_errors(tmp_path: Path) -> None:
    """``cache merge`` errors say ``cache merge``, ``cache unpack`` errors ``cache unpack``, whichever
    kind of source (a folder or a pack) the error is about."""
    junk = tmp_path / "junk.tar.zst"
    junk.write_bytes(b"this is not a pack")
    for command in ("cache merge", "cache unpack"):
        for source in (junk, tmp_path / "absent.tar.zst"):
            with pytest.raises(ConfigError) as caught:
                merge_caches([source], tmp_path / "dst", command=command)
            assert str(caught.value).startswith(f"{command}: {source}: "), caught.value


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_novelty.cli", "cache", *args], capture_output=True,
                          text=True, check=False)


def test_the_command_line_merges_packs_and_unpacks(tmp_path: Path) -> None:
    a = _cache(tmp_path / "a", {"k1": "one"})
    b = _cache(tmp_path / "b", {"k2": "two"})
    path = Cache(b).namespace("generations").path("k2")
    path.write_text(path.read_text().replace("two", "TWO"))
    merged = _cli("merge", str(a), str(b), "--into", str(tmp_path / "dst"))
    assert merged.returncode == 0, merged.stderr
    assert "1 entries added" in merged.stdout and "1 damaged left out" in merged.stdout
    assert "warning: 1 damaged entries left out" in merged.stderr and "Traceback" not in merged.stderr
    packed = _cli("pack", str(tmp_path / "dst"), "--out", str(tmp_path / "dst.tar.zst"))
    assert packed.returncode == 0 and "packed 1 entries" in packed.stdout
    unpacked = _cli("unpack", str(tmp_path / "dst.tar.zst"), "--into", str(tmp_path / "again"))
    assert unpacked.returncode == 0 and _values(tmp_path / "again", ["k1"]) == {"k1": "one"}
    missing = _cli("merge", str(tmp_path / "nowhere"), "--into", str(tmp_path / "dst"))
    assert missing.returncode == 4 and missing.stderr.count("\n") == 1 and "nowhere" in missing.stderr


@pytest.fixture
def read_only(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A read-only file system (root only)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], capture_output=True,
                             check=False)
    if mounted.returncode != 0:
        pytest.skip("mounting a read-only tmpfs needs root")
    yield folder
    subprocess.run(["umount", str(folder)], check=False)


def test_a_read_only_destination_is_refused_before_anything_is_read(tmp_path: Path, read_only: Path) -> None:
    """A read-only destination the user named stays read-only until they change it: bad input, one line."""
    a = _cache(tmp_path / "a", {"k1": "one"})
    result = _cli("merge", str(a), "--into", str(read_only / "dst"))
    assert result.returncode == 4, result.stderr
    assert result.stderr.count("\n") == 1 and "cannot be written: a read-only file system" in result.stderr
