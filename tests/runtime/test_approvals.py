"""The approval queue (`gate.approvals`): registration, resolution, expiry, terms (SPEC §3)."""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from typing import Any

import pytest

from audit import MemoryAuditSink
from runtime import (
    Approval,
    ApprovalError,
    AuditError,
    Gate,
    MemoryApprovalStore,
    PendingApproval,
    Policy,
    Resolution,
    RuntimeVerdict,
    check_resolution,
    value_sha256,
)
from runtime.testing import ManualClock
from tests.runtime.approvals import (
    APPROVAL_POLICY,
    S,
    decision_run,
    held,
    make_gate,
    refund,
    search,
)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()  # no step: waits are exact differences


def _topics(sink: MemoryAuditSink) -> list[str]:
    return [entry.topic for entry in sink.entries]


# --- registration ----------------------------------------------------------------------------


def test_a_pending_decision_is_registered_with_what_was_shown(clock: ManualClock) -> None:
    gate, sink, store = make_gate(clock)
    decision = held(gate, refund(100, "USD"))
    (pending,) = gate.approvals.pending()
    assert pending.decision_id == decision.decision_id
    assert pending.decision_sha256 == decision.decision_sha256
    assert pending.decision_sha256 == sink.entries[-1].sha256  # the /decisions record
    assert pending.run_id == sink.run_id is not None
    assert pending.executed_args_sha256 == value_sha256(decision.args)
    assert decision.args == {"amount": 100, "currency": "EUR"}  # narrowed, then held
    assert pending.held_verdict is RuntimeVerdict.NARROW
    assert pending.policy_sha256 == gate.policy.policy_sha256
    assert pending.approvers == ("alice", "bob")
    assert pending.created_ns == decision.stamp_ns
    assert pending.expires_ns == decision.stamp_ns + 600 * S
    assert (pending.agent, pending.verb, pending.resource) == (
        "support",
        "refund",
        "payments:stripe",
    )
    assert pending.matched_policy == "refunds"
    assert store.get(decision.decision_id) == (pending, None)


def test_an_unchanged_pending_action_holds_allow(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    held(gate, refund(100, "EUR"))
    (pending,) = gate.approvals.pending()
    assert pending.held_verdict is RuntimeVerdict.ALLOW


def test_the_shortest_timeout_and_the_approver_intersection_apply(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(
        gate, refund(5000)
    )  # refunds (600 s; alice, bob) and big-refunds (60 s; bob, carol)
    (pending,) = gate.approvals.pending()
    assert pending.expires_ns == decision.stamp_ns + 60 * S
    assert pending.approvers == ("bob",)
    for name in ("alice", "carol"):
        with pytest.raises(ApprovalError, match="may not resolve"):
            gate.approvals.resolve(decision.decision_id, approved=True, approver=name)
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="bob")
    assert approval.outcome == "approved"


def test_disjoint_approver_lists_let_no_one_approve(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate, refund().__class__("a", "wire", "bank:x", {"amount": 1}))
    (pending,) = gate.approvals.pending()
    assert pending.approvers == ()
    assert pending.expires_ns == decision.stamp_ns + 30 * S
    for name in ("alice", "bob"):
        with pytest.raises(ApprovalError, match="allowed: no one"):
            gate.approvals.resolve(decision.decision_id, approved=False, approver=name)
    clock.advance(30 * S)
    assert gate.approvals.wait(decision.decision_id, timeout_s=0).outcome == "expired"


def test_a_rule_without_approvers_lets_anyone_approve(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate, refund().__class__("a", "transfer", "bank:x", {"amount": 1}))
    (pending,) = gate.approvals.pending()
    assert pending.approvers is None
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="zoe")
    assert approval.approver == "zoe"


def test_registration_that_fails_fails_closed(clock: ManualClock) -> None:
    class BrokenStore(MemoryApprovalStore):
        def add(self, pending: PendingApproval) -> None:
            raise OSError("disk full")

    gate, sink, _ = make_gate(clock, store=BrokenStore())
    with pytest.raises(AuditError, match="could not be registered for approval"):
        gate.check(refund())
    # The log holds the decision as pending and nothing resolves it: the report lists it.
    (decision,) = sink.records("/decisions")
    assert decision["verdict"] == "pending"
    assert sink.records("/approvals") == ()
    assert gate.approvals.pending() == ()
    assert gate.check(search()).verdict == "allow"  # the gate still works


def test_only_pending_decisions_are_registered(clock: ManualClock) -> None:
    gate, _, store = make_gate(clock)
    for action in (search(), refund().__class__("a", "delete", "x", {})):
        gate.check(action)
    assert gate.approvals.pending() == ()
    assert store.pending() == []


# --- resolution ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("approved", "outcome", "final"),
    [(True, "approved", RuntimeVerdict.NARROW), (False, "rejected", RuntimeVerdict.DENY)],
)
def test_a_resolution_is_recorded_and_linked_to_its_decision(
    clock: ManualClock, approved: bool, outcome: str, final: RuntimeVerdict
) -> None:
    gate, sink, store = make_gate(clock)
    decision = held(gate, refund(100, "USD"))
    clock.advance(7 * S)
    approval = gate.approvals.resolve(decision.decision_id, approved=approved, approver="bob")
    assert isinstance(approval, Approval)
    assert approval.outcome == outcome
    assert approval.approved is approved
    assert approval.final_verdict is final
    assert approval.approver == "bob"
    assert approval.wait_ns == 7 * S  # monotonic, pending verdict -> resolution
    assert approval.decision_sha256 == decision.decision_sha256
    assert approval.executed_args_sha256 == value_sha256(decision.args)
    assert approval.policy_sha256 == decision.policy_sha256
    assert approval.resolved_ns == decision.stamp_ns + 7 * S
    assert approval.expires_ns == decision.stamp_ns + 600 * S
    (entry,) = [e for e in sink.entries if e.topic == "/approvals"]
    assert approval.approval_sha256 == entry.sha256
    record = entry.record
    assert record["decision_id"] == decision.decision_id
    assert record["decision_sha256"] == decision.decision_sha256
    assert record["decision_run_id"] is None  # the decision is in this run
    assert record["outcome"] == outcome
    assert record["final_verdict"] == final.value
    assert record["wait_ns"] == 7 * S
    assert record["stamp_ns"] == approval.resolved_ns
    assert record["expires_ns"] == approval.expires_ns
    assert record["executed_args_sha256"] == approval.executed_args_sha256
    assert store.unrecorded() == []  # the store knows it is logged
    assert gate.approvals.pending() == ()


