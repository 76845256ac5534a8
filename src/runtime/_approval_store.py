"""Where pending approvals wait: the `ApprovalStore` protocol and the in-memory store (ADR 0016).

The approval queue (`gate.approvals`) keeps no state of its own that matters
after a crash: every pending decision, and its resolution once a human (or the
clock) gives one, lives in a store. The in-memory store serves one process;
`SqliteApprovalStore` lets a pending action survive a restart of the agent and
be resolved by another process (`ghost approvals approve ID --store PATH`).

A store only keeps and hands over state, atomically. What a resolution may be
(who may approve, whether it came too late) is decided by `check_resolution`,
which every writer calls before `resolve`, so the queue and the command line
judge alike.

Times in a store are wall-clock (``time.time_ns``): a deadline must mean the
same thing to another process and after a restart, which a monotonic reading
does not. Durations (``wait_ns``) are still measured on the monotonic clock by
the process that watched the wait (ADR 0016).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol, runtime_checkable

from runtime._errors import ApprovalError
from runtime._verdict import RuntimeVerdict

__all__ = [
    "ApprovalStore",
    "MemoryApprovalStore",
    "Outcome",
    "PendingApproval",
    "Resolution",
    "ResolutionRecord",
    "check_resolution",
]

Outcome = Literal["approved", "rejected", "expired"]
OUTCOMES: Final = ("approved", "rejected", "expired")
MAX_APPROVER_CHARS: Final = 256
"""The longest approver name a resolution may carry."""
# What a pending decision may run under once approved (never deny, never pending).
_APPROVABLE: Final = frozenset({RuntimeVerdict.ALLOW, RuntimeVerdict.NARROW, RuntimeVerdict.SCRUB})


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A decision held for a human, exactly as it was shown for approval.

    Attributes:
        decision_id: the pending decision's id.
        decision_sha256: the content address of its ``/decisions`` record.
        run_id: the run whose log holds that record (None when the sink has no run id).
        agent, verb, resource: the action, in the escaped, scrubbed form the log keeps.
        reason: the decision's reason (which rule holds it).
        matched_policy: the first approval rule that matched.
        held_verdict: the verdict the action runs under if approved
            (``allow``, ``narrow`` or ``scrub``).
        executed_args_sha256: SHA-256 of the arguments that run if approved; an
            approval is bound to them.
        policy_sha256: the policy that decided; an approval is bound to it.
        approvers: who may approve: the names every matching rule that lists
            approvers allows (their intersection), or None when no rule lists any.
            An empty tuple means no one can approve: only rejection or expiry end it.
        created_ns: wall clock at the pending verdict.
        expires_ns: wall clock after which it is expired (the shortest timeout of
            the matching approval rules).
    """

    decision_id: str
    decision_sha256: str
    run_id: str | None
    agent: str
    verb: str
    resource: str
    reason: str
    matched_policy: str | None
    held_verdict: RuntimeVerdict
    executed_args_sha256: str
    policy_sha256: str
    approvers: tuple[str, ...] | None
    created_ns: int
    expires_ns: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "held_verdict", RuntimeVerdict(self.held_verdict))
        if self.held_verdict not in _APPROVABLE:
            raise ValueError(f"an approval cannot hold the verdict {self.held_verdict.value!r}")
        if self.approvers is not None:
            object.__setattr__(self, "approvers", tuple(sorted(set(self.approvers))))
        if self.expires_ns < self.created_ns:
            raise ValueError("an approval cannot expire before it was created")


@dataclass(frozen=True, slots=True)
class Resolution:
    """How a pending decision ended.

    Attributes:
        decision_id: the decision resolved.
        outcome: ``approved``, ``rejected`` or ``expired``.
        approver: who resolved it (None for ``expired``).
        resolved_ns: wall clock at the resolution.
    """

    decision_id: str
    outcome: Outcome
    approver: str | None
    resolved_ns: int

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"an outcome is one of {', '.join(OUTCOMES)}, not {self.outcome!r}")
        if (self.outcome == "expired") != (self.approver is None):
            raise ValueError("an expiry has no approver, and a human resolution has one")


@dataclass(frozen=True, slots=True)
class ResolutionRecord:
    """Where a resolution is logged: what a queue that did not log it needs to hand it over.

    Attributes:
        approval_sha256: the content address of the ``/approvals`` record.
        wait_ns: the ``wait_ns`` that record holds.
    """

    approval_sha256: str
    wait_ns: int


