"""The embedded demo: a tiny story model trained here, its training corpus and that corpus' index.

``--model demo`` (and the weaker ``demo-early``) resolve to folders in the cache, built on first use
from the builders in ``fixtures/demo/``. Concurrent runs wait on a file lock instead of building
twice, and a build is renamed into place only when complete, so an interrupted one is redone.

Training takes about two minutes on two idle cores, so ``fixtures/demo/trained/`` ships the two
weight files with a manifest naming the builder that trained them (the hash that keys the cache
folder): a first run rebuilds corpus, tokenizer, configs and index and places those weights, in
seconds. Weights of another builder are never used (the demo is trained here). A training build
on another machine gives the same files but for the weights' bytes (float32 training is not
bit-reproducible across CPU models; losses within 2 %, checked by ``tests/demo/test_demo_shipped.py``).
``python -m pytest_novelty.pipeline.demo ship`` trains from scratch and refreshes the shipped files.

The prepared demo heals itself: ``BUILD.json`` records the size and SHA-256 of every other file, and
every use checks them (:func:`check_demo`, through the identity memo: about 2 ms for its 18 files
warm). A damaged file is repaired under the lock with one line saying what: the index alone when
only it is damaged, else the whole demo (seconds with the shipped weights). A demo prepared by an
older version without checksums is checked against the records it has, then gets them (one line).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_novelty.infra.errors import HarnessError, NoveltyError
from pytest_novelty.infra.hashing import data_files, file_digest, hash_files, identity_memo
from pytest_novelty.infra.progress import notice
from pytest_novelty.infra.resources import bundled_path
from pytest_novelty.infra.storage import atomic_write_text, file_lock, folder_error, read_json

DEMO_MODELS = ("demo", "demo-early")
DEMO_VERSION = "v2"  # v2: the index records checksums of its files


MANIFEST = "MANIFEST.json"
BUILD_FILE = "BUILD.json"
"""The build's facts, written last: a demo folder without it is not a finished build."""
CHECKSUMS = "checksums"
"""The entry of ``BUILD.json`` recording the size and SHA-256 of every other file of the demo."""
_SHOWN = 3  # damaged files named in the one line that says so
# What training cannot skip: each checkpoint's weights and the losses measured while training.
_WEIGHT_FACTS = ("loss", "train_loss")


def _builder_digest() -> str:
    """A short hash of the builder's files directly in ``fixtures/demo/`` (not the weights in
    ``trained/``, its output): a changed builder means a new demo build."""
    digest = hashlib.sha256()
    folder = bundled_path("fixtures") / "demo"
    for path in sorted(folder.glob("*")):
        if path.suffix in (".py", ".json"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:8]


def demo_dir(cache_dir: Path) -> Path:
    """Where the demo assets of this builder version live inside ``cache_dir``."""
    return Path(cache_dir) / f"demo-{DEMO_VERSION}-{_builder_digest()}"


def is_built(cache_dir: Path) -> bool:
    """Whether a complete demo build is present (its files are checked by :func:`check_demo`)."""
    return (demo_dir(cache_dir) / BUILD_FILE).is_file()


def _load_builder() -> ModuleType:
    path = bundled_path("fixtures") / "demo" / "build.py"
    spec = importlib.util.spec_from_file_location("pytest_novelty_demo_build", path)
    if spec is None or spec.loader is None:
        raise HarnessError(f"{path}: cannot load the demo builder; reinstall pytest-novelty")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' log notices and "Writing model shards" bars off while the builder trains and
    saves (they tell the user nothing; the builder prints its own lines), restored afterwards."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def trained_dir() -> Path:
    """The folder of the shipped trained weights and their manifest."""
    return bundled_path("fixtures") / "demo" / "trained"


def read_manifest(folder: Path | None = None) -> dict[str, Any] | None:
    """The shipped weights' manifest, or None when there is none (or it cannot be read)."""
    try:
        return dict(json.loads(((folder or trained_dir()) / MANIFEST).read_text(encoding="utf-8")))
    except (OSError, ValueError, HarnessError):
        return None


def shipped_weights(builder: ModuleType, folder: Path | None = None) -> tuple[Any, str]:
    """The shipped weights as the builder's ``TrainedWeights`` when the manifest names this builder
    and each file has its recorded sha256; else None and why (then the demo is trained)."""
    folder = folder or trained_dir()
    manifest = read_manifest(folder)
    if manifest is None:
        return None, f"no shipped weights in {folder}"
    if manifest.get("builder") != _builder_digest() or manifest.get("demo_version") != DEMO_VERSION:
        return None, (f"the shipped weights were trained by builder {manifest.get('builder')}, "
                      f"this is {_builder_digest()}")
    files, losses = {}, {}
    for name in DEMO_MODELS:
        entry = manifest["weights"][name]
        path = folder / entry["file"]
        if not path.is_file() or file_digest(path) != entry["sha256"]:
            return None, f"{path} is missing or does not match its sha256 in {MANIFEST}"
        files[name], losses[name] = path, {key: float(entry[key]) for key in _WEIGHT_FACTS}
    return builder.TrainedWeights(files=files, losses=losses), ""


