"""What the reader reports about a file: problem kinds, CRC outcomes, and the bounds it keeps.

A problem is a value, not an exception: `ReadProblem` names its kind (a
closed `ProblemKind`), the byte offset of the record it concerns, and a
sentence for a person. The reader's kinds say what is wrong with the file
as stored; judging a run (chain, seal, signatures) is the verifier's job,
which turns every reader problem into "tampered or corrupted".

The bounds (`ReadLimits`) are what keep reading a hostile file cheap: no
allocation grows with a size field the file declares, only with bytes
the reader has already checked against these limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

__all__ = ["DEFAULT_LIMITS", "CrcStatus", "ProblemKind", "ReadLimits", "ReadProblem"]

_MIB: Final = 1024 * 1024


class ProblemKind(StrEnum):
    """What is wrong with a file, as the reader found it (closed: a new kind is a new release)."""

    HEADER_MISSING = "header_missing"
    """The file does not begin with an MCAP Header record."""
    RECORD_UNPARSABLE = "record_unparsable"
    """A record's fields do not fit its length, or a string is not UTF-8; skipped."""
    RECORD_TOO_LARGE = "record_too_large"
    """A record (a message, attachment, schema, ...) over `ReadLimits.max_record_bytes`; skipped."""
    CHUNK_TOO_LARGE = "chunk_too_large"
    """A chunk that claims more than `ReadLimits.max_chunk_bytes` uncompressed; skipped unread."""
    CHUNK_OVERFLOW = "chunk_overflow"
    """A chunk that inflates beyond the size its header states (a decompression bomb)."""
    CHUNK_CORRUPT = "chunk_corrupt"
    """A chunk that does not decompress, inflates short, or holds records that do not fit it."""
    CHUNK_COMPRESSION_UNSUPPORTED = "chunk_compression_unsupported"
    """A chunk compressed with an unknown (or not installed) compression."""
    CHUNK_CRC_MISMATCH = "chunk_crc_mismatch"
    """A chunk's uncompressed CRC does not match its records; they are left out."""
    ATTACHMENT_CRC_MISMATCH = "attachment_crc_mismatch"
    """An attachment's CRC does not match its bytes."""
    DATA_CRC_MISMATCH = "data_crc_mismatch"
    """The data-section CRC in DataEnd does not match the bytes before it."""
    SUMMARY_CRC_MISMATCH = "summary_crc_mismatch"
    """The summary CRC in the Footer does not match the summary section."""
    CRC_MISSING = "crc_missing"
    """A CRC ghost always writes is zero (a ghost log only: for other files zero means absent)."""
    DATA_END_MISSING = "data_end_missing"
    """A finished file without a DataEnd record: its data-section CRC cannot be checked."""
    SUMMARY_START_INVALID = "summary_start_invalid"
    """The Footer's summary start does not point at the end of the data section."""
    ALTERED_LENGTH = "altered_length"
    """A record runs past the end of a file that ends with the closing magic: altered, not cut."""
    CLOSING_MAGIC_DAMAGED = "closing_magic_damaged"
    """The bytes after the Footer are not the MCAP closing magic."""
    TRAILING_BYTES = "trailing_bytes"
    """Bytes follow the closing magic."""
    DEFINITION_CONFLICT = "definition_conflict"
    """A schema or channel id defined twice, differently; the first definition is used."""
    CHANNEL_NOT_GHOST = "channel_not_ghost"
    """A ghost topic's channel without its ghost schema and JSON encodings; its records are kept."""
    UNKNOWN_CHANNEL = "unknown_channel"
    """Messages on a channel that is never defined; left out."""
    FOREIGN_TOPIC = "foreign_topic"
    """Messages on a topic that is not a ghost topic; left out."""
    MEMORY_LIMIT = "memory_limit"
    """What the reader would have to hold exceeds a `ReadLimits` bound; the excess is dropped."""
    TOO_MANY_PROBLEMS = "too_many_problems"
    """`ReadLimits.max_problems` reached: reading stopped there (the file is still hashed)."""


class CrcStatus(StrEnum):
    """The outcome of one CRC the format defines."""

    VALID = "valid"
    """Read from its field and matched."""
    MISMATCH = "mismatch"
    """Read from its field and did not match."""
    ZERO = "zero"
    """The field is zero: the writer did not compute it (ghost always does)."""
    ABSENT = "absent"
    """The field was never read: no such record (a cut file has no DataEnd), or nothing to cover."""


@dataclass(frozen=True, slots=True)
class ReadProblem:
    """One thing wrong with a file, machine-readable and in words.

    Attributes:
        kind: what is wrong.
        offset: byte offset in the file of the record concerned (for a record
            inside a chunk, the chunk's), or None when no one record is.
        message: a sentence for a person, naming the record and its offset.
    """

    kind: ProblemKind
    offset: int | None
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """The bounds that keep reading a hostile file cheap; every one is a problem, not a crash.

    Attributes:
        max_chunk_bytes: the largest chunk read, compressed or claimed
            uncompressed (default 64 MiB); a larger claim is skipped unread, and a
            chunk that inflates past its claim is stopped one byte past it.
        max_record_bytes: the largest record held whole (a message, an
            attachment, a schema...; default 16 MiB).
        max_held_bytes: the bound on each thing a streaming read holds besides
            the current chunk: schema and channel definitions; messages waiting
            for a channel defined later; items held until the file shows it is
            ghost's (default 64 MiB each).
        max_retained_bytes: what `read_run` keeps of message and attachment
            bytes (default 256 MiB; Python objects cost several times that);
            larger runs are for `iter_run`.
        max_problems: problems reported before reading stops (default 100).
    """

    max_chunk_bytes: int = 64 * _MIB
    max_record_bytes: int = 16 * _MIB
    max_held_bytes: int = 64 * _MIB
    max_retained_bytes: int = 256 * _MIB
    max_problems: int = 100

    def __post_init__(self) -> None:
        for name in (
            "max_chunk_bytes",
            "max_record_bytes",
            "max_held_bytes",
            "max_retained_bytes",
            "max_problems",
        ):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"ReadLimits.{name} must be a positive int, got {value!r}")


DEFAULT_LIMITS: Final = ReadLimits()
"""The bounds `read_run` and `iter_run` use unless given others."""
