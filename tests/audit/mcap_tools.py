"""Test helpers that rewrite real MCAP files with the mcap library, to tamper with them.

`rewrite_mcap` copies a ghost log record by record into a new, well-formed
MCAP file, passing each message through a transform. The copy is a valid
file in every MCAP sense (fresh CRCs, indexes and summary), so what a test
changes is only what the transform changes: a verifier must then catch it
from the records alone.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path

from mcap.records import Attachment, Channel, Message, Metadata, Schema
from mcap.stream_reader import StreamReader
from mcap.writer import CompressionType, Writer

__all__ = ["Transform", "rewrite_mcap"]

Transform = Callable[[str, bytes], bytes | None]
"""``(topic, data) -> new data``, or None to drop the message."""


def rewrite_mcap(src: Path, dst: Path, transform: Transform, *, chunked: bool = False) -> int:
    """Copy the MCAP file ``src`` to ``dst``, passing every message through ``transform``.

    Schemas, channels (with their ids), attachments, metadata, message order,
    ``log_time``, ``publish_time`` and ``sequence`` are kept. ``src`` must be
    readable to its end by the mcap library (a complete file).

    Args:
        src: a complete MCAP file.
        dst: where to write the copy (replaced if it exists).
        transform: given each message's topic and data, returns the data to
            write, or None to drop the message.
        chunked: write the copy with zstd chunks instead of unchunked.

    Returns:
        The number of messages written.
    """
    schema_ids: dict[int, int] = {}
    channels: dict[int, tuple[int, str]] = {}
    written = 0
    with src.open("rb") as source, dst.open("wb") as output:
        writer = Writer(
            output,
            compression=CompressionType.ZSTD if chunked else CompressionType.NONE,
            use_chunking=chunked,
            # As ghost writes them: a ghost log without its data-section CRC is damaged.
            enable_data_crcs=True,
        )
        writer.start(profile="", library="ghost-tests rewrite_mcap")
        for record in StreamReader(source).records:
            if isinstance(record, Schema) and record.id not in schema_ids:
                schema_ids[record.id] = writer.register_schema(
                    record.name, record.encoding, record.data
                )
            elif isinstance(record, Channel) and record.id not in channels:
                new_id = writer.register_channel(
                    record.topic,
                    record.message_encoding,
                    schema_ids.get(record.schema_id, 0),
                    dict(record.metadata),
                )
                channels[record.id] = (new_id, record.topic)
            elif isinstance(record, Message):
                channel_id, topic = channels[record.channel_id]
                data = transform(topic, record.data)
                if data is not None:
                    writer.add_message(
                        channel_id=channel_id,
                        log_time=record.log_time,
                        data=data,
                        publish_time=record.publish_time,
                        sequence=record.sequence,
                    )
                    written += 1
            elif isinstance(record, Attachment):
                writer.add_attachment(
                    create_time=record.create_time,
                    log_time=record.log_time,
                    name=record.name,
                    media_type=record.media_type,
                    data=record.data,
                )
            elif isinstance(record, Metadata):
                writer.add_metadata(record.name, dict(record.metadata))
        writer.finish()
    return written


# --- hand-encoded MCAP records ----------------------------------------------------------
#
# The mcap Writer writes only well-formed files. Tests of the reader's bounds and CRC
# rules need bytes it will not write: padded records, zero or wrong CRCs, chunks that
# lie about their size, lz4 chunks, definitions that arrive late. `RecordWriter`
# encodes records from the MCAP specification's field tables, independently of the
# reader's decoder (`audit._mcap_records`), so that each checks the other.

MAGIC = b"\x89MCAP0\r\n"


def u8(value: int) -> bytes:
    """A uint8."""
    return value.to_bytes(1, "little")


def u16(value: int) -> bytes:
    """A little-endian uint16."""
    return value.to_bytes(2, "little")


def u32(value: int) -> bytes:
    """A little-endian uint32."""
    return value.to_bytes(4, "little")


def u64(value: int) -> bytes:
    """A little-endian uint64."""
    return value.to_bytes(8, "little")


def string(value: str) -> bytes:
    """An MCAP string: uint32 byte length, then UTF-8."""
    raw = value.encode()
    return u32(len(raw)) + raw


def pairs(items: list[tuple[bytes, bytes]]) -> bytes:
    """An MCAP map: uint32 byte length, then the encoded key/value pairs."""
    body = b"".join(key + value for key, value in items)
    return u32(len(body)) + body


def string_map(items: dict[str, str]) -> bytes:
    """An MCAP ``Map<string, string>``."""
    return pairs([(string(key), string(value)) for key, value in items.items()])


class RecordWriter:
    """An MCAP byte stream built record by record (``pad``: bytes appended to paddable records).

    Each ``write_*`` method appends one record and returns its length in bytes
    (opcode and length field included); ``len(writer)`` is the next record's offset.
    """

    def __init__(self, *, pad: bytes = b"") -> None:
        self.buffer = bytearray()
        self.pad = pad

    def __len__(self) -> int:
        return len(self.buffer)

    def raw(self, data: bytes) -> None:
        """Append bytes as they are."""
        self.buffer += data

    def record(self, opcode: int, body: bytes, *, paddable: bool = True) -> int:
        """Append a record with ``body`` (plus the padding, if it may carry one)."""
        body += self.pad if paddable else b""
        self.buffer += u8(opcode) + u64(len(body)) + body
        return 9 + len(body)

    def write_header(self, profile: str = "", library: str = "") -> int:
        """Header (0x01)."""
        return self.record(0x01, string(profile) + string(library))

    def write_footer(self, summary_start: int, summary_offset_start: int, crc: int) -> int:
        """Footer (0x02): never padded (readers find it from the end)."""
        body = u64(summary_start) + u64(summary_offset_start) + u32(crc)
        return self.record(0x02, body, paddable=False)

    def write_schema(self, schema_id: int, name: str, encoding: str, data: bytes) -> int:
        """Schema (0x03)."""
        body = u16(schema_id) + string(name) + string(encoding) + u32(len(data)) + data
        return self.record(0x03, body)

    def write_channel(
        self,
        channel_id: int,
        schema_id: int,
        topic: str,
        encoding: str,
        metadata: dict[str, str] | None = None,
    ) -> int:
        """Channel (0x04)."""
        body = u16(channel_id) + u16(schema_id) + string(topic) + string(encoding)
        return self.record(0x04, body + string_map(metadata or {}))

    def write_message(
        self, channel_id: int, sequence: int, log_time: int, publish_time: int, data: bytes
    ) -> int:
        """Message (0x05): its data run to the record's end, so it cannot be padded."""
        body = u16(channel_id) + u32(sequence) + u64(log_time) + u64(publish_time) + data
        return self.record(0x05, body, paddable=False)

    def write_chunk(
        self,
        records: bytes,
        *,
        start_time: int = 0,
        end_time: int = 0,
        compression: str = "",
        compressed: bytes | None = None,
        uncompressed_size: int | None = None,
        crc: int | None = None,
    ) -> int:
        """Chunk (0x06) of ``records`` (stored as ``compressed`` if given); never padded here."""
        stored = records if compressed is None else compressed
        size = len(records) if uncompressed_size is None else uncompressed_size
        body = u64(start_time) + u64(end_time) + u64(size)
        body += u32(zlib.crc32(records) if crc is None else crc)
        body += string(compression) + u64(len(stored)) + stored
        return self.record(0x06, body, paddable=False)

    def write_message_index(self, channel_id: int, entries: list[tuple[int, int]]) -> int:
        """MessageIndex (0x07): (log time, offset in the chunk) per message."""
        body = b"".join(u64(log_time) + u64(offset) for log_time, offset in entries)
        return self.record(0x07, u16(channel_id) + u32(len(body)) + body)

    def write_chunk_index(
        self,
        *,
        start_time: int,
        end_time: int,
        chunk_start: int,
        chunk_length: int,
        message_index_offsets: dict[int, int],
        message_index_length: int,
        compression: str,
        compressed_size: int,
        uncompressed_size: int,
    ) -> int:
        """ChunkIndex (0x08)."""
        body = u64(start_time) + u64(end_time) + u64(chunk_start) + u64(chunk_length)
        body += pairs([(u16(key), u64(value)) for key, value in message_index_offsets.items()])
        body += u64(message_index_length) + string(compression)
        return self.record(0x08, body + u64(compressed_size) + u64(uncompressed_size))

    def write_attachment(
        self,
        name: str,
        media_type: str,
        data: bytes,
        *,
        log_time: int = 0,
        create_time: int = 0,
        crc: int | None = None,
    ) -> int:
        """Attachment (0x09); its CRC covers every field before it (not the padding)."""
        body = u64(log_time) + u64(create_time) + string(name) + string(media_type)
        body += u64(len(data)) + data
        return self.record(0x09, body + u32(zlib.crc32(body) if crc is None else crc))

    def write_attachment_index(
        self,
        *,
        offset: int,
        length: int,
        log_time: int,
        create_time: int,
        data_size: int,
        name: str,
        media_type: str,
    ) -> int:
        """AttachmentIndex (0x0A)."""
        body = u64(offset) + u64(length) + u64(log_time) + u64(create_time) + u64(data_size)
        return self.record(0x0A, body + string(name) + string(media_type))

    def write_statistics(
        self,
        *,
        message_count: int,
        schema_count: int,
        channel_count: int,
        attachment_count: int,
        metadata_count: int,
        chunk_count: int,
        start_time: int,
        end_time: int,
        channel_message_counts: dict[int, int],
    ) -> int:
        """Statistics (0x0B)."""
        body = u64(message_count) + u16(schema_count) + u32(channel_count)
        body += u32(attachment_count) + u32(metadata_count) + u32(chunk_count)
        body += u64(start_time) + u64(end_time)
        body += pairs([(u16(key), u64(value)) for key, value in channel_message_counts.items()])
        return self.record(0x0B, body)

    def write_metadata(self, name: str, metadata: dict[str, str]) -> int:
        """Metadata (0x0C)."""
        return self.record(0x0C, string(name) + string_map(metadata))

    def write_metadata_index(self, *, offset: int, length: int, name: str) -> int:
        """MetadataIndex (0x0D)."""
        return self.record(0x0D, u64(offset) + u64(length) + string(name))

    def write_summary_offset(self, opcode: int, start: int, length: int) -> int:
        """SummaryOffset (0x0E)."""
        return self.record(0x0E, u8(opcode) + u64(start) + u64(length))

    def write_data_end(self, crc: int | None = None) -> int:
        """DataEnd (0x0F) with the CRC of every byte so far (unless given); never padded."""
        value = zlib.crc32(self.buffer) if crc is None else crc
        return self.record(0x0F, u32(value), paddable=False)

    def finish(self, *, summary_start: int = 0, summary_offset_start: int = 0) -> bytes:
        """Write the Footer (its summary CRC from ``summary_start`` or the data end) and magic."""
        footer_at = len(self.buffer)
        crc_start = summary_start or footer_at
        fields = u8(0x02) + u64(20) + u64(summary_start) + u64(summary_offset_start)
        crc = zlib.crc32(bytes(self.buffer[crc_start:footer_at]) + fields)
        self.write_footer(summary_start, summary_offset_start, crc)
        self.raw(MAGIC)
        return bytes(self.buffer)


