"""``pytest-novelty cache``: its size (``info``), emptying it (``clear``), and moving work between
machines: ``merge`` (shards' caches into one), ``pack`` and ``unpack`` (one file of a cache, for an
artifact upload). See :mod:`pytest_novelty.infra.cache_merge` for what a merge trusts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_novelty.infra.storage import default_cache_dir
from pytest_novelty.pipeline.values import Takes

CACHE_HELP = "cache folder (default $PYTEST_NOVELTY_CACHE, else ~/.cache/pytest-novelty)"
CACHE: dict[str, Any] = {"metavar": "DIR", **Takes("out-folder", what="cache folder").argument(), "help": CACHE_HELP}
"""The ``--cache DIR`` of every command that writes a cache folder."""
READ: dict[str, Any] = Takes("folder", what="an existing cache folder").argument()
"""``cache info`` and ``cache clear`` read the folder they are given (a full disk is no matter to them)."""


def _folder(value: str | None) -> Path:
    return Path(value).expanduser() if value else default_cache_dir()


def _cmd_info(args: argparse.Namespace) -> int:
    from pytest_novelty.infra.cache import cache_usage

    cache = _folder(args.cache)
    usage = cache_usage(cache)
    print(f"{cache}: {sum(usage.values()) / 1e6:.1f} MB")
    for name, size in sorted(usage.items()):
        print(f"  {name:24s} {size / 1e6:10.1f} MB")
    return 0


def _cmd_clear(args: argparse.Namespace) -> int:
    from pytest_novelty.infra.cache import clear_cache
    from pytest_novelty.infra.storage import folder_error

    cache = _folder(args.cache)
    try:  # clears take turns: each says what it removed itself
        removed = clear_cache(cache, keep_demo=not args.all)
    except OSError as exc:  # a read-only cache: one line, not a traceback
        raise folder_error(cache, "cache folder", exc, named_by="--cache" if args.cache else None) from None
    print(f"removed {removed / 1e6:.1f} MB from {cache}")
    return 0


def _report(verb: str, counts: Any, into: Path) -> int:
    """The one summary line of a merge or an unpack, and the damaged entries it left out (named)."""
    print(f"{verb} into {into}: {counts.summary()}")
    if counts.damaged:
        named = "; ".join(counts.damaged_names) + (" ..." if counts.damaged > len(counts.damaged_names) else "")
        print(f"pytest-novelty: warning: {counts.damaged} damaged entries left out ({named}); a run over "
              f"{into} names the shard whose answers they were", file=sys.stderr)
    return 0


def _cmd_merge(args: argparse.Namespace) -> int:
    from pytest_novelty.infra.cache_merge import merge_caches

    into = Path(args.into).expanduser()
    counts = merge_caches([Path(s).expanduser() for s in args.sources], into)
    return _report(f"merged {len(args.sources)} {'cache' if len(args.sources) == 1 else 'caches'}", counts, into)


def _cmd_pack(args: argparse.Namespace) -> int:
    from pytest_novelty.infra.cache_merge import pack_cache

    folder, out = _folder(args.folder), Path(args.out).expanduser()
    counts = pack_cache(folder, out)
    print(f"packed {counts.added:,} entries of {folder} into {out} ({out.stat().st_size / 1e6:.1f} MB; the built "
          "demo is not packed)")
    if counts.damaged:
        print(f"pytest-novelty: warning: {counts.damaged} damaged entries left out: "
              + "; ".join(counts.damaged_names), file=sys.stderr)
    return 0


def _cmd_unpack(args: argparse.Namespace) -> int:
    from pytest_novelty.infra.cache_merge import merge_caches

    pack, into = Path(args.pack).expanduser(), _folder(args.into)
    if pack.is_dir():
        from pytest_novelty.infra.errors import ConfigError

        raise ConfigError(f"{pack} is a folder; merge a cache folder with pytest-novelty cache merge",
                          field="cache unpack")
    return _report(f"unpacked {pack}", merge_caches([pack], into, command="cache unpack"), into)


def add_commands(sub: Any) -> None:
    """Register ``cache info``, ``cache clear``, ``cache merge``, ``cache pack`` and ``cache unpack``."""
    cache = sub.add_parser("cache", help="the cache: its size, clearing it, merging shards' caches, packing one")
    commands = cache.add_subparsers(dest="action", required=True)

    info = commands.add_parser("info", help="the cache's size, by kind of entry")
    info.add_argument("--cache", **{**CACHE, **READ})
    info.set_defaults(func=_cmd_info)

    clear = commands.add_parser("clear", help="remove cached generations, scores and judge answers")
    clear.add_argument("--cache", **{**CACHE, **READ})
    clear.add_argument("--all", action="store_true", help="also remove the built demo assets")
    clear.set_defaults(func=_cmd_clear)

    merge = commands.add_parser(
        "merge", help="merge caches (shards' cache folders, or packs) into one",
        description="Merge every sound entry of the SRC caches (folders, or files written by cache pack) into "
        "DST: each entry is checked against its checksum (a damaged one is left out and counted), an entry DST "
        "holds already is kept (another payload for the same key is counted), and other runs may use DST "
        "meanwhile. The built demo is not merged.",
    )
    merge.add_argument("sources", nargs="+", metavar="SRC", **Takes("paths").argument(),
                       help="a cache folder or a packed cache (.tar.zst)")
    merge.add_argument("--into", required=True, **{**CACHE, "metavar": "DST", "help": "the cache folder to merge into"})
    merge.set_defaults(func=_cmd_merge)

    pack = commands.add_parser("pack", help="write a cache's entries to one file (for an artifact upload)")
    pack.add_argument("folder", metavar="DIR", nargs="?", **Takes("folder").argument(), help=CACHE_HELP)
    pack.add_argument("--out", required=True, metavar="FILE", **Takes("out-file").argument(),
                      help="the file to write (name it .tar.zst)")
    pack.set_defaults(func=_cmd_pack)

    unpack = commands.add_parser("unpack", help="merge a packed cache into a cache folder")
    unpack.add_argument("pack", metavar="FILE", **Takes("file").argument(), help="a file written by cache pack")
    unpack.add_argument("--into", **{**CACHE, "metavar": "DST"})
    unpack.set_defaults(func=_cmd_unpack)
