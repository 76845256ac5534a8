"""The core every adapter shares: the action convention and what one gated call comes to."""

from __future__ import annotations

import asyncio
import threading

import pytest

from audit import MemoryAuditSink
from runtime import Action, ApprovalError, Decision, Gate, Policy, RuntimeVerdict
from runtime.integrations import (
    GatedCall,
    approved,
    asettle,
    judged,
    refusal_text,
    resolve_approval,
    resolve_held,
    settle,
    tool_action,
)
from runtime.testing import ManualClock
from tests.runtime.conftest import POLICY

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(step_ns=1_000)


@pytest.fixture
def gate(clock: ManualClock) -> Gate:
    return Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), clock=clock)


def test_tool_action_follows_the_convention() -> None:
    action = tool_action("researcher", "search", {"q": "x"})
    assert (action.agent, action.verb, action.resource) == ("researcher", "search", "tool:search")
    assert action.args == {"q": "x"}


def held(gate: Gate) -> Decision:
    # The conftest policy's approval rule covers refund on payments:*, so ask for it there.
    return gate.check(Action("bot", "refund", "payments:c-1", {"amount": 80}))


def test_judged_runs_permitted_calls_with_the_effective_arguments(gate: Gate) -> None:
    decision = gate.check(Action("bot", "query", "db:customers", {"table": "t", "limit": 9999}))
    call = judged(decision)
    assert decision.verdict is RuntimeVerdict.NARROW
    assert call.runs
    assert not call.held
    assert call.args == {"table": "t", "limit": 100, "read_only": True}
    assert call.refusal is None
    assert call.args is not decision.args  # a copy the tool may not share with the decision


def test_judged_refuses_a_deny_with_its_reason_and_id(gate: Gate) -> None:
    decision = gate.check(tool_action("bot", "delete", {"id": 1}))
    call = judged(decision)
    assert not call.runs
    assert not call.held
    assert call.refusal == refusal_text(decision)
    assert decision.reason in call.refusal
    assert decision.decision_id in call.refusal


def test_judged_holds_a_pending_call(gate: Gate) -> None:
    call = judged(held(gate))
    assert call.held
    assert not call.runs
    assert call.refusal is None


def test_settle_waits_for_a_resolution_from_another_thread(gate: Gate) -> None:
    decision = held(gate)
    timer = threading.Timer(
        0.05,
        gate.approvals.resolve,
        args=(decision.decision_id,),
        kwargs={"approved": True, "approver": "alice"},
    )
    timer.start()
    call = settle(gate, decision)
    timer.join()
    assert call.runs
    assert call.approval is not None
    assert call.approval.approver == "alice"
    assert call.args == {"amount": 80}


def test_settle_refuses_an_expired_call(gate: Gate, clock: ManualClock) -> None:
    decision = held(gate)
    clock.advance(601 * 10**9)  # past the rule's 600 s
    call = settle(gate, decision)
    assert not call.runs
    assert call.approval is not None
    assert call.approval.outcome == "expired"
    assert call.refusal is not None
    assert "expired" in call.refusal
    assert decision.decision_id in call.refusal


def test_settle_passes_its_own_timeout_on(gate: Gate) -> None:
    decision = held(gate)
    with pytest.raises(TimeoutError):
        settle(gate, decision, timeout_s=0.01)
    assert judged(decision).held


def test_settle_returns_at_once_for_a_call_that_is_not_held(gate: Gate) -> None:
    decision = gate.check(tool_action("bot", "search", {"q": "x"}))
    assert settle(gate, decision, timeout_s=0) == judged(decision)


def test_asettle_waits_without_blocking_the_loop(gate: Gate) -> None:
    decision = held(gate)

    async def main() -> GatedCall:
        loop = asyncio.get_running_loop()
        loop.call_later(
            0.05,
            lambda: gate.approvals.resolve(
                decision.decision_id,
                approved=False,
                approver="alice",
            ),
        )
        return await asettle(gate, decision)

    call = asyncio.run(main())
    assert not call.runs
    assert call.refusal is not None
    assert "rejected by alice" in call.refusal
    done = asyncio.run(asettle(gate, gate.check(tool_action("bot", "search", {}))))
    assert done.runs


def test_resolve_held_resolves_and_runs(gate: Gate) -> None:
    decision = held(gate)
    call = resolve_held(gate, decision, approve=True, approver="alice")
    assert call.runs
    assert call.approval is not None
    assert call.approval.outcome == "approved"


def test_resolve_held_keeps_the_first_resolution(gate: Gate) -> None:
    decision = held(gate)
    gate.approvals.resolve(decision.decision_id, approved=False, approver="alice")
    call = resolve_held(gate, decision, approve=True, approver="alice")
    assert not call.runs
    assert call.approval is not None
    assert call.approval.outcome == "rejected"


def test_resolve_held_raises_for_an_approver_the_rule_does_not_allow(gate: Gate) -> None:
    decision = held(gate)
    with pytest.raises(ApprovalError, match="mallory"):
        resolve_held(gate, decision, approve=True, approver="mallory")
    assert judged(decision).held  # nothing was resolved


def test_an_approval_runs_once(gate: Gate) -> None:
    decision = held(gate)
    first = resolve_held(gate, decision, approve=True, approver="alice")
    assert first.runs
    assert first.approval is not None
    again = approved(gate, decision, first.approval)
    assert not again.runs
    assert again.refusal is not None
    assert decision.decision_id in again.refusal


def test_a_refusal_never_holds_an_argument_value(gate: Gate) -> None:
    decision = gate.check(tool_action("bot", "delete", {"token": AWS_KEY}))
    assert AWS_KEY not in refusal_text(decision)


def test_an_approval_runs_only_the_arguments_that_were_approved(gate: Gate) -> None:
    decision = held(gate)
    approval = resolve_approval(gate, decision, approve=True, approver="alice")
    swapped = approved(gate, decision, approval, {"amount": 5000})
    assert not swapped.runs
    assert swapped.refusal is not None
    assert decision.decision_id in swapped.refusal
    same = approved(gate, decision, approval, {"amount": 80})
    assert same.args == {"amount": 80}


def test_resolve_approval_resolves_without_running(gate: Gate) -> None:
    decision = held(gate)
    approval = resolve_approval(gate, decision, approve=True, approver="alice")
    assert approval.outcome == "approved"
    again = resolve_approval(gate, decision, approve=False, approver="alice")
    assert again == approval  # the first resolution stands
    assert approved(gate, decision, approval).runs  # nothing ran it yet: it runs once now
