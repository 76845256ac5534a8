"""`MemoryAuditSink`: the audit sink as a test double, keeping every record in memory.

It records exactly as `McapAuditSink` does (the same `RunRecorder`: chain,
Merkle tree, checkpoints, seal), so a test can assert on ``seq``,
``prev_sha256``, content addresses and checkpoint notes without a file. By
default it also checks every record against its schema — the sink's own
``/run``, ``/checkpoints`` and ``/seal`` records included — so a test of code
that builds records finds a missing or misspelt field at once. Checkpoint
anchors are emitted as by the file sink, as each checkpoint is kept.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType, TracebackType
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from opentelemetry.trace import TracerProvider

from audit._anchor import AnchorEmitter
from audit._chain import DURABILITIES, ChainedRecord, Durability, check_appendable
from audit._close_hooks import raise_if_a_hook_failed, run_close_hooks
from audit._recorder import RunRecorder
from audit._signing import NoteSigner
from audit._validate import schema_problems
from runtime import AuditError, Clock, RunStart, SystemClock

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
        signing_key: sign the checkpoint notes with this Ed25519 key (as
            `McapAuditSink` does); None for unsigned notes.
        key_name: the key name in the notes' signature lines (default
            ``ghost/<first 16 hex digits of the key id>``).
        checkpoint_every_records: a checkpoint after this many records (default 100).
        checkpoint_every_ns: a checkpoint after a record arriving this long
            after the last one (default 1 s; 0: after every record).
        clock: the clock that stamps checkpoints and the seal and times the
            schedule (default: the system clock).
        tracer_provider: where checkpoint anchor spans go (default: global).

    Raises:
        ValueError: an unknown ``durability``, a bad ``key_name``, or a
            checkpoint interval out of range.
        TypeError: ``signing_key`` is not an `Ed25519PrivateKey`.
    """

    def __init__(
        self,
        *,
        validate: bool = True,
        durability: Durability = "process",
        signing_key: Ed25519PrivateKey | None = None,
        key_name: str | None = None,
        checkpoint_every_records: int = 100,
        checkpoint_every_ns: int = 1_000_000_000,
        clock: Clock | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        if durability not in DURABILITIES:
            raise ValueError(f"durability must be one of {DURABILITIES}, got {durability!r}")
        self._validate = validate
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
        self._entries: list[AuditEntry] = []
        self._closed = False
        self._close_hooks: list[Callable[[], None]] = []

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
    def head_sha256(self) -> str | None:
        """The content address of the last record, or None before `open_run`."""
        with self._lock:
            return self._recorder.head_sha256

    @property
    def record_count(self) -> int:
        """How many records have been kept (the ``seq`` of the next one)."""
        with self._lock:
            return self._recorder.next_seq

    def records(self, topic: str) -> tuple[Mapping[str, Any], ...]:
        """Return the records written on ``topic``, in order.

        Args:
            topic: a ghost topic such as ``/decisions``.
        """
        with self._lock:
            return tuple(entry.record for entry in self._entries if entry.topic == topic)

    def open_run(self, run: RunStart) -> None:
        """Record the ``/run`` record (``seq`` 0) and the checkpoint covering it.

        Raises:
            AuditError: the sink is closed or already has a run.
        """
        with self._lock:
            if self._closed:
                raise AuditError("open_run on a closed MemoryAuditSink")
            if self._run is not None:
                raise AuditError("open_run was already called: a sink records one run")
            _, checkpoint = self._recorder.open_run(run, self._keep)
            self._run = run
        self._anchor(checkpoint)

    def append(self, topic: str, record: Mapping[str, Any]) -> str:
        """Chain and keep ``record`` (and a checkpoint, when one is due); return its address.

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
            linked, checkpoint = self._recorder.append(topic, record, self._keep)
        if checkpoint is not None:
            self._anchor(checkpoint)
        return linked.sha256

    def close(self) -> None:
        """Write the final checkpoint and ``/seal`` if a run is open; a second call does nothing.

        The hooks added with `on_close` run first (once). If one raises, the run
        is sealed all the same, and then `AuditError` says which hook failed.
        """
        failure = self._run_close_hooks()
        self._seal()
        raise_if_a_hook_failed(failure)

    def _run_close_hooks(self) -> Exception | None:
        with self._lock:
            if self._closed:
                return None
            hooks, self._close_hooks = self._close_hooks, []
        return run_close_hooks(hooks)

    def _seal(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._run is None:
                return
            checkpoint, _ = self._recorder.seal(self._keep)
        self._anchor(checkpoint)

    def __enter__(self) -> MemoryAuditSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _keep(self, linked: ChainedRecord) -> None:
        if self._validate:
            problems = schema_problems(linked.record)
            if problems:
                raise AuditError(
                    f"a record on {linked.topic} does not match {linked.record['schema']}:"
                    f" {'; '.join(problems)}"
                )
        # Parsed back from the bytes: the entry cannot drift from what was hashed,
        # even if the caller later mutates the dict it passed in.
        self._entries.append(
            AuditEntry(
                topic=linked.topic,
                record=MappingProxyType(json.loads(linked.data)),
                sha256=linked.sha256,
                data=linked.data,
            )
        )

    def _anchor(self, checkpoint: ChainedRecord) -> None:
        run_id = self._recorder.run_id
        if run_id is not None:
            self._anchors.emit(run_id, checkpoint.record)
