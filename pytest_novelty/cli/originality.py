"""Command-line tools of the originality engine: ``index build`` and ``originality``.

``pytest-novelty index build CORPUS... --out DIR [--tokenizer words|PATH_OR_ID]`` indexes files or
folders of JSONL (``text``), plain text, ``.gz`` or ``.zst``.

``pytest-novelty originality --index SPEC --n 4 5 6 INPUT.jsonl`` reads JSONL with ``id`` and
``text`` (``-`` for stdin) and writes one JSON line per input, in order::

    {"id": ..., "originality": {"4": 0.31, "5": 0.52, "6": 0.7}, "ngrams": {"4": 57, ...},
     "longest_span": 12, "longest_span_doc": 3051}

with ``null`` where a text has fewer than n units. ``--creativity`` adds the Creativity Index (Lu
et al. 2025) exactly as the gate computes it (:mod:`pytest_novelty.metrics.creativity`), over
L = 5..12 or ``--lengths MIN-MAX``::

    "creativity_index": 2.25, "uniqueness": {"5": 0.41, ..., "12": null},
    "copied": [{"text": "the little dog ran to the park", "units": 7, "longest_match": 7}]

``uniqueness@L`` is ``null`` where the text has fewer than L units (the index counts it 0, as the
gate does); ``copied`` lists the passages that corpus spans of ``MIN`` or more units cover.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from pytest_novelty.cli.parser import named_as
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.jsonlines import json_lines
from pytest_novelty.infra.storage import default_cache_dir
from pytest_novelty.pipeline.values import Takes

__all__ = ["add_commands", "cmd_index_build", "cmd_originality"]

_BATCH = 5000


def cmd_index_build(args: argparse.Namespace) -> int:
    """Handler of ``index build``."""
    from pytest_novelty.scoring.originality import build_index

    with named_as("--tokenizer", "tokenizer"):
        facts = build_index([Path(p) for p in args.corpus], Path(args.out), tokenizer=args.tokenizer,
                            progress=not args.quiet)
    print(json.dumps(facts))
    return 0


def _records(handle: TextIO, name: str) -> Iterator[tuple[Any, str]]:
    for number, record in json_lines(handle, name, objects=False):
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise ConfigError(f"line {number} has no string field 'text'", path=name)
        yield record.get("id", number), record["text"]


def _batches(items: Iterator[tuple[Any, str]]) -> Iterator[list[tuple[Any, str]]]:
    batch: list[tuple[Any, str]] = []
    for item in items:
        batch.append(item)
        if len(batch) >= _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


ORDERS = Takes("number", 1, 64, read_by="the orders' reader, which takes the input file off their end (--n 4 5 IN)")


def _orders_and_input(args: argparse.Namespace) -> tuple[list[int], str]:
    """``--n 4 5 6 INPUT.jsonl`` puts the input among the orders (``--n`` takes several values)."""
    values, source = list(args.n), args.input
    if source is None and values and not values[-1].lstrip("-").isdigit():
        source = values.pop()
    if source is None:
        raise ConfigError("give the input JSONL file (or - for stdin) after the options", field="input")
    Takes("file", stdin=True).check(source, "INPUT")
    return [int(Takes("number", 1, 64).check(v, "--n")) for v in values], source


def _lengths(args: argparse.Namespace) -> tuple[int, ...]:
    """The range of L of ``--creativity`` (``--lengths MIN-MAX``, which implies it; default 5-12); ()
    without either."""
    from pytest_novelty.metrics.creativity import DEFAULT_LENGTHS, check_lengths

    if not args.creativity and args.lengths is None:
        return ()
    if args.lengths is None:
        return DEFAULT_LENGTHS
    low, dash, high = str(args.lengths).partition("-")
    if not (dash and low.isdigit() and high.isdigit() and 1 <= int(low) <= int(high) <= 64):
        raise ConfigError(f"{args.lengths!r} is no range: give MIN-MAX, whole numbers from 1 to 64 (5-12)",
                          field="--lengths")
    return check_lengths(range(int(low), int(high) + 1))


def _creativity(result: Any, lengths: tuple[int, ...]) -> dict[str, Any]:
    """The Creativity Index fields of one text's line."""
    from pytest_novelty.metrics.creativity import creativity_index, uniqueness_table

    table = uniqueness_table([result.match_lengths], lengths)
    return {
        "creativity_index": float(creativity_index(table)[0]),
        "uniqueness": {str(n): None if v != v else float(v) for n, v in zip(lengths, table[0], strict=True)},
        "copied": [{"text": text, "units": units, "longest_match": longest} for text, units, longest in result.copied],
    }


