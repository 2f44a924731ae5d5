"""What the integrity checks of reused things cost: the demo's check on use, an index's identity.

    python benchmarks/integrity.py [--repeat 20]

On a private copy of the prepared demo (prepared first in the user cache if needed), measures:

- the demo check (``pipeline.demo.check_demo``) cold (no memo: every file hashed) and warm (the
  memo of digests filled: one ``stat`` and one memo read per file), and ``ensure_demo`` warm, the
  call a run makes several times;
- repairing the demo after damage: its index only, then the whole demo from the shipped weights;
- the identity of the demo's index behind cached originality answers
  (``scoring.originality.identity.index_identity``), cold and warm.

Each warm figure is the mean of ``--repeat`` calls. The load average is printed beside the
figures: the machine's cores may be shared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def timed(call: Callable[[], Any], repeat: int = 1) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        call()
    return (time.perf_counter() - start) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    from pytest_novelty.infra.hashing import identity_memo
    from pytest_novelty.infra.progress import send_notices_to
    from pytest_novelty.infra.storage import default_cache_dir
    from pytest_novelty.pipeline import demo
    from pytest_novelty.scoring.originality.identity import index_identity

    send_notices_to(lambda line: None)  # the figures only, not the demo's own lines
    shared = demo.ensure_demo(default_cache_dir(), progress=False)
    with tempfile.TemporaryDirectory(prefix="novelty-integrity-") as scratch:
        cache = Path(scratch) / "cache"
        shutil.copytree(shared, cache / shared.name)
        demo.ensure_demo(cache, progress=False)  # an older demo gets its checksums here
        folder = demo.demo_dir(cache)
        files = demo.check_demo(cache).files
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        print(f"demo: {files} files, {size / 1e6:.1f} MB; load average {os.getloadavg()[0]:.2f}")

        class NoMemo:
            def get(self, key: str) -> None:
                return None

            def put(self, key: str, value: Any) -> None:
                pass

        cold = timed(lambda: demo.check_demo(cache, memo=NoMemo()))
        memo = identity_memo(cache)
        warm = timed(lambda: demo.check_demo(cache, memo=memo), args.repeat)
        ensure = timed(lambda: demo.ensure_demo(cache, progress=False), args.repeat)
        print(f"demo check: cold {cold * 1e3:.1f} ms, warm {warm * 1e3:.2f} ms; ensure_demo warm {ensure * 1e3:.2f} ms")

        with (folder / "index" / "table.0").open("r+b") as fh:
            fh.seek(4096)
            fh.write(os.urandom(4096))
        index_repair = timed(lambda: demo.ensure_demo(cache, progress=False))
        with (folder / "demo" / "model.safetensors").open("r+b") as fh:
            fh.seek(4096)
            fh.write(os.urandom(4096))
        full_repair = timed(lambda: demo.ensure_demo(cache, progress=False))
        print(f"repair: index only {index_repair:.2f} s, whole demo (shipped weights) {full_repair:.2f} s")

        spec = f"infini-gram:{folder / 'index'}"
        cold_id = timed(lambda: index_identity(spec, cache_dir=Path(scratch) / "cold" / "originality"))
        warm_cache = Path(scratch) / "warm" / "originality"
        index_identity(spec, cache_dir=warm_cache)
        warm_id = timed(lambda: index_identity(spec, cache_dir=warm_cache), args.repeat)
        index_mb = sum(p.stat().st_size for p in (folder / "index").iterdir()) / 1e6
        print(f"index identity ({index_mb:.1f} MB): cold {cold_id * 1e3:.1f} ms, warm {warm_id * 1e3:.2f} ms")
    print(f"load average afterwards {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
