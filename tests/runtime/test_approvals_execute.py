"""`gate.approvals.execute`: an approval lets exactly the approved arguments run, once (SPEC §3)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from audit import MemoryAuditSink
from runtime import (
    Action,
    Approval,
    ApprovalError,
    Gate,
    MemoryApprovalStore,
    Policy,
    RuntimeVerdict,
)
from runtime.testing import ManualClock
from tests.runtime.approvals import APPROVAL_POLICY, S, held, make_gate, refund


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def test_approved_arguments_run_as_a_fresh_copy(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate, refund(100, "USD"))
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    args = copy.deepcopy(dict(decision.args))
    runnable = gate.approvals.execute(approval, args)
    assert runnable == {"amount": 100, "currency": "EUR"}
    assert runnable is not args
    args["amount"] = 10**6  # the caller's object changes nothing already returned
    assert runnable["amount"] == 100


@pytest.mark.parametrize(
    "changed",
    [
        {"amount": 101, "currency": "EUR"},
        {"amount": 100, "currency": "USD"},  # the original, un-narrowed arguments
        {"amount": 100},
        {"amount": 100, "currency": "EUR", "extra": True},
        {"amount": 100.5, "currency": "EUR"},
        {"amount": "100", "currency": "EUR"},
        {"amount": True, "currency": "EUR"},
        {},
    ],
)
def test_changed_arguments_are_refused(clock: ManualClock, changed: dict[str, Any]) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate, refund(100, "USD"))
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    with pytest.raises(ApprovalError, match="differ from those approved"):
        gate.approvals.execute(approval, changed)
    assert gate.approvals.execute(approval, decision.args) == dict(decision.args)


def test_equality_is_canonical_json_equality(clock: ManualClock) -> None:
    # RFC 8785 numbers are IEEE doubles: 100.0 is the approved 100, and runs as what was given.
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    assert gate.approvals.execute(approval, {"amount": 100.0, "currency": "EUR"})["amount"] == 100


@pytest.mark.parametrize("bad", [[1, 2], "amount=100", None, {"amount": {1, 2}}, {1: "x"}])
def test_arguments_that_are_not_plain_data_are_refused(clock: ManualClock, bad: Any) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    with pytest.raises(ApprovalError, match="cannot be checked"):
        gate.approvals.execute(approval, bad)


def test_an_approval_runs_once(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    gate.approvals.execute(approval, decision.args)
    with pytest.raises(ApprovalError, match="already executed"):
        gate.approvals.execute(approval, decision.args)


def test_a_rejected_or_expired_approval_is_refused(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    rejected_decision = held(gate)
    expired_decision = held(gate, refund(200))
    rejected = gate.approvals.resolve(rejected_decision.decision_id, approved=False, approver="bob")
    clock.advance(600 * S)
    expired = gate.approvals.wait(expired_decision.decision_id, timeout_s=0)
    assert (rejected.final_verdict, expired.final_verdict) == (RuntimeVerdict.DENY,) * 2
    with pytest.raises(ApprovalError, match="was rejected, not approved"):
        gate.approvals.execute(rejected, rejected_decision.args)
    with pytest.raises(ApprovalError, match="was expired, not approved"):
        gate.approvals.execute(expired, expired_decision.args)


def test_an_approval_past_its_deadline_is_refused(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    clock.advance(600 * S - 1)
    clock.advance(1)
    with pytest.raises(ApprovalError, match="has expired"):
        gate.approvals.execute(approval, decision.args)


def test_one_nanosecond_before_the_deadline_it_runs(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    clock.advance(600 * S - 1)
    assert gate.approvals.execute(approval, decision.args) == dict(decision.args)


@pytest.mark.parametrize(
    "field",
    ["executed_args_sha256", "decision_sha256", "outcome_of_another", "policy_sha256"],
)
def test_a_forged_approval_is_refused(clock: ManualClock, field: str) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    other = held(gate, refund(300))
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    gate.approvals.resolve(other.decision_id, approved=False, approver="alice")
    if field == "outcome_of_another":  # an approved object for a decision that was rejected
        forged = dataclasses.replace(approval, decision_id=other.decision_id)
        args = other.args
    else:
        forged = dataclasses.replace(approval, **{field: "f" * 64})
        args = decision.args
    expected = (
        "needs a new decision" if field == "policy_sha256" else "does not match what the store"
    )
    with pytest.raises(ApprovalError, match=expected):
        gate.approvals.execute(forged, args)
    assert gate.approvals.execute(approval, decision.args) == dict(decision.args)


def test_an_approval_subclass_or_another_object_is_refused(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")

    class Sneaky(Approval):
        __slots__ = ()

    sneaky = Sneaky(**{f.name: getattr(approval, f.name) for f in dataclasses.fields(approval)})
    for thing in (sneaky, {"outcome": "approved"}, None, decision):
        with pytest.raises(ApprovalError, match="takes an Approval"):
            gate.approvals.execute(thing, decision.args)  # type: ignore[arg-type]


def test_an_approval_of_an_unknown_decision_is_refused(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    other_gate, _, _ = make_gate(clock)  # its own, empty store
    with pytest.raises(ApprovalError, match="awaits approval"):
        other_gate.approvals.execute(approval, decision.args)


def test_a_policy_change_between_pending_and_execution_is_refused(clock: ManualClock) -> None:
    store = MemoryApprovalStore()
    before, _, _ = make_gate(clock, store=store)
    changed = dict(APPROVAL_POLICY, description="the same rules, edited")
    after, after_sink, _ = make_gate(clock, store=store, sink=MemoryAuditSink(), policy=changed)
    assert before.policy.policy_sha256 != after.policy.policy_sha256
    decision = held(before)
    # The pending decision is listed and resolvable through the gate running the new policy...
    assert [p.decision_id for p in after.approvals.pending()] == [decision.decision_id]
    approval = after.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    assert approval.policy_sha256 == before.policy.policy_sha256
    # ... but it cannot run under it: that needs a new decision.
    with pytest.raises(ApprovalError, match="needs a new decision"):
        after.approvals.execute(approval, decision.args)
    assert before.approvals.execute(approval, decision.args) == dict(decision.args)
    # The resolution is in the log of the gate that made it, linked to the other run.
    (record,) = after_sink.records("/approvals")
    assert record["decision_sha256"] == decision.decision_sha256
    assert record["decision_run_id"] == before.approvals.run_id


def test_a_host_converter_that_raises_is_refused_without_its_message(clock: ManualClock) -> None:
    class Opaque:
        pass

    def to_data(value: object) -> object:
        raise RuntimeError("sk-live-secret")

    store = MemoryApprovalStore()
    gate = Gate(
        Policy.from_dict(APPROVAL_POLICY),
        sink=MemoryAuditSink(),
        clock=clock,
        approvals=store,
        to_data=to_data,
    )
    decision = held(gate)
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    with pytest.raises(ApprovalError, match=r"cannot be checked \(RuntimeError\)") as caught:
        gate.approvals.execute(approval, {"amount": Opaque()})
    assert "sk-live-secret" not in str(caught.value)
    assert gate.approvals.execute(approval, decision.args) == dict(decision.args)


def test_a_gate_that_admits_only_short_names_can_still_execute(clock: ManualClock) -> None:
    # The execution check snapshots only the arguments; the names it passes must fit
    # every gate's name bound (here 4 characters: "agent" or "resource" would not).
    policy = {
        "policy_id": "short-names",
        "default": "deny",
        "rules": [
            {"id": "pay", "verbs": ["pay"], "effect": "approval", "approval": {"timeout_s": 60}}
        ],
    }
    gate = Gate(
        Policy.from_dict(policy),
        sink=MemoryAuditSink(),
        clock=clock,
        approvals=MemoryApprovalStore(),
        max_name_chars=4,
    )
    decision = gate.check(Action("ai", "pay", "x:1", {"n": 1}))
    assert decision.verdict is RuntimeVerdict.PENDING
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="al")
    assert gate.approvals.execute(approval, decision.args) == {"n": 1}
