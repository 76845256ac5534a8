"""How the approval queue paces itself in real time: looks at the store, pauses, patience.

Real time is stopped here (`tests.runtime.approval_time`): it moves only when a
test, a sleep or a waiter's pause moves it, so each test states exactly when
the store is looked at and which pauses a waiter asks for (ADR 0016: polling
and a wait's own timeout run on real time; deadlines on the gate's clock).
"""

from __future__ import annotations

import math
import time

import pytest

from runtime import ApprovalError, AuditError, MemoryApprovalStore, Resolution
from runtime._approval_recorder import CLAIM_LEASE_NS
from runtime.testing import ManualClock
from tests.runtime.approval_time import JumpingLoop, StoppedTime, run_jumping, stop_real_time
from tests.runtime.approvals import S, held, make_gate, search

POLL_S = 2  # seconds; an int, so that one interval is exactly 2_000_000_000 ns


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def real(monkeypatch: pytest.MonkeyPatch) -> StoppedTime:
    return stop_real_time(monkeypatch)


class ClaimedElsewhere(MemoryApprovalStore):
    """A real memory store where another agent claims to log every resolution the moment it
    is stored, and then logs nothing (it hangs, or died): no queue here may log it.

    ``claims`` counts this process's attempts to claim; more than ``max_claims`` stop
    the caller with an AssertionError (a resolver that never pauses would spin).
    """

    def __init__(self, max_claims: int = 1_000) -> None:
        super().__init__()
        self.claims = 0
        self.max_claims = max_claims

    def claim_recording(self, decision_id: str, claimant: str, **times: int) -> bool:
        if claimant != "another-agent":
            self.claims += 1
            if self.claims > self.max_claims:
                raise AssertionError(f"more than {self.max_claims} claims: a loop without pause")
        return super().claim_recording(decision_id, claimant, **times)

    def resolve(self, resolution: Resolution) -> Resolution:
        stored = super().resolve(resolution)
        now = time.time_ns()  # claims are leased on the real wall clock, as the recorder does
        claimed = self.claim_recording(
            resolution.decision_id, "another-agent", now_ns=now, until_ns=now + CLAIM_LEASE_NS
        )
        assert claimed
        return stored


def _outcomes(sink: object) -> list[str]:
    return [r["outcome"] for r in sink.records("/approvals")]  # type: ignore[attr-defined]


# --- the poll: one look at the store per interval ---------------------------------------------


def test_the_store_is_looked_at_exactly_one_poll_interval_after_the_last_look(
    real: StoppedTime, clock: ManualClock
) -> None:
    gate, sink, store = make_gate(clock, poll_s=POLL_S)  # the interval starts now
    first, second = held(gate), held(gate)
    store.resolve(Resolution(first.decision_id, "approved", "bob", clock.time_ns()))

    real.advance(POLL_S * S - 1)
    gate.check(search())
    assert _outcomes(sink) == []  # a nanosecond early: no look
    real.advance(1)
    gate.check(search())
    assert _outcomes(sink) == ["approved"]  # due: looked, and recorded what it found

    store.resolve(Resolution(second.decision_id, "rejected", "bob", clock.time_ns()))
    gate.check(search())
    real.advance(POLL_S * S - 1)
    gate.check(search())
    assert _outcomes(sink) == ["approved"]  # the next interval began at that look
    real.advance(1)
    gate.check(search())
    assert _outcomes(sink) == ["approved", "rejected"]


