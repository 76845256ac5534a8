"""`wait_async`: waiting for approvals on an event loop, without a thread per waiter (SPEC §3)."""

from __future__ import annotations

import asyncio
import math
import os
import threading
from typing import Any

import pytest

from runtime import (
    Approval,
    ApprovalError,
    MemoryApprovalStore,
    PendingApproval,
    Resolution,
    check_resolution,
)
from runtime.testing import ManualClock
from tests.runtime.approvals import S, held, make_gate, refund

WAITERS = 1000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def test_a_thousand_waiters_on_one_loop_cost_no_thread_each(clock: ManualClock) -> None:
    # A poll interval longer than the test: every wake-up comes from the resolutions.
    gate, sink, _ = make_gate(clock, poll_s=60)
    decisions = [held(gate, refund(100 + i % 800)) for i in range(WAITERS)]
    counts: dict[str, int] = {}

    async def main() -> list[Approval]:
        counts["before"] = threading.active_count()
        tasks = [
            asyncio.create_task(gate.approvals.wait_async(d.decision_id, timeout_s=120))
            for d in decisions
        ]
        for _ in range(5):
            await asyncio.sleep(0)  # every waiter reaches its await
        counts["waiting"] = threading.active_count()
        assert not any(task.done() for task in tasks)

        def approve_all() -> None:
            for d in decisions:
                gate.approvals.resolve(d.decision_id, approved=True, approver="alice")

        resolver = threading.Thread(target=approve_all)
        resolver.start()
        results = await asyncio.gather(*tasks)
        resolver.join()
        return results

    results = asyncio.run(main())
    # A thousand waiters, not a thousand threads: the store is read off the loop, in the
    # loop's default executor, a pool of at most min(32, cpus + 4) threads.
    assert counts["waiting"] <= counts["before"] + min(32, (os.cpu_count() or 1) + 4)
    assert [a.decision_id for a in results] == [d.decision_id for d in decisions]
    assert {a.outcome for a in results} == {"approved"}
    assert len(sink.records("/approvals")) == WAITERS


def test_the_loop_keeps_running_while_a_waiter_waits(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock, poll_s=0.01)
    decision = held(gate)

    async def main() -> tuple[int, Approval]:
        ticks = 0
        waiter = asyncio.create_task(gate.approvals.wait_async(decision.decision_id, 60))
        while ticks < 20:
            await asyncio.sleep(0.001)
            ticks += 1
        assert not waiter.done()
        await asyncio.to_thread(
            gate.approvals.resolve, decision.decision_id, approved=False, approver="bob"
        )
        return ticks, await waiter

    ticks, approval = asyncio.run(main())
    assert ticks == 20
    assert approval.outcome == "rejected"


def test_wait_async_raises_timeout_error_and_the_decision_stays_pending(
    clock: ManualClock,
) -> None:
    gate, sink, _ = make_gate(clock, poll_s=0.01)
    decision = held(gate)
    for timeout in (0, 0.03):
        with pytest.raises(TimeoutError, match="stays pending"):
            asyncio.run(gate.approvals.wait_async(decision.decision_id, timeout))
    assert sink.records("/approvals") == ()
    assert [p.decision_id for p in gate.approvals.pending()] == [decision.decision_id]
    assert gate.approvals._async_waiters == {}  # a waiter that gave up is forgotten


def test_wait_async_sees_a_resolution_made_through_the_store(clock: ManualClock) -> None:
    gate, sink, store = make_gate(clock, poll_s=0.01)
    decision = held(gate)

    async def main() -> Approval:
        waiter = asyncio.create_task(gate.approvals.wait_async(decision.decision_id, 60))
        await asyncio.sleep(0.02)
        pending, _ = store.get(decision.decision_id)
        resolution = Resolution(decision.decision_id, "approved", "bob", clock.time_ns())
        check_resolution(pending, resolution)
        store.resolve(resolution)  # as another process would
        return await waiter

    approval = asyncio.run(main())
    assert approval.outcome == "approved"
    assert sink.records("/approvals")[0]["approver"] == "bob"
    assert store.unrecorded() == []


def test_wait_async_sees_the_expiry(clock: ManualClock) -> None:
    gate, sink, _ = make_gate(clock, poll_s=0.01)
    decision = held(gate)

    async def main() -> Approval:
        waiter = asyncio.create_task(gate.approvals.wait_async(decision.decision_id, 60))
        await asyncio.sleep(0.02)
        clock.advance(600 * S)
        return await waiter

    approval = asyncio.run(main())
    assert approval.outcome == "expired"
    assert approval.wait_ns == 600 * S
    assert sink.records("/approvals")[0]["outcome"] == "expired"