def cmd_originality(args: argparse.Namespace) -> int:
    """Handler of ``originality``."""
    from pytest_novelty.scoring.originality import open_backend, score_texts

    orders, source = _orders_and_input(args)
    lengths = _lengths(args)
    cache = Path(args.cache) if args.cache else default_cache_dir() / "originality"
    if args.cache:
        from pytest_novelty.pipeline.preflight import check_cache_folder

        check_cache_folder(cache, option="--cache", given=True)
    with named_as("--index", "originality"):
        backend = open_backend(args.index, cache_dir=cache)
    handle: TextIO
    if source == "-":
        handle, name = sys.stdin, "<stdin>"
    else:
        path = Path(source)
        if not path.is_file():
            raise ConfigError("no such input file", path=path)
        handle, name = path.open(encoding="utf-8"), str(path)
    try:
        for batch in _batches(_records(handle, name)):
            results = score_texts(backend, [text for _, text in batch], orders, lengths=lengths,
                                  progress=args.progress)
            for (ident, _), result in zip(batch, results, strict=True):
                line = {
                    "id": ident,
                    "originality": {str(n): v for n, v in result.originality.items()},
                    "ngrams": {str(n): v for n, v in result.ngrams.items()},
                    "longest_span": result.longest_span,
                    "longest_span_doc": result.longest_span_doc,
                    **(_creativity(result, lengths) if lengths else {}),
                }
                sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
            sys.stdout.flush()
    finally:
        if handle is not sys.stdin:
            handle.close()
        backend.close()
    return 0


def add_commands(subparsers: Any) -> None:
    """Register ``index build`` and ``originality`` on an argparse subparsers object."""
    index = subparsers.add_parser("index", help="build an originality index of a training corpus")
    index_sub = index.add_subparsers(dest="index_command", required=True)
    build = index_sub.add_parser(
        "build", help="index files or folders (JSONL with text, plain text, .gz, .zst) with infini-gram"
    )
    build.add_argument("corpus", nargs="+", metavar="CORPUS", **Takes("paths").argument(),
                       help="corpus files or folders")
    build.add_argument("--out", required=True, metavar="DIR", **Takes("out-folder").argument(),
                       help="folder to write the index to (replaced when complete)")
    build.add_argument("--tokenizer", default="words", metavar="TOKENIZER",
                       **Takes("model", read_by="the tokenizer's loader (words, or a tokenizer's folder, file or "
                                  "hub id)").argument(),
                       help="words (default) or a Hugging Face tokenizer folder, file or hub id")
    build.add_argument("--quiet", action="store_true", help="no progress on stderr")
    build.set_defaults(func=cmd_index_build)

    orig = subparsers.add_parser("originality", help="score the originality of texts against an index")
    orig.add_argument(
        "--index",
        required=True,
        metavar="SPEC",
        **Takes("spec").argument(),
        help="backend spec: infini-gram:DIR, ngram-set:DIR, infini-gram-api:INDEX, infini-gram-mini:INDEX",
    )
    orig.add_argument("--n", nargs="+", default=["4", "5", "6"], metavar="N", **ORDERS.argument(),
                      help="n-gram orders (default 4 5 6)")
    orig.add_argument("--cache", metavar="DIR", **Takes("out-folder").argument(),
                      help="cache folder for web API answers (default ~/.cache/pytest-novelty/originality)")
    orig.add_argument("--creativity", action="store_true",
                      help="add the Creativity Index, uniqueness@L and the copied passages, as the gate computes them")
    orig.add_argument("--lengths", metavar="MIN-MAX",
                      **Takes("spec", read_by="the range's reader (MIN-MAX, whole numbers from 1 to 64)").argument(),
                      help="the Creativity Index's range of span lengths L (default 5-12; implies --creativity)")
    orig.add_argument("--progress", action="store_true", help="show progress on stderr")
    orig.add_argument("input", nargs="?", metavar="INPUT", **Takes("file", stdin=True).argument(),
                      help="JSONL file with id and text per line, or - for stdin")
    orig.set_defaults(func=cmd_originality)
