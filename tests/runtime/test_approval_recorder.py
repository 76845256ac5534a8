"""The logging side of the approval queue (`runtime._approval_recorder`, ADR 0016).

Each resolution is logged once, under the store's claim, and handed over as the
store says it was logged to every other queue. These tests drive a recorder
directly on a real memory store and a real memory sink (opened by a gate), so
that what one recorder writes, claims and remembers can be read off exactly.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from audit import MemoryAuditSink
from runtime import (
    Approval,
    ApprovalStoreError,
    AuditError,
    Gate,
    MemoryApprovalStore,
    PendingApproval,
    Policy,
    Resolution,
    ResolutionRecord,
    RuntimeVerdict,
)
from runtime._approval import INT64_MAX
from runtime._approval_recorder import CLAIM_LEASE_NS, ApprovalRecorder
from runtime.testing import ManualClock
from tests.runtime.approvals import APPROVAL_POLICY

CACHE_SIZE = 4096  # ADR 0016: the settled approvals a queue keeps in memory
OTHER_RUN = "0190f1e2-0000-7000-8000-00000000abcd"  # the run that made the decisions


def _id(n: int) -> str:
    """A decision id (the schema wants a UUID)."""
    return f"0190f1e2-0000-7000-8000-{n:012x}"


D1 = _id(1)


def _pending(decision_id: str, **overrides: Any) -> PendingApproval:
    fields: dict[str, Any] = {
        "decision_id": decision_id,
        "decision_sha256": "a" * 64,
        "run_id": OTHER_RUN,
        "agent": "support",
        "verb": "refund",
        "resource": "payments:stripe",
        "reason": "held for approval by rule 'refunds'",
        "matched_policy": "refunds",
        "held_verdict": RuntimeVerdict.NARROW,
        "executed_args_sha256": "b" * 64,
        "policy_sha256": "c" * 64,
        "approvers": None,
        "created_ns": 1_000,
        "expires_ns": 2_000,
    }
    fields.update(overrides)
    return PendingApproval(**fields)


def _open_sink(sink: MemoryAuditSink | None = None) -> MemoryAuditSink:
    """A memory sink with its run open (a gate opens it)."""
    sink = MemoryAuditSink() if sink is None else sink
    Gate(Policy.from_dict(APPROVAL_POLICY), sink=sink, clock=ManualClock())
    return sink


class Recorder:
    """A recorder with what it calls back kept for the test to read."""

    def __init__(
        self,
        store: MemoryApprovalStore,
        *,
        sink: MemoryAuditSink | None = None,
        clock: ManualClock | None = None,
    ) -> None:
        self.sink = _open_sink(sink)
        self.clock = ManualClock() if clock is None else clock
        self.started: dict[str, int] = {}
        self.settled: list[Approval] = []
        self.recorder = ApprovalRecorder(
            store=store,
            sink=self.sink,
            clock=self.clock,
            recorded=lambda name: f"<{name}>",
            run_id=self.sink.run_id,
            started_ns=self.started.get,
            settled=self.settled.append,
        )


def _resolved(
    store: MemoryApprovalStore, decision_id: str, outcome: str = "approved", **overrides: Any
) -> tuple[PendingApproval, Resolution]:
    pending = _pending(decision_id, **overrides)
    store.add(pending)
    approver = None if outcome == "expired" else "bob"
    resolution = store.resolve(Resolution(decision_id, outcome, approver, 1_500))  # type: ignore[arg-type]
    return pending, resolution


def test_a_settled_resolution_is_logged_marked_and_reported() -> None:
    store = MemoryApprovalStore()
    here = Recorder(store)
    pending, resolution = _resolved(store, D1)
    here.started[D1] = 40
    here.clock.advance(1_000)  # monotonic now: 1,000 more than at the start

    approval = here.recorder.settle(pending, resolution)

    (entry,) = [e for e in here.sink.entries if e.topic == "/approvals"]
    assert approval is not None
    assert approval.approval_sha256 == entry.sha256
    assert approval.wait_ns == entry.record["wait_ns"] == here.clock.monotonic_ns() - 40
    assert approval.approver == entry.record["approver"] == "<bob>"  # as the log holds it
    assert approval.final_verdict is RuntimeVerdict.NARROW
    assert entry.record["decision_run_id"] == OTHER_RUN
    assert store.record_of(D1) is not None
    assert store.record_of(D1).approval_sha256 == entry.sha256  # type: ignore[union-attr]
    assert store.unrecorded() == []
    assert here.settled == [approval]
    assert here.recorder.cached(D1) == approval


def test_a_decision_this_queue_never_watched_waited_zero() -> None:
    store = MemoryApprovalStore()
    here = Recorder(store)
    pending, resolution = _resolved(store, D1, outcome="expired")
    here.clock.advance(5_000)
    approval = here.recorder.settle(pending, resolution)
    assert approval is not None
    assert approval.wait_ns == 0
    assert (approval.approver, approval.final_verdict) == (None, RuntimeVerdict.DENY)
    (record,) = here.sink.records("/approvals")
    assert (record["approver"], record["wait_ns"]) == (None, 0)


def test_a_second_settle_is_answered_from_memory_and_logs_nothing() -> None:
    store = MemoryApprovalStore()
    here = Recorder(store)
    pending, resolution = _resolved(store, D1)
    first = here.recorder.settle(pending, resolution)
    again = here.recorder.settle(pending, resolution)
    assert again is first
    assert len(here.sink.records("/approvals")) == 1
    assert here.settled == [first]  # settled once: a second waiter needs no second wake-up


@pytest.mark.parametrize(
    ("resolved_ns", "stamp"), [(-5, 0), (INT64_MAX + 1, INT64_MAX), (1_500, 1_500)]
)
def test_the_approval_carries_the_records_stamp(resolved_ns: int, stamp: int) -> None:
    store = MemoryApprovalStore()
    here = Recorder(store)
    pending = _pending(D1)
    store.add(pending)
    resolution = store.resolve(Resolution(D1, "rejected", "bob", resolved_ns))
    approval = here.recorder.settle(pending, resolution)
    (record,) = here.sink.records("/approvals")
    assert approval is not None
    assert approval.resolved_ns == record["stamp_ns"] == stamp


def test_another_queue_is_handed_the_approval_as_it_was_logged() -> None:
    store = MemoryApprovalStore()
    first, second = Recorder(store), Recorder(store)
    pending, resolution = _resolved(store, D1)
    first.started[D1] = 0
    first.clock.advance(700)
    logged = first.recorder.settle(pending, resolution)
    second.clock.advance(99_999)  # its own clock would measure another wait

    handed = second.recorder.settle(pending, resolution)

    assert second.sink.records("/approvals") == ()
    assert handed == logged
    assert second.settled == [handed]
    assert second.recorder.cached(D1) == handed


class _CountingStore(MemoryApprovalStore):
    """A real memory store that counts the writes telling it a resolution is logged."""

    marks = 0

    def mark_recorded(self, decision_id: str, approval_sha256: str, wait_ns: int) -> None:
        self.marks += 1
        super().mark_recorded(decision_id, approval_sha256, wait_ns)


def test_only_the_queue_that_logged_a_resolution_tells_the_store_and_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A queue handed a resolution over writes nothing: no store write (a SQLite write
    # takes the file's lock) and no second ``ghost.approval_resolved`` event, which
    # would count one resolution twice in the SDK's own log.
    store = _CountingStore()
    first, second = Recorder(store), Recorder(store)
    pending, resolution = _resolved(store, D1)
    with caplog.at_level(logging.INFO, logger="ghost.approvals"):
        first.recorder.settle(pending, resolution)
        assert store.marks == 1
        second.recorder.settle(pending, resolution)
    assert store.marks == 1
    events = [r.getMessage() for r in caplog.records if r.getMessage() == "ghost.approval_resolved"]
    assert events == ["ghost.approval_resolved"]


class _FailingSink(MemoryAuditSink):
    """A real memory sink whose ``/approvals`` appends raise ``error`` while it is set."""

    error: Exception | None = OSError("disk full")

    def append(self, topic: str, record: Any) -> str:
        if topic == "/approvals" and self.error is not None:
            raise self.error
        return super().append(topic, record)


def test_a_write_that_fails_is_an_audit_error_naming_only_the_type() -> None:
    store = MemoryApprovalStore()
    sink = _FailingSink()
    sink.error = OSError("/secret/path is full")
    here = Recorder(store, sink=sink)
    pending, resolution = _resolved(store, D1)
    with pytest.raises(AuditError) as caught:
        here.recorder.settle(pending, resolution)
    assert str(caught.value) == (
        f"the resolution of decision {D1} could not be recorded (OSError); the action must not run"
    )
    assert caught.value.__cause__ is sink.error
    assert here.settled == []
    assert here.recorder.cached(D1) is None
    assert [p.decision_id for p, _ in store.unrecorded()] == [D1]  # left for a later try


def test_an_audit_error_of_the_sink_is_raised_as_it_is() -> None:
    store = MemoryApprovalStore()
    sink = _FailingSink()
    sink.error = AuditError("the sink is sealed")
    here = Recorder(store, sink=sink)
    pending, resolution = _resolved(store, D1)
    with pytest.raises(AuditError) as caught:
        here.recorder.settle(pending, resolution)
    assert caught.value is sink.error


def test_a_recorder_that_cannot_write_lets_the_claim_lapse_at_once() -> None:
    # A disk-full agent must not keep its healthy neighbours from logging the
    # resolution for the whole lease (or for ever, renewing it on every sweep).
    store = MemoryApprovalStore()
    stalled = Recorder(store, sink=_FailingSink())
    other = Recorder(store)
    pending, resolution = _resolved(store, D1)
    with pytest.raises(AuditError):
        stalled.recorder.settle(pending, resolution)

    approval = other.recorder.settle(pending, resolution)

    assert approval is not None
    assert len(other.sink.records("/approvals")) == 1
    assert other.settled == [approval]


def test_a_claim_holds_other_queues_off_for_the_lease() -> None:
    # A recorder busy writing holds the claim for the lease (real wall-clock time):
    # nobody else logs it meanwhile, then anybody may.
    store = MemoryApprovalStore()
    other = Recorder(store)
    pending, resolution = _resolved(store, D1)
    before = time.time_ns()
    assert store.claim_recording(D1, "busy", now_ns=before, until_ns=before + CLAIM_LEASE_NS)

    assert other.recorder.settle(pending, resolution) is None  # held: not logged twice
    assert other.sink.records("/approvals") == ()
    assert other.settled == []
    assert CLAIM_LEASE_NS == 30_000_000_000
    still = store.claim_recording(D1, "x", now_ns=before + CLAIM_LEASE_NS - 1, until_ns=0)
    assert still is False
    assert store.claim_recording(D1, "x", now_ns=before + CLAIM_LEASE_NS, until_ns=0) is True


def test_the_recorder_that_holds_the_claim_may_try_again() -> None:
    store = MemoryApprovalStore()
    sink = _FailingSink()
    here = Recorder(store, sink=sink)
    pending, resolution = _resolved(store, D1)
    with pytest.raises(AuditError):
        here.recorder.settle(pending, resolution)
    sink.error = None
    approval = here.recorder.settle(pending, resolution)
    assert approval is not None
    assert len(sink.records("/approvals")) == 1


class _UnmarkableStore(MemoryApprovalStore):
    """A real memory store whose ``mark_recorded`` fails while ``locked`` is set."""

    locked = True
    marks = 0

    def mark_recorded(self, decision_id: str, approval_sha256: str, wait_ns: int) -> None:
        self.marks += 1
        if self.locked:
            raise ApprovalStoreError("database is locked")
        super().mark_recorded(decision_id, approval_sha256, wait_ns)


def test_a_mark_that_fails_is_kept_and_retried_until_it_lands() -> None:
    store = _UnmarkableStore()
    here = Recorder(store)
    pending, resolution = _resolved(store, D1)
    approval = here.recorder.settle(pending, resolution)  # logged: the failure is not the caller's
    assert approval is not None
    assert store.record_of(D1) is None
    assert here.recorder.remark(D1) is True  # still locked: kept for the next try
    assert here.recorder.remark(D1) is True
    store.locked = False
    assert here.recorder.remark(D1) is True
    assert store.record_of(D1) == ResolutionRecord(approval.approval_sha256, approval.wait_ns)
    assert store.unrecorded() == []
    marks = store.marks
    assert here.recorder.remark(D1) is False  # nothing waits any more
    assert store.marks == marks
    assert here.recorder.remark(_id(999_999)) is False


def test_memory_keeps_the_most_recently_used_settled_approvals() -> None:
    store = MemoryApprovalStore()
    # Thousands of records: schema checks and checkpoints off (each is tested elsewhere).
    here = Recorder(store, sink=MemoryAuditSink(validate=False, checkpoint_every_records=10**6))
    ids = [_id(i) for i in range(CACHE_SIZE + 1)]
    for decision_id in ids[:CACHE_SIZE]:
        here.recorder.settle(*_resolved(store, decision_id))
    assert all(here.recorder.cached(d) is not None for d in (ids[0], ids[CACHE_SIZE - 1]))
    assert here.recorder.cached(ids[0]) is not None  # used last: kept past the next one
    here.recorder.settle(*_resolved(store, ids[CACHE_SIZE]))
    assert here.recorder.cached(ids[CACHE_SIZE]) is not None
    assert here.recorder.cached(ids[0]) is not None
    assert here.recorder.cached(ids[1]) is None  # the least recently used went
    assert here.recorder.cached(ids[2]) is not None
    # One that left memory is handed over from the store: the same approval, no new record.
    records = len(here.sink.records("/approvals"))
    again = here.recorder.settle(*store.get(ids[1]))  # type: ignore[arg-type]
    assert again is not None
    assert again.approval_sha256 == store.record_of(ids[1]).approval_sha256  # type: ignore[union-attr]
    assert len(here.sink.records("/approvals")) == records