def test_a_second_resolution_is_refused(clock: ManualClock) -> None:
    gate, sink, _ = make_gate(clock)
    decision = held(gate)
    first = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    for approved in (True, False):
        with pytest.raises(ApprovalError, match=r"already resolved \(approved\)"):
            gate.approvals.resolve(decision.decision_id, approved=approved, approver="bob")
    assert len(sink.records("/approvals")) == 1
    assert gate.approvals.wait(decision.decision_id, timeout_s=0) is first


def test_an_unknown_id_is_refused(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    unknown = "019b76da-a800-7181-bd31-8a3bc654f83f"
    with pytest.raises(ApprovalError, match="awaits approval"):
        gate.approvals.resolve(unknown, approved=True, approver="alice")
    with pytest.raises(ApprovalError, match="awaits approval"):
        gate.approvals.wait(unknown, timeout_s=0)
    allowed = gate.check(search())
    with pytest.raises(ApprovalError):  # a decision that was never pending
        gate.approvals.resolve(allowed.decision_id, approved=True, approver="alice")


@pytest.mark.parametrize(
    "bad_id",
    [
        None,
        42,
        b"019b76da-a800-7181-bd31-8a3bc654f83f",
        ["x"],
        "",
        "x" * 1_000_000,
        "019b76da-a800-7181-bd31-8a3bc654f83f\n",
        "019B76DA-A800-7181-BD31-8A3BC654F83F",
        "../../etc/passwd",
        "\x00\x1b[31m",
    ],
)
def test_hostile_ids_are_refused_without_being_echoed(clock: ManualClock, bad_id: Any) -> None:
    gate, _, _ = make_gate(clock)
    held(gate)
    for call in (
        lambda: gate.approvals.resolve(bad_id, approved=True, approver="alice"),
        lambda: gate.approvals.wait(bad_id, timeout_s=0),
    ):
        with pytest.raises(ApprovalError, match="a decision id is a UUID") as caught:
            call()
        message = str(caught.value)
        assert len(message) < 200
        assert "\x00" not in message
        assert "\x1b" not in message
        assert "\n" not in message


@pytest.mark.parametrize(
    "approver",
    ["", " alice", "alice ", "ali\nce", "alice\x00", "bob\u202e", "\x1b[2J", "a" * 257, 7, None],
)
def test_hostile_approver_names_are_refused(clock: ManualClock, approver: Any) -> None:
    gate, sink, _ = make_gate(clock, policy=_anyone_may_approve())
    decision = held(gate)
    with pytest.raises(ApprovalError, match="approver"):
        gate.approvals.resolve(decision.decision_id, approved=True, approver=approver)
    assert sink.records("/approvals") == ()
    assert len(gate.approvals.pending()) == 1


def test_a_long_printable_approver_is_allowed_up_to_the_bound(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock, policy=_anyone_may_approve())
    decision = held(gate)
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="é" * 256)
    assert approval.approver == "é" * 256


