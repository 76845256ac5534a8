"""The MCAP records the reader decodes, read field by field from a record's body.

An MCAP record is an opcode (1 byte), a length (8 bytes, little-endian) and
a body of that length. Every field is read from where the format puts it,
within the body; a field that would run past the body's end makes the
record unparsable. Bytes left after the last defined field are padding,
which the format allows (writers may add fields in later versions), so
they are ignored: in particular an Attachment's CRC is the 4 bytes after
its data, never the body's last 4 bytes.

Pure: bytes in, frozen records out, `RecordError` for a body that does not
hold its fields. No I/O, no limits (the scanner applies them first).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from mcap.opcode import Opcode

__all__ = [
    "FOOTER_CRC_SPAN",
    "MAGIC",
    "PREFIX",
    "AttachmentRecord",
    "ChannelRecord",
    "ChunkRecord",
    "FooterRecord",
    "HeaderRecord",
    "MessageRecord",
    "RecordError",
    "SchemaRecord",
    "opcode_name",
    "read_attachment",
    "read_channel",
    "read_chunk",
    "read_data_end",
    "read_footer",
    "read_header",
    "read_message",
    "read_schema",
]

MAGIC: Final = b"\x89MCAP0\r\n"
PREFIX: Final = 9  # opcode (1 byte) + length (8 bytes)
FOOTER_CRC_SPAN: Final = 16  # the Footer body bytes its summary CRC covers: two u64 fields
_U16: Final = struct.Struct("<H")
_U32: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")
_MESSAGE_HEAD: Final = struct.Struct("<HIQQ")  # channel id, sequence, log time, publish time
_CHUNK_HEAD: Final = struct.Struct("<QQQI")  # start time, end time, uncompressed size, CRC
_FOOTER: Final = struct.Struct("<QQI")  # summary start, summary offset start, summary CRC
_KNOWN: Final = frozenset(int(opcode) for opcode in Opcode)


class RecordError(ValueError):
    """A record's body does not hold the fields its opcode defines."""


@dataclass(frozen=True, slots=True)
class HeaderRecord:
    """The Header: which profile and library wrote the file."""

    profile: str
    library: str


@dataclass(frozen=True, slots=True)
class SchemaRecord:
    """A Schema definition."""

    id: int
    name: str
    encoding: str
    data: bytes


@dataclass(frozen=True, slots=True)
class ChannelRecord:
    """A Channel definition; ``metadata`` in stored order."""

    id: int
    schema_id: int
    topic: str
    message_encoding: str
    metadata: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """A Message."""

    channel_id: int
    sequence: int
    log_time: int
    publish_time: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """A Chunk, its compressed records still a view into the record body."""

    uncompressed_size: int
    uncompressed_crc: int
    compression: str
    records: memoryview


@dataclass(frozen=True, slots=True)
class AttachmentRecord:
    """An Attachment; ``crc`` is its stored CRC and ``crc_covered`` the bytes it covers."""

    log_time: int
    create_time: int
    name: str
    media_type: str
    data: bytes
    crc: int
    crc_covered: memoryview


@dataclass(frozen=True, slots=True)
class FooterRecord:
    """The Footer."""

    summary_start: int
    summary_offset_start: int
    summary_crc: int


class _Fields:
    """A cursor over one record body; every read is checked against the body's end."""

    __slots__ = ("_at", "_end", "_view")

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._at = 0
        self._end = len(view)

    @property
    def at(self) -> int:
        return self._at

    def take(self, count: int, what: str) -> memoryview:
        start = self._at
        if count > self._end - start:
            raise RecordError(f"its {what} runs past the record's end")
        self._at = start + count
        return self._view[start : self._at]

    def unpack(self, layout: struct.Struct, what: str) -> tuple[int, ...]:
        start = self._at
        if layout.size > self._end - start:
            raise RecordError(f"its {what} runs past the record's end")
        self._at = start + layout.size
        return layout.unpack_from(self._view, start)

    def u16(self, what: str) -> int:
        return int(self.unpack(_U16, what)[0])

    def u32(self, what: str) -> int:
        return int(self.unpack(_U32, what)[0])

    def u64(self, what: str) -> int:
        return int(self.unpack(_U64, what)[0])

    def string(self, what: str) -> str:
        raw = self.take(self.u32(what), what)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError:
            raise RecordError(f"its {what} is not UTF-8") from None

    def string_map(self, what: str) -> tuple[tuple[str, str], ...]:
        size = self.u32(what)
        # The map is read within its own stated size, so it cannot eat later fields.
        inner = _Fields(self.take(size, what))
        pairs: list[tuple[str, str]] = []
        while inner.at < size:
            key = inner.string(what)
            pairs.append((key, inner.string(what)))
        return tuple(pairs)

    def rest(self) -> memoryview:
        return self._view[self._at : self._end]


