"""What the approval queue watches, and how it keeps watching through failures and races.

The queue keeps the ids it watches and a heap of their deadlines (ADR 0016):
memory follows what waits, a store that fails mid-sweep is retried from where it
failed, an expiry another agent is logging is looked at again a poll interval
later, and a resolution that lands between a waiter's look and its pause wakes
it. Some tests read the queue's bookkeeping (``_known``, ``_deadlines``): what
it holds is the bound on its memory. Waits that must end by a wake-up use a
poll interval far longer than their bound, so none asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time

import pytest

from audit import MemoryAuditSink
from runtime import (
    Action,
    Approval,
    ApprovalError,
    ApprovalStoreError,
    Gate,
    MemoryApprovalStore,
    PendingApproval,
    Resolution,
)
from runtime._approval_recorder import CLAIM_LEASE_NS
from runtime.testing import ManualClock
from tests.runtime.approvals import S, held, make_gate, refund, search

LONG_POLL = 60.0
BOUND = 20.0  # far below LONG_POLL: a waiter left to its poll would miss it


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def _logged(sink: MemoryAuditSink) -> list[tuple[str, str]]:
    return [(r["decision_id"], r["outcome"]) for r in sink.records("/approvals")]


def _due_ids(gate: Gate, now_ns: int) -> list[str]:
    return sorted(decision_id for at, decision_id in gate.approvals._deadlines if at <= now_ns)


# --- the deadline heap --------------------------------------------------------------------------


def test_the_deadline_heap_is_rebuilt_once_it_holds_more_than_twice_what_waits_and_64(
    clock: ManualClock,
) -> None:
    # A settled decision keeps its deadline on the heap until it is due; the heap is cut
    # back to what is watched once it passes 2 x watched + 64 entries, and not before.
    gate, _, _ = make_gate(clock)
    waiting = held(gate)
    sizes, kept = [], []
    for index in range(67):
        decision = held(gate, refund(101 + index))
        gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
        sizes.append(len(gate.approvals._deadlines))
        kept.append({decision_id for _, decision_id in gate.approvals._deadlines})
    assert sizes == [*range(2, 67), 1, 2]
    assert kept[65] == {waiting.decision_id}  # rebuilt: only what is still watched


def test_a_rebuilt_heap_still_expires_the_earliest_deadline_first(clock: ManualClock) -> None:
    gate, sink, _ = make_gate(clock)
    soon = held(gate, Action("a", "transfer", "bank:x", {"amount": 1}))  # 30 s
    late = held(gate, refund(100))  # 600 s
    early = held(gate, refund(5000))  # 60 s: behind `late` in the heap's list
    gate.approvals.resolve(soon.decision_id, approved=True, approver="alice")
    clock.advance(S)
    for index in range(66):  # enough settled ones (601 s) to make the heap rebuild
        decision = held(gate, refund(101 + index))
        gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    assert len(gate.approvals._deadlines) == 2
    clock.advance(59 * S)  # `early`'s deadline
    gate.check(search())
    assert _logged(sink)[-1] == (early.decision_id, "expired")
    assert [p.decision_id for p in gate.approvals.pending()] == [late.decision_id]


# --- sweeps that meet a failing store -----------------------------------------------------------


class FailsOnce(MemoryApprovalStore):
    """A real memory store that fails once, as it stores one decision's resolution."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error
        self.fail_on: str | None = None

    def resolve(self, resolution: Resolution) -> Resolution:
        if resolution.decision_id == self.fail_on:
            self.fail_on = None
            raise self.error
        return super().resolve(resolution)


@pytest.mark.parametrize(
    "error",
    [ApprovalStoreError("approvals.db", "stayed locked"), RuntimeError("database is locked")],
    ids=["store-error", "other-error"],
)
def test_a_sweep_stops_where_the_store_failed_and_the_next_one_resumes_there(
    clock: ManualClock, error: Exception
) -> None:
    store = FailsOnce(error)
    gate, sink, _ = make_gate(clock, store=store)
    decisions = []
    for index in range(3):  # deadlines one second apart: they expire in this order
        decisions.append(held(gate, refund(100 + index)))
        clock.advance(S)
    first, second, third = (d.decision_id for d in decisions)
    store.fail_on = second
    clock.advance(600 * S)

    assert gate.check(search()).verdict == "allow"  # the failure is logged, not raised
    assert _logged(sink) == [(first, "expired")]  # nothing after the failure was tried
    assert _due_ids(gate, clock.time_ns()) == sorted([second, third])  # only what is left
    gate.check(search())
    assert _logged(sink) == [(first, "expired"), (second, "expired"), (third, "expired")]
    assert gate.approvals._deadlines == []


