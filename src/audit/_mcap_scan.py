"""`McapScanner`: one bounded pass over any MCAP file, checking every CRC the format has.

The scanner knows MCAP, not ghost. It walks the records after the leading
magic in file order and yields what it finds (`Found`: a header, a
definition, a message, an attachment), what is wrong (`ReadProblem`), CRC
fields that are zero (`ZeroCrc`: "not computed" in MCAP, a problem only for
a ghost log), and, last, how the file ended (`ScanEnd`). Its rules:

1. Records are framed by their own length; a record is read whole only if
   it is one the reader needs (header, schema, channel, message,
   attachment, chunk, DataEnd, footer) and within `ReadLimits`. Others
   (indexes, statistics, metadata, unknown opcodes) are read past in
   blocks, never held. A record over its bound is a problem and is read past.
2. A chunk is held alone, decompressed with an output bound (`Inflater`), its
   uncompressed CRC checked, and its records decoded from the result. A
   chunk that claims more than the bound is never decompressed.
3. CRCs are read from their fields (`_mcap_records`): the chunk's
   uncompressed CRC, each attachment's CRC, the data-section CRC in DataEnd
   (over every byte before DataEnd) and the summary CRC in the Footer (from
   where DataEnd ends through the Footer's summary-offset field). Zero
   means "not computed" and is reported as `ZeroCrc`, not as a mismatch.
4. Where the file ends decides between *cut* and *altered*: a file that ends
   inside a record (or inside the closing magic) was cut, as a crash cuts
   it; but a file that ends with the closing magic while a record runs
   past its end was finished and then altered. Then the schema and channel
   definitions repeated in its summary are recovered, so that what the file
   is can still be told.
5. Every byte of the file's size at opening is read through the source, so
   its SHA-256 covers exactly what was parsed, even if reading stops early.

No judgement of ghost's records: that is `_reader`'s job.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mcap.opcode import Opcode

from audit._inflate import InflateError, Inflater
from audit._mcap_records import (
    FOOTER_CRC_SPAN,
    MAGIC,
    PREFIX,
    AttachmentRecord,
    ChannelRecord,
    HeaderRecord,
    MessageRecord,
    RecordError,
    SchemaRecord,
    opcode_name,
    read_attachment,
    read_channel,
    read_chunk,
    read_data_end,
    read_footer,
    read_header,
    read_message,
    read_schema,
)
from audit._problems import DEFAULT_LIMITS, CrcStatus, ProblemKind, ReadLimits, ReadProblem
from audit._source import ByteSource, open_source

__all__ = ["Found", "McapScanner", "ScanEnd", "ScanEvent", "ZeroCrc", "check_mcap"]

_PREFIX: Final = struct.Struct("<BQ")
_FOOTER_SIZE: Final = PREFIX + 20
_HELD: Final = frozenset(
    {Opcode.HEADER, Opcode.SCHEMA, Opcode.CHANNEL, Opcode.MESSAGE, Opcode.ATTACHMENT}
)
_IN_CHUNK: Final = frozenset({Opcode.SCHEMA, Opcode.CHANNEL, Opcode.MESSAGE})
# DataEnd and Footer have fixed fields; padding after them is allowed but never large.
_SMALL_LIMIT: Final = 4096
_LOOKAHEAD: Final = PREFIX + _SMALL_LIMIT


@dataclass(frozen=True, slots=True)
class Found:
    """A record the scanner decoded.

    Attributes:
        offset: byte offset of the record in the file, or of the chunk holding it.
        offset_in_chunk: its offset in the chunk's uncompressed records, or
            None outside a chunk.
        record: the decoded record.
    """

    offset: int
    offset_in_chunk: int | None
    record: HeaderRecord | SchemaRecord | ChannelRecord | MessageRecord | AttachmentRecord


@dataclass(frozen=True, slots=True)
class ZeroCrc:
    """A CRC field that is zero ("not computed"); ``what`` names it."""

    offset: int
    what: str


@dataclass(frozen=True, slots=True)
class ScanEnd:
    """How the file ended, and what it holds beyond its records (the scan's last event)."""

    size_bytes: int
    source_sha256: str
    truncated: bool
    footer: bool
    stopped: bool
    data_end: bool
    data_section_crc: CrcStatus
    summary_crc: CrcStatus
    has_summary: bool
    chunk_count: int
    chunk_index_count: int
    message_index_count: int
    statistics_count: int


ScanEvent = Found | ZeroCrc | ReadProblem | ScanEnd


class McapScanner:
    """One pass over an MCAP file from just after its leading magic.

    Args:
        source: the file, positioned after the 8-byte magic.
        limits: the bounds to keep.
    """

    def __init__(self, source: ByteSource, limits: ReadLimits) -> None:
        self._source = source
        self._limits = limits
        self._inflater = Inflater(limits.max_chunk_bytes)
        # A compressed chunk may be a little larger than its records; never much.
        self._max_chunk_record = limits.max_chunk_bytes + (limits.max_chunk_bytes >> 8) + 1024
        self._stop = False
        self._truncated = True
        self._footer = False
        self._data_end_at: int | None = None
        self._data_crc = CrcStatus.ABSENT
        self._summary_crc = CrcStatus.ABSENT
        self._has_summary = False
        self._counts: dict[int, int] = {}

    def stop(self) -> None:
        """Stop at the next record: the rest of the file is hashed, not parsed."""
        self._stop = True

    def events(self) -> Iterator[Found | ZeroCrc | ReadProblem | ScanEnd]:
        """Yield what the file holds, in file order, then one `ScanEnd`."""
        source = self._source
        first = True
        while not self._stop:
            start = source.position
            # DataEnd and the Footer need the CRCs at their start: keep it in the window.
            source.ensure(_LOOKAHEAD)
            prefix = source.read(PREFIX)
            if len(prefix) < PREFIX:
                if prefix:
                    yield from self._ended_inside(start)
                break
            opcode, length = _PREFIX.unpack(prefix)
            if first:
                first = False
                if opcode != Opcode.HEADER:
                    yield _problem(
                        ProblemKind.HEADER_MISSING,
                        start,
                        "the file does not begin with an MCAP Header record",
                    )
            self._counts[opcode] = self._counts.get(opcode, 0) + 1
            end = start + PREFIX + length
            limit = self._limit(opcode)
            if limit is not None and length > limit:
                yield self._too_large(opcode, start, length, limit)
                if end > source.size:
                    yield from self._ended_inside(start)
                    break
                source.skip(length)
                continue
            if end > source.size:
                yield from self._ended_inside(start)
                break
            if limit is None:
                source.skip(length)
                continue
            body = memoryview(source.read(length))
            if len(body) < length:  # the file shrank while read: a cut
                break
            try:
                if opcode == Opcode.FOOTER:
                    yield from self._finish(start, prefix, body)
                    break
                yield from self._take(opcode, start, body)
            except RecordError as exc:
                yield _problem(
                    ProblemKind.RECORD_UNPARSABLE,
                    start,
                    f"the {opcode_name(opcode)} record at byte {start} cannot be parsed ({exc});"
                    " it was skipped",
                )
        yield self._end()

    def _limit(self, opcode: int) -> int | None:
        if opcode in _HELD:
            return self._limits.max_record_bytes
        if opcode == Opcode.CHUNK:
            return self._max_chunk_record
        if opcode in (Opcode.DATA_END, Opcode.FOOTER):
            return _SMALL_LIMIT
        return None

    def _too_large(self, opcode: int, start: int, length: int, limit: int) -> ReadProblem:
        kind = (
            ProblemKind.CHUNK_TOO_LARGE if opcode == Opcode.CHUNK else ProblemKind.RECORD_TOO_LARGE
        )
        return _problem(
            kind,
            start,
            f"the {opcode_name(opcode)} record at byte {start} is {length} bytes long, over"
            f" the {limit}-byte bound; it was skipped",
        )

    def _take(
        self, opcode: int, start: int, body: memoryview
    ) -> Iterator[Found | ZeroCrc | ReadProblem]:
        if opcode == Opcode.MESSAGE:
            yield Found(start, None, read_message(body))
        elif opcode == Opcode.CHUNK:
            yield from self._chunk(start, body)
        elif opcode == Opcode.SCHEMA:
            yield Found(start, None, read_schema(body))
        elif opcode == Opcode.CHANNEL:
            yield Found(start, None, read_channel(body))
        elif opcode == Opcode.ATTACHMENT:
            yield from self._attachment(start, read_attachment(body))
        elif opcode == Opcode.HEADER:
            yield Found(start, None, read_header(body))
        else:  # DataEnd: the only other record held
            yield from self._data_end(start, read_data_end(body))

    def _attachment(
        self, start: int, attachment: AttachmentRecord
    ) -> Iterator[Found | ZeroCrc | ReadProblem]:
        if attachment.crc == 0:
            yield ZeroCrc(start, f"the attachment {attachment.name!r} at byte {start}")
        elif zlib.crc32(attachment.crc_covered) != attachment.crc:
            yield _problem(
                ProblemKind.ATTACHMENT_CRC_MISMATCH,
                start,
                f"the attachment {attachment.name!r} at byte {start} fails its CRC check",
            )
        yield Found(start, None, attachment)

    def _data_end(self, start: int, stored: int) -> Iterator[ZeroCrc | ReadProblem]:
        if self._data_end_at is not None:
            return  # a second DataEnd: the data section ended at the first
        crc_before = self._source.crc_at(start)
        self._data_end_at = self._source.position
        self._source.mark()
        if stored == 0:
            self._data_crc = CrcStatus.ZERO
            yield ZeroCrc(start, f"the data-section CRC (DataEnd at byte {start})")
        elif stored != crc_before:
            self._data_crc = CrcStatus.MISMATCH
            yield _problem(
                ProblemKind.DATA_CRC_MISMATCH,
                start,
                f"the data section fails its CRC check: bytes before byte {start} differ"
                " from what was written",
            )
        else:
            self._data_crc = CrcStatus.VALID

    def _chunk(self, start: int, body: memoryview) -> Iterator[Found | ZeroCrc | ReadProblem]:
        chunk = read_chunk(body)
        bound = self._limits.max_chunk_bytes
        if chunk.uncompressed_size > bound:
            yield _problem(
                ProblemKind.CHUNK_TOO_LARGE,
                start,
                f"the chunk at byte {start} claims {chunk.uncompressed_size} bytes uncompressed,"
                f" over the {bound}-byte bound; it was skipped unread",
            )
            return
        try:
            data = self._inflater.inflate(chunk.compression, chunk.records, chunk.uncompressed_size)
        except InflateError as exc:
            yield _problem(
                exc.kind, start, f"the chunk at byte {start} is corrupt ({exc.why}); it was skipped"
            )
            return
        if chunk.uncompressed_crc == 0:
            yield ZeroCrc(start, f"the CRC of the chunk at byte {start}")
        elif zlib.crc32(data) != chunk.uncompressed_crc:
            yield _problem(
                ProblemKind.CHUNK_CRC_MISMATCH,
                start,
                f"the chunk at byte {start} is corrupt (it fails its CRC check); the records"
                " in it are left out",
            )
            return
        yield from self._chunk_records(start, memoryview(data))

    def _chunk_records(self, start: int, data: memoryview) -> Iterator[Found | ReadProblem]:
        at = 0
        size = len(data)
        while at < size and not self._stop:
            if size - at < PREFIX:
                yield _chunk_cut(start, at)
                return
            opcode, length = _PREFIX.unpack_from(data, at)
            end = at + PREFIX + length
            if end > size:
                yield _chunk_cut(start, at)
                return
            if opcode in _IN_CHUNK:
                where = f"at offset {at} in the chunk at byte {start}"
                if length > self._limits.max_record_bytes:
                    yield _problem(
                        ProblemKind.RECORD_TOO_LARGE,
                        start,
                        f"the {opcode_name(opcode)} record {where} is {length} bytes long, over"
                        f" the {self._limits.max_record_bytes}-byte bound; it was skipped",
                    )
                else:
                    try:
                        yield Found(start, at, _read_in_chunk(opcode, data[at + PREFIX : end]))
                    except RecordError as exc:
                        yield _problem(
                            ProblemKind.RECORD_UNPARSABLE,
                            start,
                            f"the {opcode_name(opcode)} record {where} cannot be parsed ({exc});"
                            " it was skipped",
                        )
            at = end

    def _finish(
        self, start: int, prefix: bytes, body: memoryview
    ) -> Iterator[ZeroCrc | ReadProblem]:
        footer = read_footer(body)
        since_mark = self._source.crc_since_mark_at(start)
        self._footer = True
        self._has_summary = footer.summary_start != 0
        if footer.summary_crc == 0:
            self._summary_crc = CrcStatus.ZERO
            yield ZeroCrc(start, f"the summary CRC (Footer at byte {start})")
        elif self._data_end_at is not None and since_mark is not None:
            if footer.summary_start not in (0, self._data_end_at):
                yield _problem(
                    ProblemKind.SUMMARY_START_INVALID,
                    start,
                    f"the footer says the summary starts at byte {footer.summary_start}, but the"
                    f" data section ends at byte {self._data_end_at}",
                )
            covered = zlib.crc32(body[:FOOTER_CRC_SPAN], zlib.crc32(prefix, since_mark))
            if covered == footer.summary_crc:
                self._summary_crc = CrcStatus.VALID
            else:
                self._summary_crc = CrcStatus.MISMATCH
                yield _problem(
                    ProblemKind.SUMMARY_CRC_MISMATCH,
                    start,
                    "the summary section fails its CRC check",
                )
        if self._data_end_at is None:
            yield _problem(
                ProblemKind.DATA_END_MISSING,
                None,
                "the file has no DataEnd record: it was skipped or removed, so the data"
                " section's CRC could not be checked",
            )
        at = self._source.position
        closing = self._source.read(len(MAGIC))
        if closing == MAGIC:
            self._truncated = False
            if self._source.remaining:
                yield _problem(
                    ProblemKind.TRAILING_BYTES,
                    self._source.position,
                    f"{self._source.remaining} bytes follow the end of the MCAP file at byte"
                    f" {self._source.position}",
                )
        elif len(closing) < len(MAGIC) and MAGIC.startswith(closing):
            pass  # cut inside the closing magic: truncated, nothing damaged
        else:
            self._truncated = False
            yield _problem(
                ProblemKind.CLOSING_MAGIC_DAMAGED,
                at,
                f"the closing MCAP magic at byte {at} is damaged",
            )

    def _ended_inside(self, start: int) -> Iterator[Found | ReadProblem]:
        """The file ends inside the record at ``start``: cut short, or altered."""
        source = self._source
        if source.size < 2 * len(MAGIC) or source.read_at(source.size - len(MAGIC), 8) != MAGIC:
            return  # a cut: truncated, nothing damaged
        # A crash cannot leave the closing magic behind a partial record.
        self._truncated = False
        yield _problem(
            ProblemKind.ALTERED_LENGTH,
            start,
            f"the record at byte {start} runs past the end of the file, yet the file ends with"
            " the MCAP closing magic: it was altered, not cut, and no message or attachment"
            " after that record could be read",
        )
        yield from self._recover_definitions()

    def _recover_definitions(self) -> Iterator[Found]:
        """Read the schemas and channels the summary repeats, if the footer can be found."""
        source = self._source
        footer_at = source.size - len(MAGIC) - _FOOTER_SIZE
        tail = source.read_at(footer_at, _FOOTER_SIZE)
        if len(tail) != _FOOTER_SIZE or _PREFIX.unpack_from(tail) != (Opcode.FOOTER, 20):
            return
        at = read_footer(memoryview(tail)[PREFIX:]).summary_start
        if not len(MAGIC) <= at < footer_at:
            return
        while at + PREFIX <= footer_at:
            opcode, length = _PREFIX.unpack(source.read_at(at, PREFIX))
            end = at + PREFIX + length
            if end > footer_at:
                return
            if (
                opcode in (Opcode.SCHEMA, Opcode.CHANNEL)
                and length <= self._limits.max_record_bytes
            ):
                body = memoryview(source.read_at(at + PREFIX, length))
                try:
                    yield Found(at, None, _read_in_chunk(opcode, body))
                except RecordError:
                    return
            at = end

    def _end(self) -> ScanEnd:
        self._source.drain()
        if self._stop:
            self._truncated = False
        counts = self._counts
        return ScanEnd(
            size_bytes=self._source.size,
            source_sha256=self._source.sha256_hex(),
            truncated=self._truncated,
            footer=self._footer,
            stopped=self._stop,
            data_end=self._data_end_at is not None,
            data_section_crc=self._data_crc,
            summary_crc=self._summary_crc,
            has_summary=self._has_summary,
            chunk_count=counts.get(Opcode.CHUNK, 0),
            chunk_index_count=counts.get(Opcode.CHUNK_INDEX, 0),
            message_index_count=counts.get(Opcode.MESSAGE_INDEX, 0),
            statistics_count=counts.get(Opcode.STATISTICS, 0),
        )


def check_mcap(
    path: Path, limits: ReadLimits = DEFAULT_LIMITS
) -> tuple[list[ReadProblem], list[ZeroCrc], ScanEnd]:
    """Check any MCAP file's structure and every CRC it has; ghost's rules play no part.

    Returns:
        The problems found, the CRC fields that are zero (absent, for MCAP), and
        how the file ended.

    Raises:
        LogFormatError: the file cannot be read, or is not MCAP (no magic).
    """
    problems: list[ReadProblem] = []
    zeros: list[ZeroCrc] = []
    with open_source(path) as source:
        source.read_magic()
        for event in McapScanner(source, limits).events():
            if isinstance(event, ReadProblem):
                problems.append(event)
            elif isinstance(event, ZeroCrc):
                zeros.append(event)
            elif isinstance(event, ScanEnd):
                return problems, zeros, event
    raise AssertionError("unreachable: a scan always ends with ScanEnd")  # pragma: no cover


def _read_in_chunk(opcode: int, body: memoryview) -> SchemaRecord | ChannelRecord | MessageRecord:
    if opcode == Opcode.MESSAGE:
        return read_message(body)
    if opcode == Opcode.CHANNEL:
        return read_channel(body)
    return read_schema(body)


def _chunk_cut(start: int, at: int) -> ReadProblem:
    return _problem(
        ProblemKind.CHUNK_CORRUPT,
        start,
        f"the chunk at byte {start} is corrupt (its record at offset {at} runs past the chunk's"
        " end); the records from there on are lost",
    )


def _problem(kind: ProblemKind, offset: int | None, message: str) -> ReadProblem:
    return ReadProblem(kind=kind, offset=offset, message=message)
