"""Throughput of the openai: judge: 1,000 items x 5 samples against a local endpoint with 200 ms latency.

Starts the test suite's fake OpenAI-compatible server on 127.0.0.1, answering every request after
200 ms, scores 1,000 distinct items with 5 samples each (one ``n=5`` request per item) at the
judge's default concurrency, with an on-disk cache in a temporary folder, then scores them again
from the cache. The target is under 15 s for the first pass; the exit status is 1 if it is missed.

    python benchmarks/judge.py [--items 1000] [--samples 5] [--latency 0.2] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_novelty.scoring.judges import JudgeItem, OpenAIJudge
from tests.servers.openai_api import FakeOpenAI

TARGET_SECONDS = 15.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()

    items = [
        JudgeItem("story", f"Story {i}: Once upon a time, Tom found a map.", f"Tom followed the map {i} miles.")
        for i in range(args.items)
    ]
    with FakeOpenAI(latency=args.latency) as server, tempfile.TemporaryDirectory() as cache:
        judge = OpenAIJudge(
            "judge-model",
            base_url=server.url,
            api_key="benchmark",
            samples=args.samples,
            concurrency=args.concurrency,
            cache_dir=Path(cache),
        )
        start = time.perf_counter()
        results = judge.score(items)
        first = time.perf_counter() - start
        requests = server.request_count
        start = time.perf_counter()
        judge.score(items)
        rerun = time.perf_counter() - start
        rerun_requests = server.request_count - requests

    scored = sum(r.quality is not None and len(r.scores) == args.samples for r in results)
    floor = args.items / args.concurrency * args.latency
    print(
        f"judge benchmark: {args.items} items x {args.samples} samples, {args.latency * 1000:.0f} ms latency, "
        f"concurrency {args.concurrency}"
    )
    print(
        f"  first pass: {first:.2f} s ({requests} requests, {scored}/{args.items} items fully scored, "
        f"latency floor {floor:.2f} s, target < {TARGET_SECONDS:.0f} s)"
    )
    print(f"  rerun from the cache: {rerun:.2f} s ({rerun_requests} requests)")
    ok = first < TARGET_SECONDS and scored == args.items and rerun_requests == 0
    print("  result:", "OK" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