def test_a_decision_the_store_forgot_is_dropped_and_the_sweep_goes_on(
    clock: ManualClock,
) -> None:
    class ForgetfulStore(MemoryApprovalStore):
        forgotten: frozenset[str] = frozenset()

        def get(self, decision_id: str) -> tuple[PendingApproval, Resolution | None]:
            if decision_id in self.forgotten:
                raise ApprovalError(f"no decision {decision_id} awaits approval")
            return super().get(decision_id)

    store = ForgetfulStore()
    gate, sink, _ = make_gate(clock, store=store)
    forgotten = held(gate)
    clock.advance(S)
    other = held(gate, refund(300))  # expires after the forgotten one
    store.forgotten = frozenset({forgotten.decision_id})  # an operator deleted its row
    clock.advance(600 * S)
    gate.check(search())
    assert _logged(sink) == [(other.decision_id, "expired")]  # in the same sweep
    assert gate.approvals._known == {}  # the forgotten one is not watched any more
    assert gate.approvals._deadlines == []


# --- expiries that race -------------------------------------------------------------------------


def test_an_expiry_that_loses_the_race_is_recorded_as_the_winner_by_the_gate_call(
    clock: ManualClock,
) -> None:
    class RacingStore(MemoryApprovalStore):
        def resolve(self, resolution: Resolution) -> Resolution:
            if resolution.outcome == "expired":  # a human got in just before the clock
                super().resolve(
                    Resolution(resolution.decision_id, "rejected", "bob", resolution.resolved_ns)
                )
            return super().resolve(resolution)

    gate, sink, _ = make_gate(clock, store=RacingStore(), poll_s=LONG_POLL)
    decision = held(gate)
    clock.advance(600 * S)
    gate.check(search())  # no wait, no poll: the sweep itself records what won
    assert [
        (r["decision_id"], r["outcome"], r["approver"]) for r in sink.records("/approvals")
    ] == [(decision.decision_id, "rejected", "bob")]
    assert gate.approvals._known == {}


class ClaimedElsewhere(MemoryApprovalStore):
    """A real memory store where another agent claims to log each resolution once stored."""

    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    def get(self, decision_id: str) -> tuple[PendingApproval, Resolution | None]:
        self.gets += 1
        return super().get(decision_id)

    def resolve(self, resolution: Resolution) -> Resolution:
        stored = super().resolve(resolution)
        now = time.time_ns()
        claimed = self.claim_recording(
            resolution.decision_id, "another-agent", now_ns=now, until_ns=now + CLAIM_LEASE_NS
        )
        assert claimed
        return stored


def test_an_expiry_another_agent_logs_is_looked_at_again_a_poll_interval_later(
    clock: ManualClock,
) -> None:
    store = ClaimedElsewhere()
    gate, sink, _ = make_gate(clock, store=store, poll_s=LONG_POLL)
    decision = held(gate)
    clock.advance(600 * S)
    gate.approvals.sweep()  # stores the expiry; the other agent holds the claim
    assert sink.records("/approvals") == ()
    reads = store.gets
    gate.approvals.sweep()  # at the same moment: no second look at the store
    assert store.gets == reads

    store.mark_recorded(decision.decision_id, "ab" * 32, 7)  # the other agent logged it
    clock.advance(math.ceil(LONG_POLL * S))
    gate.approvals.sweep()  # a poll interval later: one look, and it is handed over
    assert store.gets == reads + 1
    assert gate.approvals._known == {}
    assert sink.records("/approvals") == ()  # logged once, by the other agent
    handed = gate.approvals.wait(decision.decision_id, timeout_s=0)
    assert (handed.outcome, handed.approval_sha256, handed.wait_ns) == ("expired", "ab" * 32, 7)


