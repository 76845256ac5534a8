"""The approval queue's less travelled paths: wake-ups, hand-overs, restarts, close (ADR 0016).

Waits here use a long poll interval (60 s), so that a waiter that returns at
once was woken by the resolution, not by its next poll; each wait is bounded
(``timeout_s`` or a join timeout far above what the woken path takes), and no
test asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import pytest

from audit import MemoryAuditSink
from runtime import Approval, ApprovalError, MemoryApprovalStore, Resolution
from runtime.testing import ManualClock
from tests.runtime.approvals import S, held, make_gate

LONG_POLL = 60.0
BOUND = 20.0  # far below LONG_POLL: a waiter left to its poll would miss it


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


class CountingStore(MemoryApprovalStore):
    """A real memory store that counts reads and claims."""

    def __init__(self) -> None:
        super().__init__()
        self.gets = 0
        self.claims = 0

    def get(self, decision_id: str) -> Any:
        self.gets += 1
        return super().get(decision_id)

    def claim_recording(self, decision_id: str, claimant: str, **kw: int) -> bool:
        self.claims += 1
        return super().claim_recording(decision_id, claimant, **kw)


def test_a_resolution_in_this_process_wakes_a_waiting_thread_at_once(clock: ManualClock) -> None:
    store = CountingStore()
    gate, _, _ = make_gate(clock, store=store, poll_s=LONG_POLL)
    decision = held(gate)
    results: list[Approval] = []
    started = threading.Event()

    def wait() -> None:
        started.set()
        results.append(gate.approvals.wait(decision.decision_id, timeout_s=math.inf))

    waiter = threading.Thread(
        target=wait, daemon=True
    )  # left to its poll it would outlast the test
    waiter.start()
    started.wait()
    waiter.join(timeout=0.3)  # it blocks, and reads the store only when it looks
    gets_while_blocked = store.gets
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    waiter.join(timeout=BOUND)
    assert results == [approval]
    assert gets_while_blocked < 20  # not a loop over the store while nothing happens


def test_a_resolution_in_this_process_wakes_an_async_waiter_at_once(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock, poll_s=LONG_POLL)
    decision = held(gate)

    async def main() -> Approval:
        waiting = asyncio.ensure_future(gate.approvals.wait_async(decision.decision_id, math.inf))
        await asyncio.sleep(0.05)
        approval = await asyncio.to_thread(
            gate.approvals.resolve, decision.decision_id, approved=False, approver="bob"
        )
        assert await asyncio.wait_for(waiting, BOUND) == approval
        return approval

    assert asyncio.run(main()).outcome == "rejected"


def test_a_restarted_queue_records_what_the_store_holds_unlogged_as_it_starts(
    clock: ManualClock,
) -> None:
    store = MemoryApprovalStore()
    first, _, _ = make_gate(clock, store=store)
    decision = held(first)
    store.resolve(Resolution(decision.decision_id, "approved", "bob", clock.time_ns()))
    # The first agent is gone before it looked; the next one starts on the same store.
    _, sink, _ = make_gate(clock, store=store, sink=MemoryAuditSink(), poll_s=LONG_POLL)
    (record,) = sink.records("/approvals")  # at construction, before any call
    assert record["decision_id"] == decision.decision_id
    assert store.unrecorded() == []


def test_a_resolution_made_elsewhere_is_recorded_at_the_close_whatever_the_poll(
    clock: ManualClock,
) -> None:
    gate, sink, store = make_gate(clock, poll_s=LONG_POLL)
    decision = held(gate)
    store.resolve(Resolution(decision.decision_id, "rejected", "bob", clock.time_ns()))
    sink.close()  # long before the next poll: the close looks at the store anyway
    assert [r["outcome"] for r in sink.records("/approvals")] == ["rejected"]
    assert [e.topic for e in sink.entries][-3:] == ["/approvals", "/checkpoints", "/seal"]


def test_listing_what_waits_records_the_expiries_first(clock: ManualClock) -> None:
    gate, sink, _ = make_gate(clock)
    decision = held(gate)
    clock.advance(600 * S)
    assert gate.approvals.pending() == ()
    (record,) = sink.records("/approvals")
    assert (record["decision_id"], record["outcome"]) == (decision.decision_id, "expired")


def test_a_store_that_refuses_a_resolution_is_an_approval_error(clock: ManualClock) -> None:
    class RefusingStore(MemoryApprovalStore):
        def resolve(self, resolution: Resolution) -> Resolution:
            raise ApprovalError("the store refuses")

    gate, sink, _ = make_gate(clock, store=RefusingStore())
    decision = held(gate)
    with pytest.raises(ApprovalError, match="the store refuses"):
        gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    assert sink.records("/approvals") == ()


def test_waiting_on_another_agents_decision_measures_from_when_this_queue_saw_it(
    clock: ManualClock,
) -> None:
    store = MemoryApprovalStore()
    watcher, watcher_sink, _ = make_gate(clock, store=store)
    holder, _, _ = make_gate(clock, store=store)
    decision = held(holder)  # made after the watcher started: it does not watch it yet
    with pytest.raises(TimeoutError):
        watcher.approvals.wait(decision.decision_id, timeout_s=0)  # now it does
    clock.advance(5 * S)
    store.resolve(Resolution(decision.decision_id, "approved", "bob", clock.time_ns()))
    approval = watcher.approvals.wait(decision.decision_id, timeout_s=BOUND)
    assert approval.wait_ns == 5 * S
    assert watcher_sink.records("/approvals")[0]["wait_ns"] == 5 * S


class _HeldSink(MemoryAuditSink):
    """A real memory sink whose ``/approvals`` append waits for ``release`` (bounded)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def append(self, topic: str, record: Any) -> str:
        if topic == "/approvals":
            self.entered.set()
            self.release.wait(timeout=BOUND)
        return super().append(topic, record)


