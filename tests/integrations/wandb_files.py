"""Reading a W&B offline run file (``offline-run-*/run-*.wandb``) with W&B's own record types.

The file is W&B's transaction log: a 7-byte header (``:W&B``, magic 0xBEE1, version 0), then the
LevelDB log format W&B writes it in: 32 KiB blocks of chunks, each with a 7-byte header (CRC-32 of
the chunk type and data, data length, type: 1 full, 2 first, 3 middle, 4 last) followed by the
data; a block's tail too short for a header is padding. Each record is a
``wandb.proto.wandb_internal_pb2.Record`` message, parsed here with W&B's own protobuf classes.
The wandb package (0.31) ships no Python reader of these files, so only the framing is ours.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BLOCK = 32768
HEADER = 7


def _chunks(data: bytes) -> Iterator[bytes]:
    ident, magic, version = struct.unpack("<4sHB", data[:HEADER])
    if ident != b":W&B" or magic != 0xBEE1 or version != 0:
        raise ValueError(f"not a W&B run file: {ident!r} {magic:#x} {version}")
    pos, pending = HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:
            pos += left
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if kind == 0:  # zero padding to the end of the block
            pos += left
            continue
        chunk = data[pos + HEADER : pos + HEADER + length]
        if zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            raise ValueError(f"checksum mismatch at byte {pos}")
        pos += HEADER + length
        if kind == 1:
            yield chunk
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            yield pending + chunk
            pending = b""


def records(path: Path) -> Iterator[Any]:
    """Every record of one run file, as W&B's ``Record`` messages."""
    from wandb.proto import wandb_internal_pb2

    for chunk in _chunks(path.read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(chunk)
        yield record


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def read_run(path: Path) -> dict[str, Any]:
    """The run's settings, config, history (one dict per logged step) and summary."""
    out: dict[str, Any] = {"run": None, "config": {}, "history": [], "summary": {}}
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
            out["run"] = {"project": run.project, "name": run.display_name, "group": run.run_group, "id": run.run_id}
            out["config"].update({_key(i): json.loads(i.value_json) for i in run.config.update})
        elif kind == "config":
            out["config"].update({_key(i): json.loads(i.value_json) for i in record.config.update})
        elif kind == "history":
            out["history"].append({_key(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "summary":
            out["summary"].update({_key(i): json.loads(i.value_json) for i in record.summary.update})
    return out


def offline_run(wandb_dir: Path) -> tuple[Path, dict[str, Any]]:
    """The one offline run under ``wandb_dir``: its folder and its content."""
    (file,) = sorted(wandb_dir.glob("wandb/offline-run-*/run-*.wandb"))
    return file.parent, read_run(file)
