"""`MemoryAuditSink`: the audit sink as a test double, keeping every record in memory.

It chains exactly as `McapAuditSink` does (the same `Chain`), so a test can
assert on ``seq``, ``prev_sha256`` and content addresses without a file. By
default it also checks every record against its schema, so a test of code
that builds records finds a missing or misspelt field at once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType, TracebackType
from typing import Any

from audit._chain import (
    RUN_TOPIC,
    SEAL_TOPIC,
    Chain,
    ChainedRecord,
    Durability,
    check_appendable,
    make_run_record,
)
from audit._validate import schema_problems
from runtime import AuditError, RunStart

__all__ = ["AuditEntry", "MemoryAuditSink"]


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One record as a sink wrote it.

    Attributes:
        topic: the topic it was written on (``/decisions``).
        record: the record, ``seq`` and ``prev_sha256`` included (read-only).
        sha256: its content address, the SHA-256 hex of ``data``.
        data: its canonical bytes, as an MCAP sink would store them.
    """

    topic: str
    record: Mapping[str, Any]
    sha256: str
    data: bytes


class MemoryAuditSink:
    """An `AuditSink` that keeps a run's chained records in memory, for tests.

    Thread-safe, a context manager, and sealed by `close` like `McapAuditSink`.

    Args:
        validate: check each record field by field against its schema
            (`audit.schema_problems`) and refuse one that does not match.
        durability: the mode to record in the ``/run`` record (nothing is
            written anywhere; this only lets a test mimic a file sink's run).
    """

    def __init__(self, *, validate: bool = True, durability: Durability = "process") -> None:
        self._validate = validate
        self._durability: Durability = durability
        self._lock = threading.Lock()
        self._chain = Chain()
        self._run: RunStart | None = None
        self._entries: list[AuditEntry] = []
        self._closed = False

    @property
    def run(self) -> RunStart | None:
        """The run passed to `open_run`, or None before it."""
        return self._run

    @property
    def entries(self) -> tuple[AuditEntry, ...]:
        """Every record written so far, in ``seq`` order (``/run`` first)."""
        with self._lock:
            return tuple(self._entries)

    @property
    def closed(self) -> bool:
        """Whether `close` has been called."""
        return self._closed

    @property
    def head_sha256(self) -> str | None:
        """The content address of the last record, or None before `open_run`."""
        with self._lock:
            return self._chain.head_sha256

    def records(self, topic: str) -> tuple[Mapping[str, Any], ...]:
        """Return the records written on ``topic``, in order.

        Args:
            topic: a ghost topic such as ``/decisions``.
        """
        with self._lock:
            return tuple(entry.record for entry in self._entries if entry.topic == topic)

    def open_run(self, run: RunStart) -> None:
        """Record the ``/run`` record (``seq`` 0).

        Raises:
            AuditError: the sink is closed or already has a run.
        """
        with self._lock:
            if self._closed:
                raise AuditError("open_run on a closed MemoryAuditSink")
            if self._run is not None:
                raise AuditError("open_run was already called: a sink records one run")
            self._write(RUN_TOPIC, make_run_record(run, self._durability))
            self._run = run

    def append(self, topic: str, record: Mapping[str, Any]) -> str:
        """Chain and keep ``record``; return its content address.

        Raises:
            AuditError: no run is open, the sink is closed, or the record does
                not fit its topic, does not encode, or (with ``validate``) does
                not match its schema.
        """
        with self._lock:
            if self._closed:
                raise AuditError("append on a closed MemoryAuditSink")
            if self._run is None:
                raise AuditError("append before open_run: no run is open")
            check_appendable(topic, record)
            return self._write(topic, record).sha256

    def close(self) -> None:
        """Write the ``/seal`` record if a run is open; a second call does nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._run is not None:
                self._write(SEAL_TOPIC, self._chain.seal_record(time.time_ns()))

    def __enter__(self) -> MemoryAuditSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _write(self, topic: str, record: Mapping[str, Any]) -> AuditEntry:
        linked: ChainedRecord = self._chain.link(topic, record)
        if self._validate:
            problems = schema_problems(linked.record)
            if problems:
                raise AuditError(
                    f"a record on {topic} does not match {record['schema']}: {'; '.join(problems)}"
                )
        # Parsed back from the bytes: the entry cannot drift from what was hashed,
        # even if the caller later mutates the dict it passed in.
        entry = AuditEntry(
            topic=topic,
            record=MappingProxyType(json.loads(linked.data)),
            sha256=linked.sha256,
            data=linked.data,
        )
        self._chain.commit(linked)
        self._entries.append(entry)
        return entry