def test_a_resolver_waits_while_another_queue_logs_its_resolution_then_gets_it(
    clock: ManualClock,
) -> None:
    # The deciding agent claims the resolution the moment it is stored and takes a
    # while to log it; the resolver (another agent) waits for that record, without
    # logging its own, and returns the approval as it was logged.
    holder_sink = _HeldSink()
    store = CountingStore()
    holder, _, _ = make_gate(clock, store=store, sink=holder_sink, poll_s=0.01)
    decision = held(holder)
    resolver, resolver_sink, _ = make_gate(clock, store=store, poll_s=0.01)
    sweeper = threading.Thread(target=lambda: holder.approvals.sweep(force=True))
    original_resolve = store.resolve

    def resolve_then_let_the_holder_claim(resolution: Resolution) -> Resolution:
        stored = original_resolve(resolution)
        sweeper.start()
        assert holder_sink.entered.wait(timeout=BOUND)  # it holds the claim, writing
        return stored

    store.resolve = resolve_then_let_the_holder_claim  # type: ignore[method-assign]
    claims_before = store.claims
    releaser = threading.Timer(0.2, holder_sink.release.set)
    releaser.start()
    approval = resolver.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    sweeper.join(timeout=BOUND)
    releaser.join()

    (entry,) = [e for e in holder_sink.entries if e.topic == "/approvals"]
    assert resolver_sink.records("/approvals") == ()
    assert approval.approval_sha256 == entry.sha256
    assert approval.outcome == "approved"
    assert store.claims - claims_before < 100  # it paced its looks (poll), no busy loop


def test_after_a_forced_look_the_next_look_waits_a_whole_poll_interval(clock: ManualClock) -> None:
    class ScanCounting(MemoryApprovalStore):
        scans = 0

        def unrecorded(self) -> Any:
            self.scans += 1
            return super().unrecorded()

    store = ScanCounting()
    gate, _, _ = make_gate(clock, store=store, poll_s=LONG_POLL)
    held(gate)
    gate.approvals.sweep(force=True)
    scans = store.scans
    for _ in range(3):
        gate.approvals.sweep()
    assert store.scans == scans  # the interval starts again at the forced look


def test_a_queue_asked_to_resolve_a_decision_watches_it_and_records_its_expiry(
    clock: ManualClock,
) -> None:
    store = MemoryApprovalStore()
    watcher, watcher_sink, _ = make_gate(clock, store=store)
    holder, holder_sink, _ = make_gate(clock, store=store)
    decision = held(holder)  # made after the watcher started
    with pytest.raises(ApprovalError, match="may not resolve"):
        watcher.approvals.resolve(decision.decision_id, approved=True, approver="mallory")
    clock.advance(600 * S)
    watcher.approvals.sweep()
    assert [r["outcome"] for r in watcher_sink.records("/approvals")] == ["expired"]
    assert holder_sink.records("/approvals") == ()
