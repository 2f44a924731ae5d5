"""Count queries per scored answer on the demo suites, against a loopback infini-gram API.

A web API answers one ``count`` query per request, so what a suite costs there is the number of
queries the search (``pytest_novelty/scoring/originality/search.py``) needs. This script:

- prepares the demo (``--model demo``'s checkpoint and training corpus, in ``--cache``);
- indexes the corpus with the demo checkpoint's own tokenizer and serves it on 127.0.0.1 in the
  public API's JSON (the test suite's fake server, answering from the real index);
- runs every suite of ``suites/`` on the demo checkpoint with ``originality =
  infini-gram-api:...?url=LOOPBACK``, counting the requests the server receives, and the plan each
  run announces before its first request;
- checks that the answers equal the local index's (the same corpus, queried exactly) and prints,
  per suite, the queries per scored answer next to what one query per n-gram per order would take.

    python benchmarks/api_queries.py [--cache DIR] [--suites suites] [--rate 0]

With ``--rate R`` the client keeps R requests a second (the public hosts' default is 5): the
announced durations are then the ones a run against the public API would see.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_novelty.infra.progress import notices_to
from pytest_novelty.pipeline import demo
from pytest_novelty.pipeline.runner import RunConfig, Runner
from pytest_novelty.scoring.originality import build_index, open_backend, score_texts
from pytest_novelty.suites.suite_file import load_suite
from tests.servers.infinigram_api import FakeInfiniGram

INDEX = "v4_demo_bpe"


class IndexedApi(FakeInfiniGram):
    """The fake API answering ``count`` queries from a real local index (fast, exact)."""

    def __init__(self, index: Path, **options: Any) -> None:
        super().__init__(token_indexes={INDEX: []}, **options)
        from infini_gram.engine import InfiniGramEngine

        from pytest_novelty.scoring.originality.index import engine_path

        self.engine = InfiniGramEngine(
            index_dir=str(engine_path(index)), eos_token_id=0, vocab_size=0xFFFF, token_dtype="u16"
        )

    def answer(self, body: Any) -> dict[str, Any]:
        ids = body.get("query_ids") if isinstance(body, dict) else None
        if body.get("index") != INDEX or body.get("query_type") != "count" or not isinstance(ids, list):
            return super().answer(body)
        return {"count": int(self.engine.count(input_ids=ids)["count"]), "approx": False}


def naive_queries(texts: list[str], tokenizer: Any, ns: list[int]) -> int:
    """One query per n-gram per order (no search, no sharing between texts)."""
    return sum(max(0, len(enc) - n + 1) for enc in tokenizer.encode(texts) for n in ns)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, help="where the demo is prepared (default: a temporary folder)")
    parser.add_argument("--suites", type=Path, default=Path(__file__).resolve().parents[1] / "suites")
    parser.add_argument("--rate", type=float, default=0.0, help="requests a second the client keeps (0: none)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="novelty-api-queries-") as tmp:
        cache = args.cache or Path(tmp) / "cache"
        assets = demo.ensure_demo(cache, progress=False)
        model = assets / "demo"
        start = time.perf_counter()
        build_index([assets / "corpus.jsonl"], Path(tmp) / "bpe-index", tokenizer=str(model), progress=False)
        print(f"demo corpus indexed with the demo tokenizer in {time.perf_counter() - start:.0f}s; "
              f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
        local = open_backend(f"infini-gram:{Path(tmp) / 'bpe-index'}")
        rows = []
        with IndexedApi(Path(tmp) / "bpe-index") as server:
            for path in sorted(args.suites.glob("*.toml")):
                suite = load_suite(path)
                plans: list[tuple[str, int]] = []  # each announced plan, with the requests sent before it

                def heard(line: str, plans: list[tuple[str, int]] = plans) -> None:
                    if "count queries" in line:
                        plans.append((line, server.request_count))

                spec = f"infini-gram-api:{INDEX}?url={server.url}&tokenizer={model}&rate={args.rate:g}"
                config = RunConfig(
                    model=str(model), cache_dir=Path(tmp) / f"run-{path.stem}", device="cpu", originality=spec,
                )  # fmt: skip
                before = server.request_count
                with notices_to(heard):
                    result = Runner(config).run(suite)
                sent = server.request_count - before
                # the answers' lookup comes first, the prompts' (prompt novelty) second
                for_answers = (plans[1][1] if len(plans) > 1 else server.request_count) - before
                answers = [a for row in result.answers for a in row]
                prompts = [p.text for p in result.prompts]
                ns = list(suite.scoring.ngrams)
                exact = score_texts(local, answers, ns)
                for n in ns:
                    mine = result.originality[n].reshape(-1)
                    theirs = np.array([np.nan if r.originality[n] is None else r.originality[n] for r in exact])
                    if not np.allclose(mine, theirs, equal_nan=True):
                        print(f"MISMATCH: {path.stem} originality@{n} differs from the local index", file=sys.stderr)
                        return 1
                naive = naive_queries(answers, local.tokenizer, ns)
                rows.append((path.stem, len(answers), len(prompts), for_answers, sent, naive, [p for p, _ in plans]))
        local.close()

    print(f"\ncount queries against a loopback API (rate {args.rate:g}/s; answers checked against the local index)")
    print(f"{'suite':<8} {'answers':>8} {'queries':>8} {'per answer':>11} {'naive':>8} {'saved':>6}   "
          f"{'prompts':>8} {'with prompts':>13}")  # fmt: skip
    for name, answers, prompts, for_answers, sent, naive, _ in rows:
        print(f"{name:<8} {answers:>8} {for_answers:>8} {for_answers / answers:>11.1f} {naive:>8} "
              f"{1 - for_answers / naive:>6.0%}   {prompts:>8} {sent / answers:>13.1f}")  # fmt: skip
    answers, queries, total = (sum(r[k] for r in rows) for k in (1, 3, 4))
    print(f"{'all':<8} {answers:>8} {queries:>8} {queries / answers:>11.1f} {'':>8} {'':>6}   {'':>8} "
          f"{total / answers:>13.1f}")  # fmt: skip
    print("\nannounced before the first request (answers, then prompts), and the same plans at the public 5/s:")
    for name, *_, lines in rows:
        for line in lines:
            print(f"  {name}: {line}")
            print(f"  {'':{len(name)}}  {at_public_rate(line)}")
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


def at_public_rate(line: str) -> str:
    """An announced plan's line as a run against the public hosts (5 requests a second) prints it."""
    from dataclasses import replace

    from pytest_novelty.scoring.originality.api import PUBLIC_RATE, QueryPlan

    found = re.search(r"\] (\S+): ([\d,]+)(?: to ([\d,]+))? count queries for ([\d,]+) texts.*; ([\d,]+) cached", line)
    assert found is not None, line
    service, fewest, most, texts, reused = found.groups()
    number = lambda text: int(text.replace(",", ""))  # noqa: E731
    plan = QueryPlan(service, number(texts), number(fewest), number(most or fewest), number(reused), 0.0, 8)
    return replace(plan, rate=PUBLIC_RATE).line()


if __name__ == "__main__":
    sys.exit(main())
