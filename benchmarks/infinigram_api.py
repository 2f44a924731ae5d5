"""Throughput of the infini-gram API client: count queries per second against a loopback server.

The server (``tests/servers/infinigram_api.py``) answers every query after ``--latency`` seconds,
as the public API does from afar; the client keeps ``--concurrency`` queries in flight through the
harness's one HTTP client. Prints the wall time, the queries per second and the ideal rate
(concurrency / latency); ``--faults`` makes that share of requests fail once (429, 5xx, dropped
connections, error answers), so the figure includes the retries.

    python benchmarks/infinigram_api.py --queries 2000 --latency 0.02 --concurrency 8
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_novelty.infra.http import Connection
from pytest_novelty.scoring.originality.client import JsonClient
from tests.servers.infinigram_api import FakeInfiniGram


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--faults", type=float, default=0.0, help="share of requests that fail once")
    args = parser.parse_args()

    docs = ["the cat sat on the mat and the dog sat on the log"]
    payloads = [{"index": "v2_bench", "query_type": "count", "query": f"the {i % 50} cat"} for i in range(args.queries)]
    answers = 0

    def count(_: int, answer: dict[str, object]) -> None:
        nonlocal answers
        answers += isinstance(answer.get("count"), int)

    with FakeInfiniGram(text_indexes={"v2_bench": docs}, latency=args.latency, fail_rate=args.faults) as server:
        connection = Connection.of({"concurrency": args.concurrency, "backoff": 0.01, "max_backoff": 0.05})
        client = JsonClient(server.url, name="the benchmark API", connection=connection)
        start = time.perf_counter()
        client.post_all(payloads, count)
        wall = time.perf_counter() - start
    ideal = args.concurrency / args.latency if args.latency else float("inf")
    print(
        f"infini-gram API client: {args.queries} queries, {args.latency * 1000:.0f} ms latency, "
        f"concurrency {args.concurrency}, fault share {args.faults:.0%}"
    )
    print(
        f"  {wall:.2f} s, {args.queries / wall:.0f} queries/s (ideal {ideal:.0f}/s), "
        f"{client.traffic.requests} requests, {client.traffic.retries} retries, {answers} answers"
    )
    return 0 if answers == args.queries else 1


if __name__ == "__main__":
    sys.exit(main())
