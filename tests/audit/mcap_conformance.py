"""The MCAP conformance files (foxglove/mcap ``tests/conformance/data``), rebuilt byte for byte.

Upstream keeps these files in Git LFS, so a clone without LFS holds only
pointers, each naming its file's SHA-256 and size. This module rebuilds
every file from the rules of upstream's generator
(``tests/conformance/scripts/generate-inputs.ts`` and ``variants/``: six
inputs, ten features, every sensible combination) with the test-side
`RecordWriter`, and checks the result against those pointers. So the
files in ``tests/golden/mcap-conformance`` are upstream's, proven by
hash, and the rebuilding is a second, independent check of our encoder.

Run from the repository root::

    PYTHONPATH=. python -m tests.audit.mcap_conformance OUT_DIR [--mirror UPSTREAM_GIT_DIR]

With ``--mirror`` (a clone or bare mirror of foxglove/mcap) every file is
compared with its LFS pointer there, and ``SHA256SUMS`` is written from the
pointers; any difference is an error.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.audit.mcap_tools import MAGIC, RecordWriter

__all__ = ["FEATURES", "Variant", "generate", "variants"]

FEATURES = ("ch", "mx", "st", "rsh", "rch", "ax", "mdx", "chx", "sum", "pad")
"""Upstream's features: chunks, message indexes, statistics, repeated schemas and channels,
attachment / metadata / chunk indexes, summary offsets, padding after each record's fields."""

_PAD = b"\x01\xff\xff"  # what upstream appends to every record that may carry padding
_SCHEMA = {"type": "Schema", "id": 1, "name": "Example", "encoding": "c", "data": b"\4\5\6"}
_CHANNEL = {
    "type": "Channel",
    "id": 1,
    "topic": "example",
    "schema_id": 1,
    "encoding": "a",
    "metadata": {"foo": "bar"},
}


def _message(log_time: int, publish_time: int, sequence: int) -> dict[str, Any]:
    return {
        "type": "Message",
        "channel_id": 1,
        "log_time": log_time,
        "publish_time": publish_time,
        "data": b"\1\2\3",
        "sequence": sequence,
    }


INPUTS: dict[str, list[dict[str, Any]]] = {
    "NoData": [],
    "OneSchemalessMessage": [
        {
            "type": "Channel",
            "id": 1,
            "topic": "example",
            "schema_id": 0,
            "encoding": "text",
            "metadata": {},
        },
        _message(2, 1, 10),
    ],
    "OneMessage": [_SCHEMA, _CHANNEL, _message(2, 1, 10)],
    "OneAttachment": [
        {
            "type": "Attachment",
            "name": "myFile",
            "media_type": "application/octet-stream",
            "log_time": 2,
            "create_time": 1,
            "data": b"\1\2\3",
        }
    ],
    "OneMetadata": [{"type": "Metadata", "name": "myMetadata", "metadata": {"foo": "bar"}}],
    "TenMessages": [
        _SCHEMA,
        _CHANNEL,
        *(
            _message(log_time, log_time, sequence)
            for sequence, log_time in enumerate([0, 2, 1, 3, 3, 5, 4, 7, 8, 9])
        ),
    ],
}


@dataclass(frozen=True)
class Variant:
    """One conformance file: its input, features, and upstream path."""

    base: str
    features: frozenset[str]
    records: list[dict[str, Any]] = field(compare=False)

    @property
    def name(self) -> str:
        """Upstream's file stem: the input's name, then the sorted features."""
        return "-".join([self.base, *sorted(self.features)])

    @property
    def path(self) -> str:
        """Upstream's path under ``tests/conformance/data``."""
        return f"{self.base}/{self.name}.mcap"


def _combinations(features: tuple[str, ...]) -> Iterator[frozenset[str]]:
    if not features:
        yield frozenset()
        return
    for rest in _combinations(features[1:]):
        yield rest
        yield rest | {features[0]}


def _sensible(features: frozenset[str], records: list[dict[str, Any]]) -> bool:
    kinds = {record["type"] for record in records}
    needs = {"ax": "Attachment", "mdx": "Metadata", "rsh": "Schema", "rch": "Channel"}
    if any(feature in features and kind not in kinds for feature, kind in needs.items()):
        return False
    if not kinds & {"Message", "Channel", "Schema"} and features & {"ch", "chx", "mx"}:
        return False
    if "sum" in features and not features & {"chx", "rsh", "rch", "mdx", "ax", "st"}:
        return False
    return not (features & {"chx", "mx"} and "ch" not in features)


