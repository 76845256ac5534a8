"""`gate.approvals`: resolve, wait for, expire and execute pending decisions (SPEC §3, ADR 0016).

The queue is the gate's side of human approval. Its state that matters lives
in an `ApprovalStore` (in memory, or SQLite so that another process -- an
operator's ``ghost approvals approve`` -- can resolve, and a restarted agent can
pick up what waited). The queue adds what only the agent process can do:

* **audit** every resolution as a ``/approvals`` record on the gate's sink,
  linked to its decision by ``decision_sha256`` (and, for a decision of an
  earlier run, ``decision_run_id``), then tell the store it is logged
  (`ApprovalStore.mark_recorded`). A resolution the store holds but no log
  does yet -- made by another process, or before a restart -- is recorded the
  next time the queue looks (`sweep`: every gate call, every `wait` poll, the
  sink's close);
* **expire** what waited past its deadline: the store gets an ``expired``
  resolution (final verdict ``deny``) no later than the next gate call,
  `wait`, or the sink's close;
* **measure** ``wait_ns`` on the gate's monotonic clock;
* **wake** waiters: `wait` blocks its thread on a condition; `wait_async`
  awaits a future on its own loop, so a thousand of them cost no thread each;
* **check at execution** (`execute`): the approval is the store's, approved,
  not expired, not used yet, under the policy the gate runs now, for exactly
  the arguments about to run.

Deadlines are wall-clock (``expires_ns``), because they must mean the same in
another process and after a restart; the queue reads them from the gate's
clock, so a `runtime.testing.ManualClock` makes expiry deterministic. How
long a caller's own `wait` blocks is real time (`time.monotonic`), whatever the
gate's clock says.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from runtime._approval import Approval, check_decision_id, wait_limit_ns
from runtime._approval_binding import ApprovalBinding
from runtime._approval_recorder import APPROVALS_TOPIC, CLAIM_LEASE_NS, ApprovalRecorder
from runtime._approval_store import ApprovalStore, PendingApproval, Resolution, check_resolution
from runtime._clock import Clock
from runtime._errors import ApprovalError, ApprovalStoreError, AuditError
from runtime._logging import get_event_log
from runtime._recorded import type_name
from runtime._sink import AuditSink
from runtime._snapshot import Snapshotter

__all__ = ["APPROVALS_TOPIC", "ApprovalQueue"]

_log = get_event_log("ghost.approvals")
_HEAP_SLACK: Final = 64


class ApprovalQueue:
    """The approval queue of one gate: ``gate.approvals``. Thread-safe.

    Built by `runtime.Gate`; use it through the gate.

    Args:
        store: where pending approvals and resolutions are kept.
        sink: the gate's audit sink, which receives the ``/approvals`` records.
        clock: the gate's clock (wall clock for deadlines, monotonic for ``wait_ns``).
        policy_sha256: the policy the gate runs; `execute` refuses approvals of another.
        snapshotter: the gate's snapshotter: `execute` takes arguments as the gate does.
        recorded: the gate's `RecordedText` (scrubs and escapes an approver's name).
        run_id: the id of the run the sink writes (None when the sink does not say).
        poll_s: how often a waiter (and the gate) looks for resolutions made elsewhere.
        on_settled: called (outside the queue's lock) with each approval settled
            here; the gate settles the budget a pending decision held (ADR 0032).
            What it raises is logged, never propagated.

    Raises:
        AuditError: a resolution the store held unrecorded could not be recorded.
    """

    def __init__(
        self,
        *,
        store: ApprovalStore,
        sink: AuditSink,
        clock: Clock,
        policy_sha256: str,
        snapshotter: Snapshotter,
        recorded: Callable[[object], str],
        run_id: str | None,
        poll_s: float,
        on_settled: Callable[[Approval], None] | None = None,
    ) -> None:
        self._on_settled = on_settled
        self._store = store
        self._clock = clock
        self._run_id = run_id
        self._poll_ns = math.ceil(poll_s * 1_000_000_000)  # the gate admits 0 < poll_s <= 60
        self._poll_s = poll_s
        self._cond = threading.Condition(threading.Lock())
        # Guarded by _cond (never held while calling into the recorder: it calls back):
        self._known: dict[str, int] = {}  # decision id -> monotonic ns at the pending verdict
        self._deadlines: list[tuple[int, str]] = []  # heap of (expires_ns, decision id)
        self._settled_count = 0  # how many approvals were settled: a waiter's wake-up test
        self._async_waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]]
        self._async_waiters = {}
        self._recorder = ApprovalRecorder(
            store=store,
            sink=sink,
            clock=clock,
            recorded=recorded,
            run_id=run_id,
            started_ns=self._started_ns,
            settled=self._settled,
        )
        self._binding = ApprovalBinding(
            store=store, clock=clock, policy_sha256=policy_sha256, snapshotter=snapshotter
        )
        # A restart: what waited in the store, and what was resolved but never logged.
        for pending in store.pending():
            self._adopt(pending)
        self._next_poll_ns = time.monotonic_ns() + self._poll_ns
        for pending, resolution in store.unrecorded():
            self._adopt(pending)
            self._recorder.settle(pending, resolution)

    @property
    def store(self) -> ApprovalStore:
        """The store the queue keeps its state in."""
        return self._store

    @property
    def run_id(self) -> str | None:
        """The id of the run the gate's sink writes (None when the sink does not say)."""
        return self._run_id

    @property
    def poll_s(self) -> float:
        """Seconds between looks at the store for resolutions made elsewhere."""
        return self._poll_s

    # -- called by the gate ---------------------------------------------------------------

    def register(self, pending: PendingApproval, verdict_monotonic_ns: int) -> None:
        """Keep a new pending decision (the gate calls this before `check` returns).

        Raises:
            ApprovalError: the store already holds this decision.
            Exception: whatever the store raises; the gate fails closed on it.
        """
        self._store.add(pending)
        with self._cond:
            self._known[pending.decision_id] = verdict_monotonic_ns
            heapq.heappush(self._deadlines, (pending.expires_ns, pending.decision_id))

    def sweep(self, *, force: bool = False) -> None:
        """Record every due expiry and, once per poll interval, resolutions made elsewhere.

        Called by every gate call, every `wait` poll and the sink's close
        (``force``: look at the store now). A store that fails is logged and
        left for the next sweep; a decision the store no longer knows is
        logged and dropped. Nothing becomes runnable because of either.

        Raises:
            AuditError: a resolution could not be recorded (it stays in the
                store, unrecorded, for the next sweep or run).
        """
        now = self._clock.time_ns()
        with self._cond:
            due = self._pop_due(now)
        self._sweep(due, now, lambda: self._poll(force=force))

    def close_hook(self) -> None:
        """What the sink calls as it closes: record due expiries and outside resolutions."""
        self.sweep(force=True)

    # -- the public API -------------------------------------------------------------------

    def pending(self) -> tuple[PendingApproval, ...]:
        """Return the decisions that wait for a human, oldest first.

        Expired ones are recorded as expired first, so they are not listed.

        Raises:
            AuditError: an expiry could not be recorded.
        """
        self.sweep()
        now = self._clock.time_ns()
        return tuple(p for p in self._store.pending() if p.expires_ns > now)

    def resolve(self, decision_id: str, *, approved: bool, approver: str) -> Approval:
        """Approve or reject a pending decision, record it, and return the approval.

        Args:
            decision_id: the pending decision's id.
            approved: True to approve, False to reject.
            approver: who decides; must be allowed by every matching rule that
                lists approvers (rejections too).

        Returns:
            The recorded `Approval` (``approved`` or ``rejected``).

        Raises:
            ApprovalError: unknown id; already resolved (the message names the
                outcome); expired (then recorded as ``expired``); the approver is
                not allowed, empty, too long, or holds control characters.
            TypeError: ``approved`` is not a bool.
            AuditError: the resolution could not be recorded (it is kept in the
                store and recorded by a later sweep; the action must not run now).
        """
        check_decision_id(decision_id)
        if type(approved) is not bool:
            raise TypeError(f"approved must be True or False, not {type_name(approved)}")
        if type(approver) is not str:
            raise ApprovalError(f"an approver is a name (a str), not {type_name(approver)}")
        pending, existing = self._store.get(decision_id)
        self._adopt(pending)
        if existing is not None:
            self._recorder.settle(pending, existing)
            raise ApprovalError(f"decision {decision_id} is already resolved ({existing.outcome})")
        now = self._clock.time_ns()
        if now >= pending.expires_ns:  # record the expiry; check_resolution then refuses
            self._recorder.settle(pending, self._expire_one(pending, now))
        resolution = Resolution(decision_id, "approved" if approved else "rejected", approver, now)
        check_resolution(pending, resolution)
        try:
            stored = self._store.resolve(resolution)
        except ApprovalError:
            # Another resolver won the race: log what won, then say so.
            _, won = self._store.get(decision_id)
            if won is not None:
                self._recorder.settle(pending, won)
            raise
        return self._settle_now(pending, stored)

    def wait(self, decision_id: str, timeout_s: float) -> Approval:
        """Block this thread until the decision is resolved or expires; return the approval.

        A resolution from another thread wakes it at once; one made by another
        process through the store is seen within the poll interval. An expiry
        is recorded as ``expired`` (final verdict ``deny``).

        Args:
            decision_id: the pending decision's id.
            timeout_s: the longest this call blocks, in seconds (real time);
                ``math.inf`` waits until resolution or expiry.

        Returns:
            The recorded `Approval`.

        Raises:
            TimeoutError: ``timeout_s`` passed first; the decision stays pending.
            ApprovalError: unknown id.
            TypeError, ValueError: ``timeout_s`` is not a number, is NaN or negative.
            AuditError: the resolution could not be recorded.
        """
        limit_ns = wait_limit_ns(timeout_s)
        check_decision_id(decision_id)
        started = time.monotonic_ns()
        pending, _ = self._store.get(decision_id)
        self._adopt(pending)
        while True:
            self.sweep()
            with self._cond:
                settled = self._settled_count
            approval = self._settle(decision_id)
            if approval is not None:
                return approval
            pause = self._pause_s(pending, started, limit_ns)
            with self._cond:
                if self._settled_count == settled:  # nothing settled since we looked
                    self._cond.wait(pause)

    async def wait_async(self, decision_id: str, timeout_s: float) -> Approval:
        """The asyncio twin of `wait`: never blocks the loop, and holds no thread while waiting.

        The waiter is a future on the running loop that a resolution in this
        process wakes (from any thread). The store is never read on the loop:
        once per poll interval one waiter of the queue claims the poll and runs
        it in a worker thread for every waiter at once (due expiries, outside
        resolutions, the decisions waited on), so a thousand waiters cost one
        thread hop per interval, not a thousand store reads.

        Raises:
            TimeoutError, ApprovalError, TypeError, ValueError, AuditError: as `wait`.
        """
        limit_ns = wait_limit_ns(timeout_s)
        check_decision_id(decision_id)
        started = time.monotonic_ns()
        loop = asyncio.get_running_loop()
        pending, _ = await asyncio.to_thread(self._store.get, decision_id)
        self._adopt(pending)
        while True:
            waiter: asyncio.Future[None] = loop.create_future()
            with self._cond:
                # Registered before the look at the cache: a settling that the look
                # misses has not called _settled yet, and will wake this waiter.
                self._async_waiters.setdefault(decision_id, []).append((loop, waiter))
            try:
                cached = self._recorder.cached(decision_id)
                if cached is not None:
                    return cached
                sweep = self._claim_sweep()
                if sweep is not None:
                    await asyncio.to_thread(sweep)
                    cached = self._recorder.cached(decision_id)
                    if cached is not None:
                        return cached
                pause = self._pause_s(pending, started, limit_ns)
                await asyncio.wait((waiter,), timeout=pause)
            finally:
                self._forget_waiter(decision_id, loop, waiter)

    def execute(self, approval: Approval, args: Mapping[str, Any]) -> dict[str, Any]:
        """Check that ``approval`` lets ``args`` run now; return the arguments to run.

        Refused unless all of these hold: ``approval`` is an `Approval` the
        store agrees with, its outcome is ``approved``, its deadline has not
        passed, it was not executed before (an approval runs once), the gate
        runs the policy it was made under, and the canonical SHA-256 of
        ``args`` is the approved ``executed_args_sha256``.

        Args:
            approval: what `resolve`, `wait` or `wait_async` returned.
            args: the arguments about to run (normally ``decision.args``).

        Returns:
            A fresh plain-data copy of ``args`` -- run the action with it, not
            with ``args``, which the caller could still change.

        Raises:
            ApprovalError: any of the above does not hold; nothing may run.
        """
        return self._binding.execute(approval, args)

    # -- machinery ------------------------------------------------------------------------

    def _adopt(self, pending: PendingApproval) -> None:
        """Start watching a decision registered elsewhere (an earlier run, another process)."""
        if self._recorder.cached(pending.decision_id) is not None:
            return  # settled here already: nothing left to watch
        with self._cond:
            if pending.decision_id in self._known:
                return
            self._known[pending.decision_id] = self._clock.monotonic_ns()
            heapq.heappush(self._deadlines, (pending.expires_ns, pending.decision_id))

    def _sweep(self, due: list[str], now: int, poll: Callable[[], None]) -> None:
        """Expire the ``due`` decisions, then ``poll``; log a store's failure, raise AuditError."""
        try:
            self._expire(due, now)
            poll()
        except AuditError:
            raise
        except Exception as exc:  # noqa: BLE001 - a store hiccup must not fail a gate call
            _log.warning("ghost.approval_store_failed", error=type_name(exc))

    def _pop_due(self, now: int) -> list[str]:
        """Take the decisions whose deadline is ``now`` or earlier off the heap (under _cond)."""
        due: list[str] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            _, decision_id = heapq.heappop(self._deadlines)
            due.append(decision_id)  # one settled meanwhile is a cache hit in _settle
        return due

    def _expire(self, due: list[str], now: int) -> None:
        for index, decision_id in enumerate(due):
            try:
                if self._settle(decision_id) is None:
                    # Another queue is logging it: look again later, to hand it over.
                    self._retry([decision_id], now + self._poll_ns)
            except ApprovalError as exc:
                if isinstance(exc, ApprovalStoreError):
                    # The store failed (locked, unreadable), it did not refuse: retry.
                    self._retry(due[index:], now)
                    raise
                # The store no longer knows it (or refuses it): there is nothing left to
                # expire, and retrying on every gate call would stop the gate for good.
                _log.warning(
                    "ghost.approval_store_failed", decision_id=decision_id, error=type_name(exc)
                )
                with self._cond:
                    self._known.pop(decision_id, None)
            except Exception:
                self._retry(due[index:], now)
                raise

    def _retry(self, decision_ids: list[str], now: int) -> None:
        """Put deadlines back on the heap, due at ``now``: a later sweep expires them."""
        with self._cond:
            for decision_id in decision_ids:
                heapq.heappush(self._deadlines, (now, decision_id))

    def _take_poll(self, *, force: bool = False) -> bool:
        """Whether the caller looks at the store now: a poll interval has passed, or ``force``.

        Taking the slot starts the next interval, so of many callers at once one polls.
        """
        real = time.monotonic_ns()
        with self._cond:
            taken = force or real >= self._next_poll_ns
            if taken:
                self._next_poll_ns = real + self._poll_ns
        return taken

    def _poll(self, *, force: bool) -> None:
        # Whoever takes the poll slot polls for everyone, async waiters included: a busy
        # gate must not starve them of a resolution another queue logged.
        if self._take_poll(force=force):
            self._poll_for_waiters()

    def _record_unrecorded(self) -> None:
        """Record the store's resolutions that no log holds yet, of the decisions we know."""
        for pending, resolution in self._store.unrecorded():
            # Logged here, but telling the store failed (locked)? Tell it now, or the
            # next run would log the resolution a second time.
            if self._recorder.remark(pending.decision_id):
                continue
            with self._cond:
                ours = pending.decision_id in self._known
            if ours:
                self._recorder.settle(pending, resolution)

    def _settle_waited(self) -> None:
        """Settle every decision an async waiter waits on that the store has settled."""
        with self._cond:
            waited = list(self._async_waiters)
        for decision_id in waited:
            self._settle(decision_id)

    def _claim_sweep(self) -> Callable[[], None] | None:
        """For an async waiter: the sweep due now, claimed so that no other waiter runs it.

        The due deadlines are taken off the heap and the poll slot is taken here,
        each under the lock: a thousand waiters waking at once start one sweep, not
        a thousand. Returns None when nothing is due.
        """
        now = self._clock.time_ns()
        with self._cond:
            due = self._pop_due(now)
        poll = self._take_poll()
        if not due and not poll:
            return None
        return lambda: self._sweep(due, now, self._poll_for_waiters if poll else _nothing)

    def _poll_for_waiters(self) -> None:
        self._record_unrecorded()
        self._settle_waited()

    def _settle(self, decision_id: str) -> Approval | None:
        """Return the decision's approval, expiring and recording it if due; else None.

        None while it waits, and while another queue logs its resolution.
        """
        cached = self._recorder.cached(decision_id)
        if cached is not None:
            with self._cond:  # adopted again while it settled: stop watching it now
                self._known.pop(decision_id, None)
            return cached
        pending, resolution = self._store.get(decision_id)
        if resolution is None:
            now = self._clock.time_ns()
            if now < pending.expires_ns:
                return None
            resolution = self._expire_one(pending, now)
        return self._recorder.settle(pending, resolution)

    def _settle_now(self, pending: PendingApproval, resolution: Resolution) -> Approval:
        """Settle a resolution this caller made, waiting while another queue logs it.

        Another queue can hold the claim only briefly (it logs at once) or until
        its lease lapses (it died): either way this returns within the lease.

        Raises:
            AuditError: it could not be recorded, here or elsewhere, within the lease.
        """
        give_up = time.monotonic_ns() + CLAIM_LEASE_NS + self._poll_ns
        while True:
            approval = self._recorder.settle(pending, resolution)
            if approval is not None:
                return approval
            if time.monotonic_ns() >= give_up:
                raise AuditError(
                    f"the resolution of decision {pending.decision_id} is stored, but no log"
                    " holds it yet (another process claimed it); the action must not run now"
                )
            time.sleep(self._poll_s)

    def _started_ns(self, decision_id: str) -> int | None:
        """When this queue began watching ``decision_id`` (the recorder's ``wait_ns`` origin)."""
        with self._cond:
            return self._known.get(decision_id)

    def _settled(self, approval: Approval) -> None:
        """A decision is settled (logged here or handed over): stop watching it, wake waiters."""
        with self._cond:
            self._known.pop(approval.decision_id, None)
            self._settled_count += 1
            if len(self._deadlines) > 2 * len(self._known) + _HEAP_SLACK:
                # Settled decisions keep their deadlines until due; past this many, keep only
                # those still watched, so memory follows what waits, not the longest timeout.
                self._deadlines = [entry for entry in self._deadlines if entry[1] in self._known]
                heapq.heapify(self._deadlines)
            woken = self._async_waiters.pop(approval.decision_id, [])
            self._cond.notify_all()
        if self._on_settled is not None:
            try:
                self._on_settled(approval)
            except Exception as exc:  # noqa: BLE001 - the approval stands whatever a hook does
                _log.error(
                    "ghost.approval_hook_failed",
                    decision_id=approval.decision_id,
                    error=type_name(exc),
                )
        for loop, waiter in woken:
            # Each future is woken once: its list was popped above, under the lock. A
            # closed loop raises RuntimeError: nobody waits there any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(waiter.set_result, None)

    def _expire_one(self, pending: PendingApproval, now: int) -> Resolution:
        # At or after the deadline, so check_resolution accepts it by construction.
        resolution = Resolution(pending.decision_id, "expired", None, max(now, pending.expires_ns))
        try:
            return self._store.resolve(resolution)
        except ApprovalError:
            _, won = self._store.get(pending.decision_id)  # resolved meanwhile: that stands
            if won is None:
                raise
            return won

    def _pause_s(self, pending: PendingApproval, started: int, limit_ns: int | None) -> float:
        """How long a waiter sleeps before looking again; raises TimeoutError when it is done."""
        pause_ns = self._poll_ns
        if limit_ns is not None:
            remaining = limit_ns - (time.monotonic_ns() - started)
            if remaining <= 0:
                raise TimeoutError(
                    f"decision {pending.decision_id} is still pending after the wait's own"
                    " timeout; it stays pending"
                )
            pause_ns = min(pause_ns, remaining)
        until_expiry = pending.expires_ns - self._clock.time_ns()
        if until_expiry > 0:  # wake at the deadline; past it, another queue is logging it
            pause_ns = min(pause_ns, max(until_expiry, 1_000_000))
        return pause_ns / 1_000_000_000

    def _forget_waiter(
        self, decision_id: str, loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None]
    ) -> None:
        with self._cond:
            waiters = self._async_waiters.get(decision_id)
            if waiters is None:
                return
            try:
                waiters.remove((loop, waiter))
            except ValueError:
                return
            if not waiters:
                del self._async_waiters[decision_id]


def _nothing() -> None:
    return None