def _check_placed(staging: Path, manifest: dict[str, Any]) -> None:
    """The checkpoints written from shipped weights hold exactly those weights."""
    for name in DEMO_MODELS:
        written = staging / name / "model.safetensors"
        if file_digest(written) != manifest["weights"][name]["sha256"]:
            raise HarnessError(
                f"{written}: the rebuilt demo weights differ from {trained_dir() / MANIFEST}; "
                "reinstall pytest-novelty, or remove the manifest to train the demo here"
            )


@dataclass(frozen=True)
class DemoCheck:
    """What :func:`check_demo` found: ``damaged`` names each file missing or unlike its record (and
    why); ``legacy``, the demo records no checksums and was checked against the records it has."""

    folder: Path
    damaged: tuple[str, ...] = ()
    legacy: bool = False
    files: int = 0

    @property
    def ok(self) -> bool:
        return not self.damaged

    @property
    def index_only(self) -> bool:
        """Whether only the index is damaged (then rebuilding the index repairs it, in seconds)."""
        return bool(self.damaged) and all(entry.startswith("index/") for entry in self.damaged)

    @property
    def summary(self) -> str:
        """The damaged files in a few words: ``index/table.0 differs from its checksum (and 2 more)``."""
        named = "; ".join(self.damaged[:_SHOWN])
        more = len(self.damaged) - _SHOWN
        return named + (f" (and {more} more)" if more > 0 else "")


def _read_build(folder: Path) -> dict[str, Any] | None:
    facts = read_json(folder / BUILD_FILE)
    return facts if isinstance(facts, dict) else None


def _demo_files(folder: Path) -> list[Path]:
    """Every file of a demo folder that its checksums cover (all but ``BUILD.json`` and hidden files)."""
    return [f for f in data_files(folder) if f.relative_to(folder).as_posix() != BUILD_FILE]


def _checksums(folder: Path, memo: Any) -> dict[str, dict[str, Any]]:
    """Size and SHA-256 of every file of a demo folder, by relative path."""
    files = _demo_files(folder)
    digests = hash_files(files, memo=memo, what="the demo", quiet=True)
    return {f.relative_to(folder).as_posix(): {"bytes": f.stat().st_size, "sha256": digests[f]} for f in files}


def check_demo(cache_dir: Path, *, memo: Any = None) -> DemoCheck:
    """Check the prepared demo in ``cache_dir`` against its recorded checksums: sizes, then SHA-256
    through ``memo`` (default: the cache's identity memo, shared with the weights' checkpoint
    identity), so a warm check reads no file.

    A ``legacy`` demo (no checksums) is checked against what it records: the index against its
    ``novelty-index.json``, the corpus against ``BUILD.json``'s SHA-256, shipped weights against their
    manifest, and every other JSON file must parse.
    """
    folder = demo_dir(cache_dir)
    memo = identity_memo(cache_dir) if memo is None else memo
    facts = _read_build(folder)
    if facts is None:
        return DemoCheck(folder, (f"{BUILD_FILE} cannot be read",))
    recorded = facts.get(CHECKSUMS)
    if not isinstance(recorded, dict) or not recorded:
        return _check_legacy(folder, facts, memo)
    damaged, present = [], []
    for name, entry in sorted(recorded.items()):
        file = folder / name
        if not file.is_file():
            damaged.append(f"{name} is missing")
        elif not isinstance(entry, dict) or file.stat().st_size != entry.get("bytes"):
            recorded_bytes = entry.get("bytes") if isinstance(entry, dict) else "?"
            damaged.append(f"{name} has {file.stat().st_size} bytes, {recorded_bytes} recorded")
        else:
            present.append(file)
    digests = hash_files(present, memo=memo, what="the demo", quiet=True)
    for file in present:
        name = file.relative_to(folder).as_posix()
        if digests[file] != recorded[name].get("sha256"):
            damaged.append(f"{name} differs from its checksum")
    return DemoCheck(folder, tuple(sorted(damaged)), legacy=False, files=len(recorded))


