"""`read_run`: a ghost audit log read back, whatever state the file is in.

The reader is what the analyzer stands on, so it never dies with a traceback
on bad input. It sorts what can go wrong into three kinds:

* **Not a ghost audit log at all** — missing, a directory, unreadable, not
  MCAP, cut inside the leading magic, or an MCAP file from another program:
  `read_run` raises `LogFormatError`.
* **Cut short** — the file ends before a valid footer, as a crash (or a cut
  at any byte) leaves it: every record complete before the cut is returned
  and `RunLog.truncated` is True. A cut is not a problem by itself.
* **Damaged** — a chunk or data-section CRC that does not match, a record
  that cannot be parsed, a message on an unknown channel or a foreign topic:
  each is a sentence in `RunLog.problems`, and reading goes on past it
  wherever the damaged record's length allows.

It reads the file once into memory, so the bytes it parses are exactly the
bytes `RunLog.source_sha256` hashes, even while a live sink is appending.
Records are parsed one by one with `mcap.stream_reader.StreamReader`; chunks
are broken up here, CRC-checked, so that one corrupt chunk costs only its own
records. Whether a record is well-formed for its schema, and whether the
chain holds, is for the analyzer to judge: the reader reports what is stored.
"""

from __future__ import annotations

import io
import os
import stat
import struct
import zlib
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from mcap.exceptions import McapError
from mcap.opcode import Opcode
from mcap.records import (
    Attachment,
    Channel,
    Chunk,
    DataEnd,
    Footer,
    Header,
    McapRecord,
    Message,
    Schema,
)
from mcap.stream_reader import StreamReader, breakup_chunk

from audit._errors import LogFormatError
from audit._parse import parse_record
from audit._run_log import LoggedAttachment, LoggedRecord, RunLog
from audit._schemas import MESSAGE_ENCODING, SCHEMA_ENCODING, TOPICS
from runtime import sha256_hex

__all__ = ["read_run"]

try:
    from zstandard import ZstdError
except ImportError:  # pragma: no cover - mcap installs zstandard; only a stripped install lacks it

    class ZstdError(Exception):  # type: ignore[no-redef]
        """Stands in when zstandard is absent (its chunks then fail as unsupported)."""


MAGIC: Final = b"\x89MCAP0\r\n"
_RECORD_PREFIX: Final = 9  # opcode (1 byte) + length (8 bytes)
_FOOTER_CRC_SPAN: Final = _RECORD_PREFIX + 16  # the footer bytes its summary CRC covers
# A corrupt size field must not make us allocate gigabytes for one chunk.
_MAX_CHUNK_BYTES: Final = 1 << 30
_MAX_PROBLEMS: Final = 100
_KNOWN_OPCODES: Final = frozenset(int(opcode) for opcode in Opcode)
# What a record that does not parse raises: the mcap library's own errors, short
# reads (struct.error, EOFError), bad UTF-8 in a string field (ValueError), and a
# length field too large for a read() (OverflowError).
_RECORD_ERRORS: Final = (McapError, struct.error, EOFError, ValueError, OverflowError)
# ...and a chunk adds its decompressor's: zstandard's, lz4's RuntimeError, and
# MemoryError for a size field that lies within the cap.
_CHUNK_ERRORS: Final = (*_RECORD_ERRORS, ZstdError, RuntimeError, MemoryError)


def read_run(path: str | os.PathLike[str]) -> RunLog:
    """Read a ghost audit log, recovering all it can from a damaged or cut file.

    Args:
        path: the MCAP file.

    Returns:
        The run's records, attachments, and what was wrong with the file.

    Raises:
        LogFormatError: the file is missing, a directory or unreadable; is not
            MCAP; is cut inside its leading magic (or empty); or is an MCAP
            file from another program (channels or messages, none of them ghost's).
    """
    source = Path(os.fspath(path))
    data = _read_file(source)
    _check_magic(source, data)
    scan = _Scan(data)
    scan.run()
    return scan.result(source)


def _read_file(path: Path) -> bytes:
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise LogFormatError(path, "it is a directory, not a file")
        if not stat.S_ISREG(mode):
            raise LogFormatError(path, "it is not a regular file")
        return path.read_bytes()
    except FileNotFoundError:
        raise LogFormatError(path, "there is no such file") from None
    except PermissionError:
        raise LogFormatError(path, "permission denied: the file cannot be read") from None
    except OSError as exc:
        raise LogFormatError(path, f"the file cannot be read ({exc.strerror or exc})") from None


def _check_magic(path: Path, data: bytes) -> None:
    if not data:
        raise LogFormatError(path, "the file is empty")
    if len(data) < len(MAGIC) and MAGIC.startswith(data):
        raise LogFormatError(
            path, f"the file is cut inside the MCAP magic: it holds only {len(data)} bytes"
        )
    if not data.startswith(MAGIC):
        raise LogFormatError(path, "it is not an MCAP file (it does not start with the MCAP magic)")


