"""What `read_run` returns: a ghost audit log as stored, records and all."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LoggedAttachment", "LoggedRecord", "RunLog"]


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
    """

    topic: str
    log_time_ns: int
    sequence: int
    data: bytes
    sha256: str
    record: Mapping[str, Any] | None
    problem: str | None


@dataclass(frozen=True, slots=True)
class LoggedAttachment:
    """One MCAP attachment (ghost stores the run's policy source as one).

    Attributes:
        name: its file name (``policy.toml``).
        media_type: its media type (``application/toml``).
        log_time_ns: its MCAP ``log_time``.
        data: its bytes.
        sha256: ``sha256_hex(data)``, to compare with ``policy_source_sha256``.
    """

    name: str
    media_type: str
    log_time_ns: int
    data: bytes
    sha256: str


@dataclass(frozen=True, slots=True)
class RunLog:
    """A ghost audit log as read from disk.

    Attributes:
        path: the file read.
        source_sha256: SHA-256 hex of the whole file's bytes.
        records: the messages on ghost topics, in file order.
        attachments: the attachments, in file order.
        truncated: the file ends without a valid footer (a crash, or a cut):
            every record complete before the cut is in ``records``.
        problems: damage found while reading, one sentence each; empty for an
            intact file, and for a file that was merely cut short.
    """

    path: Path
    source_sha256: str
    records: tuple[LoggedRecord, ...]
    attachments: tuple[LoggedAttachment, ...]
    truncated: bool
    problems: tuple[str, ...]

    def records_on(self, topic: str) -> tuple[LoggedRecord, ...]:
        """Return the records on ``topic`` (``/decisions``), in file order."""
        return tuple(record for record in self.records if record.topic == topic)