def test_a_restarted_queue_takes_over_a_resolution_whose_claimant_gave_up(
    clock: ManualClock,
) -> None:
    store = MemoryApprovalStore()
    first, _, _ = make_gate(clock, store=store)
    decision = held(first)
    store.resolve(Resolution(decision.decision_id, "approved", "bob", clock.time_ns()))
    now = time.time_ns()
    assert store.claim_recording(
        decision.decision_id, "another-agent", now_ns=now, until_ns=now + CLAIM_LEASE_NS
    )
    restarted, sink, _ = make_gate(clock, store=store, sink=MemoryAuditSink(), poll_s=LONG_POLL)
    assert sink.records("/approvals") == ()  # the other agent is logging it
    now = time.time_ns()
    store.claim_recording(decision.decision_id, "another-agent", now_ns=now, until_ns=now)
    restarted.approvals.sweep(force=True)  # the other agent gave up: this queue logs it
    assert _logged(sink) == [(decision.decision_id, "approved")]
    assert store.unrecorded() == []


def test_a_decision_resolved_while_it_is_registered_is_not_watched_past_its_deadline(
    clock: ManualClock,
) -> None:
    class ResolvedAsItIsAdded(MemoryApprovalStore):
        """A real memory store: an operator resolves a decision the moment it is stored,
        before the gate's check has returned (the decision id was listed in the store)."""

        gate: Gate | None = None

        def add(self, pending: PendingApproval) -> None:
            super().add(pending)
            assert self.gate is not None
            approvals = self.gate.approvals
            resolver = threading.Thread(
                target=approvals.resolve,
                args=(pending.decision_id,),
                kwargs={"approved": True, "approver": "alice"},
            )
            resolver.start()
            resolver.join(timeout=BOUND)

    store = ResolvedAsItIsAdded()
    gate, sink, _ = make_gate(clock, store=store)
    store.gate = gate
    decision = held(gate)
    assert _logged(sink) == [(decision.decision_id, "approved")]
    clock.advance(600 * S)
    gate.check(search())  # its old deadline comes due: settled already, nothing to expire
    assert _logged(sink) == [(decision.decision_id, "approved")]
    assert gate.approvals._known == {}


# --- wake-ups that race -------------------------------------------------------------------------


def test_a_resolution_between_a_waiters_look_and_its_pause_ends_the_wait_at_once(
    clock: ManualClock,
) -> None:
    class ResolvedWhileLooking(MemoryApprovalStore):
        """A real memory store: just after the waiter's look finds the decision pending,
        a resolver in this process settles it, before the waiter can pause."""

        gate: Gate | None = None
        waiter_reads = 0

        def get(self, decision_id: str) -> tuple[PendingApproval, Resolution | None]:
            found = super().get(decision_id)
            if threading.current_thread().name == "waiter":
                self.waiter_reads += 1
                if self.waiter_reads == 2:  # its first look in the loop (after the initial read)
                    assert self.gate is not None
                    resolver = threading.Thread(
                        target=self.gate.approvals.resolve,
                        args=(decision_id,),
                        kwargs={"approved": True, "approver": "alice"},
                    )
                    resolver.start()
                    resolver.join(timeout=BOUND)
            return found

    store = ResolvedWhileLooking()
    gate, _, _ = make_gate(clock, store=store, poll_s=LONG_POLL)
    store.gate = gate
    decision = held(gate)
    results: list[Approval] = []

    waiter = threading.Thread(
        target=lambda: results.append(gate.approvals.wait(decision.decision_id, math.inf)),
        name="waiter",
        daemon=True,  # left to its poll it would outlast the test
    )
    waiter.start()
    waiter.join(timeout=BOUND)
    assert store.waiter_reads >= 2
    assert [a.outcome for a in results] == ["approved"]


def test_a_waiter_that_gives_up_leaves_the_others_on_its_decision_waiting(
    clock: ManualClock,
) -> None:
    gate, _, _ = make_gate(clock, poll_s=LONG_POLL)
    decision = held(gate)

    async def main() -> tuple[Approval, Approval]:
        staying = asyncio.create_task(gate.approvals.wait_async(decision.decision_id, math.inf))
        for _ in range(int(BOUND / 0.01)):  # until it is registered, bounded
            if decision.decision_id in gate.approvals._async_waiters:
                break
            await asyncio.sleep(0.01)
        assert decision.decision_id in gate.approvals._async_waiters
        with pytest.raises(TimeoutError):
            await gate.approvals.wait_async(decision.decision_id, 0)  # another one gives up
        approval = await asyncio.to_thread(
            gate.approvals.resolve, decision.decision_id, approved=True, approver="alice"
        )
        return approval, await asyncio.wait_for(staying, BOUND)

    approval, woken = asyncio.run(main())
    assert woken == approval
    assert gate.approvals._async_waiters == {}
