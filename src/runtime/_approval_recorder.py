"""Each resolution logged once, whichever queue sharing the store sees it first (ADR 0016).

Several live agents may share one approval store, and each queue watches
every decision the store held when it started (so that a restarted agent picks
up what waited). Left alone, two of them would both log one resolution, each
in its own run. The store arbitrates instead: a queue logs a resolution only
under a claim (`ApprovalStore.claim_recording`, a compare-and-set with a lease),
and a queue that does not hold the claim hands the resolution over as the
store says it was logged (`ApprovalStore.record_of`): the same
``approval_sha256`` and ``wait_ns`` in every process.

The first queue to see a resolution logs it, in its own run (naming the
decision's run when that is another). No queue waits for another: an agent
cannot tell whether the run that made a decision is alive, and a resolution
logged late (or, for a run that died, never) is worse than one logged in a
neighbour's run that says whose decision it was.

A claim lapses after `CLAIM_LEASE_NS` (real wall-clock time: leases are
compared across processes): a recorder that died between its claim and its
record does not keep the resolution out of every log.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from runtime._approval import INT64_MAX, Approval, approval_record, final_verdict
from runtime._approval_store import ApprovalStore, PendingApproval, Resolution, ResolutionRecord
from runtime._clock import Clock
from runtime._errors import AuditError
from runtime._logging import get_event_log
from runtime._recorded import type_name
from runtime._sink import AuditSink

__all__ = ["APPROVALS_TOPIC", "CLAIM_LEASE_NS", "ApprovalRecorder"]

APPROVALS_TOPIC: Final = "/approvals"
CLAIM_LEASE_NS: Final = 30_000_000_000
"""How long a claim to log a resolution holds before another queue may take it over."""
_CACHE_SIZE: Final = 4096
"""Settled approvals kept in memory; an older one is read back from the store."""
_log = get_event_log("ghost.approvals")


class ApprovalRecorder:
    """The logging side of one approval queue. Thread-safe.

    Args:
        store: the approval store (the arbiter of who logs what).
        sink: the gate's sink, which receives the ``/approvals`` records.
        clock: the gate's clock (``wait_ns`` is measured on its monotonic clock).
        recorded: the gate's `RecordedText` (scrubs and escapes an approver's name).
        run_id: the run the sink writes.
        started_ns: the monotonic reading at which the queue began watching a
            decision (None when it never did).
        settled: called with every approval once it is settled here.
    """

    __slots__ = (
        "_cache",
        "_cache_lock",
        "_claimant",
        "_clock",
        "_lock",
        "_recorded",
        "_run_id",
        "_settled",
        "_sink",
        "_sink_run_at_start",
        "_started_ns",
        "_store",
        "_unmarked",
    )

    def __init__(
        self,
        *,
        store: ApprovalStore,
        sink: AuditSink,
        clock: Clock,
        recorded: Callable[[object], str],
        run_id: str | None,
        started_ns: Callable[[str], int | None],
        settled: Callable[[Approval], None],
    ) -> None:
        self._store = store
        self._sink = sink
        self._clock = clock
        self._recorded = recorded
        self._run_id = run_id
        # The sink's run when this recorder was made: a later one means the sink moved
        # to a new run (`audit.SocketAuditSink` reconnecting after its writer restarted).
        self._sink_run_at_start = _sink_run(sink)
        self._started_ns = started_ns
        self._settled = settled
        # Unique per queue: two queues of one run (or of no run id) still claim apart.
        self._claimant = secrets.token_hex(16)
        # One record at a time: held across the store and the sink, so never on an event
        # loop; the cache has a lock of its own, held only for dictionary work.
        self._lock = threading.Lock()
        self._cache_lock = threading.Lock()
        # Guarded by _cache_lock:
        self._cache: OrderedDict[str, Approval] = OrderedDict()
        self._unmarked: dict[str, ResolutionRecord] = {}  # logged here; the store not told yet

    def cached(self, decision_id: str) -> Approval | None:
        """The approval settled here for ``decision_id``, if it is still in memory.

        Never waits for a record being written: safe on an event loop.
        """
        with self._cache_lock:
            approval = self._cache.get(decision_id)
            if approval is not None:
                self._cache.move_to_end(decision_id)
            return approval

    def settle(self, pending: PendingApproval, resolution: Resolution) -> Approval | None:
        """Return the approval of a resolution: logged here under a claim, or handed over.

        Args:
            pending: the decision.
            resolution: how the store says it ended.

        Returns:
            None while another queue holds the claim and has not logged it yet.

        Raises:
            AuditError: the record could not be written (the claim lapses; the
                resolution stays unlogged in the store for a later try).
            ApprovalError: the store refused or failed (`ApprovalStoreError`).
        """
        decision_id = pending.decision_id
        with self._lock:
            approval = self.cached(decision_id)
            if approval is not None:
                return approval
            with self._cache_lock:
                # Logged here, the store not told (and perhaps evicted from the cache since):
                # it is logged, whatever the store says. Never write it a second time.
                logged = self._unmarked.get(decision_id)
            mine = logged is not None
            written = False
            if logged is None:
                logged = self._store.record_of(decision_id)
            if logged is None:
                if not self._claim(decision_id):
                    return None
                logged = self._write(pending, resolution)
                with self._cache_lock:
                    self._unmarked[decision_id] = logged  # until the store knows
                mine = written = True
            approval = self._approval(pending, resolution, logged)
            with self._cache_lock:
                self._cache[decision_id] = approval
                if len(self._cache) > _CACHE_SIZE:
                    self._cache.popitem(last=False)
        self._settled(approval)  # wake the waiters first: the mark may wait for a lock
        if mine:
            self.mark(decision_id, logged)
        if written:
            _log.info(
                "ghost.approval_resolved",
                decision_id=decision_id,
                outcome=resolution.outcome,
                approval_sha256=logged.approval_sha256,
            )
        return approval

    def mark(self, decision_id: str, logged: ResolutionRecord) -> None:
        """Tell the store a resolution is logged; a failure is logged and retried by `remark`."""
        try:
            self._store.mark_recorded(decision_id, logged.approval_sha256, logged.wait_ns)
        except Exception as exc:  # noqa: BLE001 - a later run may log it twice, never zero
            with self._cache_lock:
                self._unmarked[decision_id] = logged
            _log.warning("ghost.approval_store_failed", error=type_name(exc))
        else:
            with self._cache_lock:
                self._unmarked.pop(decision_id, None)

    def remark(self, decision_id: str) -> bool:
        """Retry telling the store about a record logged here; False if none waits for it."""
        with self._cache_lock:
            logged = self._unmarked.get(decision_id)
        if logged is None:
            return False
        self.mark(decision_id, logged)
        return True

    # -- machinery ------------------------------------------------------------------------

    def _claim(self, decision_id: str) -> bool:
        """Whether this queue may log the resolution now (under _lock)."""
        now = time.time_ns()
        return self._store.claim_recording(
            decision_id, self._claimant, now_ns=now, until_ns=now + CLAIM_LEASE_NS
        )

    def _release(self, decision_id: str) -> None:
        """Let the claim lapse now: a queue that cannot write must not keep others out."""
        now = time.time_ns()
        try:
            self._store.claim_recording(decision_id, self._claimant, now_ns=now, until_ns=now)
        except Exception as exc:  # noqa: BLE001 - then the lease lapses on its own
            _log.warning("ghost.approval_store_failed", error=type_name(exc))

    def _write(self, pending: PendingApproval, resolution: Resolution) -> ResolutionRecord:
        """Append the ``/approvals`` record; return where it is (under _lock)."""
        decision_id = pending.decision_id
        now_ns = self._clock.monotonic_ns()
        started = self._started_ns(decision_id)
        # Every path here adopts the decision first; unknown, it waited for nobody here.
        wait_ns = now_ns - (now_ns if started is None else started)
        approver = None if resolution.approver is None else self._recorded(resolution.approver)
        # The run the sink writes now: a sink that reconnected after its writer restarted
        # (`audit.SocketAuditSink`) writes a new run, and the decision's run is then another.
        current = _sink_run(self._sink)
        run_id = (
            current
            if current is not None and current != self._sink_run_at_start
            else (self._run_id)
        )
        record = approval_record(
            pending, resolution, approver=approver, wait_ns=wait_ns, run_id=run_id
        )
        try:
            address = self._sink.append(APPROVALS_TOPIC, record)
        except Exception as exc:
            _log.error("ghost.audit_failed", decision_id=decision_id, error=type_name(exc))
            self._release(decision_id)
            if isinstance(exc, AuditError):
                raise
            raise AuditError(
                f"the resolution of decision {decision_id} could not be recorded"
                f" ({type_name(exc)}); the action must not run"
            ) from exc
        return ResolutionRecord(address, record["wait_ns"])

    def _approval(
        self, pending: PendingApproval, resolution: Resolution, logged: ResolutionRecord
    ) -> Approval:
        approver = resolution.approver
        return Approval(
            decision_id=pending.decision_id,
            decision_sha256=pending.decision_sha256,
            decision_run_id=pending.run_id,
            outcome=resolution.outcome,
            approver=None if approver is None else self._recorded(approver),
            final_verdict=final_verdict(pending, resolution),
            wait_ns=logged.wait_ns,
            executed_args_sha256=pending.executed_args_sha256,
            policy_sha256=pending.policy_sha256,
            expires_ns=pending.expires_ns,
            resolved_ns=min(INT64_MAX, max(0, resolution.resolved_ns)),  # the record's stamp
            approval_sha256=logged.approval_sha256,
        )


def _sink_run(sink: object) -> str | None:
    """The id of the run ``sink`` writes now, or None when it does not say (never raises)."""
    try:
        run_id = getattr(sink, "run_id", None)
    except Exception:  # noqa: BLE001 - a sink's property that fails says nothing
        return None
    return run_id if isinstance(run_id, str) else None