def variants() -> Iterator[Variant]:
    """Every conformance file upstream generates, in its order."""
    for base, records in INPUTS.items():
        for features in _combinations(FEATURES):
            if _sensible(features, records):
                yield Variant(base, features, records)


class _Chunk:
    """The records of the one chunk upstream writes, and its message indexes."""

    def __init__(self, *, message_index: bool) -> None:
        self.records = RecordWriter()  # records inside a chunk are never padded upstream
        self.indexes: dict[int, list[tuple[int, int]]] | None = {} if message_index else None
        self.start_time = 0
        self.end_time = 0
        self.messages = 0

    def add(self, record: dict[str, Any]) -> None:
        if record["type"] == "Schema":
            _write_definition(self.records, record)
            return
        if record["type"] == "Channel":
            if self.indexes is not None:
                self.indexes.setdefault(record["id"], [])
            _write_definition(self.records, record)
            return
        log_time = record["log_time"]
        if self.messages == 0 or log_time < self.start_time:
            self.start_time = log_time
        if self.messages == 0 or log_time > self.end_time:
            self.end_time = log_time
        if self.indexes is not None:
            self.indexes.setdefault(record["channel_id"], []).append((log_time, len(self.records)))
        self.messages += 1
        _write_message(self.records, record)


def _write_definition(writer: RecordWriter, record: dict[str, Any]) -> int:
    if record["type"] == "Schema":
        return writer.write_schema(record["id"], record["name"], record["encoding"], record["data"])
    return writer.write_channel(
        record["id"], record["schema_id"], record["topic"], record["encoding"], record["metadata"]
    )


def _write_message(writer: RecordWriter, record: dict[str, Any]) -> int:
    return writer.write_message(
        record["channel_id"],
        record["sequence"],
        record["log_time"],
        record["publish_time"],
        record["data"],
    )


