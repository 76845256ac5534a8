"""`McapAuditSink`: the audit log as an MCAP file (ADR 0006: the MCAP channel layout).

Layout. The six ghost topics are registered up front, when the file is
created, in `TOPICS` order: schema ids and channel ids 1-6 are ``/run``,
``/assessments``, ``/decisions``, ``/approvals``, ``/seal``, ``/checkpoints``,
each channel with ``message_encoding="json"`` and its record's JSON Schema
(``jsonschema``). A message's data are the record's canonical bytes;
``log_time`` and ``publish_time`` are its ``stamp_ns``; ``sequence`` is its
``seq`` modulo 2**32 (``seq`` is authoritative). The policy source is an
attachment written just before the ``/run`` record. The writer keeps the
data-section and chunk CRCs, so a reader can tell a flipped byte from a
clean file.

Every message is in a chunk, in every mode, so that a sealed file's summary
indexes every message (chunk indexes, and a message index after each chunk)
and indexed readers — the ``mcap`` libraries' seeking readers, Foxglove —
list them all; a file cut by a crash is still read by streaming. The schema
and channel definitions travel in the first chunk, beside the ``/run``
record, and again in the summary.

Durability (recorded in the ``/run`` record) — what holds when `append` returns:

* ``"process"`` — the record (and the checkpoint after it, if one was due)
  is in a finished, uncompressed chunk handed to the operating system: it
  survives a SIGKILL of the process. One chunk per call.
* ``"fsync"`` — as ``"process"``, then `os.fsync`: it survives power loss.
* ``"chunk"`` — zstd-compressed chunks of about ``chunk_size`` bytes, handed
  to the OS as each is finished; a crash loses the open chunk. The ``/run``
  record and its checkpoint get a chunk of their own at once even so, so a
  crashed run still names itself.

Checkpoints, signing and anchors: see `audit._recorder` and `audit._anchor`.
A checkpoint's anchor is emitted once the chunk holding it has reached the
operating system, so an anchor never names a tree the file might not hold.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mcap.writer import LIBRARY_IDENTIFIER, CompressionType, Writer
from opentelemetry.trace import TracerProvider

from audit._anchor import AnchorEmitter
from audit._chain import (
    DURABILITIES,
    RUN_TOPIC,
    ChainedRecord,
    Durability,
    WriterIdentity,
    check_appendable,
)
from audit._chunk_indexes import spill_chunk_indexes
from audit._close_hooks import raise_if_a_hook_failed, run_close_hooks
from audit._recorder import RunRecorder
from audit._schemas import MESSAGE_ENCODING, SCHEMA_ENCODING, TOPICS, schema_data
from audit._signing import NoteSigner
from runtime import AuditError, Clock, RunStart, SystemClock
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
        path: the file to create. Missing parent directories are created. A
            path that already exists (a file, a directory, a symlink) is
            refused, atomically (``O_EXCL``), unless ``overwrite``.
        durability: ``"process"`` (default), ``"fsync"`` or ``"chunk"``; see the
            module docstring for what each guarantees when `append` returns.
        chunk_size: for ``"chunk"``: the uncompressed size at which a chunk is
            finished and written (default 1 MiB). Ignored by the other modes.
        overwrite: replace an existing file at ``path`` (never the default: an
            audit log is not silently replaced).
        signing_key: sign every checkpoint note with this Ed25519 key; the
            ``/run`` record then declares it (``signing``). None: unsigned notes.
        key_name: the key name in the notes' signature lines (default
            ``ghost/<first 16 hex digits of the key id>``).
        checkpoint_every_records: a checkpoint once this many records follow
            the last one (default 100).
        checkpoint_every_ns: a checkpoint after a record that arrives this long
            after the last checkpoint (default 1 s; 0: after every record).
            Evaluated as records arrive: an idle sink writes nothing.
        clock: stamps checkpoints and the seal, and times the schedule
            (default: the system clock).
        tracer_provider: where checkpoint anchor spans go (default: global).

    Raises:
        ValueError: an unknown ``durability``, ``chunk_size`` below 1, a bad
            ``key_name``, or a checkpoint interval out of range.
        TypeError: ``signing_key`` is not an `Ed25519PrivateKey`.
        AuditError: the file exists (without ``overwrite``) or cannot be
            created (the message names the path and the operating system's reason).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "process",
        chunk_size: int = _MIB,
        overwrite: bool = False,
        signing_key: Ed25519PrivateKey | None = None,
        key_name: str | None = None,
        checkpoint_every_records: int = 100,
        checkpoint_every_ns: int = 1_000_000_000,
        clock: Clock | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        if durability not in DURABILITIES:
            raise ValueError(f"durability must be one of {DURABILITIES}, got {durability!r}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1 byte, got {chunk_size}")
        self._path = Path(path)
        self._durability: Durability = durability
        self._recorder = RunRecorder(
            durability=durability,
            signer=None if signing_key is None else NoteSigner(signing_key, key_name),
            checkpoint_every_records=checkpoint_every_records,
            checkpoint_every_ns=checkpoint_every_ns,
            clock=SystemClock() if clock is None else clock,
        )
        self._anchors = AnchorEmitter(tracer_provider)
        self._lock = threading.Lock()
        self._run: RunStart | None = None
        self._closed = False
        self._close_hooks: list[Callable[[], None]] = []
        # Why the sink stopped accepting records, once a write failed midway.
        self._failure: str | None = None
        # The policy whose source is attached before the /run record.
        self._policy: RunStart | None = None
        # Checkpoints written but not yet known to be in the OS's hands, and what is:
        # file positions after the last record added and after the last flush, and the
        # highest seq known to be in a finished chunk.
        self._unanchored: list[ChainedRecord] = []
        self._position = self._flushed_at = 0
        self._written_seq = -1
        # Inside append_pair: records are added to the open chunk, finished together after.
        self._holding = False
        self._file = _create(self._path, overwrite=overwrite)
        try:
            chunked = durability == "chunk"
            self._writer = Writer(
                self._file,
                # process/fsync finish a chunk on every call; never split one mid-call.
                chunk_size=chunk_size if chunked else 2**62,
                compression=CompressionType.ZSTD if chunked else CompressionType.NONE,
                use_chunking=True,
                enable_data_crcs=True,
            )
            # One index per chunk, for the summary: on disk, or a long run grows without end.
            self._chunk_indexes = spill_chunk_indexes(self._writer)
            self._writer.start(profile="", library=_LIBRARY)
            self._channel_ids: dict[str, int] = {}
            for topic, name in TOPICS.items():
                schema_id = self._writer.register_schema(name, SCHEMA_ENCODING, schema_data(name))
                self._channel_ids[topic] = self._writer.register_channel(
                    topic, MESSAGE_ENCODING, schema_id
                )
            self._file.flush()
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
    def run_id(self) -> str | None:
        """The id of the run this sink records (in its ``/run`` record); None before `open_run`."""
        with self._lock:
            return self._recorder.run_id

    def on_close(self, hook: Callable[[], None]) -> None:
        """Have `close` call ``hook`` first, before the run is sealed.

        A gate registers its approval queue here, so that expiries due at
        close are recorded in the run (SPEC §3). Hooks run in the order added,
        outside the sink's lock (they may `append`).

        Args:
            hook: called with no arguments.
        """
        with self._lock:
            self._close_hooks.append(hook)

    @property
    def record_count(self) -> int:
        """How many records have been written (the ``seq`` of the next one)."""
        with self._lock:
            return self._recorder.next_seq

    @property
    def head_sha256(self) -> str | None:
        """The content address of the last record written, or None before `open_run`."""
        with self._lock:
            return self._recorder.head_sha256

    def open_run(self, run: RunStart) -> None:
        """Write the policy source attachment(s), the ``/run`` record (``seq`` 0) and a checkpoint.

        A run with a shadow candidate (``run.shadow``) attaches its source as well.

        In every mode they are handed to the operating system before this returns.

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
            self._policy = run
            linked, checkpoint = self._recorder.open_run(run, self._store)
            self._unanchored.append(checkpoint)
            try:
                # Every mode, chunked included, gets the run header out at once.
                if self._durability == "chunk":
                    self._finish_open_chunk()
                self._sync()
            except Exception as exc:
                raise self._failed("the /run record", exc) from exc
            self._run = run
            anchors = self._take_anchors()
        _log.info(
            "ghost.run_opened",
            path=str(self._path),
            run_id=linked.record["run_id"],
            durability=self._durability,
        )
        self._emit(anchors)

    def append(self, topic: str, record: Mapping[str, Any]) -> str:
        """Chain ``record`` on ``topic``, write it, and return its content address.

        A checkpoint follows it when one is due. When this returns, both have
        reached the operating system (``"process"``), the disk (``"fsync"``),
        or the open chunk (``"chunk"``).

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
            # A record that does not fit or encode is refused before anything is written.
            linked, checkpoint = self._recorder.append(topic, record, self._store)
            if checkpoint is not None:
                self._unanchored.append(checkpoint)
            try:
                if self._durability == "chunk":
                    self._push_finished_chunks()
                self._sync()
            except Exception as exc:
                raise self._failed(f"a record on {topic}", exc) from exc
            anchors = self._take_anchors()
        self._emit(anchors)
        return linked.sha256

    def append_pair(
        self,
        topic: str,
        record: Mapping[str, Any],
        then_topic: str,
        then: Callable[[str], Mapping[str, Any]],
    ) -> tuple[str, str]:
        """Append ``record``, then the record ``then(its address)``: adjacent, in one write.

        The gate's assessment and the decision that names it (ADR 0025): both
        are chained under one hold of the lock, so their ``seq`` are
        consecutive, and in ``process`` and ``fsync`` modes they share one
        finished chunk, one write to the OS and one ``fsync``. When this
        returns, both hold what `append` promises for one.

        Returns:
            The two content addresses.

        A subclass that overrides `append` gets two calls of its `append`
        instead, so that what it does to each record is never bypassed.

        Raises:
            AuditError: as `append`. If the second record is refused (it does not
                fit or encode), the first is still written, as two `append`
                calls would have left it.
        """
        if type(self).append is not McapAuditSink.append:
            first_sha256 = self.append(topic, record)
            return first_sha256, self.append(then_topic, then(first_sha256))
        with self._lock:
            self._check_usable("append")
            if self._run is None:
                raise AuditError(f"append on {self._path} before open_run: no run is open")
            check_appendable(topic, record)
            self._holding = True
            try:
                first, checkpoint = self._recorder.append(topic, record, self._store)
                if checkpoint is not None:
                    self._unanchored.append(checkpoint)
                second_record = then(first.sha256)
                check_appendable(then_topic, second_record)
                second, checkpoint = self._recorder.append(then_topic, second_record, self._store)
                if checkpoint is not None:
                    self._unanchored.append(checkpoint)
            finally:
                self._holding = False
                self._finish_held(then_topic)
            anchors = self._take_anchors()
        self._emit(anchors)
        return first.sha256, second.sha256

    def _finish_held(self, topic: str) -> None:
        """Hand what `append_pair` added to the OS (and the disk), as `append` does each record.

        After a failed write nothing more is written: that failure is what propagates.
        """
        if self._failure is not None:
            return
        try:
            if self._durability == "chunk":
                self._push_finished_chunks()
            else:
                self._writer.flush()
                self._written_seq = self._recorder.next_seq - 1
            self._sync()
        except Exception as exc:
            raise self._failed(f"a record on {topic}", exc) from exc

    def close(self) -> None:
        """Seal the run and finish the file; a second call does nothing.

        When a run is open and no write has failed, the final checkpoint and
        the ``/seal`` record are written; then the MCAP summary (chunk and
        message indexes) and footer. A sink that never opened a run leaves a
        valid MCAP file holding no records. The hooks added with `on_close`
        run first (once).

        Raises:
            AuditError: the seal or the footer cannot be written; or a close hook
                raised (the run is sealed all the same, then this says so).
        """
        failure = self._run_close_hooks()
        self._seal()
        raise_if_a_hook_failed(failure)

    def _declare_writer(self, identity: WriterIdentity) -> None:
        """Record ``identity`` in the ``/run`` record: the audit daemon's sinks (ADR 0034).

        Raises:
            AuditError: the run is already open.
        """
        with self._lock:
            if self._run is not None:
                raise AuditError("the writer of a run is declared before open_run")
            self._recorder.declare_writer(identity)

    def _close_ended(self, ended: str) -> None:
        """`close`, with the seal saying why the run ended (``ended``, ADR 0034)."""
        failure = self._run_close_hooks()
        self._seal(ended)
        raise_if_a_hook_failed(failure)

    def _run_close_hooks(self) -> Exception | None:
        with self._lock:
            if self._closed:
                return None
            hooks, self._close_hooks = self._close_hooks, []
        return run_close_hooks(hooks)

    def _seal(self, ended: str | None = None) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sealed: ChainedRecord | None = None
            try:
                if self._failure is None:
                    if self._run is not None:
                        checkpoint, sealed = self._recorder.seal(self._store, ended)
                        self._unanchored.append(checkpoint)
                    self._writer.finish()
                    self._drop_chunk_indexes()
                    self._file.flush()
                    if self._durability == "fsync":
                        os.fsync(self._file.fileno())
                    self._written_seq = self._recorder.next_seq - 1
            except Exception as exc:
                self._close_file()
                raise AuditError(f"cannot seal audit log {self._path}: {_why(exc)}") from exc
            if self._failure is not None:
                # Already reported when the write failed; a close error would add nothing.
                self._close_file()
            else:
                try:
                    self._file.close()
                except OSError as exc:
                    raise AuditError(f"cannot close audit log {self._path}: {_why(exc)}") from exc
            anchors = self._take_anchors()
        self._emit(anchors)
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
                f" the log ends before seq {self._recorder.next_seq}"
            )

    def _store(self, linked: ChainedRecord) -> None:
        """Hand one linked record to the writer (the `RunRecorder`'s ``store``)."""
        try:
            if linked.topic == RUN_TOPIC and self._policy is not None:
                # Attachment first: once the /run record is on disk, the policy it names is too.
                self._writer.add_attachment(
                    create_time=0,
                    log_time=self._policy.stamp_ns,
                    name=self._policy.policy_source_name,
                    media_type=self._policy.policy_source_media_type,
                    data=self._policy.policy_source,
                )
                shadow = self._policy.shadow
                # A shadow candidate's source too (ADR 0031), unless it is the same bytes.
                if shadow is not None and shadow.source_sha256 != self._policy.policy_source_sha256:
                    self._writer.add_attachment(
                        create_time=0,
                        log_time=self._policy.stamp_ns,
                        name=shadow.source_name,
                        media_type=shadow.source_media_type,
                        data=shadow.source,
                    )
                self._position = self._file.tell()
            self._writer.add_message(
                channel_id=self._channel_ids[linked.topic],
                log_time=linked.stamp_ns,
                publish_time=linked.stamp_ns,
                data=linked.data,
                sequence=linked.seq % _SEQUENCE_MODULUS,
            )
            if self._durability != "chunk" and not self._holding:
                # One record, one finished chunk: indexed, CRC'd and handed to the OS.
                self._writer.flush()
        except Exception as exc:
            raise self._failed(f"a record on {linked.topic}", exc) from exc
        if self._durability != "chunk":
            if not self._holding:  # append_pair's records are written, and counted, together
                self._written_seq = linked.seq
        else:
            # The writer finishes a chunk right after adding the message that fills it:
            # if the file grew, this record and every one before it are in finished chunks.
            position = self._file.tell()
            if position != self._position:
                self._position = position
                self._written_seq = linked.seq

    def _finish_open_chunk(self) -> None:
        # Chunk mode only: the run header is not left waiting in the open chunk.
        self._writer.flush()
        self._written_seq = self._recorder.next_seq - 1
        self._position = self._flushed_at = self._file.tell()

    def _sync(self) -> None:
        if self._durability == "fsync":
            os.fsync(self._file.fileno())

    def _push_finished_chunks(self) -> None:
        if self._position != self._flushed_at:
            self._file.flush()
            self._flushed_at = self._position

    def _take_anchors(self) -> list[ChainedRecord]:
        """Take the checkpoints whose chunk has reached the OS; keep the rest for later."""
        ready = [c for c in self._unanchored if c.seq <= self._written_seq]
        if ready:
            self._unanchored = [c for c in self._unanchored if c.seq > self._written_seq]
        return ready

    def _emit(self, anchors: list[ChainedRecord]) -> None:
        run_id = self._recorder.run_id
        if run_id is None:
            return
        for checkpoint in anchors:
            self._anchors.emit(run_id, checkpoint.record)

    def _failed(self, what: str, exc: Exception) -> AuditError:
        # Part of a record may be in the file: nothing written after it could be trusted.
        self._failure = _why(exc)
        _log.error("ghost.audit_write_failed", path=str(self._path), error=type(exc).__name__)
        return AuditError(f"cannot write {what} to audit log {self._path}: {self._failure}")

    def _close_file(self) -> None:
        # Already reporting the failure that matters; a close error would add nothing.
        self._drop_chunk_indexes()
        with contextlib.suppress(OSError):
            self._file.close()

    def _drop_chunk_indexes(self) -> None:
        if self._chunk_indexes is not None:
            with contextlib.suppress(OSError):
                self._chunk_indexes.close()


def _create(path: Path, *, overwrite: bool) -> IO[bytes]:
    """Create ``path`` and its parents; refuse an existing ``path`` unless ``overwrite``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AuditError(
            f"cannot create the directory {path.parent} for audit log {path}: {exc.strerror or exc}"
        ) from exc
    # O_EXCL: the check and the creation are one step, so no other writer's file
    # (or a symlink planted in between) can be replaced.
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
    except FileExistsError as exc:
        raise AuditError(
            f"refusing to replace {path}: it already exists, and an audit log is never"
            " silently replaced (choose a new path, or pass overwrite=True)"
        ) from exc
    except OSError as exc:
        raise AuditError(f"cannot create audit log {path}: {exc.strerror or exc}") from exc
    # Buffered on purpose: the writer emits a record in several small writes.
    return os.fdopen(fd, "wb")


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{type(exc).__name__}: {exc.strerror}"
    return type(exc).__name__ if not str(exc) else f"{type(exc).__name__}: {exc}"
