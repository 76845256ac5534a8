"""The approval queue on a `SqliteApprovalStore` that another process holds locked.

A store that cannot be written for a while (``ghost approvals`` or another
agent holds the write lock past the busy timeout) raises `ApprovalStoreError`,
a subclass of `ApprovalError`. The queue must treat it as a store failure,
retried by the next sweep -- not as the store refusing an unknown decision,
which the sweep drops for good.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from audit import MemoryAuditSink
from runtime import (
    ApprovalStoreError,
    AuditError,
    Resolution,
    ResolutionRecord,
    SqliteApprovalStore,
    make_uuid7,
)
from runtime.testing import ManualClock
from tests.records import make_run_start
from tests.runtime.approvals import S, held, make_gate, refund, search
from tests.runtime.test_approval_store import make_pending


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "approvals.db"


@pytest.fixture
def store(path: Path) -> Iterator[SqliteApprovalStore]:
    with SqliteApprovalStore(path, busy_timeout_s=0.01) as opened:
        yield opened


def outcomes(sink: MemoryAuditSink) -> list[str]:
    return [r["outcome"] for r in sink.records("/approvals")]


def locked(path: Path) -> sqlite3.Connection:
    """Another process's connection holding the store's write lock until it rolls back."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


def test_an_expiry_the_locked_store_refused_is_recorded_by_the_next_gate_call(
    store: SqliteApprovalStore, path: Path
) -> None:
    clock = ManualClock()
    gate, sink, _ = make_gate(clock, store=store)
    decision = held(gate, refund())
    clock.advance(601 * S)

    other = locked(path)
    gate.check(search())  # the sweep cannot store the expiry: logged, kept for the next
    assert outcomes(sink) == []
    other.execute("ROLLBACK")
    other.close()

    gate.check(search())
    assert outcomes(sink) == ["expired"]
    _, resolution = store.get(decision.decision_id)
    assert resolution is not None
    assert resolution.outcome == "expired"


def test_a_resolution_the_locked_store_refused_is_a_store_error_and_can_be_retried(
    store: SqliteApprovalStore, path: Path
) -> None:
    gate, sink, _ = make_gate(ManualClock(), store=store)
    decision = held(gate, refund())

    other = locked(path)
    with pytest.raises(ApprovalStoreError, match="locked"):
        gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    other.execute("ROLLBACK")
    other.close()
    assert outcomes(sink) == []

    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    assert approval.outcome == "approved"
    assert outcomes(sink) == ["approved"]


class LockingSink(MemoryAuditSink):
    """A real memory sink; once it holds an ``/approvals`` record, another process locks the store.

    The unlucky moment: the resolution is logged, and the store cannot be told so.
    """

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.other: sqlite3.Connection | None = None

    def append(self, topic: str, record: Mapping[str, Any]) -> str:
        address = super().append(topic, record)
        if topic == "/approvals" and self.other is None:
            self.other = locked(self.path)
        return address


def _approve_from_outside(path: Path, decision_id: str, clock: ManualClock) -> None:
    # An operator approves through the file, as ``ghost approvals approve`` does.
    with SqliteApprovalStore(path, create=False) as operator:
        operator.resolve(Resolution(decision_id, "approved", "alice", clock.time_ns()))


def test_a_resolution_the_locked_store_cannot_hand_out_is_logged_once_it_can(
    store: SqliteApprovalStore, path: Path
) -> None:
    clock = ManualClock()
    gate, sink, _ = make_gate(clock, store=store)
    decision = held(gate, refund())
    _approve_from_outside(path, decision.decision_id, clock)

    other = locked(path)  # the claim to log it cannot be taken: nothing is logged yet
    gate.approvals.sweep(force=True)
    assert outcomes(sink) == []
    other.execute("ROLLBACK")
    other.close()

    gate.approvals.sweep(force=True)
    assert outcomes(sink) == ["approved"]
    assert store.unrecorded() == []
    record = store.record_of(decision.decision_id)
    assert record is not None
    (entry,) = [e for e in sink.entries if e.topic == "/approvals"]
    assert record == ResolutionRecord(entry.sha256, entry.record["wait_ns"])


