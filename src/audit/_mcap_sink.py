"""`McapAuditSink`: the audit log as an MCAP file (ADR: the MCAP channel layout).

Layout. The five ghost topics are registered up front, when the file is
created, in `TOPICS` order: schema ids and channel ids 1-5 are ``/run``,
``/assessments``, ``/decisions``, ``/approvals``, ``/seal``, each channel with
``message_encoding="json"`` and its record's JSON Schema (``jsonschema``).
Registering up front keeps the ids the same in every ghost file and puts the
channel definitions at the head of the file, before any record they describe,
so a file cut by a crash still says what it holds. A message's data are the
record's canonical bytes; ``log_time`` and ``publish_time`` are its
``stamp_ns``; ``sequence`` is its ``seq`` modulo 2**32 (``seq`` is authoritative).
The policy source is an attachment written just before the ``/run`` record.
The writer keeps a data-section CRC, so a reader can tell a flipped byte
from a clean file.

Durability (recorded in the ``/run`` record):

* ``"process"`` — unchunked; each record is handed to the operating system
  (the file object is flushed) before `append` returns, so it survives a
  SIGKILL of the process.
* ``"fsync"`` — as ``"process"``, and `os.fsync` before `append` returns, so
  it survives power loss.
* ``"chunk"`` — zstd-compressed chunks of about ``chunk_size`` bytes, handed
  to the OS as each chunk is finished; a crash loses the open chunk. The
  ``/run`` record is flushed at once even so, so a crashed run still names itself.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final

from mcap.writer import LIBRARY_IDENTIFIER, CompressionType, Writer

from audit._chain import (
    DURABILITIES,
    RUN_TOPIC,
    SEAL_TOPIC,
    Chain,
    ChainedRecord,
    Durability,
    check_appendable,
    make_run_record,
)
from audit._schemas import MESSAGE_ENCODING, SCHEMA_ENCODING, TOPICS, schema_data
from runtime import AuditError, RunStart
from runtime._logging import get_event_log  # the SDK's one event-logging seam (SPEC §5)

__all__ = ["McapAuditSink"]

_log = get_event_log("ghost.audit")

_MIB: Final = 1024 * 1024
_LIBRARY: Final = f"ghost-sdk; {LIBRARY_IDENTIFIER}"
_SEQUENCE_MODULUS: Final = 2**32


class McapAuditSink:
    """An `AuditSink` that writes a run's chained records to an MCAP file.

    Thread-safe: one lock covers chaining and writing, so ``seq`` order is
    file order. Use it as a context manager, or call `close` to seal the run
    and finish the file; a run that is never closed reads back as truncated.

    Args:
        path: the file to create (an existing file is replaced).
        durability: ``"process"`` (default), ``"fsync"`` or ``"chunk"``; see the
            module docstring for what each guarantees when `append` returns.
        chunk_size: for ``"chunk"``: the uncompressed size at which a chunk is
            finished and written (default 1 MiB). Ignored by the other modes.

    Raises:
        ValueError: an unknown ``durability``, or ``chunk_size`` below 1.
        AuditError: the file cannot be created (the message names the path and
            the operating system's reason).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "process",
        chunk_size: int = _MIB,
    ) -> None:
        if durability not in DURABILITIES:
            raise ValueError(f"durability must be one of {DURABILITIES}, got {durability!r}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1 byte, got {chunk_size}")
        self._path = Path(path)
        self._durability: Durability = durability
        self._lock = threading.Lock()
        self._chain = Chain()
        self._run: RunStart | None = None
        self._closed = False
        # Why the sink stopped accepting records, once a write failed midway.
        self._failure: str | None = None
        self._flushed_at = 0
        try:
            # Buffered on purpose: the writer emits a record in several small writes.
            self._file: IO[bytes] = open(self._path, "wb")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise AuditError(
                f"cannot create audit log {self._path}: {exc.strerror or exc}"
            ) from exc
        try:
            chunked = durability == "chunk"
            self._writer = Writer(
                self._file,
                chunk_size=chunk_size,
                compression=CompressionType.ZSTD if chunked else CompressionType.NONE,
                use_chunking=chunked,
                enable_data_crcs=True,
            )
            self._writer.start(profile="", library=_LIBRARY)
            self._channel_ids: dict[str, int] = {}
            for topic, name in TOPICS.items():
                schema_id = self._writer.register_schema(name, SCHEMA_ENCODING, schema_data(name))
                self._channel_ids[topic] = self._writer.register_channel(
                    topic, MESSAGE_ENCODING, schema_id
                )
            self._writer.flush()
        except Exception as exc:
            self._file.close()
            raise AuditError(f"cannot start audit log {self._path}: {_why(exc)}") from exc

    @property
    def path(self) -> Path:
        """The file this sink writes."""
        return self._path

    @property
    def durability(self) -> Durability:
        """The durability mode, as recorded in the ``/run`` record."""
        return self._durability

    @property
    def closed(self) -> bool:
        """Whether `close` has been called."""
        return self._closed

    @property
    def record_count(self) -> int:
        """How many records have been written (the ``seq`` of the next one)."""
        with self._lock:
            return self._chain.next_seq

    @property
    def head_sha256(self) -> str | None:
        """The content address of the last record written, or None before `open_run`."""
        with self._lock:
            return self._chain.head_sha256

    def open_run(self, run: RunStart) -> None:
        """Write the ``/run`` record (``seq`` 0) and the policy source attachment.

        Args:
            run: what the gate declares about itself.

        Raises:
            AuditError: the sink is closed or already has a run, the run does
                not encode, or the write fails.
        """
        with self._lock:
            self._check_usable("open_run")
            if self._run is not None:
                raise AuditError(
                    f"open_run was already called on {self._path}: a sink records one run"
                )
            linked = self._chain.link(RUN_TOPIC, make_run_record(run, self._durability))
            try:
                # Attachment first: once the /run record is on disk, the policy it names is too.
                self._writer.add_attachment(
                    create_time=0,
                    log_time=run.stamp_ns,
                    name=run.policy_source_name,
                    media_type=run.policy_source_media_type,
                    data=run.policy_source,
                )
                self._add_message(linked)
                # Every mode, chunked included, gets the run header out at once.
                self._writer.flush()
                if self._durability == "fsync":
                    os.fsync(self._file.fileno())
                self._flushed_at = self._file.tell()
            except Exception as exc:
                raise self._failed("the /run record", exc) from exc
            self._chain.commit(linked)
            self._run = run
            run_id = linked.record["run_id"]
        _log.info(
            "ghost.run_opened", path=str(self._path), run_id=run_id, durability=self._durability
        )

    def append(self, topic: str, record: Mapping[str, Any]) -> str:
        """Chain ``record`` on ``topic``, write it, and return its content address.

        When this returns, the record has reached the operating system
        (``"process"``), the disk (``"fsync"``), or the open chunk (``"chunk"``).

        Args:
            topic: ``/assessments``, ``/decisions`` or ``/approvals``.
            record: the record with ``schema`` and ``stamp_ns`` but without
                ``seq`` and ``prev_sha256``.

        Returns:
            The SHA-256 hex of the record's canonical bytes as written.

        Raises:
            AuditError: no run is open, the sink is closed or failed earlier, the
                record does not fit its topic or cannot be encoded, or the write fails.
        """
        with self._lock:
            self._check_usable("append")
            if self._run is None:
                raise AuditError(f"append on {self._path} before open_run: no run is open")
            check_appendable(topic, record)
            linked = self._chain.link(topic, record)
            try:
                self._add_message(linked)
                self._push()
            except Exception as exc:
                raise self._failed(f"a record on {topic}", exc) from exc
            self._chain.commit(linked)
            return linked.sha256

    def close(self) -> None:
        """Seal the run and finish the file; a second call does nothing.

        The ``/seal`` record is written when a run is open and no write has
        failed; then the MCAP summary and footer. A sink that never opened a
        run leaves a valid MCAP file holding no records.

        Raises:
            AuditError: the seal or the footer cannot be written.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sealed: ChainedRecord | None = None
            try:
                if self._failure is None:
                    if self._run is not None:
                        seal = self._chain.seal_record(time.time_ns())
                        sealed = self._chain.link(SEAL_TOPIC, seal)
                        self._add_message(sealed)
                        self._chain.commit(sealed)
                    self._writer.finish()
                    self._file.flush()
                    if self._durability == "fsync":
                        os.fsync(self._file.fileno())
            except Exception as exc:
                self._close_file()
                raise AuditError(f"cannot seal audit log {self._path}: {_why(exc)}") from exc
            try:
                self._file.close()
            except OSError as exc:
                raise AuditError(f"cannot close audit log {self._path}: {_why(exc)}") from exc
        if sealed is not None:
            _log.info(
                "ghost.run_sealed",
                path=str(self._path),
                record_count=sealed.seq,
                head_sha256=sealed.record["head_sha256"],
            )

    def __enter__(self) -> McapAuditSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _check_usable(self, operation: str) -> None:
        if self._closed:
            raise AuditError(f"{operation} on {self._path} after close")
        if self._failure is not None:
            raise AuditError(
                f"{operation} on {self._path} refused: an earlier write failed ({self._failure});"
                f" the log ends before seq {self._chain.next_seq}"
            )

    def _add_message(self, linked: ChainedRecord) -> None:
        self._writer.add_message(
            channel_id=self._channel_ids[linked.topic],
            log_time=linked.stamp_ns,
            publish_time=linked.stamp_ns,
            data=linked.data,
            sequence=linked.seq % _SEQUENCE_MODULUS,
        )

    def _push(self) -> None:
        if self._durability == "chunk":
            # The writer writes only whole chunks; hand one to the OS as soon as it is written.
            position = self._file.tell()
            if position != self._flushed_at:
                self._file.flush()
                self._flushed_at = position
            return
        self._file.flush()
        if self._durability == "fsync":
            os.fsync(self._file.fileno())

    def _failed(self, what: str, exc: Exception) -> AuditError:
        # Part of a record may be in the file: nothing written after it could be trusted.
        self._failure = _why(exc)
        _log.error("ghost.audit_write_failed", path=str(self._path), error=type(exc).__name__)
        return AuditError(f"cannot write {what} to audit log {self._path}: {self._failure}")

    def _close_file(self) -> None:
        # Already reporting the failure that matters; a close error would add nothing.
        with contextlib.suppress(OSError):
            self._file.close()


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{type(exc).__name__}: {exc.strerror}"
    return type(exc).__name__ if not str(exc) else f"{type(exc).__name__}: {exc}"