def test_a_look_the_gate_skips_does_not_put_off_the_next(
    real: StoppedTime, clock: ManualClock
) -> None:
    gate, sink, store = make_gate(clock, poll_s=POLL_S)
    decision = held(gate)
    for _ in range(4):  # gate calls within the interval take no look, and leave it as it was
        real.advance(POLL_S * S // 4 - 1)
        gate.check(search())
    store.resolve(Resolution(decision.decision_id, "approved", "bob", clock.time_ns()))
    real.advance(4)
    gate.check(search())
    assert _outcomes(sink) == ["approved"]


# --- an async waiter's pauses ------------------------------------------------------------------


def test_a_waiter_pauses_one_poll_interval_at_a_time_then_what_is_left_of_its_timeout(
    real: StoppedTime, clock: ManualClock
) -> None:
    gate, sink, _ = make_gate(clock, poll_s=POLL_S)
    decision = held(gate)  # its deadline is ten minutes away
    loop = JumpingLoop(real, clock)

    async def main() -> None:
        with pytest.raises(TimeoutError, match="stays pending"):
            await gate.approvals.wait_async(decision.decision_id, timeout_s=5)

    run_jumping(loop, main)
    assert loop.pauses == [2.0, 2.0, 1.0]  # and it gave up at exactly 5 s, not a pause later
    # One hop to a worker for its first read, one per poll taken (at 2 s and 4 s): the
    # looks in between, with nothing due, cost no thread.
    assert loop.hops == 3
    assert sink.records("/approvals") == ()


def test_an_async_waiter_sees_a_resolution_made_elsewhere_at_its_first_poll(
    real: StoppedTime, clock: ManualClock
) -> None:
    gate, sink, store = make_gate(clock, poll_s=POLL_S)
    decision = held(gate)
    store.resolve(Resolution(decision.decision_id, "approved", "bob", clock.time_ns()))  # by CLI
    loop = JumpingLoop(real, clock)

    async def main() -> str:
        approval = await gate.approvals.wait_async(decision.decision_id, timeout_s=5)
        return approval.outcome

    assert run_jumping(loop, main) == "approved"
    assert loop.pauses == [2.0]  # one interval, then the poll found it
    assert loop.hops == 2  # its first read, and that poll
    assert _outcomes(sink) == ["approved"]


def test_a_waiter_with_a_nanosecond_of_its_timeout_left_pauses_that_nanosecond(
    real: StoppedTime, clock: ManualClock
) -> None:
    gate, _, _ = make_gate(clock, poll_s=POLL_S)
    decision = held(gate)
    loop = JumpingLoop(real, clock)

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await gate.approvals.wait_async(decision.decision_id, timeout_s=4.000000001)

    run_jumping(loop, main)
    assert loop.pauses == [2.0, 2.0, 1e-9]


def test_a_waiter_wakes_at_the_deadline_and_returns_the_expiry_it_swept(
    real: StoppedTime, clock: ManualClock
) -> None:
    gate, sink, _ = make_gate(clock, poll_s=POLL_S)
    decision = held(gate)
    clock.advance(600 * S - S // 2)  # half a second before its deadline
    loop = JumpingLoop(real, clock)

    async def main() -> str:
        approval = await gate.approvals.wait_async(decision.decision_id, timeout_s=math.inf)
        return approval.outcome

    assert run_jumping(loop, main) == "expired"
    assert loop.pauses == [0.5]  # to the deadline, not a whole interval; none after the sweep
    assert _outcomes(sink) == ["expired"]


def test_a_deadline_a_nanosecond_away_is_waited_for_a_millisecond(
    real: StoppedTime, clock: ManualClock
) -> None:
    gate, _, _ = make_gate(clock, poll_s=POLL_S)
    decision = held(gate)
    clock.advance(600 * S - 1)
    loop = JumpingLoop(real, clock)

    async def main() -> str:
        approval = await gate.approvals.wait_async(decision.decision_id, timeout_s=math.inf)
        return approval.outcome

    assert run_jumping(loop, main) == "expired"
    assert loop.pauses == [0.001]  # a floor, so that a waiter never spins on a deadline


def test_past_the_deadline_a_waiter_looks_once_per_interval_while_another_agent_logs_it(
    real: StoppedTime, clock: ManualClock
) -> None:
    gate, sink, store = make_gate(clock, store=ClaimedElsewhere(), poll_s=POLL_S)
    decision = held(gate)
    clock.advance(600 * S)  # exactly at the deadline
    loop = JumpingLoop(real, clock)

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await gate.approvals.wait_async(decision.decision_id, timeout_s=POLL_S)

    run_jumping(loop, main)
    assert loop.pauses == [2.0]  # the deadline is behind it: no cut to it, no spinning
    assert sink.records("/approvals") == ()  # the other agent holds the claim
    _, resolution = store.get(decision.decision_id)
    assert resolution is not None
    assert resolution.outcome == "expired"


# --- a resolver's patience with another agent's claim -----------------------------------------


def test_a_resolver_gives_up_a_lease_and_one_interval_after_another_agent_claimed_its_record(
    real: StoppedTime, clock: ManualClock
) -> None:
    store = ClaimedElsewhere()
    gate, sink, _ = make_gate(clock, store=store, poll_s=1)
    decision = held(gate)
    with pytest.raises(AuditError, match=r"is stored, but no log holds it yet \(another process"):
        gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    # It looked once per poll interval, and gave up when the lease and one more interval
    # had passed: exactly then, not an interval later.
    assert real.sleeps == [1.0] * (CLAIM_LEASE_NS // S + 1)
    assert store.claims == len(real.sleeps) + 1  # a look, then a pause, ..., a last look
    assert sink.records("/approvals") == ()
    ((pending, resolution),) = store.unrecorded()  # stored: a later sweep may still log it
    assert (pending.decision_id, resolution.outcome) == (decision.decision_id, "approved")
    with pytest.raises(ApprovalError, match="already resolved"):
        gate.approvals.resolve(decision.decision_id, approved=False, approver="alice")


def test_a_resolver_whose_record_lands_at_once_does_not_pause(
    real: StoppedTime, clock: ManualClock
) -> None:
    gate, sink, _ = make_gate(clock, poll_s=1)
    decision = held(gate)
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    assert approval.outcome == "approved"
    assert real.sleeps == []
    assert _outcomes(sink) == ["approved"]