def zstd_rle_frame(total: int, *, window_log: int = 17, byte: int = 0) -> bytes:
    """A zstd frame of RLE blocks that inflates to ``total`` copies of ``byte`` (RFC 8878).

    Each block is 4 bytes and inflates to 128 KiB, so 1 GiB takes 32 KiB: the
    decompression bomb the reader must refuse. Built by hand, in no time; the frame
    header declares the content size and a window of ``2**window_log`` bytes.
    """
    block = 1 << 17
    if total % block or not 10 <= window_log <= 41:
        raise ValueError("total must be a multiple of 128 KiB, window_log within 10..41")
    # Frame header: 8-byte content size, not single-segment, so a window descriptor follows.
    frame = bytearray(b"\x28\xb5\x2f\xfd") + bytes([0xC0, (window_log - 10) << 3]) + u64(total)
    blocks = total // block
    for index in range(blocks):
        last = index == blocks - 1
        header = int(last) | (1 << 1) | (block << 3)  # Last_Block, Block_Type 1 (RLE), size
        frame += header.to_bytes(3, "little") + bytes([byte])
    return bytes(frame)


def ghost_prelude(writer: RecordWriter, *, library: str = "ghost-sdk; tests") -> None:
    """Write magic, Header, then every ghost schema and channel (ids 1-6), outside any chunk."""
    from audit._schemas import MESSAGE_ENCODING, SCHEMA_ENCODING, TOPICS, schema_data

    writer.raw(MAGIC)
    writer.write_header("", library)
    for number, (topic, name) in enumerate(TOPICS.items(), start=1):
        writer.write_schema(number, name, SCHEMA_ENCODING, schema_data(name))
        writer.write_channel(number, number, topic, MESSAGE_ENCODING)
