"""`RunRecorder`: the one place that decides which records a run's log holds, in what order.

Both sinks drive it, so a memory run and a file run are the same records:

1. ``open_run``: the ``/run`` record (``seq`` 0), then a checkpoint covering it;
2. ``append``: the caller's record, then a checkpoint if one is due
   (`audit._checkpoint.CheckpointSchedule`);
3. ``seal``: a final checkpoint covering every record so far, then ``/seal``.

Each record is linked by the `Chain`, handed to the sink's ``store``
callback, and only then committed to the chain and to the Merkle tree (a
`CompactRange`: one leaf hash per record, no second pass). A ``store`` that
raises leaves both where the log is. The recorder does no I/O and takes no
lock: each sink holds its own lock around a whole step.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

from audit._chain import (
    CHECKPOINT_TOPIC,
    RUN_TOPIC,
    SEAL_TOPIC,
    Chain,
    ChainedRecord,
    Durability,
    WriterIdentity,
    make_run_record,
)
from audit._checkpoint import CheckpointSchedule, make_checkpoint_record
from audit._merkle import CompactRange, leaf_hash
from audit._signing import NoteSigner
from runtime import AuditError, Clock, RunStart

__all__ = ["RunRecorder", "Store"]

Store = Callable[[ChainedRecord], None]
"""Writes one linked record (to a file, or a list); raises if it cannot."""


class RunRecorder:
    """The chain, the Merkle tree and the checkpoint schedule of one run.

    Args:
        durability: the sink's mode, recorded in ``/run``.
        signer: signs the checkpoint notes; None for unsigned notes.
        checkpoint_every_records: see `CheckpointSchedule`.
        checkpoint_every_ns: see `CheckpointSchedule`.
        clock: stamps checkpoints and the seal (wall clock) and times the
            schedule (monotonic clock).
        identity: for the audit daemon: the daemon and its peer, recorded in
            ``/run`` (see `make_run_record`); None in-process.

    Raises:
        ValueError: a checkpoint interval is out of range.
        TypeError: a checkpoint interval is not an integer.
    """

    __slots__ = (
        "_chain",
        "_clock",
        "_durability",
        "_identity",
        "_run_id",
        "_schedule",
        "_signer",
        "_tree",
    )

    def __init__(
        self,
        *,
        durability: Durability,
        signer: NoteSigner | None,
        checkpoint_every_records: int,
        checkpoint_every_ns: int,
        clock: Clock,
        identity: WriterIdentity | None = None,
    ) -> None:
        self._durability: Durability = durability
        self._identity = identity
        self._signer = signer
        self._clock = clock
        self._schedule = CheckpointSchedule(
            every_records=checkpoint_every_records, every_ns=checkpoint_every_ns, clock=clock
        )
        self._chain = Chain()
        self._tree = CompactRange()
        self._run_id: str | None = None

    @property
    def next_seq(self) -> int:
        """The ``seq`` of the next record; also how many are committed."""
        return self._chain.next_seq

    @property
    def head_sha256(self) -> str | None:
        """The content address of the last committed record, or None before ``/run``."""
        return self._chain.head_sha256

    @property
    def run_id(self) -> str | None:
        """The run's id, once ``/run`` is committed."""
        return self._run_id

    @property
    def signing(self) -> Mapping[str, str] | None:
        """The ``signing`` field of the ``/run`` record: the key the notes are signed with."""
        if self._signer is None:
            return None
        return {
            "key_id": self._signer.key_id,
            "key_name": self._signer.name,
            "public_key": base64.b64encode(self._signer.verifier.public_key).decode(),
        }

    def declare_writer(self, identity: WriterIdentity) -> None:
        """Have the ``/run`` record name ``identity`` (the audit daemon and its peer).

        Raises:
            AuditError: ``/run`` is already written.
        """
        if self._chain.next_seq:
            raise AuditError("the writer of a run is declared before its /run record")
        self._identity = identity

    def open_run(self, run: RunStart, store: Store) -> tuple[ChainedRecord, ChainedRecord]:
        """Store and commit the ``/run`` record, then the checkpoint covering it.

        Returns:
            The ``/run`` record and the checkpoint, as stored.

        Raises:
            AuditError: the run record is refused (see `make_run_record`), or
                ``store`` raised it.
        """
        linked = self._chain.link(
            RUN_TOPIC, make_run_record(run, self._durability, self.signing, self._identity)
        )
        self._store(linked, store)
        return linked, self._checkpoint(store)

    def append(
        self, topic: str, record: Mapping[str, Any], store: Store
    ) -> tuple[ChainedRecord, ChainedRecord | None]:
        """Store and commit ``record``, then a checkpoint if one is due.

        The caller checks that ``topic`` is one a gate may append to.

        Returns:
            The record as stored, and the checkpoint written after it, if any.

        Raises:
            AuditError: the record does not fit or encode (nothing stored), or
                ``store`` raised it.
        """
        linked = self._chain.link(topic, record)
        self._store(linked, store)
        checkpoint = self._checkpoint(store) if self._schedule.due(self.next_seq) else None
        return linked, checkpoint

    def seal(self, store: Store, ended: str | None = None) -> tuple[ChainedRecord, ChainedRecord]:
        """Store and commit the final checkpoint, then the ``/seal`` record.

        ``ended``: why the audit daemon sealed a run its agent did not close
        (the seal's ``ended``, see `Chain.seal_record`); None for a clean close.

        Returns:
            The final checkpoint and the seal, as stored.

        Raises:
            AuditError: no run is open, or ``store`` raised it.
        """
        if self._run_id is None:
            raise AuditError("a run cannot be sealed before its /run record is written")
        checkpoint = self._checkpoint(store)
        sealed = self._chain.link(SEAL_TOPIC, self._chain.seal_record(self._clock.time_ns(), ended))
        self._store(sealed, store)
        return checkpoint, sealed

    def _store(self, linked: ChainedRecord, store: Store) -> None:
        store(linked)
        self._chain.commit(linked)
        self._tree.append(leaf_hash(linked.data))
        if linked.topic == RUN_TOPIC:
            self._run_id = linked.record["run_id"]

    def _checkpoint(self, store: Store) -> ChainedRecord:
        run_id, head = self._run_id, self._chain.head_sha256
        if run_id is None or head is None:
            raise AuditError("a checkpoint needs the /run record first")
        record = make_checkpoint_record(
            # Never stamped before the record it follows (as the seal, see Chain.seal_record).
            stamp_ns=max(self._clock.time_ns(), self._chain.head_stamp_ns),
            run_id=run_id,
            tree_size=self._tree.size,
            root_hash=self._tree.root(),
            head_sha256=head,
            signer=self._signer,
        )
        linked = self._chain.link(CHECKPOINT_TOPIC, record)
        self._store(linked, store)
        self._schedule.written(self.next_seq)
        return linked