def read_header(body: memoryview) -> HeaderRecord:
    """Decode a Header body."""
    fields = _Fields(body)
    profile = fields.string("profile")
    return HeaderRecord(profile=profile, library=fields.string("library"))


def read_schema(body: memoryview) -> SchemaRecord:
    """Decode a Schema body."""
    fields = _Fields(body)
    schema_id = fields.u16("id")
    name = fields.string("name")
    encoding = fields.string("encoding")
    data = bytes(fields.take(fields.u32("data length"), "data"))
    return SchemaRecord(id=schema_id, name=name, encoding=encoding, data=data)


def read_channel(body: memoryview) -> ChannelRecord:
    """Decode a Channel body."""
    fields = _Fields(body)
    channel_id = fields.u16("id")
    schema_id = fields.u16("schema id")
    topic = fields.string("topic")
    encoding = fields.string("message encoding")
    return ChannelRecord(
        id=channel_id,
        schema_id=schema_id,
        topic=topic,
        message_encoding=encoding,
        metadata=fields.string_map("metadata"),
    )


def read_message(body: memoryview) -> MessageRecord:
    """Decode a Message body: its data are all the bytes after the fixed fields."""
    fields = _Fields(body)
    channel_id, sequence, log_time, publish_time = fields.unpack(_MESSAGE_HEAD, "header")
    return MessageRecord(
        channel_id=channel_id,
        sequence=sequence,
        log_time=log_time,
        publish_time=publish_time,
        data=bytes(fields.rest()),
    )


def read_chunk(body: memoryview) -> ChunkRecord:
    """Decode a Chunk body, leaving its records compressed."""
    fields = _Fields(body)
    _, _, size, crc = fields.unpack(_CHUNK_HEAD, "header")
    compression = fields.string("compression")
    records = fields.take(fields.u64("records length"), "records")
    return ChunkRecord(
        uncompressed_size=size, uncompressed_crc=crc, compression=compression, records=records
    )


def read_attachment(body: memoryview) -> AttachmentRecord:
    """Decode an Attachment body; its CRC covers every field before the CRC."""
    fields = _Fields(body)
    log_time = fields.u64("log time")
    create_time = fields.u64("create time")
    name = fields.string("name")
    media_type = fields.string("media type")
    data = bytes(fields.take(fields.u64("data length"), "data"))
    covered = body[: fields.at]
    return AttachmentRecord(
        log_time=log_time,
        create_time=create_time,
        name=name,
        media_type=media_type,
        data=data,
        crc=fields.u32("crc"),
        crc_covered=covered,
    )


def read_data_end(body: memoryview) -> int:
    """Decode a DataEnd body: its data-section CRC."""
    return _Fields(body).u32("data section crc")


def read_footer(body: memoryview) -> FooterRecord:
    """Decode a Footer body."""
    start, offset_start, crc = _Fields(body).unpack(_FOOTER, "fields")
    return FooterRecord(summary_start=start, summary_offset_start=offset_start, summary_crc=crc)


def opcode_name(opcode: int) -> str:
    """Name an opcode for a message (``chunk index``, or ``unknown (0x80)``)."""
    if opcode in _KNOWN:
        return Opcode(opcode).name.lower().replace("_", " ")
    return f"unknown (0x{opcode:02x})"
