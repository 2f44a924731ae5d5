"""The Creativity Index on the demo: beside novelty@5, its ranking of the answers, and its floor.

    python benchmarks/creativity_demo.py [--seeds 12] [--cache DIR]

On the bundled story suite (``suites/story.toml``, which gates ``creativity_index >= 1``) it runs
the demo checkpoint and its weaker ``demo-early`` as the gate does and prints, for each:

- ``creativity_index`` and ``novelty@5`` with their 95 % intervals (clustered by prompt), and the
  suite's ``uniqueness@L`` at every L of its range;
- Kendall's τ-b between the per-answer Creativity Index and the per-answer novelty@5 (quality and
  originality at n = 5, too short counted as 0), over the checkpoint's answers (an unscored answer
  left out), and between the index and originality@5 alone;
- the verdict of the ``creativity_index`` case, and the same for answers that copy the corpus: for
  each prompt, a story of the demo's training corpus, verbatim.

With ``--seeds N`` both checkpoints are then run again under N generation seeds (``--novelty-seed``
101, 102, ...) and the case's verdicts are counted: the floor's 12-seed check. Answers come from the
cache where an earlier run left them (the first run of a seed generates about 200 stories per
checkpoint, some seconds each on two cores).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_novelty.gate import check_threshold  # noqa: E402
from pytest_novelty.infra.storage import default_cache_dir  # noqa: E402
from pytest_novelty.metrics.table import values_of  # noqa: E402
from pytest_novelty.metrics.tail_agreement import kendall_tau_b  # noqa: E402
from pytest_novelty.pipeline import demo  # noqa: E402
from pytest_novelty.pipeline.config import RunConfig  # noqa: E402
from pytest_novelty.pipeline.results import SuiteResult  # noqa: E402
from pytest_novelty.pipeline.runner import Runner  # noqa: E402
from pytest_novelty.suites.schema import Suite  # noqa: E402
from pytest_novelty.suites.suite_file import load_suite  # noqa: E402

METRIC = "creativity_index"


def with_interval(result: SuiteResult, metric: str) -> str:
    interval = result.measured.intervals.get(metric)
    value = result.metrics[metric]
    return f"{value:.3f}" + ("" if interval is None else f" [{interval.low:.3f}, {interval.high:.3f}]")


def tau(result: SuiteResult, other: str) -> float:
    """Kendall's τ-b of the per-answer Creativity Index with the per-answer values of ``other``."""
    index = values_of(METRIC, result.quality, result.originality, result.scores.uniqueness)
    values = values_of(other, result.quality, result.originality, result.scores.uniqueness)
    assert index is not None and values is not None
    x, y = np.asarray(values, dtype=float).ravel(), np.asarray(index, dtype=float).ravel()
    keep = ~np.isnan(x)
    return float(kendall_tau_b(x[keep], y[keep])[0])


def verdict(suite: Suite, result: SuiteResult) -> str:
    threshold = next(t for t in suite.thresholds if t.metric == METRIC)
    return "pass" if check_threshold(suite.name, threshold, result.metrics).passed else "FAIL"


def corpus_stories(cache: Path, count: int) -> list[str]:
    """``count`` stories of the demo's training corpus (its documents of at least 40 words that
    start like the demo's stories), in corpus order."""
    stories = []
    with (demo.demo_dir(cache) / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            text = json.loads(line)["text"]
            if len(text.split()) >= 40 and text.startswith(("Once", "One ")):
                stories.append(text)
                if len(stories) == count:
                    break
    return stories


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=0, help="generation seeds of the floor's check (0: none)")
    parser.add_argument("--cache", type=Path, default=None, help="cache folder (default: the usual one)")
    args = parser.parse_args()
    cache = args.cache or default_cache_dir()
    suite = load_suite(REPO / "suites" / "story.toml")
    print(f"suite {suite.name}: {suite.generation.samples} samples of {len(suite.thresholds)} cases, "
          f"Creativity Index over L = {suite.scoring.creativity_lengths[0]}..{suite.scoring.creativity_lengths[1]}")
    results = {}
    for model in demo.DEMO_MODELS:
        start = time.perf_counter()
        result = results[model] = Runner(RunConfig(model=model, cache_dir=cache)).run(suite)
        uniqueness = ", ".join(f"{m.partition('@')[2]}: {v:.3f}" for m, v in result.metrics.items()
                               if m.startswith("uniqueness@"))  # fmt: skip
        print(f"\n{model} ({result.quality.size} answers, {time.perf_counter() - start:.1f}s)")
        print(f"  creativity_index {with_interval(result, METRIC)}   novelty@5 {with_interval(result, 'novelty@5')}")
        print(f"  uniqueness@L  {uniqueness}")
        print(f"  Kendall tau-b over its answers: creativity_index with novelty@5 {tau(result, 'novelty@5'):+.3f}, "
              f"with originality@5 {tau(result, 'originality@5'):+.3f}")
        print(f"  case creativity_index >= 1: {verdict(suite, result)}")
    real = results["demo"]
    copied = corpus_stories(cache, len(real.prompts) * suite.generation.samples)
    width = suite.generation.samples
    copier = Runner(RunConfig(model="demo", cache_dir=cache)).score(
        suite, real.prompts, [copied[i : i + width] for i in range(0, len(copied), width)], model="corpus copier")
    print(f"\ncorpus stories as answers: creativity_index {with_interval(copier, METRIC)}, "
          f"case creativity_index >= 1: {verdict(suite, copier)}")
    if args.seeds:
        print(f"\nthe case over {args.seeds} generation seeds:")
        for model in demo.DEMO_MODELS:
            values, passed = [], 0
            for seed in range(101, 101 + args.seeds):
                result = Runner(RunConfig(model=model, cache_dir=cache, seed=seed)).run(suite)
                values.append(result.metrics[METRIC])
                passed += verdict(suite, result) == "pass"
            print(f"  {model}: passes in {passed} of {args.seeds} seeds; creativity_index from {min(values):.3f} "
                  f"to {max(values):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
