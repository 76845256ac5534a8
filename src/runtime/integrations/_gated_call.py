"""One gated tool call, the same way on every surface (SPEC §7).

Each adapter turns its framework's tool call into an `Action` by one
convention (`tool_action`), asks the gate, and then does one of three things
with the answer, which `GatedCall` carries:

* run the tool with ``call.args`` (``allow``, ``narrow``, ``scrub``, or a
  ``pending`` decision a human approved, checked by `ApprovalQueue.execute`);
* hand ``call.refusal`` back to the model as the framework's own rejection
  (``deny``, a rejected or expired approval);
* hold it for a human (``pending``): the framework's own human-in-the-loop
  flow where it has one, else `settle` waits until the approval is resolved or
  the rule's timeout expires it.

The refusal text carries ``decision.reason`` and the decision id, never an
argument value: a reason never holds one (SPEC §3).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from runtime._action import Action, Decision
from runtime._approval import Approval
from runtime._errors import ApprovalError
from runtime._gate import Gate
from runtime._verdict import RuntimeVerdict

__all__ = [
    "ActionOverride",
    "GatedCall",
    "approved",
    "asettle",
    "judged",
    "refusal_text",
    "resolve_approval",
    "resolve_held",
    "settle",
    "tool_action",
]

CallT = TypeVar("CallT")

ActionOverride = Callable[[CallT], Action]
"""A callable from a framework's tool call to the `Action` the gate judges (SPEC §7).

For resources finer than the tool (a path, a table, an account). Whatever it
raises denies the call, recorded (the adapter asks the gate about a
placeholder action that names the failure's type).
"""

TOOL_RESOURCE_PREFIX: Final = "tool:"


def tool_action(agent: str, tool_name: str, args: Mapping[str, Any]) -> Action:
    """The `Action` of one framework tool call by SPEC §7's convention.

    ``verb`` is the tool's name and ``resource`` is ``tool:<tool name>``. The
    gate validates all three names and snapshots ``args``; nothing is checked
    here, so a hostile name is denied (and recorded) by the gate, not lost.
    """
    return Action(agent=agent, verb=tool_name, resource=TOOL_RESOURCE_PREFIX + tool_name, args=args)


@dataclass(frozen=True, slots=True)
class GatedCall:
    """What to do with one tool call, after the gate (and a human, if asked).

    Attributes:
        decision: the gate's decision.
        approval: how a ``pending`` decision was resolved; None otherwise, or
            while it still waits.
        args: the arguments to run the tool with, or None when it must not run
            (now, or at all).
        refusal: the text the model gets instead of a result, or None when the
            tool runs or still waits.
    """

    decision: Decision
    approval: Approval | None
    args: dict[str, Any] | None
    refusal: str | None

    @property
    def runs(self) -> bool:
        """Whether the tool runs (with ``args``)."""
        return self.args is not None

    @property
    def held(self) -> bool:
        """Whether the call waits for a human (``pending``, not yet resolved)."""
        return self.args is None and self.refusal is None


def refusal_text(decision: Decision, approval: Approval | None = None) -> str:
    """The model-facing text of a call that does not run: the reason and the decision id."""
    if approval is None:
        return f"ghost denied this tool call: {decision.reason} (decision {decision.decision_id})"
    who = f" by {approval.approver}" if approval.approver is not None else ""
    return (
        f"ghost did not run this tool call: its approval was {approval.outcome}{who}"
        f" ({decision.reason}; decision {decision.decision_id})"
    )


def judged(decision: Decision) -> GatedCall:
    """The `GatedCall` of a decision, before any human: runs, refused or held."""
    if decision.permitted:
        return GatedCall(decision, None, dict(decision.args), None)
    if decision.verdict is RuntimeVerdict.PENDING:
        return GatedCall(decision, None, None, None)
    return GatedCall(decision, None, None, refusal_text(decision))


def approved(
    gate: Gate,
    decision: Decision,
    approval: Approval,
    args: Mapping[str, Any] | None = None,
) -> GatedCall:
    """The `GatedCall` of a resolved pending decision, about to run with ``args``.

    An approval runs only what `ApprovalQueue.execute` accepts: the approved
    arguments, under the policy it was made under, once. A refused execution
    becomes a refusal that names the decision, so the model learns why.

    Args:
        args: the arguments the framework is about to run (default:
            ``decision.args``); anything but the approved ones is refused.
    """
    if not approval.approved:
        return GatedCall(decision, approval, None, refusal_text(decision, approval))
    try:
        run = gate.approvals.execute(approval, decision.args if args is None else args)
    except ApprovalError as exc:
        return GatedCall(
            decision,
            approval,
            None,
            f"ghost did not run this tool call: {exc} (decision {decision.decision_id})",
        )
    return GatedCall(decision, approval, run, None)


def settle(gate: Gate, decision: Decision, *, timeout_s: float = math.inf) -> GatedCall:
    """Judge ``decision``; for ``pending``, block until it is resolved or expires.

    For surfaces without a human-in-the-loop flow of their own: the wait ends
    at the rule's approval timeout at the latest (the expiry is recorded and
    refuses the call).

    Args:
        gate: the gate that decided.
        decision: what `Gate.check` returned.
        timeout_s: the longest this call blocks; past it `TimeoutError` is
            raised and the decision stays pending (default: until resolution
            or expiry).

    Raises:
        TimeoutError: ``timeout_s`` passed first.
        AuditError: the resolution could not be recorded; the tool must not run.
    """
    call = judged(decision)
    if not call.held:
        return call
    return approved(gate, decision, gate.approvals.wait(decision.decision_id, timeout_s))


async def asettle(gate: Gate, decision: Decision, *, timeout_s: float = math.inf) -> GatedCall:
    """The asyncio twin of `settle`: the wait never blocks the loop."""
    call = judged(decision)
    if not call.held:
        return call
    approval = await gate.approvals.wait_async(decision.decision_id, timeout_s)
    return approved(gate, decision, approval)


def resolve_approval(gate: Gate, decision: Decision, *, approve: bool, approver: str) -> Approval:
    """Resolve a held decision from a framework's own approval flow (nothing runs yet).

    If the decision was resolved already (through ``ghost approvals``, another
    process, or its expiry), that resolution stands and is what is returned:
    the first resolution wins, whichever side made it.

    Raises:
        ApprovalError: ``approver`` is not allowed by the matching rules (nothing
            is resolved), or the id is unknown to the gate's store.
        AuditError: the resolution could not be recorded; the tool must not run.
    """
    try:
        return gate.approvals.resolve(decision.decision_id, approved=approve, approver=approver)
    except ApprovalError as refused:
        try:  # resolved already? then that resolution is the answer
            return gate.approvals.wait(decision.decision_id, 0)
        except TimeoutError:
            raise refused from None  # still pending: the refusal itself stands


def resolve_held(gate: Gate, decision: Decision, *, approve: bool, approver: str) -> GatedCall:
    """`resolve_approval`, then judge the call with its held arguments (`approved`).

    Raises:
        ApprovalError: as `resolve_approval`.
        AuditError: as `resolve_approval`.
    """
    return approved(
        gate, decision, resolve_approval(gate, decision, approve=approve, approver=approver)
    )