def check_resolution(pending: PendingApproval, resolution: Resolution) -> None:
    """Refuse a resolution the terms of ``pending`` do not allow.

    A human resolution after the deadline is refused (the decision has expired,
    whatever the store says yet); an approval by someone every approver-listing
    rule does not allow is refused; a rejection is open to the same approvers.
    An expiry before the deadline is refused. An approver is a ``str`` of at
    most `MAX_APPROVER_CHARS` printable characters, not padded with spaces.

    Raises:
        ApprovalError: the resolution is not allowed; the message says why.
    """
    if resolution.decision_id != pending.decision_id:
        raise ApprovalError(
            f"a resolution of {resolution.decision_id} cannot resolve {pending.decision_id}"
        )
    if resolution.outcome == "expired":
        if resolution.resolved_ns < pending.expires_ns:
            raise ApprovalError(f"decision {pending.decision_id} has not expired yet")
        return
    if resolution.resolved_ns >= pending.expires_ns:
        raise ApprovalError(
            f"decision {pending.decision_id} has expired: it can no longer be resolved"
        )
    approver = resolution.approver
    if type(approver) is not str:
        raise ApprovalError("an approver is a name (a str)")
    if len(approver) > MAX_APPROVER_CHARS:
        raise ApprovalError(
            f"an approver's name is at most {MAX_APPROVER_CHARS} characters, not {len(approver)}"
        )
    if not approver or not approver.isprintable() or approver != approver.strip():
        raise ApprovalError("an approver is a non-empty name without control characters")
    if pending.approvers is not None and approver not in pending.approvers:
        allowed = ", ".join(pending.approvers) or "no one"
        raise ApprovalError(
            f"{approver!r} may not resolve decision {pending.decision_id} (allowed: {allowed})"
        )


@runtime_checkable
class ApprovalStore(Protocol):
    """Keeps pending approvals and their resolutions. Implementations are thread-safe.

    Every method is atomic. ``resolve`` is a compare-and-set: of concurrent
    resolutions of one decision (threads, processes), exactly one is stored and
    every other raises `ApprovalError`.
    """

    def add(self, pending: PendingApproval) -> None:
        """Keep a new pending approval.

        Raises:
            ApprovalError: one with this decision id is already kept.
        """
        ...

    def get(self, decision_id: str) -> tuple[PendingApproval, Resolution | None]:
        """Return the pending approval ``decision_id`` and its resolution (None while it waits).

        Raises:
            ApprovalError: no approval with this id is kept.
        """
        ...

    def pending(self) -> Sequence[PendingApproval]:
        """Return the approvals not resolved yet, oldest first (expired ones included)."""
        ...

    def resolve(self, resolution: Resolution) -> Resolution:
        """Store ``resolution`` if its decision is still unresolved; return it.

        The caller has checked it (`check_resolution`).

        Raises:
            ApprovalError: unknown decision id, or the decision is already resolved
                (the message names the outcome that won).
        """
        ...

    def unrecorded(self) -> Sequence[tuple[PendingApproval, Resolution]]:
        """Return the resolutions no audit log holds yet, in the order they were stored."""
        ...

    def claim_recording(
        self, decision_id: str, claimant: str, *, now_ns: int, until_ns: int
    ) -> bool:
        """Take the right to log the resolution of ``decision_id``; True if ``claimant`` holds it.

        A compare-and-set, like ``resolve``: of concurrent claimants (queues
        sharing the store), one holds the claim until ``until_ns`` or until
        the resolution is logged. A claim lapses at its ``until_ns`` (wall
        clock, compared with the caller's ``now_ns``): then another claimant
        may take it, so a recorder that died does not keep a resolution out of
        every log. A claimant that holds the claim may renew it.

        Returns:
            False when the resolution is logged already, or another claimant
            holds a claim that has not lapsed.

        Raises:
            ApprovalError: the decision is unknown or not resolved.
        """
        ...

    def mark_recorded(self, decision_id: str, approval_sha256: str, wait_ns: int) -> None:
        """Note that the resolution of ``decision_id`` is logged, as record ``approval_sha256``.

        The first mark stays: a second one (a record written twice, after a
        claim lapsed) leaves the store as it was.

        Raises:
            ApprovalError: the decision is unknown or not resolved.
        """
        ...

    def record_of(self, decision_id: str) -> ResolutionRecord | None:
        """Return where the resolution of ``decision_id`` is logged, or None while it is not.

        Raises:
            ApprovalError: the decision is unknown.
        """
        ...

    def claim_execution(self, decision_id: str) -> bool:
        """Mark an approval as executed; True the first time, False ever after.

        An approval runs once, across every process that shares the store.

        Raises:
            ApprovalError: the decision is unknown or not resolved.
        """
        ...

    def prune(self, before_ns: int) -> int:
        """Forget every decision that is settled for good before ``before_ns``; return how many.

        Settled for good: resolved, its resolution logged, and its deadline
        (wall clock) before ``before_ns`` -- an approval can no longer run, and
        the log holds what happened. A decision still pending, or resolved but
        not logged yet, is never forgotten. A forgotten decision is unknown.
        """
        ...

    def close(self) -> None:
        """Release what the store holds open (idempotent)."""
        ...


