"""What the reader yields and returns: a ghost audit log as stored, records and all.

`iter_run` streams `LoggedChannel`, `LoggedRecord`, `LoggedAttachment` and
`ReadProblem` items, then one `ReadEnd`; `read_run` collects them into a
`RunLog`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit._problems import CrcStatus, ReadProblem

__all__ = ["LoggedAttachment", "LoggedChannel", "LoggedRecord", "ReadEnd", "RunItem", "RunLog"]


@dataclass(frozen=True, slots=True)
class LoggedRecord:
    """One message on a ghost topic, as stored.

    Attributes:
        topic: its channel's topic (``/decisions``).
        log_time_ns: the MCAP ``log_time``.
        sequence: the MCAP message ``sequence`` (``seq`` modulo 2**32 when intact).
        data: the message bytes exactly as stored.
        sha256: ``sha256_hex(data)``, the recomputed content address.
        record: the parsed JSON object (read-only), or None if ``data`` is not one.
        problem: why ``record`` is None, else None.
        publish_time_ns: the MCAP ``publish_time`` (ghost writes ``stamp_ns``).
        channel_id: the MCAP channel id it was logged on.
        offset: byte offset in the file of its Message record, or of the Chunk
            record holding it.
        offset_in_chunk: its offset in the chunk's uncompressed records, or None
            outside a chunk. ``(offset, offset_in_chunk or -1)`` orders records
            as the file does.
    """

    topic: str
    log_time_ns: int
    sequence: int
    data: bytes
    sha256: str
    record: Mapping[str, Any] | None
    problem: str | None
    publish_time_ns: int
    channel_id: int
    offset: int
    offset_in_chunk: int | None

    @property
    def position(self) -> tuple[int, int]:
        """Where the record is in the file, as a sort key (file order)."""
        return (self.offset, -1 if self.offset_in_chunk is None else self.offset_in_chunk)


@dataclass(frozen=True, slots=True)
class LoggedAttachment:
    """One MCAP attachment (ghost stores the run's policy source as one).

    Attributes:
        name: its file name (``policy.toml``).
        media_type: its media type (``application/toml``).
        log_time_ns: its MCAP ``log_time``.
        data: its bytes.
        sha256: ``sha256_hex(data)``, to compare with ``policy_source_sha256``.
        create_time_ns: its MCAP ``create_time``.
        offset: byte offset of its Attachment record in the file.
    """

    name: str
    media_type: str
    log_time_ns: int
    data: bytes
    sha256: str
    create_time_ns: int
    offset: int


@dataclass(frozen=True, slots=True)
class LoggedChannel:
    """One MCAP channel with the schema it names, as the file defines them (first definition).

    Attributes:
        channel_id: its MCAP id.
        topic: its topic.
        message_encoding: its messages' encoding (``json`` on ghost channels).
        metadata: its metadata, read-only.
        schema_id: the schema it names (0: none).
        schema_name: that schema's name, or None if it has none or it is never defined.
        schema_encoding: that schema's encoding (``jsonschema``), or None likewise.
        schema_data: that schema's bytes, or None likewise. ghost writes
            `audit._schemas.schema_data(name)`; anything else was changed.
        is_ghost: a ghost topic carrying its ghost schema name, ``jsonschema``
            and ``json`` (the bytes of the schema are not judged here).
        offset: byte offset of its Channel record, or of the Chunk holding it.
    """

    channel_id: int
    topic: str
    message_encoding: str
    metadata: Mapping[str, str]
    schema_id: int
    schema_name: str | None
    schema_encoding: str | None
    schema_data: bytes | None
    is_ghost: bool
    offset: int


@dataclass(frozen=True, slots=True)
class ReadEnd:
    """How reading a log ended: the last item `iter_run` yields.

    Attributes:
        path: the file read.
        source_sha256: SHA-256 hex of the bytes read: the file's first
            ``size_bytes`` bytes (its size when opened; bytes appended while it
            was read are not read).
        size_bytes: how many bytes were read and hashed.
        truncated: the file ends as a crash leaves it, before its footer and
            closing magic: every record complete before the cut was yielded.
            A cut alone is not a problem.
        footer: a Footer record was read (a finished file's last record).
        data_end: a DataEnd record was read.
        data_section_crc: the DataEnd CRC's outcome (ABSENT without a DataEnd).
        summary_crc: the Footer CRC's outcome (ABSENT without a Footer, or
            without a DataEnd to say where the summary starts).
        has_summary: the Footer points at a summary section.
        chunk_count: Chunk records in the data section.
        chunk_index_count: ChunkIndex records (in the summary).
        message_index_count: MessageIndex records (after chunks).
        statistics_count: Statistics records (in the summary).
        library: the Header's ``library`` field, or None without a readable Header.
        stopped: reading stopped early (`ProblemKind.TOO_MANY_PROBLEMS`).
    """

    path: Path
    source_sha256: str
    size_bytes: int
    truncated: bool
    footer: bool
    data_end: bool
    data_section_crc: CrcStatus
    summary_crc: CrcStatus
    has_summary: bool
    chunk_count: int
    chunk_index_count: int
    message_index_count: int
    statistics_count: int
    library: str | None
    stopped: bool


RunItem = LoggedChannel | LoggedRecord | LoggedAttachment | ReadProblem | ReadEnd
"""What `iter_run` yields."""


@dataclass(frozen=True, slots=True)
class RunLog:
    """A ghost audit log as read from disk.

    Attributes:
        path: the file read.
        source_sha256: SHA-256 hex of the bytes read (the whole file, as it was
            when opened).
        records: the messages on ghost topics, in file order.
        attachments: the attachments, in file order.
        truncated: the file ends without a valid footer (a crash, or a cut):
            every record complete before the cut is in ``records``.
        problems: damage found while reading, one sentence each; empty for an
            intact file, and for a file that was merely cut short.
        read_problems: the same problems, with their kinds and offsets.
        channels: the channels the file defines, in the order they were read.
        end: how reading ended (CRC outcomes, summary, ...).
    """

    path: Path
    source_sha256: str
    records: tuple[LoggedRecord, ...]
    attachments: tuple[LoggedAttachment, ...]
    truncated: bool
    problems: tuple[str, ...]
    read_problems: tuple[ReadProblem, ...]
    channels: tuple[LoggedChannel, ...]
    end: ReadEnd

    def records_on(self, topic: str) -> tuple[LoggedRecord, ...]:
        """Return the records on ``topic`` (``/decisions``), in file order."""
        return tuple(record for record in self.records if record.topic == topic)
