"""Throughput of the openai: judge against its latency floor, with and without injected faults.

Starts the test suite's fake OpenAI-compatible server on 127.0.0.1 in a process of its own (an
endpoint never shares the judge's interpreter; ``--same-process`` puts it back in this one, as
the first version of this benchmark did), answering every request after ``--latency`` seconds.
Scores ``--items`` distinct items with ``--samples`` samples each (one ``n=samples`` request per
item) at ``--concurrency``, with an on-disk cache in a temporary folder, then scores them again
from the cache (no request may be sent).

The floor is what the latency alone costs: requests sent x latency / concurrency. The goal is
1.25 x the floor without faults. Without faults the endpoint is, by default, a lean one
(``--server lean``: an asyncio loop that reads each request, waits the latency and answers one
fixed valid reply per choice), since the test suite's fake (``--server fake``: ``http.server``
with a thread per connection) costs more time of its own than the floor leaves: a bare ``httpx``
client, 32 connections and nothing else, takes 1.38 x the floor against it here and 1.19 x
against the lean one. The benchmark times that bare client too, on the same endpoint, as the
peer: what any Python client built on httpx reaches. ``--faults F`` injects faults into a share F of the items, one
kind each in turn: 429 with ``Retry-After: --retry-after``, 503, and a reply without a score;
every such item needs one more request, and the goal is then 1.5 x the floor counted over the
requests actually sent. The exit status is 1 when a goal is missed or a rerun sends a request.

    python benchmarks/judge.py [--items 1000] [--samples 5] [--latency 0.2] [--concurrency 32]
                               [--faults 0.1] [--retry-after 1] [--server lean|fake] [--same-process]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_novelty.scoring.judges import JudgeItem, OpenAIJudge
from tests.servers.openai_api import FakeOpenAI

FAULTS = ("429", "503", "no_score")


def fault_of(i: int, share: float) -> str | None:
    """The fault item ``i`` meets (spread evenly over the items), or None."""
    if share <= 0:
        return None
    every = max(1, round(1 / share))
    return FAULTS[(i // every) % len(FAULTS)] if i % every == 0 else None


def marker(i: int) -> str:
    return f"[item {i}]"


def _arm(server: FakeOpenAI, items: int, share: float, retry_after: float) -> None:
    for i in range(items):
        kind = fault_of(i, share)
        if kind == "429":
            server.inject("status", status=429, retry_after=retry_after, match=marker(i), message="rate limited")
        elif kind == "503":
            server.inject("status", status=503, match=marker(i), message="overloaded")
        elif kind == "no_score":
            server.inject("no_score", match=marker(i))


def _serve(pipe: Connection, latency: float, items: int, share: float, retry_after: float) -> None:
    """The server process: start, arm the faults, say the URL, count requests until told to stop."""
    with FakeOpenAI(latency=latency) as server:
        _arm(server, items, share, retry_after)
        pipe.send(server.url)
        while pipe.recv() == "count":
            pipe.send(server.request_count)


class LeanEndpoint:
    """An OpenAI-compatible ``/chat/completions`` that costs next to nothing of its own: one asyncio
    loop, HTTP/1.1 keep-alive, ``latency`` seconds before each answer, ``n`` choices that each
    say ``Score: 4``. Counts the requests it answers."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.requests = 0

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = json.loads(await reader.readexactly(length)) if length else {}
                self.requests += 1
                await asyncio.sleep(self.latency)
                writer.write(self.answer(int(body.get("n", 1)), str(body.get("model", ""))))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @staticmethod
    def answer(n: int, model: str) -> bytes:
        choice = {"finish_reason": "stop", "message": {"role": "assistant", "content": "Fine.\nScore: 4"}}
        payload = json.dumps({
            "id": "lean", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": i, **choice} for i in range(n)],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }).encode()  # fmt: skip
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        return head.encode() + payload


def _serve_lean(pipe: Connection, latency: float) -> None:
    """The lean endpoint's process: say the URL, then count requests until told to stop."""
    lean = LeanEndpoint(latency)

    async def serve() -> None:
        server = await asyncio.start_server(lean.connection, "127.0.0.1", 0, backlog=1024)
        pipe.send(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1")
        loop = asyncio.get_running_loop()
        while await loop.run_in_executor(None, pipe.recv) == "count":
            pipe.send(lean.requests)

    asyncio.run(serve())


def bare_client(url: str, requests: int, samples: int, concurrency: int) -> float:
    """Seconds a bare ``httpx`` client takes to send ``requests`` at ``concurrency`` connections and
    read each answer's JSON (no cache, no retries, no parsing of scores): the peer."""
    import httpx

    async def run() -> float:
        messages = [{"role": "user", "content": "Story: Tom found a map."}]
        body = {"model": "judge-model", "messages": messages, "n": samples}
        left = list(range(requests))

        async def lane() -> None:
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                while left:
                    left.pop()
                    (await client.post("/chat/completions", json=body)).json()

        start = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(concurrency)))
        return time.perf_counter() - start

    return asyncio.run(run())


@contextmanager
def spawned(target: Any, *args: Any) -> Iterator[tuple[str, Any]]:
    """Run ``target(pipe, *args)`` in a process of its own, which sends its URL and then answers
    each ``"count"`` with its request count; (URL, a function that asks for that count)."""
    ours, theirs = multiprocessing.get_context("spawn").Pipe()
    child = multiprocessing.get_context("spawn").Process(target=target, args=(theirs, *args), daemon=True)
    child.start()
    try:
        url = ours.recv()

        def count() -> int:
            ours.send("count")
            return int(ours.recv())

        yield url, count
    finally:
        ours.send("stop")
        child.join(timeout=10)


@contextmanager
def endpoint(args: argparse.Namespace) -> Iterator[tuple[str, Any]]:
    """(URL, a function that returns the requests received so far)."""
    if args.server == "lean":
        with spawned(_serve_lean, args.latency) as served:
            yield served
    elif args.same_process:
        with FakeOpenAI(latency=args.latency) as server:
            _arm(server, args.items, args.faults, args.retry_after)
            yield server.url, lambda: server.request_count
    else:
        with spawned(_serve, args.latency, args.items, args.faults, args.retry_after) as served:
            yield served


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--faults", type=float, default=0.0, help="share of items that meet a fault (0-1)")
    parser.add_argument("--retry-after", type=float, default=1.0, help="seconds a 429 asks to wait")
    parser.add_argument("--server", choices=("lean", "fake"), default=None,
                        help="the endpoint: lean (default without faults) or the test suite's fake (with faults)")
    parser.add_argument("--same-process", action="store_true", help="run the fake server in this process")
    args = parser.parse_args()
    args.server = args.server or ("fake" if args.faults > 0 or args.same_process else "lean")
    if args.server == "lean" and (args.faults > 0 or args.same_process):
        parser.error("--faults and --same-process need --server fake (the lean endpoint injects nothing)")

    items = [
        JudgeItem("story", f"Story {i}: Once upon a time, Tom found a map. {marker(i)}", f"Tom walked {i} miles.")
        for i in range(args.items)
    ]
    with endpoint(args) as (url, request_count), tempfile.TemporaryDirectory() as cache:
        judge = OpenAIJudge(
            "judge-model",
            base_url=url,
            api_key="benchmark",
            samples=args.samples,
            concurrency=args.concurrency,
            cache_dir=Path(cache),
        )
        start, cpu = time.perf_counter(), time.process_time()
        results = judge.score(items)
        first, first_cpu = time.perf_counter() - start, time.process_time() - cpu
        requests = request_count()
        start = time.perf_counter()
        judge.score(items)
        rerun = time.perf_counter() - start
        rerun_requests = request_count() - requests
        bare = None if args.faults > 0 else bare_client(url, requests, args.samples, args.concurrency)

    scored = sum(r.quality is not None and len(r.scores) == args.samples for r in results)
    floor = requests * args.latency / args.concurrency
    goal = 1.5 if args.faults > 0 else 1.25
    where = "this process" if args.same_process else "its own process"
    print(
        f"judge benchmark: {args.items} items x {args.samples} samples, {args.latency * 1000:.0f} ms latency, "
        f"concurrency {args.concurrency}, faults in {args.faults:.0%} of the items, {args.server} server in {where}; "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}"
    )
    print(
        f"  first pass: {first:.2f} s, {first / floor:.2f} x the floor of {floor:.2f} s "
        f"({requests} requests x {args.latency:g} s / {args.concurrency}; goal <= {goal:g} x); "
        f"{scored}/{args.items} items fully scored; judge process CPU {first_cpu:.2f} s "
        f"({first_cpu / max(requests, 1) * 1000:.2f} ms per request)"
    )
    print(f"  rerun from the cache: {rerun:.2f} s ({rerun_requests} requests)")
    if bare is not None:
        print(f"  peer, a bare httpx client on the same endpoint: {bare:.2f} s, {bare / floor:.2f} x the floor "
              f"(the judge takes {first / bare:.2f} x its time)")
    ok = first <= goal * floor and scored == args.items and rerun_requests == 0
    print("  result:", "OK" if ok else "MISSED", f"(load {os.getloadavg()[0]:.2f})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