def test_approved_must_be_a_bool(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    for value in (1, "yes", None):
        with pytest.raises(TypeError, match="approved"):
            gate.approvals.resolve(decision.decision_id, approved=value, approver="alice")  # type: ignore[arg-type]
    assert len(gate.approvals.pending()) == 1


def test_a_secret_in_an_approver_name_is_scrubbed_in_the_log(clock: ManualClock) -> None:
    gate, sink, _ = make_gate(clock, policy=_anyone_may_approve())
    decision = held(gate)
    approval = gate.approvals.resolve(
        decision.decision_id, approved=True, approver="AKIAIOSFODNN7EXAMPLE"
    )
    assert "AKIAIOSFODNN7EXAMPLE" not in str(sink.records("/approvals"))
    assert approval.approver == sink.records("/approvals")[0]["approver"]


# --- expiry ----------------------------------------------------------------------------------


def test_expiry_is_recorded_by_the_next_gate_call_as_expired(clock: ManualClock) -> None:
    gate, sink, store = make_gate(clock)
    decision = held(gate)
    clock.advance(600 * S)
    gate.check(search())
    assert _topics(sink)[-3:] == ["/approvals", "/assessments", "/decisions"]
    (record,) = sink.records("/approvals")
    assert record["outcome"] == "expired"  # never "rejected"
    assert record["approver"] is None
    assert record["final_verdict"] == "deny"
    assert record["wait_ns"] == 600 * S
    assert record["stamp_ns"] == decision.stamp_ns + 600 * S
    _, resolution = store.get(decision.decision_id)
    assert resolution is not None
    assert resolution.outcome == "expired"


def test_one_nanosecond_before_the_deadline_it_can_still_be_approved(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    clock.advance(600 * S - 1)
    gate.check(search())
    assert len(gate.approvals.pending()) == 1
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    assert approval.outcome == "approved"


def test_at_the_deadline_a_resolution_is_refused_and_the_expiry_recorded(
    clock: ManualClock,
) -> None:
    gate, sink, _ = make_gate(clock)
    decision = held(gate)
    clock.advance(600 * S)
    with pytest.raises(ApprovalError, match="has expired"):
        gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    (record,) = sink.records("/approvals")
    assert record["outcome"] == "expired"
    with pytest.raises(ApprovalError, match=r"already resolved \(expired\)"):
        gate.approvals.resolve(decision.decision_id, approved=False, approver="alice")
    assert len(sink.records("/approvals")) == 1


def test_expiry_is_recorded_by_wait(clock: ManualClock) -> None:
    gate, sink, _ = make_gate(clock)
    decision = held(gate)
    clock.advance(601 * S)
    approval = gate.approvals.wait(decision.decision_id, timeout_s=0)
    assert approval.outcome == "expired"
    assert approval.final_verdict is RuntimeVerdict.DENY
    assert approval.approver is None
    assert approval.wait_ns == 601 * S
    assert sink.records("/approvals")[0]["outcome"] == "expired"


def test_wait_records_every_due_expiry_not_only_its_own(clock: ManualClock) -> None:
    gate, sink, _ = make_gate(clock)
    short = held(gate, refund(5000))  # 60 s
    long = held(gate, refund(100))  # 600 s
    clock.advance(60 * S)
    with pytest.raises(TimeoutError):
        gate.approvals.wait(long.decision_id, timeout_s=0)
    (record,) = sink.records("/approvals")
    assert record["decision_id"] == short.decision_id
    assert [p.decision_id for p in gate.approvals.pending()] == [long.decision_id]


def test_expiry_is_recorded_at_the_sinks_close_before_the_seal(clock: ManualClock) -> None:
    gate, sink, _ = make_gate(clock)
    held(gate)
    clock.advance(600 * S)
    sink.close()
    topics = _topics(sink)
    assert topics[-3:] == ["/approvals", "/checkpoints", "/seal"]
    assert sink.records("/approvals")[0]["outcome"] == "expired"


def test_a_close_before_the_deadline_leaves_it_pending(clock: ManualClock) -> None:
    gate, sink, store = make_gate(clock)
    decision = held(gate)
    clock.advance(599 * S)
    sink.close()
    assert sink.records("/approvals") == ()
    assert [p.decision_id for p in store.pending()] == [decision.decision_id]


def test_pending_lists_oldest_first_and_omits_the_expired(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    first = held(gate, refund(100))
    clock.advance(S)
    big = held(gate, refund(5000))
    clock.advance(S)
    third = held(gate, refund(200))
    ids = [p.decision_id for p in gate.approvals.pending()]
    assert ids == [first.decision_id, big.decision_id, third.decision_id]
    clock.advance(59 * S)
    assert [p.decision_id for p in gate.approvals.pending()] == [
        first.decision_id,
        third.decision_id,
    ]


# --- wait ------------------------------------------------------------------------------------


def test_wait_blocks_until_another_thread_approves(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    results: list[Approval] = []
    waiter = threading.Thread(
        target=lambda: results.append(gate.approvals.wait(decision.decision_id, timeout_s=60))
    )
    waiter.start()
    waiter.join(timeout=0.3)
    assert waiter.is_alive()  # still blocked: nothing resolved it
    clock.advance(3 * S)
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    waiter.join(timeout=30)
    assert not waiter.is_alive()
    assert results == [approval]
    assert results[0] is approval
    assert approval.wait_ns == 3 * S


def test_wait_sees_a_resolution_made_through_the_store_within_the_poll(
    clock: ManualClock,
) -> None:
    # What another process (``ghost approvals approve``) does: check, then resolve in the store.
    gate, sink, store = make_gate(clock, poll_s=0.01)
    decision = held(gate)
    results: list[Approval] = []
    waiter = threading.Thread(
        target=lambda: results.append(gate.approvals.wait(decision.decision_id, timeout_s=60))
    )
    waiter.start()
    pending, _ = store.get(decision.decision_id)
    clock.advance(2 * S)
    resolution = Resolution(decision.decision_id, "rejected", "bob", clock.time_ns())
    check_resolution(pending, resolution)
    store.resolve(resolution)
    waiter.join(timeout=30)
    assert not waiter.is_alive()
    (approval,) = results
    assert approval.outcome == "rejected"
    assert approval.approver == "bob"
    assert approval.wait_ns >= 2 * S  # measured by this process, to when it saw it
    assert sink.records("/approvals")[0]["outcome"] == "rejected"
    assert store.unrecorded() == []


def test_a_resolution_made_through_the_store_is_recorded_by_the_next_check(
    clock: ManualClock,
) -> None:
    gate, sink, store = make_gate(clock, poll_s=0.001)
    decision = held(gate)
    _pending, _ = store.get(decision.decision_id)
    store.resolve(Resolution(decision.decision_id, "approved", "alice", clock.time_ns()))
    time.sleep(0.01)  # past the poll interval (real time paces polling, not the gate's clock)
    gate.check(search())
    assert _topics(sink)[-3] == "/approvals"
    assert store.unrecorded() == []


def test_wait_raises_timeout_error_and_the_decision_stays_pending(clock: ManualClock) -> None:
    gate, sink, _ = make_gate(clock)
    decision = held(gate)
    for timeout in (0, 0.0, 0.05):
        with pytest.raises(TimeoutError, match="stays pending"):
            gate.approvals.wait(decision.decision_id, timeout_s=timeout)
    assert sink.records("/approvals") == ()
    assert [p.decision_id for p in gate.approvals.pending()] == [decision.decision_id]
    approval = gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    assert approval.outcome == "approved"


@pytest.mark.parametrize("timeout", [math.nan, -1, -0.001, -(10**400)])
def test_wait_refuses_a_negative_or_nan_timeout(clock: ManualClock, timeout: float) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    with pytest.raises(ValueError, match="timeout_s"):
        gate.approvals.wait(decision.decision_id, timeout_s=timeout)


@pytest.mark.parametrize("timeout", ["1", None, True, [1], 1j])
def test_wait_refuses_a_timeout_that_is_not_a_number(clock: ManualClock, timeout: Any) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    with pytest.raises(TypeError, match="timeout_s"):
        gate.approvals.wait(decision.decision_id, timeout_s=timeout)


@pytest.mark.parametrize("timeout", [math.inf, 10**400, 1e300])
def test_an_unbounded_wait_ends_at_the_resolution(clock: ManualClock, timeout: float) -> None:
    gate, _, _ = make_gate(clock)
    decision = held(gate)
    results: list[Approval] = []
    waiter = threading.Thread(
        target=lambda: results.append(gate.approvals.wait(decision.decision_id, timeout))
    )
    waiter.start()
    gate.approvals.resolve(decision.decision_id, approved=False, approver="alice")
    waiter.join(timeout=30)
    assert [a.outcome for a in results] == ["rejected"]


def test_a_waiter_sees_the_expiry_when_the_clock_passes_the_deadline(clock: ManualClock) -> None:
    gate, _, _ = make_gate(clock, poll_s=0.01)
    decision = held(gate)
    results: list[Approval] = []
    waiter = threading.Thread(
        target=lambda: results.append(gate.approvals.wait(decision.decision_id, timeout_s=60))
    )
    waiter.start()
    clock.advance(600 * S)
    waiter.join(timeout=30)
    assert [a.outcome for a in results] == ["expired"]


def test_concurrent_resolvers_exactly_one_wins(clock: ManualClock) -> None:
    gate, sink, _ = make_gate(clock)
    decision = held(gate)
    barrier = threading.Barrier(8)
    won: list[Approval] = []
    lost: list[ApprovalError] = []

    def resolve(index: int) -> None:
        barrier.wait()
        try:
            won.append(
                gate.approvals.resolve(
                    decision.decision_id, approved=index % 2 == 0, approver="alice"
                )
            )
        except ApprovalError as exc:
            lost.append(exc)

    threads = [threading.Thread(target=resolve, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(won) == 1
    assert len(lost) == 7
    assert all("already resolved" in str(exc) for exc in lost)
    assert len(sink.records("/approvals")) == 1


# --- recording failures ----------------------------------------------------------------------


class _FailingApprovals(MemoryAuditSink):
    """A sink whose ``/approvals`` appends fail while ``failing`` is set."""

    failing = True

    def append(self, topic: str, record: Any) -> str:
        if topic == "/approvals" and self.failing:
            raise OSError("disk full")
        return super().append(topic, record)


def test_a_resolution_that_cannot_be_recorded_raises_and_is_recorded_later(
    clock: ManualClock,
) -> None:
    sink = _FailingApprovals()
    gate, _, store = make_gate(clock, sink=sink, poll_s=0.001)
    decision = held(gate)
    with pytest.raises(AuditError, match="could not be recorded"):
        gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    assert [p.decision_id for p, _ in store.unrecorded()] == [decision.decision_id]
    sink.failing = False
    time.sleep(0.01)
    gate.check(search())  # the next sweep records it
    (record,) = sink.records("/approvals")
    assert record["outcome"] == "approved"
    assert store.unrecorded() == []
    approval = gate.approvals.wait(decision.decision_id, timeout_s=0)
    assert (
        approval.approval_sha256 == next(e for e in sink.entries if e.topic == "/approvals").sha256
    )


def test_an_expiry_that_cannot_be_recorded_fails_the_gate_call(clock: ManualClock) -> None:
    sink = _FailingApprovals()
    gate, _, _ = make_gate(clock, sink=sink)
    held(gate)
    clock.advance(600 * S)
    with pytest.raises(AuditError):
        gate.check(search())
    sink.failing = False
    assert gate.check(search()).verdict == "allow"
    assert [r["outcome"] for r in sink.records("/approvals")] == ["expired"]


def test_a_store_that_fails_while_sweeping_does_not_fail_the_gate(clock: ManualClock) -> None:
    class FlakyStore(MemoryApprovalStore):
        broken = False

        def unrecorded(self) -> list[tuple[PendingApproval, Resolution]]:
            if self.broken:
                raise RuntimeError("database is locked")
            return super().unrecorded()

    store = FlakyStore()
    gate, _, _ = make_gate(clock, store=store, poll_s=0.001)
    store.broken = True
    time.sleep(0.01)
    assert gate.check(search()).verdict == "allow"


# --- the gate's arguments --------------------------------------------------------------------


@pytest.mark.parametrize("poll", [0, -1, math.nan, math.inf, 61, "0.2", True, None])
def test_the_poll_interval_must_be_a_sensible_number(clock: ManualClock, poll: Any) -> None:
    with pytest.raises(ValueError, match="approval_poll_s"):
        Gate(
            Policy.from_dict(APPROVAL_POLICY),
            sink=MemoryAuditSink(),
            clock=clock,
            approval_poll_s=poll,
        )


def test_approvals_must_be_a_store(clock: ManualClock) -> None:
    with pytest.raises(TypeError, match="ApprovalStore"):
        Gate(Policy.from_dict(APPROVAL_POLICY), sink=MemoryAuditSink(), approvals=object())  # type: ignore[arg-type]


def test_the_default_store_is_in_memory_and_per_gate(clock: ManualClock) -> None:
    policy = Policy.from_dict(APPROVAL_POLICY)
    one = Gate(policy, sink=MemoryAuditSink(), clock=clock)
    two = Gate(policy, sink=MemoryAuditSink(), clock=clock)
    assert isinstance(one.approvals.store, MemoryApprovalStore)
    assert one.approvals.store is not two.approvals.store
    assert one.approvals.poll_s == 0.2
    held(one)
    assert two.approvals.pending() == ()


def _anyone_may_approve() -> dict[str, Any]:
    policy = dict(APPROVAL_POLICY)
    policy["rules"] = [
        {"id": "refunds", "verbs": ["refund"], "effect": "approval", "approval": {"timeout_s": 60}}
    ]
    return policy


def test_a_replaced_approval_is_still_an_approval() -> None:
    # Approval is a frozen value: changing a field needs a new object (execute compares them).
    approval = Approval(
        decision_id="d",
        decision_sha256="a" * 64,
        decision_run_id=None,
        outcome="approved",
        approver="alice",
        final_verdict=RuntimeVerdict.ALLOW,
        wait_ns=1,
        executed_args_sha256="b" * 64,
        policy_sha256="c" * 64,
        expires_ns=2,
        resolved_ns=1,
        approval_sha256="d" * 64,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        approval.outcome = "rejected"  # type: ignore[misc]
    assert not dataclasses.replace(approval, outcome="expired").approved


# --- the terms of a hold, unit by unit -------------------------------------------------------


def _rule(rule_id: str, timeout_s: float, approvers: tuple[str, ...] | None) -> Any:
    from runtime import ApprovalSpec, Effect, Rule

    return Rule(rule_id, Effect.APPROVAL, approval=ApprovalSpec(timeout_s, approvers))


def test_terms_take_the_shortest_timeout_rounded_up_to_a_nanosecond() -> None:
    from runtime import Effect, Rule
    from runtime._approval import approval_terms

    rules = [
        Rule("allow", Effect.ALLOW),
        _rule("a", 2.5, None),
        _rule("b", 1e-10, None),
        _rule("c", 3, None),
    ]
    assert approval_terms(rules).timeout_ns == 1
    assert approval_terms(rules[:2]).timeout_ns == 2_500_000_000
    assert approval_terms(rules[:2]).approvers is None


def test_terms_intersect_only_the_rules_that_list_approvers() -> None:
    from runtime._approval import approval_terms

    terms = approval_terms(
        [_rule("a", 9, ("x", "y", "z")), _rule("b", 9, None), _rule("c", 9, ("z", "y", "q"))]
    )
    assert terms.approvers == ("y", "z")
    assert approval_terms([_rule("a", 9, ())]).approvers == ()


def test_a_timeout_past_int64_is_clamped() -> None:
    from runtime._approval import INT64_MAX, approval_terms

    assert approval_terms([_rule("a", 1e300, None)]).timeout_ns == INT64_MAX


@pytest.mark.parametrize("timeout", [0, -1, math.inf, math.nan])
def test_a_timeout_that_policy_loading_refuses_is_refused_here_too(timeout: float) -> None:
    from runtime._approval import approval_terms

    with pytest.raises(ValueError, match="positive finite"):
        approval_terms([_rule("a", timeout, None)])


def test_terms_need_an_approval_rule() -> None:
    from runtime import Effect, Rule
    from runtime._approval import approval_terms

    with pytest.raises(ValueError, match="at least one approval rule"):
        approval_terms([Rule("allow", Effect.ALLOW)])


def test_a_deadline_past_int64_is_clamped_in_the_record(clock: ManualClock) -> None:
    policy = dict(APPROVAL_POLICY)
    policy["rules"] = [
        {"id": "r", "verbs": ["refund"], "effect": "approval", "approval": {"timeout_s": 1e300}}
    ]
    gate, sink, _ = make_gate(clock, policy=policy)
    decision = held(gate)
    (pending,) = gate.approvals.pending()
    assert pending.expires_ns == 2**63 - 1
    gate.approvals.resolve(decision.decision_id, approved=True, approver="x")
    assert sink.records("/approvals")[0]["expires_ns"] == 2**63 - 1


def test_a_gate_call_does_not_scan_the_store(clock: ManualClock) -> None:
    # The sweep each check does is a look at the earliest deadline; the store is
    # polled once per interval (60 s here), not once per check.
    class CountingStore(MemoryApprovalStore):
        scans = 0

        def unrecorded(self) -> list[tuple[PendingApproval, Resolution]]:
            CountingStore.scans += 1
            return super().unrecorded()

        def pending(self) -> list[PendingApproval]:
            CountingStore.scans += 1
            return super().pending()

    gate, _, _ = make_gate(clock, store=CountingStore(), poll_s=60)
    scans_at_start = CountingStore.scans
    for index in range(300):
        held(gate, refund(100 + index))
        gate.check(search())
    assert CountingStore.scans == scans_at_start
    assert scans_at_start == 2  # what waited, and what no log holds: once, at the start


def test_a_decision_that_vanished_from_the_store_does_not_stop_the_gate(
    clock: ManualClock,
) -> None:
    class ForgetfulStore(MemoryApprovalStore):
        forgotten: frozenset[str] = frozenset()

        def get(self, decision_id: str) -> tuple[PendingApproval, Resolution | None]:
            if decision_id in self.forgotten:
                raise ApprovalError(f"no decision {decision_id} awaits approval")
            return super().get(decision_id)

    store = ForgetfulStore()
    gate, sink, _ = make_gate(clock, store=store)
    decision = held(gate)
    other = held(gate, refund(300))
    store.forgotten = frozenset({decision.decision_id})  # an operator deleted its row
    clock.advance(600 * S)
    for _ in range(3):
        assert gate.check(search()).verdict == "allow"
    # The other one, still known, expired as usual.
    assert [r["decision_id"] for r in sink.records("/approvals")] == [other.decision_id]


def test_a_store_that_fails_while_expiring_is_retried_by_the_next_sweep(
    clock: ManualClock,
) -> None:
    class FlakyStore(MemoryApprovalStore):
        failures = 1

        def resolve(self, resolution: Resolution) -> Resolution:
            if self.failures:
                self.failures -= 1
                raise RuntimeError("database is locked")
            return super().resolve(resolution)

    gate, sink, _ = make_gate(clock, store=FlakyStore())
    decision = held(gate)
    clock.advance(600 * S)
    assert gate.check(search()).verdict == "allow"  # the failure is logged, not raised
    assert sink.records("/approvals") == ()
    gate.check(search())
    (record,) = sink.records("/approvals")
    assert (record["decision_id"], record["outcome"]) == (decision.decision_id, "expired")


# --- what a new queue picks up, and races ----------------------------------------------------


def test_a_new_queue_expires_what_waited_in_the_store_at_its_next_check(
    clock: ManualClock,
) -> None:
    store = MemoryApprovalStore()
    first, _, _ = make_gate(clock, store=store)
    decision = held(first)
    second, sink, _ = make_gate(clock, store=store)  # a restart over the same store
    clock.advance(600 * S)
    second.check(search())  # no wait, no resolve: the new queue knew it from the start
    (record,) = sink.records("/approvals")
    assert (record["decision_id"], record["outcome"]) == (decision.decision_id, "expired")
    assert record["decision_run_id"] == decision_run(first)
    assert store.unrecorded() == []


def test_two_live_queues_on_one_store_log_a_resolution_once(clock: ManualClock) -> None:
    store = MemoryApprovalStore()
    first, first_sink, _ = make_gate(clock, store=store)
    decision = held(first)
    second, second_sink, _ = make_gate(clock, store=store)  # another agent, same store
    store.resolve(Resolution(decision.decision_id, "approved", "bob", clock.time_ns()))

    second.approvals.sweep(force=True)  # the first to look logs it, naming the deciding run
    first.approvals.sweep(force=True)  # the deciding agent finds it logged: not twice

    assert first_sink.records("/approvals") == ()
    (entry,) = [e for e in second_sink.entries if e.topic == "/approvals"]
    assert entry.record["decision_run_id"] == decision_run(first)
    # The deciding agent is handed the same approval: one record, one address everywhere.
    handed = first.approvals.wait(decision.decision_id, timeout_s=5)
    assert handed.approval_sha256 == entry.sha256
    assert handed.wait_ns == entry.record["wait_ns"]
    assert handed == second.approvals.wait(decision.decision_id, timeout_s=5)
    # It runs once, whichever agent runs it.
    first.approvals.execute(handed, decision.args)
    with pytest.raises(ApprovalError, match="already executed"):
        second.approvals.execute(handed, decision.args)


class SlowSink(MemoryAuditSink):
    """A real memory sink that takes its time over each ``/approvals`` record.

    It widens the moment between deciding to log a resolution and the store
    knowing it is logged, where two queues without a claim would both log it.
    """

    def append(self, topic: str, record: Any) -> str:
        if topic == "/approvals":
            time.sleep(0.005)
        return super().append(topic, record)


def test_queues_sweeping_at_the_same_moment_log_each_resolution_once(
    clock: ManualClock,
) -> None:
    store = MemoryApprovalStore()
    first, first_sink, _ = make_gate(clock, store=store, sink=SlowSink())
    decisions = [held(first, refund(100 + i)) for i in range(12)]
    second, second_sink, _ = make_gate(clock, store=store, sink=SlowSink())
    for decision in decisions:
        store.resolve(Resolution(decision.decision_id, "approved", "bob", clock.time_ns()))
    barrier = threading.Barrier(2)

    def sweep(gate: Gate) -> None:
        barrier.wait()
        gate.approvals.sweep(force=True)

    threads = [threading.Thread(target=sweep, args=(gate,)) for gate in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    logged = [*first_sink.records("/approvals"), *second_sink.records("/approvals")]
    assert sorted(r["decision_id"] for r in logged) == sorted(d.decision_id for d in decisions)
    assert store.unrecorded() == []


def test_a_queue_stops_watching_what_is_settled(clock: ManualClock) -> None:
    # Memory bounded by what waits: every path that settles a decision forgets it,
    # however often a caller comes back to it. (White-box: what the queue watches.)
    gate, _, store = make_gate(clock)
    resolved = [held(gate, refund(100 + i)) for i in range(3)]
    expiring = held(gate, refund(200))
    outside = held(gate, refund(300))
    for decision in resolved:
        gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
        gate.approvals.wait(decision.decision_id, timeout_s=1)
        with pytest.raises(ApprovalError, match="already resolved"):
            gate.approvals.resolve(decision.decision_id, approved=False, approver="alice")
    store.resolve(Resolution(outside.decision_id, "rejected", "bob", clock.time_ns()))
    gate.approvals.sweep(force=True)
    assert set(gate.approvals._known) == {expiring.decision_id}
    clock.advance(601 * S)
    gate.check(search())
    assert gate.approvals._known == {}
    for decision in (*resolved, expiring, outside):
        gate.approvals.wait(decision.decision_id, timeout_s=1)
    assert gate.approvals._known == {}


def test_the_deadline_heap_follows_what_waits_not_the_longest_timeout(
    clock: ManualClock,
) -> None:
    # White-box: every settled decision keeps a deadline until it is due (ten minutes here);
    # the heap is rebuilt from what is still watched once it holds twice as many.
    gate, _, _ = make_gate(clock)
    waiting = held(gate, refund(99))
    for index in range(300):
        decision = held(gate, refund(100 + index))
        gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    queue = gate.approvals
    assert set(queue._known) == {waiting.decision_id}
    assert len(queue._deadlines) <= 2 * len(queue._known) + 64
    assert waiting.decision_id in {decision_id for _, decision_id in queue._deadlines}
    clock.advance(601 * S)
    gate.check(search())  # the one still watched expires, from the rebuilt heap
    assert store_outcome(gate, waiting.decision_id) == "expired"


def store_outcome(gate: Gate, decision_id: str) -> str | None:
    _, resolution = gate.approvals.store.get(decision_id)
    return None if resolution is None else resolution.outcome


def test_an_expiry_two_live_queues_race_for_is_logged_once(clock: ManualClock) -> None:
    store = MemoryApprovalStore()
    first, first_sink, _ = make_gate(clock, store=store)
    decision = held(first)
    second, second_sink, _ = make_gate(clock, store=store)
    clock.advance(601 * S)

    first.check(search())
    second.check(search())
    first.approvals.sweep(force=True)
    second.approvals.sweep(force=True)

    logged = [*first_sink.records("/approvals"), *second_sink.records("/approvals")]
    assert [(r["decision_id"], r["outcome"]) for r in logged] == [(decision.decision_id, "expired")]
    assert first.approvals.wait(decision.decision_id, timeout_s=5) == second.approvals.wait(
        decision.decision_id, timeout_s=5
    )


def test_resolving_what_another_process_resolved_records_it_then_refuses(
    clock: ManualClock,
) -> None:
    gate, sink, store = make_gate(clock, poll_s=60)  # no poll would see it in time
    decision = held(gate)
    store.resolve(Resolution(decision.decision_id, "approved", "bob", clock.time_ns()))
    with pytest.raises(ApprovalError, match=r"already resolved \(approved\)"):
        gate.approvals.resolve(decision.decision_id, approved=False, approver="alice")
    (record,) = sink.records("/approvals")
    assert (record["outcome"], record["approver"]) == ("approved", "bob")


def test_an_expiry_that_loses_the_race_records_the_resolution_that_won(
    clock: ManualClock,
) -> None:
    class RacingStore(MemoryApprovalStore):
        def resolve(self, resolution: Resolution) -> Resolution:
            if resolution.outcome == "expired":  # a human got in just before the clock
                human = Resolution(
                    resolution.decision_id, "rejected", "bob", resolution.resolved_ns
                )
                super().resolve(human)
            return super().resolve(resolution)

    gate, sink, _ = make_gate(clock, store=RacingStore())
    decision = held(gate)
    clock.advance(600 * S)
    approval = gate.approvals.wait(decision.decision_id, timeout_s=0)
    assert (approval.outcome, approval.approver) == ("rejected", "bob")
    assert [r["outcome"] for r in sink.records("/approvals")] == ["rejected"]


def test_an_expiry_the_store_refuses_for_no_reason_is_not_recorded(clock: ManualClock) -> None:
    class RefusingStore(MemoryApprovalStore):
        def resolve(self, resolution: Resolution) -> Resolution:
            raise ApprovalError("refused")

    gate, sink, _ = make_gate(clock, store=RefusingStore())
    decision = held(gate)
    clock.advance(600 * S)
    with pytest.raises(ApprovalError, match="refused"):
        gate.approvals.wait(decision.decision_id, timeout_s=0)
    assert sink.records("/approvals") == ()


# --- a wait's own timeout, in nanoseconds ----------------------------------------------------


def test_wait_limits_convert_seconds_exactly() -> None:
    from runtime._approval import wait_limit_ns

    assert wait_limit_ns(0) == 0
    assert wait_limit_ns(1) == 1_000_000_000
    assert wait_limit_ns(1.5) == 1_500_000_000
    assert wait_limit_ns(0.000_000_001) == 1
    assert wait_limit_ns(999_999_999) == 999_999_999_000_000_000
    assert wait_limit_ns(10**9) is None
    assert wait_limit_ns(math.inf) is None


def test_a_timeout_past_int64_is_clamped_to_exactly_int64() -> None:
    from runtime._approval import approval_terms

    assert approval_terms([_rule("a", 1e300, None)]).timeout_ns == 2**63 - 1
    assert approval_terms([_rule("a", 9.3e9, None)]).timeout_ns == 2**63 - 1
    assert approval_terms([_rule("a", 9.2e9, None)]).timeout_ns == 9_200_000_000_000_000_000


def test_terms_are_a_frozen_value() -> None:
    from runtime._approval import ApprovalTerms

    terms = ApprovalTerms(timeout_ns=1, approvers=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        terms.timeout_ns = 2  # type: ignore[misc]
    assert not hasattr(terms, "__dict__")


@pytest.mark.parametrize(("given", "recorded"), [(-5, 0), (0, 0), (1, 1), (2**64, 2**63 - 1)])
def test_an_approval_record_holds_its_integers_within_the_schemas_range(
    given: int, recorded: int
) -> None:
    from runtime._approval import approval_record

    pending = PendingApproval(
        decision_id="019b76da-a800-7181-bd31-8a3bc654f83f",
        decision_sha256="a" * 64,
        run_id=None,
        agent="a",
        verb="v",
        resource="r",
        reason="held",
        matched_policy="rule",
        held_verdict=RuntimeVerdict.ALLOW,
        executed_args_sha256="b" * 64,
        policy_sha256="c" * 64,
        approvers=None,
        created_ns=min(given, -10),
        expires_ns=given,
    )
    record = approval_record(
        pending,
        Resolution(pending.decision_id, "expired", None, given),
        approver=None,
        wait_ns=given,
        run_id=None,
    )
    assert record["stamp_ns"] == record["wait_ns"] == record["expires_ns"] == recorded
    assert record["final_verdict"] == "deny"
    assert record["decision_run_id"] is None


def test_an_approval_record_names_the_decisions_run_only_when_it_is_another() -> None:
    from runtime._approval import approval_record

    pending = PendingApproval(
        decision_id="019b76da-a800-7181-bd31-8a3bc654f83f",
        decision_sha256="a" * 64,
        run_id="019b76da-a800-7181-bd31-000000000001",
        agent="a",
        verb="v",
        resource="r",
        reason="held",
        matched_policy="rule",
        held_verdict=RuntimeVerdict.SCRUB,
        executed_args_sha256="b" * 64,
        policy_sha256="c" * 64,
        approvers=("x",),
        created_ns=1,
        expires_ns=2,
    )
    resolution = Resolution(pending.decision_id, "approved", "x", 1)

    def run_of(run_id: str | None) -> object:
        record = approval_record(pending, resolution, approver="x", wait_ns=0, run_id=run_id)
        assert record["final_verdict"] == "scrub"
        return record["decision_run_id"]

    assert run_of(pending.run_id) is None
    assert run_of("019b76da-a800-7181-bd31-000000000002") == pending.run_id
    assert run_of(None) == pending.run_id


def test_a_resolver_that_loses_the_stores_race_records_the_winner(clock: ManualClock) -> None:
    class RacingStore(MemoryApprovalStore):
        def resolve(self, resolution: Resolution) -> Resolution:
            if resolution.approver == "alice":  # bob's CLI got there first
                super().resolve(dataclasses.replace(resolution, outcome="rejected", approver="bob"))
            return super().resolve(resolution)

    gate, sink, _ = make_gate(clock, store=RacingStore())
    decision = held(gate)
    with pytest.raises(ApprovalError, match=r"already resolved \(rejected\)"):
        gate.approvals.resolve(decision.decision_id, approved=True, approver="alice")
    (record,) = sink.records("/approvals")
    assert (record["outcome"], record["approver"]) == ("rejected", "bob")


class _Id(str):
    """A str subclass: its own methods (here, a lying repr) must never shape the message."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'019b76da-a800-7181-bd31-8a3bc654f83f'"

    def __len__(self) -> int:
        raise RuntimeError("a subclass's code ran")


@pytest.mark.parametrize(
    ("bad_id", "shown"),
    [
        ("../../etc/passwd", "'../../etc/passwd'"),  # short and printable: quoted
        ("x" * 64, repr("x" * 64)),  # up to 64 characters are quoted
        ("x" * 65, "a str of 65 characters"),  # longer: only the length
        ("ok\x1b[2J", "a str of 6 characters"),  # unprintable: only the length
        (_Id("short"), "a _Id of 5 characters"),  # a subclass: never its own repr
        (None, "a NoneType"),
        (42, "a int"),
    ],
    ids=["traversal", "64-chars", "65-chars", "unprintable", "str-subclass", "none", "int"],
)
def test_a_refused_id_is_shown_only_when_short_and_printable(bad_id: Any, shown: str) -> None:
    from runtime._approval import check_decision_id

    with pytest.raises(ApprovalError) as caught:
        check_decision_id(bad_id)
    assert str(caught.value) == f"no decision {shown} awaits approval: a decision id is a UUID"


def test_a_decision_another_agent_holds_is_listed_until_its_deadline_exactly(
    clock: ManualClock,
) -> None:
    # The listing queue started before the decision was made, so it does not watch it
    # and will not record its expiry: it still never lists it once its deadline passes.
    store = MemoryApprovalStore()
    lister, lister_sink, _ = make_gate(clock, store=store)
    holder, _, _ = make_gate(clock, store=store)
    decision = held(holder)
    (pending,) = lister.approvals.pending()
    clock.advance(pending.expires_ns - clock.time_ns() - 1)
    assert [p.decision_id for p in lister.approvals.pending()] == [decision.decision_id]
    clock.advance(1)  # at the deadline it is expired
    assert lister.approvals.pending() == ()
    assert lister_sink.records("/approvals") == ()  # the holder's to record


def test_a_queue_leaves_the_resolution_of_a_decision_it_never_watched_to_its_holder(
    clock: ManualClock,
) -> None:
    # The watcher started before the decision was made: it is another live agent's, and
    # that agent logs its resolution in its own run, not the watcher in a neighbour's.
    store = MemoryApprovalStore()
    watcher, watcher_sink, _ = make_gate(clock, store=store)
    holder, holder_sink, _ = make_gate(clock, store=store)
    decision = held(holder)
    store.resolve(Resolution(decision.decision_id, "approved", "bob", clock.time_ns()))
    watcher.approvals.sweep(force=True)
    assert watcher_sink.records("/approvals") == ()
    assert [p.decision_id for p, _ in store.unrecorded()] == [decision.decision_id]
    holder.approvals.sweep(force=True)
    (record,) = holder_sink.records("/approvals")
    assert (record["decision_id"], record["decision_run_id"]) == (decision.decision_id, None)


def test_an_expiry_noticed_late_is_stamped_when_it_was_recorded(clock: ManualClock) -> None:
    # The resolution is the sweep's: made when the queue noticed, never before the deadline.
    gate, sink, store = make_gate(clock)
    decision = held(gate)
    clock.advance(601 * S)
    gate.check(search())
    (record,) = sink.records("/approvals")
    assert record["stamp_ns"] == decision.stamp_ns + 601 * S
    assert record["expires_ns"] == decision.stamp_ns + 600 * S
    _, resolution = store.get(decision.decision_id)
    assert resolution is not None
    assert resolution.resolved_ns == record["stamp_ns"]
