"""The hash chain every sink writes: ``seq`` and ``prev_sha256``, assigned in one place.

A run's records form a chain. The ``/run`` record is ``seq`` 0 with
``prev_sha256`` null; every later record takes the next ``seq`` and the
content address of the record before it, so deleting, inserting or
reordering a record breaks a link. The ``/seal`` record closes a clean run
with the number of records before it and the address of the last one.

`Chain` only computes; it never writes. A sink asks it to `Chain.link` a
record, writes the returned bytes, and only then `Chain.commit`s, so a write
that fails leaves the chain where the file is. `Chain` is not thread-safe:
each sink holds its own lock around link, write and commit.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from audit._schemas import TOPICS
from runtime import (
    AuditError,
    CanonicalEncodingError,
    RunStart,
    canonical_bytes,
    make_uuid7,
    sha256_hex,
)

__all__ = [
    "APPEND_TOPICS",
    "CHECKPOINT_TOPIC",
    "DURABILITIES",
    "RUN_TOPIC",
    "SEAL_TOPIC",
    "SINK_TOPICS",
    "Chain",
    "ChainedRecord",
    "Durability",
    "ProcessIdentity",
    "RunLink",
    "WriterIdentity",
    "check_appendable",
    "check_record",
    "make_run_record",
]

Durability = Literal["process", "fsync", "chunk"]
"""How far each record has got before `append` returns (see `McapAuditSink`)."""

DURABILITIES: Final[tuple[Durability, ...]] = ("process", "fsync", "chunk")

RUN_TOPIC: Final = "/run"
SEAL_TOPIC: Final = "/seal"
CHECKPOINT_TOPIC: Final = "/checkpoints"

SINK_TOPICS: Final = frozenset({RUN_TOPIC, CHECKPOINT_TOPIC, SEAL_TOPIC})
"""Topics only a sink writes: a gate that could append a checkpoint could forge a tree head."""

APPEND_TOPICS: Final = frozenset(TOPICS) - SINK_TOPICS
"""Topics a gate may `append` to."""

_ASSIGNED: Final = ("seq", "prev_sha256")


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    """A process as the kernel names it: its pid, uid and gid.

    Attributes:
        pid: process id.
        uid: user id (effective, as ``SO_PEERCRED`` reports it).
        gid: group id (effective).
    """

    pid: int
    uid: int
    gid: int

    def as_record(self) -> dict[str, int]:
        """The record form (``{"pid": ..., "uid": ..., "gid": ...}``)."""
        return {"pid": self.pid, "uid": self.uid, "gid": self.gid}


@dataclass(frozen=True, slots=True)
class RunLink:
    """The run a daemon-written run follows after a reconnect: the ``/run`` record's ``follows``.

    The gate's sink lost its daemon and opened a new run; this names the old
    run's head as the old daemon last acknowledged it (ADR 0034, addendum).

    Attributes:
        run_id: the old run.
        record_count: how many records of it were acknowledged (the ``seq`` after its head).
        head_sha256: the content address of its record ``record_count - 1``.
    """

    run_id: str
    record_count: int
    head_sha256: str

    def as_record(self) -> dict[str, str | int]:
        """The record form (``{"run_id": ..., "record_count": ..., "head_sha256": ...}``)."""
        return {
            "run_id": self.run_id,
            "record_count": self.record_count,
            "head_sha256": self.head_sha256,
        }


@dataclass(frozen=True, slots=True)
class WriterIdentity:
    """Who wrote a daemon-written run, and for whom (the ``/run`` record's ``writer``, ``peer``).

    Attributes:
        writer: the audit daemon process.
        peer: the process at the other end of the socket (``SO_PEERCRED``).
        follows: the run this one continues after the gate reconnected, as the
            daemon confirmed it; None for a first run.
    """

    writer: ProcessIdentity
    peer: ProcessIdentity
    follows: RunLink | None = None


@dataclass(frozen=True, slots=True)
class ChainedRecord:
    """A record with its place in the chain, ready to write.

    Attributes:
        topic: the topic it is written on.
        record: the full record, ``seq`` and ``prev_sha256`` included.
        data: its canonical bytes, exactly what the log stores.
        sha256: its content address, ``sha256_hex(data)``.
    """

    topic: str
    record: Mapping[str, Any]
    data: bytes
    sha256: str

    @property
    def seq(self) -> int:
        """The record's sequence number in its run."""
        seq: int = self.record["seq"]
        return seq

    @property
    def stamp_ns(self) -> int:
        """The record's wall-clock stamp (the MCAP ``log_time``)."""
        stamp: int = self.record["stamp_ns"]
        return stamp


class Chain:
    """The state of one run's chain: the next ``seq`` and the head's address."""

    __slots__ = ("_head_sha256", "_head_stamp_ns", "_next_seq")

    def __init__(self) -> None:
        self._next_seq = 0
        self._head_sha256: str | None = None
        self._head_stamp_ns = 0

    @property
    def next_seq(self) -> int:
        """The ``seq`` the next record gets; also the number of records committed."""
        return self._next_seq

    @property
    def head_sha256(self) -> str | None:
        """The content address of the last committed record, or None before ``/run``."""
        return self._head_sha256

    @property
    def head_stamp_ns(self) -> int:
        """The ``stamp_ns`` of the last committed record (0 before ``/run``)."""
        return self._head_stamp_ns

    def link(self, topic: str, record: Mapping[str, Any]) -> ChainedRecord:
        """Give ``record`` the next ``seq`` and ``prev_sha256``, and encode it once.

        Nothing changes until `commit`.

        Args:
            topic: the topic the record is for (checked against its ``schema``).
            record: the record without ``seq`` and ``prev_sha256``.

        Returns:
            The full record with its canonical bytes and content address.

        Raises:
            AuditError: the record does not fit its topic (see `check_record`), or
                has no canonical form (a float, a non-string key, ...).
        """
        check_record(topic, record)
        if (self._next_seq == 0) != (topic == RUN_TOPIC):
            raise AuditError(
                f"the /run record must be the first of a run, and only the first"
                f" (a record on {topic} would get seq {self._next_seq})"
            )
        full = {**record, "seq": self._next_seq, "prev_sha256": self._head_sha256}
        try:
            data = canonical_bytes(full)
        except CanonicalEncodingError as exc:
            raise AuditError(f"a {record['schema']} record cannot be encoded: {exc}") from exc
        return ChainedRecord(topic=topic, record=full, data=data, sha256=sha256_hex(data))

    def commit(self, linked: ChainedRecord) -> None:
        """Advance the chain past ``linked``, once it has been written.

        Raises:
            AuditError: ``linked`` was not linked to the current head (a sink bug).
        """
        if linked.seq != self._next_seq or linked.record["prev_sha256"] != self._head_sha256:
            raise AuditError(f"record seq {linked.seq} does not extend the chain at its head")
        self._next_seq += 1
        self._head_sha256 = linked.sha256
        self._head_stamp_ns = linked.stamp_ns

    def seal_record(self, now_ns: int, ended: str | None = None) -> dict[str, Any]:
        """Return the ``/seal`` record that closes the chain as it stands.

        Args:
            now_ns: the wall clock at close. The seal is stamped no earlier
                than the record before it: a gate on an injected clock may
                stamp records ahead of the real one, and a seal that sorted
                before them by ``log_time`` would not look last in an MCAP viewer.
            ended: why the audit daemon sealed a run its agent did not close
                (one of `SEAL_ENDINGS`); None for a run closed by its gate.

        Raises:
            AuditError: the chain has no ``/run`` record yet.
        """
        if self._head_sha256 is None:
            raise AuditError("a run cannot be sealed before its /run record is written")
        record: dict[str, Any] = {
            "schema": TOPICS[SEAL_TOPIC],
            "stamp_ns": max(now_ns, self._head_stamp_ns),
            "record_count": self._next_seq,
            "head_sha256": self._head_sha256,
        }
        if ended is not None:
            record["ended"] = ended
        return record


def check_record(topic: str, record: Mapping[str, Any]) -> None:
    """Check what every sink checks before writing: the topic, ``schema`` and ``stamp_ns``.

    This is deliberately shallow (the gate builds its records from typed
    values); `audit.schema_problems` checks a record field by field.

    Raises:
        AuditError: unknown topic, a ``schema`` that is not the topic's, a
            ``stamp_ns`` that is not a non-negative integer, or ``seq`` /
            ``prev_sha256`` already present (they are the sink's to assign).
    """
    expected = TOPICS.get(topic)
    if expected is None:
        raise AuditError(f"{topic!r} is not a ghost audit topic (known: {', '.join(TOPICS)})")
    if not isinstance(record, Mapping):
        raise AuditError(f"a record must be a mapping, not {type(record).__name__}")
    schema = record.get("schema")
    if schema != expected:
        raise AuditError(f"a record on {topic} must have schema {expected!r}, not {schema!r}")
    stamp = record.get("stamp_ns")
    if not isinstance(stamp, int) or isinstance(stamp, bool) or stamp < 0:
        raise AuditError(f"a {expected} record needs stamp_ns as a non-negative integer")
    assigned = [key for key in _ASSIGNED if key in record]
    if assigned:
        raise AuditError(f"a record must not carry {' or '.join(assigned)}: the sink assigns them")


def check_appendable(topic: str, record: Mapping[str, Any]) -> None:
    """`check_record`, and refuse the topics only a sink writes (`SINK_TOPICS`).

    Raises:
        AuditError: as `check_record`, or ``topic`` is ``/run``,
            ``/checkpoints`` or ``/seal``.
    """
    if topic in SINK_TOPICS:
        raise AuditError(f"records on {topic} are written by the sink itself, not appended")
    check_record(topic, record)


def make_run_record(
    run: RunStart,
    durability: Durability,
    signing: Mapping[str, str] | None = None,
    identity: WriterIdentity | None = None,
) -> dict[str, Any]:
    """Return the ``/run`` record for ``run``, minting its ``run_id``.

    Args:
        run: what the gate declared about itself.
        durability: the sink's durability mode, recorded so a reader knows
            what a crash could have cost.
        signing: the key the run's checkpoint notes are signed with
            (``key_id``, ``key_name``, ``public_key``), or None when unsigned.
        identity: for a run written by the audit daemon, the daemon and the
            peer process it writes for; ``pid`` is then the peer's (the process
            that made the decisions), and ``writer`` and ``peer`` are recorded.

    Raises:
        AuditError: ``run.policy_source_sha256`` is not the SHA-256 of
            ``run.policy_source``, or a shadow candidate's ``source_sha256``
            not that of its source (the attachment would not match the chain).
    """
    if sha256_hex(run.policy_source) != run.policy_source_sha256:
        raise AuditError(
            "RunStart.policy_source_sha256 is not the SHA-256 of policy_source;"
            " the stored policy would not match the run record"
        )
    shadow = run.shadow
    if shadow is not None and sha256_hex(shadow.source) != shadow.source_sha256:
        raise AuditError(
            "RunStart.shadow.source_sha256 is not the SHA-256 of its source;"
            " the stored candidate policy would not match the run record"
        )
    record: dict[str, Any] = {
        "schema": TOPICS[RUN_TOPIC],
        "stamp_ns": run.stamp_ns,
        "run_id": make_uuid7(run.stamp_ns),
        "sdk_version": run.sdk_version,
        "host": socket.gethostname(),
        "pid": os.getpid() if identity is None else identity.peer.pid,
        "policy_id": run.policy_id,
        "policy_sha256": run.policy_sha256,
        "policy_source_sha256": run.policy_source_sha256,
        "durability": durability,
        "signing": None if signing is None else dict(signing),
    }
    if shadow is not None:  # only a run with a shadow candidate has the key (ADR 0031)
        record["shadow"] = {
            "policy_id": shadow.policy_id,
            "policy_sha256": shadow.policy_sha256,
            "policy_source_sha256": shadow.source_sha256,
        }
    if identity is not None:
        record["writer"] = identity.writer.as_record()
        record["peer"] = identity.peer.as_record()
        if identity.follows is not None:  # only a reconnected run has the key
            record["follows"] = identity.follows.as_record()
    return record
