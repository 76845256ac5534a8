"""What an approval lets run: exactly the approved arguments, under the same policy, once.

`gate.approvals.execute(approval, args)` asks this (ADR 0016). An approval is
bound to what was shown for approval: the decision, the canonical SHA-256 of
the arguments that will execute, the policy, and a deadline. Running other
arguments, or under another policy, needs a new decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from runtime._approval import Approval
from runtime._approval_store import ApprovalStore
from runtime._canonical import value_sha256
from runtime._clock import Clock
from runtime._errors import ApprovalError, EvaluationError
from runtime._recorded import type_name
from runtime._snapshot import Snapshotter

__all__ = ["ApprovalBinding"]

# Only the arguments are checked; the names stand in for the action's. Empty, so that
# they pass every gate's name checks (a gate may admit names of a few characters only).
_NO_NAME: Final = ""


class ApprovalBinding:
    """The execution check of one gate's approvals. Thread-safe.

    Args:
        store: the approval store (the judge of what was approved).
        clock: the gate's clock (its wall clock against the deadline).
        policy_sha256: the policy the gate runs now.
        snapshotter: the gate's snapshotter, so arguments are taken as the gate takes them.
    """

    __slots__ = ("_clock", "_policy_sha256", "_snapshotter", "_store")

    def __init__(
        self,
        *,
        store: ApprovalStore,
        clock: Clock,
        policy_sha256: str,
        snapshotter: Snapshotter,
    ) -> None:
        self._store = store
        self._clock = clock
        self._policy_sha256 = policy_sha256
        self._snapshotter = snapshotter

    def execute(self, approval: Approval, args: Mapping[str, Any]) -> dict[str, Any]:
        """Return a fresh plain-data copy of ``args`` if ``approval`` lets them run now.

        Raises:
            ApprovalError: ``approval`` is not an exact `Approval`, is not
                ``approved``, was made under another policy, does not match the
                store, is past its deadline, or was executed before; or ``args``
                are not plain data, or differ from the approved arguments.
        """
        if type(approval) is not Approval:
            raise ApprovalError(f"execute takes an Approval, not {type_name(approval)}")
        decision_id = approval.decision_id
        if approval.outcome != "approved":
            raise ApprovalError(
                f"decision {decision_id} was {approval.outcome}, not approved: it must not run"
            )
        if approval.policy_sha256 != self._policy_sha256:
            raise ApprovalError(
                f"decision {decision_id} was approved under policy {approval.policy_sha256},"
                f" but the gate now runs {self._policy_sha256}: it needs a new decision"
            )
        pending, resolution = self._store.get(decision_id)
        if (
            resolution is None
            or resolution.outcome != "approved"
            or pending.executed_args_sha256 != approval.executed_args_sha256
            or pending.policy_sha256 != approval.policy_sha256
            or pending.decision_sha256 != approval.decision_sha256
        ):
            raise ApprovalError(
                f"the approval of decision {decision_id} does not match what the store holds"
            )
        if self._clock.time_ns() >= pending.expires_ns:
            raise ApprovalError(f"the approval of decision {decision_id} has expired")
        try:
            snapshot = self._snapshotter.take(_NO_NAME, _NO_NAME, _NO_NAME, args)
            digest = value_sha256(snapshot.args)
        except EvaluationError as exc:  # ghost's own message: safe to show
            raise ApprovalError(
                f"the arguments for decision {decision_id} cannot be checked: {exc}"
            ) from None
        except Exception as exc:  # noqa: BLE001 - anything else: the type only, never the text
            raise ApprovalError(
                f"the arguments for decision {decision_id} cannot be checked ({type_name(exc)})"
            ) from None
        if digest != pending.executed_args_sha256:
            raise ApprovalError(
                f"the arguments differ from those approved for decision {decision_id}:"
                " different arguments need a new decision"
            )
        # Last, after every check: only an execution that is allowed uses the approval up.
        # The store keeps it, so an approval runs once across every process sharing it.
        if not self._store.claim_execution(decision_id):
            raise ApprovalError(f"the approval of decision {decision_id} was already executed")
        return snapshot.args
