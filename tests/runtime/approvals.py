"""Shared pieces of the approval tests: a policy with every approval term, a gate factory."""

from __future__ import annotations

from typing import Any

from audit import MemoryAuditSink
from runtime import Action, ApprovalStore, Decision, Gate, MemoryApprovalStore, Policy
from runtime.testing import ManualClock

S: int = 1_000_000_000  # one second in ns

APPROVAL_POLICY: dict[str, Any] = {
    "policy_id": "approvals-test",
    "default": "deny",
    "rules": [
        {
            "id": "refunds",
            "verbs": ["refund"],
            "resources": ["payments:*"],
            "effect": "approval",
            "approval": {"timeout_s": 600, "approvers": ["alice", "bob"]},
        },
        {
            "id": "big-refunds",
            "verbs": ["refund"],
            "resources": ["payments:*"],
            "effect": "approval",
            "when": {"amount": {"gt": 1000}},
            "approval": {"timeout_s": 60, "approvers": ["bob", "carol"]},
        },
        {
            "id": "refund-currency",
            "verbs": ["refund"],
            "effect": "narrow",
            "narrow": {"set": {"currency": "EUR"}},
        },
        {
            "id": "transfers",
            "verbs": ["transfer"],
            "effect": "approval",
            "approval": {"timeout_s": 30},
        },
        {
            "id": "wire-a",
            "verbs": ["wire"],
            "effect": "approval",
            "approval": {"timeout_s": 45, "approvers": ["alice"]},
        },
        {
            "id": "wire-b",
            "verbs": ["wire"],
            "effect": "approval",
            "approval": {"timeout_s": 30, "approvers": ["bob"]},
        },
        {"id": "search", "verbs": ["search"], "effect": "allow"},
    ],
}


def refund(amount: int = 100, currency: str = "EUR") -> Action:
    """A refund the policy holds for approval (alice or bob, 600 s)."""
    return Action("support", "refund", "payments:stripe", {"amount": amount, "currency": currency})


def search() -> Action:
    """An action the policy allows."""
    return Action("researcher", "search", "tool:web", {"query": "q"})


def make_gate(
    clock: ManualClock,
    *,
    store: ApprovalStore | None = None,
    sink: MemoryAuditSink | None = None,
    policy: dict[str, Any] | None = None,
    poll_s: float = 0.2,
) -> tuple[Gate, MemoryAuditSink, ApprovalStore]:
    """A gate on a memory sink and an approval store (fresh ones unless given)."""
    store = MemoryApprovalStore() if store is None else store
    sink = MemoryAuditSink() if sink is None else sink
    gate = Gate(
        Policy.from_dict(APPROVAL_POLICY if policy is None else policy),
        sink=sink,
        clock=clock,
        approvals=store,
        approval_poll_s=poll_s,
    )
    return gate, sink, store


def held(gate: Gate, action: Action | None = None) -> Decision:
    """Check ``action`` (a refund by default) and return the pending decision."""
    decision = gate.check(refund() if action is None else action)
    assert decision.verdict == "pending", decision.reason
    return decision


def decision_run(gate: Gate) -> str | None:
    """The run a gate's decisions are logged in (its sink's run id)."""
    return gate.approvals.run_id
