"""`@gate.guard(..., wait=True)`: a pending call waits for its approval, then runs or is denied."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from runtime import (
    ActionDenied,
    ApprovalError,
    ApprovalPending,
    Gate,
    GuardError,
    PendingApproval,
)
from runtime.testing import ManualClock
from tests.runtime.approvals import S, make_gate


def when_held(gate: Gate, then: Callable[[PendingApproval], None]) -> threading.Thread:
    """Start a thread that waits until a decision is pending, then calls ``then`` with it."""

    def watch() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            waiting = gate.approvals.pending()
            if waiting:
                then(waiting[0])
                return
            time.sleep(0.005)

    thread = threading.Thread(target=watch)
    thread.start()
    return thread


def guarded_refund(gate: Gate, calls: list[tuple[str, int, str]]) -> Callable[..., str]:
    @gate.guard(verb="refund", resource="payments:{order}", agent="support", wait=True)
    def refund(order: str, amount: int, currency: str = "USD") -> str:
        calls.append((order, amount, currency))
        return f"refunded {amount} {currency}"

    return refund


def test_an_approved_call_runs_with_the_approved_arguments() -> None:
    gate, sink, _ = make_gate(ManualClock(), poll_s=0.01)
    calls: list[tuple[str, int, str]] = []
    refund = guarded_refund(gate, calls)
    helper = when_held(
        gate,
        lambda held: gate.approvals.resolve(held.decision_id, approved=True, approver="alice"),
    )

    # The policy narrows the currency to EUR: what runs is what was approved.
    assert refund("o-1", 100) == "refunded 100 EUR"
    helper.join()

    assert calls == [("o-1", 100, "EUR")]
    (record,) = sink.records("/approvals")
    assert (record["outcome"], record["approver"], record["final_verdict"]) == (
        "approved",
        "alice",
        "narrow",
    )


def test_a_rejected_call_is_denied_and_never_runs() -> None:
    gate, _, _ = make_gate(ManualClock(), poll_s=0.01)
    calls: list[tuple[str, int, str]] = []
    refund = guarded_refund(gate, calls)
    helper = when_held(
        gate, lambda held: gate.approvals.resolve(held.decision_id, approved=False, approver="bob")
    )

    with pytest.raises(ActionDenied, match="its approval was rejected by bob") as raised:
        refund("o-1", 100)
    helper.join()

    assert calls == []
    assert raised.value.approval is not None
    assert raised.value.approval.outcome == "rejected"
    assert raised.value.decision.verdict == "pending"


def test_an_expired_call_is_denied_as_expired_never_as_rejected() -> None:
    clock = ManualClock()
    gate, sink, _ = make_gate(clock, poll_s=0.01)
    calls: list[tuple[str, int, str]] = []
    refund = guarded_refund(gate, calls)
    helper = when_held(gate, lambda held: clock.advance(601 * S))  # the rule gives 600 s

    with pytest.raises(ActionDenied, match="its approval expired") as raised:
        refund("o-1", 100)
    helper.join()

    assert calls == []
    assert raised.value.approval is not None
    assert raised.value.approval.outcome == "expired"
    assert [r["outcome"] for r in sink.records("/approvals")] == ["expired"]


def test_without_wait_a_pending_call_still_raises() -> None:
    gate, _, _ = make_gate(ManualClock())

    @gate.guard(verb="refund", resource="payments:{order}", agent="support")
    def refund(order: str, amount: int) -> None:
        raise AssertionError("must not run")

    with pytest.raises(ApprovalPending):
        refund("o-1", 100)
    assert len(gate.approvals.pending()) == 1


def test_an_approval_runs_the_call_once_even_if_reused() -> None:
    gate, _, _ = make_gate(ManualClock(), poll_s=0.01)
    calls: list[tuple[str, int, str]] = []
    refund = guarded_refund(gate, calls)
    approvals: list[Any] = []
    helper = when_held(
        gate,
        lambda held: approvals.append(
            gate.approvals.resolve(held.decision_id, approved=True, approver="alice")
        ),
    )
    refund("o-1", 100)
    helper.join()

    # The approval was spent by the guarded call: it cannot run the action a second time.
    with pytest.raises(ApprovalError):
        gate.approvals.execute(approvals[0], {"amount": 100, "currency": "EUR", "order": "o-1"})
    assert len(calls) == 1


@pytest.mark.parametrize("wait", ["yes", 1, None])
def test_wait_must_be_a_bool(wait: object) -> None:
    gate, _, _ = make_gate(ManualClock())
    with pytest.raises(GuardError, match="wait must be True or False"):
        gate.guard(verb="refund", resource="payments:x", agent="support", wait=wait)(  # type: ignore[arg-type]
            lambda: None
        )


def test_an_async_call_waits_on_the_loop_and_runs_once_approved() -> None:
    gate, _, _ = make_gate(ManualClock(), poll_s=0.01)
    calls: list[tuple[str, int, str]] = []

    @gate.guard(verb="refund", resource="payments:{order}", agent="support", wait=True)
    async def refund(order: str, amount: int, currency: str = "USD") -> str:
        calls.append((order, amount, currency))
        return "done"

    async def main() -> tuple[str, int]:
        ticks = 0

        async def tick() -> None:  # runs while the refund waits: the loop is not blocked
            nonlocal ticks
            while not calls:
                ticks += 1
                await asyncio.sleep(0.005)

        helper = when_held(
            gate,
            lambda held: gate.approvals.resolve(held.decision_id, approved=True, approver="bob"),
        )
        result, _ = await asyncio.gather(refund("o-9", 7), tick())
        await asyncio.to_thread(helper.join)
        return result, ticks

    result, ticks = asyncio.run(main())
    assert result == "done"
    assert calls == [("o-9", 7, "EUR")]
    assert ticks >= 1


def test_an_async_rejection_is_denied() -> None:
    gate, _, _ = make_gate(ManualClock(), poll_s=0.01)

    @gate.guard(verb="refund", resource="payments:{order}", agent="support", wait=True)
    async def refund(order: str, amount: int) -> None:
        raise AssertionError("must not run")

    helper = when_held(
        gate, lambda held: gate.approvals.resolve(held.decision_id, approved=False, approver="bob")
    )
    with pytest.raises(ActionDenied, match="rejected by bob"):
        asyncio.run(refund("o-1", 100))
    helper.join()


def test_an_async_wait_leaves_the_loop_running_while_the_call_is_pending() -> None:
    # The resolver waits until the loop has run on for a while after the decision is
    # pending: a wait that blocked the loop (a thread's wait on it) would stop the ticks.
    gate, _, _ = make_gate(ManualClock(), poll_s=0.01)
    ran: list[str] = []
    ticks = [0]
    progressed: list[bool] = []

    @gate.guard(verb="refund", resource="payments:{order}", agent="support", wait=True)
    async def refund(order: str, amount: int, currency: str = "USD") -> str:
        ran.append(order)
        return "done"

    def approve(held: PendingApproval) -> None:
        seen = ticks[0]
        give_up = time.monotonic() + 10  # a bound for a blocked loop, not a timing claim
        while ticks[0] < seen + 20 and time.monotonic() < give_up:
            time.sleep(0.005)
        progressed.append(ticks[0] >= seen + 20)
        gate.approvals.resolve(held.decision_id, approved=True, approver="bob")

    async def main() -> str:
        async def tick() -> None:
            while not ran:
                ticks[0] += 1
                await asyncio.sleep(0.001)

        helper = when_held(gate, approve)
        result, _ = await asyncio.gather(refund("o-9", 7), tick())
        await asyncio.to_thread(helper.join)
        return result

    assert asyncio.run(main()) == "done"
    assert progressed == [True]
    assert ran == ["o-9"]


def test_an_async_call_with_wait_that_is_allowed_or_denied_does_not_wait() -> None:
    gate, sink, _ = make_gate(ManualClock())
    ran: list[str] = []

    @gate.guard(verb="search", resource="tool:{name}", agent="researcher", wait=True)
    async def search(name: str, query: str) -> str:
        ran.append(query)
        return query

    @gate.guard(verb="launch", resource="tool:{name}", agent="researcher", wait=True)
    async def launch(name: str) -> None:
        raise AssertionError("must not run")

    assert asyncio.run(search("web", "q")) == "q"
    with pytest.raises(ActionDenied):
        asyncio.run(launch("rocket"))
    assert ran == ["q"]
    assert [r["verdict"] for r in sink.records("/decisions")] == ["allow", "deny"]
    assert gate.approvals.pending() == ()