class _Scan:
    """One pass over a file's records, collecting what a `RunLog` needs."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.schemas: dict[int, Schema] = {}
        self.channels: dict[int, Channel] = {}
        self.messages: list[tuple[int, Message]] = []
        self.attachments: list[LoggedAttachment] = []
        self.problems: list[str] = []
        self.truncated = True
        self.seen_header = False
        self.seen_data_end = False

    def run(self) -> None:
        buffer = io.BytesIO(self.data)
        position: int | None = len(MAGIC)
        while position is not None and len(self.problems) < _MAX_PROBLEMS:
            buffer.seek(position)
            position = self._read_from(buffer)
        if len(self.problems) >= _MAX_PROBLEMS:
            self.problems.append("too many problems: reading stopped there")

    def _read_from(self, buffer: io.BytesIO) -> int | None:
        """Read records until the end; return where to resume after a damaged one, if any."""
        # A fresh reader per resumption: a generator that raised is spent.
        reader = StreamReader(
            buffer, skip_magic=True, emit_chunks=True, record_size_limit=len(self.data)
        )
        records = reader.records
        after_footer = False
        while True:
            start = buffer.tell()
            try:
                record = next(records)
            except StopIteration:
                # The footer and the closing magic both read: the file is whole.
                self.truncated = False
                self._check_complete(buffer.tell())
                return None
            except _RECORD_ERRORS as exc:
                if after_footer:
                    self._bad_closing_magic(start)
                    return None
                return self._damaged(start, exc)
            self._take(record, self._record_start(start), buffer.tell())
            after_footer = isinstance(record, Footer)

    def _record_start(self, position: int) -> int:
        """Return where the record read from ``position`` begins.

        StreamReader skips records of unknown opcode without yielding them, so
        the record it yields (or fails on) is the first known one from there.
        The walk stops where a record would run past the end of the file.
        """
        while len(self.data) - position >= _RECORD_PREFIX:
            opcode: int
            length: int
            opcode, length = struct.unpack_from("<BQ", self.data, position)
            end = position + _RECORD_PREFIX + length
            if opcode in _KNOWN_OPCODES or end > len(self.data):
                break
            position = end
        return position

    def _damaged(self, start: int, exc: Exception) -> int | None:
        """Classify a failure after ``start``: a cut (None) or a damaged record (resume offset)."""
        position = self._record_start(start)
        if len(self.data) - position >= _RECORD_PREFIX:
            opcode: int
            length: int
            opcode, length = struct.unpack_from("<BQ", self.data, position)
            end = position + _RECORD_PREFIX + length
            if end <= len(self.data):
                self.problems.append(
                    f"the {_opcode_name(opcode)} record at byte {position} cannot be parsed"
                    f" ({_why(exc)}); it was skipped"
                )
                return end
        # Otherwise the file ends inside this record: cut short, or altered.
        if len(self.data) >= 2 * len(MAGIC) and self.data.endswith(MAGIC):
            # A crash cannot leave the closing magic behind a partial record: the
            # file was finished, and a length or the footer was altered since.
            self.truncated = False
            self.problems.append(
                f"the record at byte {position} runs past the end of the file, yet the file"
                " ends with the MCAP closing magic: it was altered, not cut, and nothing"
                " after that record could be read"
            )
        return None

    def _bad_closing_magic(self, start: int) -> None:
        tail = self.data[start:]
        if len(tail) < len(MAGIC) and MAGIC.startswith(tail):
            return  # cut inside the closing magic: truncated, nothing damaged
        self.truncated = False
        self.problems.append(f"the closing MCAP magic at byte {start} is damaged")

    def _check_complete(self, end: int) -> None:
        if not self.seen_data_end:
            # Its CRC is the one check that covers every byte of the data section.
            self.problems.append(
                "the file has no DataEnd record: it was skipped or removed, so the data"
                " section's CRC could not be checked"
            )
        if end < len(self.data):
            self.problems.append(
                f"{len(self.data) - end} bytes follow the end of the MCAP file at byte {end}"
            )

    def _take(self, record: McapRecord, start: int, end: int) -> None:
        if not self.seen_header:
            self.seen_header = True
            if not isinstance(record, Header):
                self.problems.append("the file does not begin with an MCAP Header record")
        if isinstance(record, Message):
            self.messages.append((start, record))
        elif isinstance(record, Schema | Channel):
            self._define(record)
        elif isinstance(record, Chunk):
            self._take_chunk(record, start)
        elif isinstance(record, Attachment):
            self._take_attachment(record, start, end)
        elif isinstance(record, DataEnd):
            self.seen_data_end = True
            crc = record.data_section_crc
            if crc and zlib.crc32(self.data[:start]) != crc:
                self.problems.append(
                    "the data section fails its CRC check: bytes before"
                    f" byte {start} differ from what was written"
                )
        elif isinstance(record, Footer):
            self._check_footer(record, start)

    def _define(self, record: Schema | Channel) -> None:
        known: Mapping[int, Schema | Channel] = (
            self.schemas if isinstance(record, Schema) else self.channels
        )
        kind = "schema" if isinstance(record, Schema) else "channel"
        previous = known.get(record.id)
        if previous is None:
            if isinstance(record, Schema):
                self.schemas[record.id] = record
            else:
                self.channels[record.id] = record
        elif previous != record:
            # The summary repeats definitions; a repeat that differs was changed.
            self.problems.append(
                f"{kind} {record.id} is defined twice, differently; the first definition is used"
            )

    def _take_chunk(self, chunk: Chunk, start: int) -> None:
        if chunk.uncompressed_size > _MAX_CHUNK_BYTES:
            self.problems.append(
                f"the chunk at byte {start} claims {chunk.uncompressed_size} bytes"
                " uncompressed; it was skipped as corrupt"
            )
            return
        try:
            inner = breakup_chunk(chunk, validate_crc=True)
        except _CHUNK_ERRORS as exc:
            self.problems.append(
                f"the chunk at byte {start} is corrupt ({_why(exc)}); the records in it are lost"
            )
            return
        for record in inner:
            if isinstance(record, Message):
                self.messages.append((start, record))
            elif isinstance(record, Schema | Channel):
                self._define(record)

    def _take_attachment(self, attachment: Attachment, start: int, end: int) -> None:
        # mcap's Attachment.read skips the CRC; check it here.
        stored = int.from_bytes(self.data[end - 4 : end], "little")
        if stored and zlib.crc32(self.data[start + _RECORD_PREFIX : end - 4]) != stored:
            self.problems.append(
                f"the attachment {attachment.name!r} at byte {start} fails its CRC check"
            )
        self.attachments.append(
            LoggedAttachment(
                name=attachment.name,
                media_type=attachment.media_type,
                log_time_ns=attachment.log_time,
                data=attachment.data,
                sha256=sha256_hex(attachment.data),
            )
        )

    def _check_footer(self, footer: Footer, start: int) -> None:
        if not footer.summary_crc:
            return
        first = footer.summary_start or start
        covered = self.data[first : start + _FOOTER_CRC_SPAN]
        if first > start or zlib.crc32(covered) != footer.summary_crc:
            self.problems.append("the summary section fails its CRC check")

    def result(self, path: Path) -> RunLog:
        ghost_channels = {
            channel.id for channel in self.channels.values() if self._is_ghost(channel)
        }
        if not ghost_channels and (self.channels or self.messages):
            topics = sorted({channel.topic for channel in self.channels.values()})
            found = ", ".join(topics) if topics else "none"
            raise LogFormatError(
                path,
                "it is an MCAP file, but not a ghost audit log: none of its channels is a"
                f" ghost topic with a ghost schema (its topics: {found})",
            )
        records: list[LoggedRecord] = []
        foreign: Counter[str] = Counter()
        unknown: Counter[int] = Counter()
        for _, message in self.messages:
            channel = self.channels.get(message.channel_id)
            if channel is None:
                unknown[message.channel_id] += 1
            elif channel.topic in TOPICS:
                records.append(_logged(channel.topic, message))
            else:
                foreign[channel.topic] += 1
        problems = list(self.problems)
        problems.extend(
            f"channel {channel.id} on {channel.topic} does not carry the"
            f" {TOPICS[channel.topic]} JSON schema with JSON messages"
            for channel in self.channels.values()
            if channel.topic in TOPICS and channel.id not in ghost_channels
        )
        problems.extend(
            f"{count} message(s) on channel {channel_id}, which is never defined, were left out"
            for channel_id, count in sorted(unknown.items())
        )
        problems.extend(
            f"{count} message(s) on {topic}, which is not a ghost topic, were left out"
            for topic, count in sorted(foreign.items())
        )
        return RunLog(
            path=path,
            source_sha256=sha256_hex(self.data),
            records=tuple(records),
            attachments=tuple(self.attachments),
            truncated=self.truncated,
            problems=tuple(problems),
        )

    def _is_ghost(self, channel: Channel) -> bool:
        schema = self.schemas.get(channel.schema_id)
        return (
            channel.topic in TOPICS
            and channel.message_encoding == MESSAGE_ENCODING
            and schema is not None
            and schema.name == TOPICS[channel.topic]
            and schema.encoding == SCHEMA_ENCODING
        )


def _logged(topic: str, message: Message) -> LoggedRecord:
    record, problem = parse_record(message.data)
    return LoggedRecord(
        topic=topic,
        log_time_ns=message.log_time,
        sequence=message.sequence,
        data=message.data,
        sha256=sha256_hex(message.data),
        record=record,
        problem=problem,
    )


def _opcode_name(opcode: int) -> str:
    return Opcode(opcode).name.lower().replace("_", " ")


def _why(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
