"""A warm rerun (every answer in the cache) loads no model: neither torch nor transformers is imported.

Each run is a pytest subprocess over the tiny checkpoint, with a conftest that writes, when the
session ends (after the table), which heavy modules the process imported. The cold run must have
imported them (it generates), so the check is one that can fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

HEAVY = ("torch", "transformers", "tokenizers")

# Written into the pytester folder: it imports nothing heavy itself.
WATCH = f'''
import json, sys
from pathlib import Path

def pytest_unconfigure(config):
    heavy = [name for name in {HEAVY!r} if name in sys.modules]
    who = getattr(config, "workerinput", {{}}).get("workerid", "main")  # each xdist process its own file
    Path(config.rootpath, f"heavy-{{who}}.json").write_text(json.dumps(heavy))
'''


def heavy_imports(pytester: pytest.Pytester, args: list[str]) -> tuple[list[str], str]:
    """The heavy modules one pytest run imported, and its output.

    The run is started as from inside an xdist worker (a CI job's test, a training job under xdist):
    it inherits the worker's variables without being a worker, and is no reason to import torch.
    """
    for old in pytester.path.glob("heavy-*.json"):
        old.unlink()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTEST_XDIST_WORKER", "gw0")
        patch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
        result = pytester.runpytest_subprocess(*args, timeout=600)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK, out[-3000:]
    watched = {f.stem: json.loads(f.read_text()) for f in pytester.path.glob("heavy-*.json")}
    assert "heavy-main" in watched and ("-n" not in args or len(watched) == 3), watched  # every process reported
    return sorted({name for heavy in watched.values() for name in heavy}), out


def test_a_warm_rerun_imports_neither_torch_nor_transformers_and_loads_no_model(
    pytester: pytest.Pytester, novelty_args: list[str]
) -> None:
    pytester.makeconftest(WATCH)
    cold, cold_out = heavy_imports(pytester, novelty_args)
    assert "torch" in cold and "transformers" in cold  # it generated: the watch sees the imports
    assert "[novelty] loading" in cold_out
    warm, warm_out = heavy_imports(pytester, novelty_args)
    assert warm == [], warm_out[-3000:]
    assert "[novelty] loading" not in warm_out
    assert "0 samples generated in 0 batches (12 from cache)" in warm_out
    table = [line for line in cold_out.splitlines() if line.startswith("  ") and ("pass" in line or "FAIL" in line)]
    assert table and all(line in warm_out for line in table)  # the same verdicts, from the cache
    # Spread over two xdist workers, as CI runs it: no worker imports torch to place itself either.
    spread, spread_out = heavy_imports(pytester, [*novelty_args, "-n", "2"])
    assert spread == [], spread_out[-3000:]
    assert all(line in spread_out for line in table)


def test_a_rerun_that_generates_one_new_sample_loads_the_model_and_checks_its_prompts(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    pytester.makeconftest(WATCH)
    heavy_imports(pytester, novelty_args)
    suite = suite_dir / "story.toml"
    suite.write_text(suite.read_text().replace("samples = 2", "samples = 3"))  # one more sample per prompt
    again, out = heavy_imports(pytester, novelty_args)
    assert "torch" in again and "[novelty] loading" in out
    assert "6 samples generated in 2 batches (12 from cache)" in out


def test_a_warm_rerun_of_a_chat_suite_renders_its_messages_without_the_tokenizer(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path, tmp_path: Path, tiny_corpus: list[str]
) -> None:
    from tests.generation.tiny_models import build_family_checkpoint

    chat = build_family_checkpoint(tmp_path / "chat-model", "llama", tiny_corpus)  # it has a chat template
    suite = suite_dir / "story.toml"
    suite.write_text(suite.read_text() + '\n[prompting]\nmethod = "chat"\n')
    args = [f"--model={chat}" if a == "--model" else a for a in novelty_args]
    args.pop(args.index(f"--model={chat}") + 1)  # the tiny checkpoint that followed --model
    pytester.makeconftest(WATCH)
    cold, _ = heavy_imports(pytester, args)
    assert "transformers" in cold
    warm, out = heavy_imports(pytester, args)
    assert warm == [], out[-3000:]
    assert "0 samples generated in 0 batches (12 from cache)" in out