def generate(variant: Variant) -> bytes:
    """Build one conformance file as upstream's generator does."""
    features, records = variant.features, variant.records
    out = RecordWriter(pad=_PAD if "pad" in features else b"")
    out.raw(MAGIC)
    out.write_header("", "")
    chunk = _Chunk(message_index="mx" in features) if "ch" in features else None
    counts = {"Schema": 0, "Channel": 0, "Message": 0, "Attachment": 0, "Metadata": 0}
    per_channel: dict[int, int] = {}
    times: list[int] = []
    attachment_indexes: list[dict[str, Any]] = []
    metadata_indexes: list[dict[str, Any]] = []
    for record in records:
        kind = record["type"]
        counts[kind] += 1
        if kind in ("Schema", "Channel", "Message"):
            if kind == "Message":
                per_channel[record["channel_id"]] = per_channel.get(record["channel_id"], 0) + 1
                times.append(record["log_time"])
            if chunk is not None:
                chunk.add(record)
            elif kind == "Message":
                _write_message(out, record)
            else:
                _write_definition(out, record)
        elif kind == "Attachment":
            offset = len(out)
            length = out.write_attachment(
                record["name"],
                record["media_type"],
                record["data"],
                log_time=record["log_time"],
                create_time=record["create_time"],
            )
            if "ax" in features:
                attachment_indexes.append(
                    {
                        "offset": offset,
                        "length": length,
                        "log_time": record["log_time"],
                        "create_time": record["create_time"],
                        "data_size": len(record["data"]),
                        "name": record["name"],
                        "media_type": record["media_type"],
                    }
                )
        else:
            offset = len(out)
            length = out.write_metadata(record["name"], record["metadata"])
            if "mdx" in features:
                metadata_indexes.append(
                    {"offset": offset, "length": length, "name": record["name"]}
                )
    chunk_indexes: list[dict[str, Any]] = []
    if chunk is not None:
        data = bytes(chunk.records.buffer)
        chunk_start = len(out)
        chunk_length = out.write_chunk(data, start_time=chunk.start_time, end_time=chunk.end_time)
        offsets: dict[int, int] = {}
        index_length = 0
        for channel_id, entries in (chunk.indexes or {}).items():
            offsets[channel_id] = len(out)
            index_length += out.write_message_index(channel_id, entries)
        if "chx" in features:
            chunk_indexes.append(
                {
                    "start_time": chunk.start_time,
                    "end_time": chunk.end_time,
                    "chunk_start": chunk_start,
                    "chunk_length": chunk_length,
                    "message_index_offsets": offsets,
                    "message_index_length": index_length,
                    "compression": "",
                    "compressed_size": len(data),
                    "uncompressed_size": len(data),
                }
            )
    out.write_data_end()
    summary_start = len(out)
    groups: list[tuple[int, int, int]] = []

    def group(opcode: int, start: int) -> None:
        if len(out) != start:
            groups.append((opcode, start, len(out) - start))

    start = len(out)
    if "rsh" in features:
        for record in records:
            if record["type"] == "Schema":
                _write_definition(out, record)
    group(0x03, start)
    start = len(out)
    if "rch" in features:
        for record in records:
            if record["type"] == "Channel":
                _write_definition(out, record)
    group(0x04, start)
    start = len(out)
    if "st" in features:
        out.write_statistics(
            message_count=counts["Message"],
            schema_count=counts["Schema"],
            channel_count=counts["Channel"],
            attachment_count=counts["Attachment"],
            metadata_count=counts["Metadata"],
            chunk_count=1 if chunk is not None else 0,
            start_time=min(times, default=0),
            end_time=max(times, default=0),
            channel_message_counts=per_channel,
        )
    group(0x0B, start)
    start = len(out)
    for index in metadata_indexes:
        out.write_metadata_index(**index)
    group(0x0D, start)
    start = len(out)
    for index in attachment_indexes:
        out.write_attachment_index(**index)
    group(0x0A, start)
    start = len(out)
    for index in chunk_indexes:
        out.write_chunk_index(**index)
    group(0x08, start)
    has_summary = len(out) != summary_start
    summary_offset_start = 0
    if "sum" in features:
        summary_offset_start = len(out)
        for opcode, group_start, group_length in groups:
            out.write_summary_offset(opcode, group_start, group_length)
    # The summary CRC covers the summary section (even when the footer says there is none).
    fields = b"\x02" + (20).to_bytes(8, "little")
    fields += (summary_start if has_summary else 0).to_bytes(8, "little")
    fields += summary_offset_start.to_bytes(8, "little")
    crc = zlib.crc32(bytes(out.buffer[summary_start:]) + fields)
    out.write_footer(summary_start if has_summary else 0, summary_offset_start, crc)
    out.raw(MAGIC)
    return bytes(out.buffer)


def _lfs_pointers(mirror: Path) -> dict[str, tuple[str, int]]:
    """Upstream's LFS pointers: path under the data dir -> (SHA-256, size)."""
    prefix = "tests/conformance/data/"
    git = shutil.which("git") or "git"
    listing = subprocess.run(
        [git, "--git-dir", str(mirror), "ls-tree", "-r", "--name-only", "HEAD", prefix],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    pointers: dict[str, tuple[str, int]] = {}
    for name in listing:
        if not name.endswith(".mcap"):
            continue
        text = subprocess.run(
            [git, "--git-dir", str(mirror), "show", f"HEAD:{name}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        fields = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
        pointers[name.removeprefix(prefix)] = (
            fields["oid"].removeprefix("sha256:"),
            int(fields["size"]),
        )
    return pointers


def main(argv: list[str] | None = None) -> int:
    """Write every conformance file to OUT_DIR, checked against upstream when asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--mirror", type=Path, help="a foxglove/mcap git dir with LFS pointers")
    args = parser.parse_args(argv)
    pointers = _lfs_pointers(args.mirror) if args.mirror else None
    sums: list[str] = []
    failures = 0
    for variant in variants():
        data = generate(variant)
        digest = hashlib.sha256(data).hexdigest()
        if pointers is not None:
            expected = pointers.pop(variant.path, None)
            if expected != (digest, len(data)):
                print(f"differs from upstream: {variant.path}", file=sys.stderr)
                failures += 1
        target = args.out / variant.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        sums.append(f"{digest}  {variant.path}\n")
    if pointers:
        print(f"upstream files not generated: {sorted(pointers)}", file=sys.stderr)
        failures += len(pointers)
    if args.mirror and not failures:
        (args.out / "SHA256SUMS").write_text("".join(sorted(sums, key=lambda s: s[66:])))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
