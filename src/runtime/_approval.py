"""What a resolved approval is (`Approval`), and the terms a pending decision is held under.

An `Approval` is what `gate.approvals.resolve`, `wait` and `wait_async` return:
the outcome of one pending decision, bound to exactly what was shown for
approval (the decision, the SHA-256 of the arguments that will execute, the
policy, the deadline) and to the ``/approvals`` record that audits it
(ADR 0016).

The terms of a hold come from every matching ``approval`` rule (SPEC §3): the
shortest timeout applies, and an approver must be allowed by every rule that
lists approvers -- the intersection of their lists.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from runtime._approval_store import Outcome, PendingApproval, Resolution
from runtime._errors import ApprovalError
from runtime._recorded import type_name
from runtime._rule import Rule
from runtime._verdict import RuntimeVerdict

__all__ = [
    "Approval",
    "ApprovalTerms",
    "approval_record",
    "approval_terms",
    "check_decision_id",
    "wait_limit_ns",
]

APPROVAL_SCHEMA: Final = "ghost.approval/1"
INT64_MAX: Final = 2**63 - 1
_NS_PER_S: Final = 1_000_000_000
_UUID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Beyond this a caller's own timeout means "until resolved or expired" (and a float
# product would overflow): every decision expires, so such a wait still ends.
_MAX_WAIT_S: Final = 10.0**9


@dataclass(frozen=True, slots=True)
class Approval:
    """How one pending decision was resolved, as recorded in the audit log.

    Attributes:
        decision_id: the pending decision's id.
        decision_sha256: the content address of its ``/decisions`` record.
        decision_run_id: the run whose log holds that record (None: unknown).
        outcome: ``approved``, ``rejected`` or ``expired``.
        approver: who resolved it (None for ``expired``), as the log records it.
        final_verdict: the verdict the action runs under: the held verdict
            (``allow``, ``narrow`` or ``scrub``) when approved, else ``deny``.
        wait_ns: monotonic nanoseconds from the pending verdict to the
            resolution, as this process measured it (for a resolution made by
            another process: to when this process saw it; for a decision of an
            earlier run: from when this process first saw it, ADR 0016).
        executed_args_sha256: SHA-256 of the arguments the approval lets run.
        policy_sha256: the policy the decision was made under.
        expires_ns: the wall-clock deadline the decision was held until.
        resolved_ns: wall clock at the resolution (the record's ``stamp_ns``).
        approval_sha256: the content address of its ``/approvals`` record.
    """

    decision_id: str
    decision_sha256: str
    decision_run_id: str | None
    outcome: Outcome
    approver: str | None
    final_verdict: RuntimeVerdict
    wait_ns: int
    executed_args_sha256: str
    policy_sha256: str
    expires_ns: int
    resolved_ns: int
    approval_sha256: str

    @property
    def approved(self) -> bool:
        """Whether the action may run (once `ApprovalQueue.execute` accepts its arguments)."""
        return self.outcome == "approved"


@dataclass(frozen=True, slots=True)
class ApprovalTerms:
    """What holds a pending decision: how long, and who may approve.

    Attributes:
        timeout_ns: the shortest timeout among the matching approval rules.
        approvers: the names every approver-listing rule allows (sorted), or
            None when no matching rule lists approvers.
    """

    timeout_ns: int
    approvers: tuple[str, ...] | None


def approval_terms(rules: Iterable[Rule]) -> ApprovalTerms:
    """The terms of a hold: the shortest timeout, the intersection of the approver lists.

    Args:
        rules: the rules that matched the action (only ``approval`` rules count).

    Raises:
        ValueError: no approval rule is among them (a pending verdict always has one).
    """
    timeouts: list[int] = []
    allowed: set[str] | None = None
    for rule in rules:
        spec = rule.approval
        if spec is None:
            continue
        timeouts.append(_seconds_to_ns(spec.timeout_s))
        if spec.approvers is not None:
            names = set(spec.approvers)
            allowed = names if allowed is None else allowed & names
    if not timeouts:
        raise ValueError("a pending decision needs at least one approval rule")
    return ApprovalTerms(
        timeout_ns=min(timeouts), approvers=None if allowed is None else tuple(sorted(allowed))
    )


def _seconds_to_ns(seconds: float) -> int:
    # Policy loading admits only positive finite numbers; a deadline past int64 is clamped.
    if not 0 < seconds < math.inf:
        raise ValueError(f"a timeout is a positive finite number of seconds, not {seconds!r}")
    if seconds >= INT64_MAX / _NS_PER_S:  # before multiplying: 1e300 s would overflow to inf
        return INT64_MAX
    return min(INT64_MAX, math.ceil(seconds * _NS_PER_S))


def final_verdict(pending: PendingApproval, resolution: Resolution) -> RuntimeVerdict:
    """The verdict an action runs under after ``resolution``: the held one, or deny."""
    return pending.held_verdict if resolution.outcome == "approved" else RuntimeVerdict.DENY


def approval_record(
    pending: PendingApproval,
    resolution: Resolution,
    *,
    approver: str | None,
    wait_ns: int,
    run_id: str | None,
) -> dict[str, Any]:
    """The ``ghost.approval/1`` record (without ``seq``/``prev_sha256``) of one resolution.

    Args:
        pending: what was held.
        resolution: how it ended.
        approver: the approver as the log may hold it (scrubbed and escaped).
        wait_ns: the wait, monotonic, as this process measured it.
        run_id: the run this record is written to; ``decision_run_id`` is null
            when the decision is in the same run, else the decision's run.
    """
    same_run = pending.run_id is None or pending.run_id == run_id
    return {
        "schema": APPROVAL_SCHEMA,
        "stamp_ns": min(INT64_MAX, max(0, resolution.resolved_ns)),
        "decision_id": pending.decision_id,
        "decision_sha256": pending.decision_sha256,
        "decision_run_id": None if same_run else pending.run_id,
        "outcome": resolution.outcome,
        "approver": approver,
        "wait_ns": min(INT64_MAX, max(0, wait_ns)),
        "final_verdict": final_verdict(pending, resolution).value,
        "executed_args_sha256": pending.executed_args_sha256,
        "policy_sha256": pending.policy_sha256,
        "expires_ns": min(INT64_MAX, max(0, pending.expires_ns)),
    }


def check_decision_id(decision_id: object) -> None:
    """Refuse what cannot be a decision id (every one is a lowercase UUID string).

    The message never repeats a long or unprintable id: it may be anyone's text.

    Raises:
        ApprovalError: ``decision_id`` is not a UUID string.
    """
    if type(decision_id) is str and _UUID.fullmatch(decision_id):
        return
    if type(decision_id) is str and len(decision_id) <= 64 and decision_id.isprintable():
        shown = repr(decision_id)
    elif isinstance(decision_id, str):  # str's own length: a subclass's __len__ never runs
        shown = f"a {type_name(decision_id)} of {str.__len__(decision_id)} characters"
    else:
        shown = f"a {type_name(decision_id)}"
    raise ApprovalError(f"no decision {shown} awaits approval: a decision id is a UUID")


def wait_limit_ns(timeout_s: object) -> int | None:
    """A wait's own timeout in nanoseconds, or None for "until resolved or expired".

    Raises:
        TypeError: ``timeout_s`` is not an int or float (a bool is not a number of seconds).
        ValueError: it is NaN or negative.
    """
    if type(timeout_s) is bool or not isinstance(timeout_s, int | float):
        raise TypeError(f"timeout_s must be a number of seconds, not {type_name(timeout_s)}")
    if isinstance(timeout_s, float) and math.isnan(timeout_s):
        raise ValueError("timeout_s must be a non-negative number of seconds, not NaN")
    if timeout_s < 0:
        raise ValueError(f"timeout_s must be a non-negative number of seconds, not {timeout_s!r}")
    if timeout_s >= _MAX_WAIT_S:  # compared before any float product: a huge int cannot overflow
        return None
    return int(timeout_s * _NS_PER_S)