def _check_legacy(folder: Path, facts: dict[str, Any], memo: Any) -> DemoCheck:
    """A demo without recorded checksums, checked against the records it has (see :func:`check_demo`)."""
    from pytest_novelty.scoring.originality import read_index

    damaged: list[str] = []
    files = _demo_files(folder)
    names = {f.relative_to(folder).as_posix() for f in files}
    expected = {"corpus.jsonl", "index/novelty-index.json"} | {
        f"{model}/{name}" for model in DEMO_MODELS for name in ("config.json", "model.safetensors", "tokenizer.json")
    }
    damaged.extend(f"{name} is missing" for name in sorted(expected - names))
    try:
        read_index(folder / "index", memo=memo)
    except NoveltyError as exc:
        damaged.append(f"index/ is damaged ({exc})")
    checks: dict[Path, str | None] = {}
    if isinstance(facts.get("corpus_sha256"), str):
        checks[folder / "corpus.jsonl"] = facts["corpus_sha256"]
    manifest = read_manifest() or {}
    if facts.get("trained_here") is False and manifest.get("builder") == _builder_digest():
        for model in DEMO_MODELS:
            checks[folder / model / "model.safetensors"] = manifest["weights"][model]["sha256"]
    present = [f for f in checks if f.is_file()]
    digests = hash_files(present, memo=memo, what="the demo", quiet=True)
    damaged.extend(f"{f.relative_to(folder).as_posix()} differs from its record" for f in present
                   if digests[f] != checks[f])
    for file in files:
        name = file.relative_to(folder).as_posix()
        if file.suffix == ".json" and not name.startswith("index/"):
            try:
                json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                damaged.append(f"{name} cannot be read")
    return DemoCheck(folder, tuple(sorted(damaged)), legacy=True, files=len(files))


def _record_checksums(folder: Path, facts: dict[str, Any], memo: Any) -> None:
    """Write ``BUILD.json`` again with the checksums of every other file (atomically)."""
    facts = {**facts, CHECKSUMS: _checksums(folder, memo)}
    atomic_write_text(folder / BUILD_FILE, json.dumps(facts, indent=1, default=str) + "\n")


def ensure_demo(cache_dir: Path, *, progress: bool = True, train: bool = False) -> Path:
    """The prepared demo in ``cache_dir``, checked, and prepared (again) where it is missing or damaged
    (module docstring); ``train=True`` trains from scratch (minutes) instead of placing the shipped weights."""
    target = demo_dir(cache_dir)
    try:
        return _ensure(cache_dir, target, progress=progress, train=train)
    except OSError as exc:  # a full or read-only disk while preparing: one line naming the demo folder
        raise folder_error(target, "demo folder", exc, elsewhere="give another cache folder") from None


def _ensure(cache_dir: Path, target: Path, *, progress: bool, train: bool) -> Path:
    memo = identity_memo(cache_dir)
    if is_built(cache_dir) and (first := check_demo(cache_dir, memo=memo)).ok and not first.legacy:
        return target  # nothing to heal and every checksum recorded: no lock needed
    with file_lock(Path(cache_dir) / f".{target.name}.lock"):
        found = check_demo(cache_dir, memo=memo) if is_built(cache_dir) else None  # another process may have healed it
        if found is not None and found.ok:
            if found.legacy:
                _record_checksums(target, _read_build(target) or {}, memo)
                notice(f"[novelty] the demo in {target} was prepared by an older version without checksums: checked "
                    f"against the records it has, and the checksums of its {found.files} files recorded now")
            return target
        if found is not None and found.index_only:
            notice(f"[novelty] the demo in {target} is damaged ({found.summary}); rebuilding its index (seconds)")
            _rebuild_index(target, memo, progress)
        else:
            damage = None if found is None else f"the demo in {target} is damaged ({found.summary}); preparing it again"
            _prepare(cache_dir, target, progress=progress, train=train, damage=damage, memo=memo)
        after = check_demo(cache_dir, memo=memo)
        if not after.ok:
            raise HarnessError(f"the demo in {target} is still damaged after preparing it again ({after.summary}); "
                               "check the disk, or remove the folder and run `pytest-novelty demo build`")
    return target


def _rebuild_index(target: Path, memo: Any, progress: bool) -> None:
    """Index the demo's (verified) corpus again in place of a damaged index; record the new checksums."""
    _replace(target / "index", None)
    facts = _read_build(target) or {}
    facts["index"] = _index_corpus(target, progress)
    _record_checksums(target, facts, memo)


def _index_corpus(folder: Path, progress: bool) -> dict[str, Any]:
    """Index the demo's ``corpus.jsonl`` into its ``index/`` folder (words as units); the index's facts."""
    from pytest_novelty.scoring.originality import build_index

    # The indexer's bar redraws with carriage returns: only on a terminal, never in a CI log.
    return build_index([folder / "corpus.jsonl"], folder / "index", tokenizer="words",
                       progress=progress and sys.stderr.isatty())