def test_wait_async_returns_an_earlier_resolution_at_once(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    assert asyncio.run(gate.approvals.wait_async(decision.decision_id, 0)) is approval


def test_acheck_wait_async_and_execute_together(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)

    async def main() -> dict[str, Any]:
        decision = await gate.acheck(refund(250, "USD"))
        assert decision.verdict == "pending"
        loop = asyncio.get_running_loop()
        loop.call_later(
            0.01,
            lambda: gate.approvals.resolve(decision.decision_id, approved=True, approver="bob"),
        )
        approval = await gate.approvals.wait_async(decision.decision_id, 60)
        return gate.approvals.execute(approval, decision.args)

    assert asyncio.run(main()) == {"amount": 250, "currency": "EUR"}


def test_a_cancelled_waiter_leaves_the_decision_resolvable(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)

    async def main() -> None:
        waiter = asyncio.create_task(gate.approvals.wait_async(decision.decision_id, 60))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    asyncio.run(main())
    assert gate.approvals._async_waiters == {}  # the cancelled waiter left nothing behind
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    assert approval.outcome == "approved"


@pytest.mark.parametrize(
    ("timeout", "error"),
    [(math.nan, ValueError), (-1, ValueError), ("5", TypeError), (None, TypeError)],
)
def test_wait_async_refuses_bad_timeouts(clock: ManualClock, timeout: Any, error: type) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    with pytest.raises(error, match="timeout_s"):
        asyncio.run(gate.approvals.wait_async(decision.decision_id, timeout))


@pytest.mark.parametrize("bad_id", [None, 7, "x" * 100_000, "\x00"])
def test_wait_async_refuses_bad_ids(clock: ManualClock, bad_id: Any) -> None:
    gate, _, _ = make_gate(clock)
    with pytest.raises(ApprovalError, match="a decision id is a UUID"):
        asyncio.run(gate.approvals.wait_async(bad_id, 1))


def test_many_async_waiters_share_one_poll_of_the_store(clock: ManualClock) -> None:
    class CountingStore(MemoryApprovalStore):
        gets = 0
        polls = 0

        def get(self, decision_id: str) -> tuple[PendingApproval, Resolution | None]:
            CountingStore.gets += 1
            return super().get(decision_id)

        def unrecorded(self) -> list[tuple[PendingApproval, Resolution]]:
            CountingStore.polls += 1
            return super().unrecorded()

    gate, _, _ = make_gate(clock, store=CountingStore(), poll_s=0.005)
    decisions = [held(gate, refund(100 + i)) for i in range(200)]

    async def main() -> None:
        tasks = [
            asyncio.create_task(gate.approvals.wait_async(d.decision_id, timeout_s=120))
            for d in decisions
        ]
        await asyncio.sleep(0.1)
        CountingStore.gets = CountingStore.polls = 0
        # Every waiter wakes to look at the store several times. 200 waiters waking every
        # 5 ms saturate a loaded machine, so wait for three polls, not for a fixed time.
        for _ in range(1_000):
            if CountingStore.polls >= 3:
                break
            await asyncio.sleep(0.01)
        gets, polls = CountingStore.gets, CountingStore.polls
        assert polls >= 3  # the waiters do poll, once per interval
        assert gets >= 2 * len(decisions)  # two polls at least are complete
        # One sweep per poll interval for all of them, not one per waiter per wake-up.
        assert polls * 20 <= gets
        clock.advance(600 * S)
        await asyncio.gather(*tasks)

    asyncio.run(main())


def test_wait_async_measures_a_decision_of_another_gate_from_when_it_began_waiting(
    clock: ManualClock,
) -> None:
    store = MemoryApprovalStore()
    first, _, _ = make_gate(clock, store=store)
    second, sink, _ = make_gate(clock, store=store, poll_s=0.01)
    decision = held(first)
    clock.advance(4 * S)  # before the second gate looks: not part of its wait

    async def main() -> Approval:
        waiter = asyncio.create_task(second.approvals.wait_async(decision.decision_id, 60))
        await asyncio.sleep(0.02)
        clock.advance(5 * S)
        store.resolve(Resolution(decision.decision_id, "approved", "alice", clock.time_ns()))
        return await waiter

    approval = asyncio.run(main())
    assert approval.wait_ns == 5 * S
    assert sink.records("/approvals")[0]["wait_ns"] == 5 * S


def test_an_async_waiter_records_a_due_expiry_without_polling_the_store(
    clock: ManualClock,
) -> None:
    class CountingStore(MemoryApprovalStore):
        polls = 0

        def unrecorded(self) -> list[tuple[PendingApproval, Resolution]]:
            CountingStore.polls += 1
            return super().unrecorded()

    gate, sink, _ = make_gate(clock, store=CountingStore(), poll_s=60)
    waiting = held(gate, refund(100))  # 600 s
    short = held(gate, refund(5000))  # 60 s
    polls_at_start = CountingStore.polls

    async def main() -> None:
        waiter = asyncio.create_task(gate.approvals.wait_async(waiting.decision_id, 0.2))
        await asyncio.sleep(0.01)
        clock.advance(60 * S)
        with pytest.raises(TimeoutError):
            await waiter

    asyncio.run(main())
    (record,) = sink.records("/approvals")
    assert (record["decision_id"], record["outcome"]) == (short.decision_id, "expired")
    assert CountingStore.polls == polls_at_start  # the poll was not due: only the expiry was


class WatchedStore(MemoryApprovalStore):
    """The real memory store, noting the thread of every call (to catch one on the loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []
        self.watching = False

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        if name.startswith("_") or not callable(value):
            return value
        threads = super().__getattribute__("threads")

        def called(*args: Any, **kwargs: Any) -> Any:
            if self.watching:  # noted where it runs, not where it was looked up
                threads.append(threading.get_ident())
            return value(*args, **kwargs)

        return called


def test_the_store_is_never_touched_on_the_loop(clock: ManualClock) -> None:
    # A SQLite store can wait for a lock up to its busy timeout: the loop must not.
    store = WatchedStore()
    gate, _, _ = make_gate(clock, store=store, poll_s=0.01)
    decisions = [held(gate, refund(100 + i)) for i in range(3)]

    async def main() -> list[Approval]:
        store.watching = True
        tasks = [
            asyncio.create_task(gate.approvals.wait_async(d.decision_id, timeout_s=30))
            for d in decisions
        ]
        await asyncio.sleep(0.05)  # a few polls of their own
        resolver = threading.Thread(
            target=lambda: [
                gate.approvals.resolve(d.decision_id, approved=True, approver="alice")
                for d in decisions
            ]
        )
        resolver.start()
        done = await asyncio.gather(*tasks)
        resolver.join()
        store.watching = False
        return done

    loop_thread = threading.get_ident()  # asyncio.run runs its loop on this thread
    results = asyncio.run(main())
    assert [a.outcome for a in results] == ["approved"] * 3
    assert store.threads  # the store was used, by the pollers and the resolver
    assert loop_thread not in store.threads


def test_a_waiter_is_woken_by_a_resolution_not_by_its_poll(clock: ManualClock) -> None:
    # Polls every 60 s, waits at most 20: only the wake-up can end the wait in time.
    gate, _, _ = make_gate(clock, poll_s=60)
    sync_decision, async_decision = held(gate, refund(100)), held(gate, refund(200))

    def resolve_soon() -> None:
        threading.Event().wait(0.2)
        for decision in (sync_decision, async_decision):
            gate.approvals.resolve(decision.decision_id, approved=False, approver="alice")

    async def wait_async() -> Approval:
        return await gate.approvals.wait_async(async_decision.decision_id, timeout_s=20)

    resolver = threading.Thread(target=resolve_soon)
    resolver.start()
    approval = gate.approvals.wait(sync_decision.decision_id, timeout_s=20)
    assert approval.outcome == "rejected"
    assert asyncio.run(wait_async()).outcome == "rejected"
    resolver.join()


def test_a_busy_gate_delivers_to_an_async_waiter_what_another_queue_logged(
    clock: ManualClock,
) -> None:
    # The waiter's own poll is a minute away; the gate's calls take the poll slot. Each
    # such poll must look for the waiters too, or the resolution would wait for the minute.
    store = MemoryApprovalStore()
    gate, _, _ = make_gate(clock, store=store, poll_s=60)
    decision = held(gate)
    other, other_sink, _ = make_gate(clock, store=store)

    async def main() -> Approval:
        task = asyncio.create_task(gate.approvals.wait_async(decision.decision_id, timeout_s=20))
        while not gate.approvals._async_waiters:  # registered (white-box)
            await asyncio.sleep(0.01)
        store.resolve(Resolution(decision.decision_id, "approved", "bob", clock.time_ns()))
        other.approvals.sweep(force=True)  # the other agent logs it
        await asyncio.to_thread(gate.approvals.sweep, force=True)  # a gate call here
        return await task

    approval = asyncio.run(main())
    (entry,) = [e for e in other_sink.entries if e.topic == "/approvals"]
    assert approval.approval_sha256 == entry.sha256
