"""The MCAP structure a ghost sink always writes, checked where the reader does not yet (ADR 0013).

ghost writes every CRC the MCAP format has and the same JSON Schema bytes
for every ghost channel, so in a ghost file:

* a data-section, chunk or summary CRC of zero is an integrity problem, not
  a check to skip: zeroing it turns off the one check that catches an edit
  made in place, without touching the hash chain's view of the records;
* a schema named after a ghost record schema (``ghost.decision/1``) carries
  that schema's canonical JSON (`audit.SCHEMAS`), byte for byte: one emptied
  or altered tells every viewer something else about the records.

This module also says whether the file defines any channel on a ghost
topic, which `verify_run` needs to tell "a ghost run with no record" (a
crash right after the file was opened, or tampering) from "not a ghost log".

**Seam.** `audit.read_run` does not report these yet; it is being rebuilt
to stream, to read CRCs from their fields and to report problems by kind.
When it reports zero CRCs, altered ghost schemas and whether ghost channels
were seen, `scan_structure` and this second pass over the file go away and
`verify_run` maps the reader's kinds instead. Until then this pass reads the
file again with the ``mcap`` library, decompressing each chunk at most to
the size its header claims and never beyond 64 MiB.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mcap.records import Channel, Chunk, DataEnd, Footer, McapRecord, Schema
from mcap.stream_reader import StreamReader, breakup_chunk

from analysis._verify_model import IntegrityCheck, RunProblem
from runtime import canonical_bytes

__all__ = ["MAX_CHUNK_BYTES", "McapStructure", "scan_structure"]

MAX_CHUNK_BYTES: Final = 64 * 1024 * 1024
"""The largest chunk this pass decompresses (SPEC §5: reading is bounded)."""

_SCHEMA_ENCODING: Final = "jsonschema"


@dataclass(frozen=True, slots=True)
class McapStructure:
    """What the structure pass found.

    Attributes:
        ghost_channels: the file defines a channel on a ghost topic.
        problems: zero CRCs and altered ghost schemas, one problem each.
    """

    ghost_channels: bool
    problems: tuple[RunProblem, ...]


def scan_structure(
    path: Path,
    *,
    complete: bool,
    topics: Mapping[str, str],
    schemas: Mapping[str, Mapping[str, Any]],
) -> McapStructure:
    """Check the CRC fields and ghost schemas of an MCAP file the reader has accepted.

    Args:
        path: the file.
        complete: the reader found its footer (a cut file has no DataEnd to check).
        topics: the ghost topics (`audit.TOPICS`).
        schemas: the ghost record schemas by name (`audit.SCHEMAS`).

    Returns:
        Whether ghost channels were seen, and the problems found.
    """
    scan = _Scan(topics, {name: canonical_bytes(schema) for name, schema in schemas.items()})
    try:
        data = path.read_bytes()
    except OSError as exc:
        scan.problem(f"the file could not be read a second time ({exc.strerror or exc})")
        return scan.result()
    scan.run(data, complete=complete)
    return scan.result()


class _Scan:
    def __init__(self, topics: Mapping[str, str], schema_bytes: Mapping[str, bytes]) -> None:
        self._topics = topics
        self._schema_bytes = schema_bytes
        self._ghost_channels = False
        self._problems: list[RunProblem] = []
        self._reported_schemas: set[tuple[int, str]] = set()
        self._data_end: DataEnd | None = None
        self._chunks = 0

    def problem(self, message: str) -> None:
        self._problems.append(RunProblem(IntegrityCheck.FILE, message))

    def result(self) -> McapStructure:
        return McapStructure(ghost_channels=self._ghost_channels, problems=tuple(self._problems))

    def run(self, data: bytes, *, complete: bool) -> None:
        try:
            for record in _records(data):
                self._take(record)
        except Exception as exc:  # noqa: BLE001 - any parse failure ends the pass; see below
            # A cut file ends inside a record; damage elsewhere is the reader's to report.
            if complete:
                self.problem(
                    f"its MCAP records could not all be read for the CRC and schema checks"
                    f" ({type(exc).__name__})"
                )
        if complete and self._data_end is not None and self._data_end.data_section_crc == 0:
            self.problem(
                "its data-section CRC is zero: a ghost sink always writes it, so it was"
                " zeroed, which turns off the check that catches an edit made in place"
            )

    def _take(self, record: McapRecord) -> None:
        if isinstance(record, Schema | Channel):
            self._define(record)
        elif isinstance(record, Chunk):
            self._chunks += 1
            self._take_chunk(record, self._chunks)
        elif isinstance(record, DataEnd) and self._data_end is None:
            self._data_end = record
        elif isinstance(record, Footer) and record.summary_start and not record.summary_crc:
            self.problem("its summary CRC is zero: a ghost sink always writes it, so it was zeroed")

    def _define(self, record: Schema | Channel) -> None:
        if isinstance(record, Channel):
            self._ghost_channels = self._ghost_channels or record.topic in self._topics
        else:
            self._check_schema(record)

    def _check_schema(self, schema: Schema) -> None:
        expected = self._schema_bytes.get(schema.name)
        if expected is None or (schema.id, schema.name) in self._reported_schemas:
            return
        if schema.encoding != _SCHEMA_ENCODING or schema.data != expected:
            self._reported_schemas.add((schema.id, schema.name))
            self.problem(
                f"schema {schema.id} is named {schema.name} but does not carry that ghost"
                f" schema ({len(schema.data)} bytes of {schema.encoding or 'no'} encoding,"
                f" expected {len(expected)} bytes of jsonschema): it was emptied or altered"
            )

    def _take_chunk(self, chunk: Chunk, number: int) -> None:
        if chunk.uncompressed_crc == 0:
            self.problem(
                f"chunk {number} has a zero CRC: a ghost sink always writes chunk CRCs, so it"
                " was zeroed, which turns off the check that catches an edit inside the chunk"
            )
        inner = _inflate(chunk)
        if inner is None:
            return  # unsupported, oversized or corrupt: the reader reports the chunk
        for record in breakup_chunk(
            Chunk(
                message_start_time=chunk.message_start_time,
                message_end_time=chunk.message_end_time,
                uncompressed_size=len(inner),
                uncompressed_crc=0,
                compression="",
                data=inner,
            )
        ):
            if isinstance(record, Schema | Channel):
                self._define(record)


def _records(data: bytes) -> Iterator[McapRecord]:
    reader = StreamReader(io.BytesIO(data), emit_chunks=True, record_size_limit=len(data))
    yield from reader.records


def _inflate(chunk: Chunk) -> bytes | None:
    size = chunk.uncompressed_size
    if size > MAX_CHUNK_BYTES:
        return None
    if chunk.compression == "":
        return chunk.data if len(chunk.data) == size else None
    if chunk.compression != "zstd":
        return None
    import zstandard

    # Streamed, so a frame's own size claim cannot make us allocate more than the
    # chunk claims; one byte more than claimed shows a chunk that inflates beyond it.
    source = io.BytesIO(chunk.data)
    with zstandard.ZstdDecompressor().stream_reader(source, read_across_frames=True) as stream:
        try:
            inner = stream.read(size + 1)
        except zstandard.ZstdError:
            return None
    return inner if len(inner) == size else None