def _prepare(cache_dir: Path, target: Path, *, progress: bool, train: bool, damage: str | None, memo: Any) -> None:
    """Build the whole demo in a staging folder and swap it into place (the old one, if any, removed)."""
    start = time.perf_counter()
    builder = _load_builder()
    weights, why = (None, "training requested") if train else shipped_weights(builder)
    head = f"[novelty] {damage}" if damage else f"[novelty] preparing the demo in {target}"
    if weights is not None:
        notice(f"{head}: shipped weights of both checkpoints, corpus and index rebuilt here "
            f"({'' if damage else 'once; '}about 10 s on 2 idle cores)")
    else:
        notice(f"{head}: training the checkpoints ({why}), corpus and index "
            f"({'' if damage else 'once; '}about 2 minutes on 2 idle cores)")
    staging = Path(cache_dir) / f".{target.name}-staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        _build_into(staging, target, cache_dir, builder, weights, progress=progress, memo=memo, start=start)
    except BaseException:  # a full disk, an interrupt: the half-built staging folder goes, its space freed
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _build_into(staging: Path, target: Path, cache_dir: Path, builder: ModuleType, weights: Any, *,
                progress: bool, memo: Any, start: float) -> None:
    """Build the demo in ``staging``, then move it into place (see :func:`_prepare`)."""
    with quiet_transformers():
        facts: dict[str, Any] = dict(builder.build_demo(staging, progress=progress, weights=weights))
    if weights is not None:
        _check_placed(staging, read_manifest() or {})
    notice("[novelty] indexing the demo training corpus")
    facts["index"] = _index_corpus(staging, progress)
    facts["seconds_total"] = round(time.perf_counter() - start, 1)
    _record_checksums(staging, facts, memo)  # BUILD.json last: a folder without it is no finished build
    _replace(target, staging)
    notice(f"[novelty] demo built in {facts['seconds_total']:.0f}s")


def _replace(old: Path, new: Path | None) -> None:
    """Put ``new`` (or nothing) in the place of a damaged ``old``, moved aside first in one rename so
    readers never see half of either, then removed."""
    aside = old.with_name(f".{old.name}.damaged-{os.getpid()}")
    if old.exists():
        shutil.rmtree(aside, ignore_errors=True)
        old.rename(aside)
    if new is not None:
        new.rename(old)
    shutil.rmtree(aside, ignore_errors=True)


def ship(build: Path | None = None, dest: Path | None = None) -> dict[str, Any]:
    """Copy the trained weights of ``build`` (a from-scratch demo folder of this builder; without it
    one is trained now in a temporary cache) into ``dest`` (default :func:`trained_dir`) with their
    manifest, which is returned."""
    import platform
    import tempfile

    import torch
    import transformers

    digest = _builder_digest()
    with tempfile.TemporaryDirectory(prefix="novelty-demo-ship-") as scratch:
        if build is None:
            build = ensure_demo(Path(scratch), train=True)
        build = Path(build)
        facts = json.loads((build / BUILD_FILE).read_text(encoding="utf-8"))
        if build.name != f"demo-{DEMO_VERSION}-{digest}" or not facts.get("trained_here", True):
            raise HarnessError(f"{build}: not a from-scratch build of builder {digest} ({DEMO_VERSION}); "
                               "run without --from to train one")
        dest = Path(dest) if dest else trained_dir()
        dest.mkdir(parents=True, exist_ok=True)
        weights: dict[str, Any] = {}
        for name in DEMO_MODELS:
            shutil.copyfile(build / name / "model.safetensors", dest / f"{name}.safetensors")
            checkpoint = json.loads((build / name / "demo_facts.json").read_text(encoding="utf-8"))
            weights[name] = {"file": f"{name}.safetensors", "sha256": file_digest(dest / f"{name}.safetensors"),
                             **{key: checkpoint[key] for key in _WEIGHT_FACTS}}
    manifest = {
        "builder": digest, "demo_version": DEMO_VERSION,
        "trained_with": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                         "machine": platform.machine(), "threads": facts["recipe"]["threads"]},
        "weights": weights,
    }
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> int:
    """``python -m pytest_novelty.pipeline.demo ship [--from BUILD]``: refresh the shipped trained weights."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pytest_novelty.pipeline.demo",
                                     description="Refresh the demo's shipped trained weights.")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("ship", help="train the demo from scratch and copy its weights to fixtures/demo/trained")
    cmd.add_argument("--from", dest="build", type=Path, help="a from-scratch demo build of this builder to copy")
    args = parser.parse_args(argv)
    try:
        manifest = ship(args.build)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(manifest, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