class MemoryApprovalStore:
    """An `ApprovalStore` in this process's memory: the default, gone when the process is."""

    __slots__ = ("_claims", "_entries", "_executed", "_lock", "_records", "_unrecorded")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[PendingApproval, Resolution | None]] = {}
        # Resolved ids no log holds yet, in the order stored (a dict keeps insertion
        # order): `unrecorded` costs what is unrecorded, not every resolution ever made.
        self._unrecorded: dict[str, None] = {}
        self._claims: dict[str, tuple[str, int]] = {}  # id -> (claimant, until_ns)
        self._records: dict[str, ResolutionRecord] = {}
        self._executed: set[str] = set()

    def add(self, pending: PendingApproval) -> None:
        with self._lock:
            if pending.decision_id in self._entries:
                raise ApprovalError(f"decision {pending.decision_id} is already awaiting approval")
            self._entries[pending.decision_id] = (pending, None)

    def get(self, decision_id: str) -> tuple[PendingApproval, Resolution | None]:
        with self._lock:
            return self._entry(decision_id)

    def pending(self) -> list[PendingApproval]:
        with self._lock:
            waiting = [p for p, r in self._entries.values() if r is None]
        return sorted(waiting, key=lambda p: (p.created_ns, p.decision_id))

    def resolve(self, resolution: Resolution) -> Resolution:
        with self._lock:
            pending, existing = self._entry(resolution.decision_id)
            if existing is not None:
                raise ApprovalError(
                    f"decision {resolution.decision_id} is already resolved ({existing.outcome})"
                )
            self._entries[resolution.decision_id] = (pending, resolution)
            self._unrecorded[resolution.decision_id] = None
            return resolution

    def unrecorded(self) -> list[tuple[PendingApproval, Resolution]]:
        with self._lock:
            found: list[tuple[PendingApproval, Resolution]] = []
            for decision_id in self._unrecorded:
                pending, resolution = self._entries[decision_id]
                assert resolution is not None  # only resolved ids are unrecorded
                found.append((pending, resolution))
            return found

    def claim_recording(
        self, decision_id: str, claimant: str, *, now_ns: int, until_ns: int
    ) -> bool:
        with self._lock:
            self._require_resolved(decision_id)
            if decision_id in self._records:
                return False
            holder = self._claims.get(decision_id)
            if holder is not None and holder[0] != claimant and now_ns < holder[1]:
                return False
            self._claims[decision_id] = (claimant, until_ns)
            return True

    def mark_recorded(self, decision_id: str, approval_sha256: str, wait_ns: int) -> None:
        with self._lock:
            self._require_resolved(decision_id)
            if decision_id not in self._records:
                self._records[decision_id] = ResolutionRecord(approval_sha256, wait_ns)
            self._unrecorded.pop(decision_id, None)
            self._claims.pop(decision_id, None)

    def record_of(self, decision_id: str) -> ResolutionRecord | None:
        with self._lock:
            self._entry(decision_id)
            return self._records.get(decision_id)

    def claim_execution(self, decision_id: str) -> bool:
        with self._lock:
            self._require_resolved(decision_id)
            if decision_id in self._executed:
                return False
            self._executed.add(decision_id)
            return True

    def prune(self, before_ns: int) -> int:
        with self._lock:
            done = [
                decision_id
                for decision_id, (pending, resolution) in self._entries.items()
                if resolution is not None
                and decision_id in self._records
                and pending.expires_ns < before_ns
            ]
            for decision_id in done:
                del self._entries[decision_id]
                del self._records[decision_id]
                self._claims.pop(decision_id, None)
                self._executed.discard(decision_id)
            return len(done)

    def close(self) -> None:
        return None

    def _entry(self, decision_id: str) -> tuple[PendingApproval, Resolution | None]:
        try:
            return self._entries[decision_id]
        except (KeyError, TypeError):
            raise ApprovalError(f"no decision {decision_id!r} awaits approval") from None

    def _require_resolved(self, decision_id: str) -> None:
        _, resolution = self._entry(decision_id)
        if resolution is None:
            raise ApprovalError(f"decision {decision_id} is not resolved")
