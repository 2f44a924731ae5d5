"""How long a run waits on remote parts that accept connections and never answer, with the defaults.

Against a server on 127.0.0.1 that accepts every connection and answers nothing
(``tests.servers.base.SilentServer``), with no option changed, it prints the seconds until:

- the preflight of a served model (``GET /models``) stops the run;
- the preflight of an ``infini-gram-mini:`` index (one count query) stops the run;
- a batch of rows sent to a served model becomes a harness error, next to the bound
  :func:`~pytest_novelty.generation.openai.silent_server_bound` gives (about two minutes);

and the seconds a preflight takes against a port where nothing listens. Run from the repository
root: ``python benchmarks/silent_servers.py`` (``--skip-generation`` leaves out the two-minute part).
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_novelty.generation import Batch
from pytest_novelty.generation.openai import OpenAIGenerator, silent_server_bound
from pytest_novelty.infra.errors import HarnessError
from pytest_novelty.infra.progress import send_notices_to
from pytest_novelty.scoring.originality import open_backend
from pytest_novelty.suites.schema import GenerationSettings
from tests.servers.base import SilentServer


def timed(what: str, action: Callable[[], object]) -> None:
    start = time.monotonic()
    try:
        action()
        outcome = "passed (unexpected)"
    except HarnessError as error:
        outcome = f"{type(error).__name__}: {str(error)[:110]}"
    print(f"{what:<44} {time.monotonic() - start:7.1f} s  {outcome}", flush=True)


def closed_url(path: str) -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}{path}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-generation", action="store_true", help="leave out the two-minute measurement")
    parser.add_argument("--rows", type=int, default=64, help="rows in the batch sent to the silent server")
    args = parser.parse_args()

    refused = closed_url("/v1")
    timed("preflight, served model, nothing listening", OpenAIGenerator("openai:m", base_url=refused).check)
    timed("preflight, mini index, nothing listening", open_backend(f"infini-gram-mini:v2_x?url={refused}").check)
    with SilentServer("/v1") as silent:
        timed("preflight, served model, silent server", OpenAIGenerator("openai:m", base_url=silent.url).check)
        timed("preflight, mini index, silent server", open_backend(f"infini-gram-mini:v2_x?url={silent.url}").check)
        if args.skip_generation:
            return
        send_notices_to(lambda line: print("   ", line))
        gen = OpenAIGenerator("openai:m", base_url=silent.url, revision="r")
        attempts, bound = silent_server_bound(gen.connection)
        timeout, budget = gen.connection.timeout, gen.connection.retry.max_retry_time
        line = f"defaults: timeout {timeout:g} s, retries within {budget:g} s"
        print(f"{line}: {attempts} attempts, {bound:.1f} s at most")
        settings = GenerationSettings(samples=1, max_new_tokens=16)
        batch = Batch([f"Story {i}:" for i in range(args.rows)], list(range(args.rows)), settings)
        timed(f"generation, {args.rows} rows, silent server", lambda: gen.sample(batch))


if __name__ == "__main__":
    main()