def test_a_resolution_logged_while_the_store_was_locked_is_marked_later_and_never_logged_twice(
    store: SqliteApprovalStore, path: Path
) -> None:
    clock = ManualClock()
    sink = LockingSink(path)
    gate, _, _ = make_gate(clock, store=store, sink=sink)
    decision = held(gate, refund())
    _approve_from_outside(path, decision.decision_id, clock)

    gate.approvals.sweep(force=True)  # logged; the store cannot be told so (locked)
    assert outcomes(sink) == ["approved"]
    assert [p.decision_id for p, _ in store.unrecorded()] == [decision.decision_id]
    other = sink.other
    assert other is not None
    gate.approvals.sweep(force=True)  # still locked: nothing logged a second time
    assert outcomes(sink) == ["approved"]
    other.execute("ROLLBACK")
    other.close()

    gate.approvals.sweep(force=True)  # the next look tells the store
    assert store.unrecorded() == []
    assert outcomes(sink) == ["approved"]
    # A restart over the store does not log it a second time.
    restarted, restarted_sink, _ = make_gate(clock, store=store)
    restarted.check(search())
    assert outcomes(restarted_sink) == []


def test_a_record_whose_mark_failed_is_never_written_again_even_out_of_the_cache(
    store: SqliteApprovalStore, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime import _approval_recorder
    from runtime._approval_recorder import ApprovalRecorder

    monkeypatch.setattr(_approval_recorder, "_CACHE_SIZE", 1)
    clock = ManualClock()
    one, two = make_uuid7(1_000), make_uuid7(2_000)
    first, second = make_pending(one, expires_ns=10**30), make_pending(two, expires_ns=10**30)
    for pending in (first, second):
        store.add(pending)
        store.resolve(Resolution(pending.decision_id, "approved", "alice", 1_500))
    sink = LockingSink(path)
    sink.open_run(make_run_start())
    recorder = ApprovalRecorder(
        store=store,
        sink=sink,
        clock=clock,
        recorded=str,
        run_id="run-1",
        started_ns=lambda _: None,
        settled=lambda _: None,
    )
    resolved = {p.decision_id: store.get(p.decision_id)[1] for p in (first, second)}

    logged = recorder.settle(first, resolved[one])  # written; the mark fails (locked)
    assert logged is not None
    assert store.record_of(one) is None
    assert sink.other is not None
    sink.other.execute("ROLLBACK")
    sink.other.close()
    assert recorder.settle(second, resolved[two]) is not None  # evicts the first from the cache

    again = recorder.settle(first, resolved[one])

    assert again == logged
    assert [r["decision_id"] for r in sink.records("/approvals")] == [one, two]
    assert store.record_of(one) == ResolutionRecord(logged.approval_sha256, logged.wait_ns)


class FailingSink(MemoryAuditSink):
    """A real memory sink whose disk is full: it refuses every ``/approvals`` record."""

    def append(self, topic: str, record: Mapping[str, Any]) -> str:
        if topic == "/approvals":
            raise OSError(28, "No space left on device")
        return super().append(topic, record)


def test_a_queue_that_cannot_write_lets_a_neighbour_log_the_resolution(
    store: SqliteApprovalStore, path: Path
) -> None:
    clock = ManualClock()
    broken, _, _ = make_gate(clock, store=store, sink=FailingSink())
    decision = held(broken, refund())
    with SqliteApprovalStore(path, create=False) as other:
        healthy, healthy_sink, _ = make_gate(clock, store=other)
        _approve_from_outside(path, decision.decision_id, clock)

        with pytest.raises(AuditError, match="could not be recorded"):
            broken.approvals.sweep(force=True)  # it took the claim, and could not write
        healthy.approvals.sweep(force=True)  # no 30 s wait for the broken one's lease

        assert outcomes(healthy_sink) == ["approved"]
        assert store.unrecorded() == []
