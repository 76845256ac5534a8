"""The order in which a check asks its counters, and what it never asks (ADR 0032).

`test_budget.py` holds budgets end to end; this file pins the steps of
`runtime._budget.LimitCheck` that only show in what the store is asked and
in the assessment's ``limits``: limited ``deny`` rules first and an exceeded
one ends the asking; ``approval`` rules all asked; nothing asked (not even
an extra clock reading) when no limited rule matched or another rule
denies; nothing settled when nothing was reserved; a wall clock that reads
below zero or not as an integer is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from audit import MemoryAuditSink
from runtime import (
    Action,
    Decision,
    Gate,
    MemoryCounterStore,
    Policy,
    RuntimeVerdict,
)
from runtime._budget import Budgets, LimitState, _ClockError
from runtime.testing import ManualClock
from tests.runtime.counting_store import CountingStore


class _Clock(ManualClock):
    """A wall clock that reads whatever the test sets."""

    wall: object = 0

    def time_ns(self) -> int:
        return self.wall  # type: ignore[return-value]  # hostile readings on purpose


def _rule(rule_id: str, effect: str, max_count: int, **extra: Any) -> dict[str, Any]:
    limit = {"key": "agent", "window_s": 60, "max_count": max_count}
    return {"id": rule_id, "verbs": ["refund"], "effect": effect, "limit": limit, **extra}


def _gate(
    rules: list[dict[str, Any]], clock: ManualClock | None = None
) -> tuple[Gate, MemoryAuditSink, CountingStore]:
    policy = Policy.from_dict(
        {
            "policy_id": "order",
            "rules": [
                *rules,
                {"id": "no-test", "verbs": ["refund"], "effect": "deny",
                 "when": {"test": {"exists": True, "eq": True}}},
                {"id": "refunds", "verbs": ["refund", "read"], "effect": "allow"},
            ],
        }
    )  # fmt: skip
    sink, store = MemoryAuditSink(), CountingStore()
    gate = Gate(policy, sink=sink, clock=clock or ManualClock(), counters=store)
    return gate, sink, store


def _check(gate: Gate, verb: str = "refund", **args: object) -> Decision:
    return gate.check(Action(agent="a", verb=verb, resource="pay:1", args=dict(args)))


def _limits(sink: MemoryAuditSink) -> list[Mapping[str, Any]]:
    return list(sink.records("/assessments")[-1].get("limits", ()))


def test_deny_rules_are_asked_before_approval_rules_whatever_the_file_order() -> None:
    gate, sink, store = _gate([_rule("ask", "approval", 5), _rule("cap", "deny", 5)])
    assert _check(gate).verdict is RuntimeVerdict.ALLOW
    assert [entry["rule"] for entry in _limits(sink)] == ["cap", "ask"]
    assert store.forced == [False, True]  # the approval rule reserves with force


def test_an_exceeded_deny_rule_ends_the_asking() -> None:
    gate, sink, store = _gate([_rule("ask", "approval", 0), _rule("cap", "deny", 0)])
    decision = _check(gate)
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.matched_policy == "cap"
    assert [(e["rule"], e["exceeded"], e["reserved"]) for e in _limits(sink)] == [
        ("cap", True, False)
    ]
    assert store.forced == [False]  # the approval rule's counter was never asked
    assert store.settled == []  # nothing was reserved, so nothing is settled


def test_every_exceeded_approval_rule_is_asked_and_reserves() -> None:
    gate, sink, store = _gate([_rule("ask-1", "approval", 0), _rule("ask-2", "approval", 0)])
    decision = _check(gate)
    assert decision.verdict is RuntimeVerdict.PENDING
    assert [(e["rule"], e["exceeded"], e["reserved"]) for e in _limits(sink)] == [
        ("ask-1", True, True),
        ("ask-2", True, True),
    ]
    assert store.forced == [True, True]
    assert store.settled == []  # pending: held until the approval is settled
    gate.approvals.resolve(decision.decision_id, approved=False, approver="alice")
    assert store.settled == [(decision.decision_id, False)]


def test_another_rule_that_denies_asks_no_counter() -> None:
    gate, sink, store = _gate([_rule("cap", "deny", 5)])
    decision = _check(gate, test=True)
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.matched_policy == "no-test"  # decided by that rule, not by an error
    assert decision.reason == "denied by rule 'no-test'"
    assert "limits" not in sink.records("/assessments")[-1]
    assert (store.forced, store.settled) == ([], [])


class _CountingClock(ManualClock):
    """A `ManualClock` that counts its wall-clock readings."""

    reads = 0

    def time_ns(self) -> int:
        self.reads += 1
        return super().time_ns()


def test_a_check_matching_no_limited_rule_reads_no_extra_clock() -> None:
    reads = []
    for rules in ([_rule("cap", "deny", 5)], []):
        clock = _CountingClock()
        gate, _, store = _gate(rules, clock)
        before = clock.reads
        assert _check(gate, verb="read").verdict is RuntimeVerdict.ALLOW
        reads.append(clock.reads - before)
        assert store.forced == []
    assert reads[0] == reads[1]  # the limited rule did not match: budgets read nothing


@pytest.mark.parametrize("wall", [-1, -(2**70), 1.5, True, None, "0"])
def test_a_wall_clock_below_zero_or_not_an_int_is_refused(wall: object) -> None:
    clock = _Clock()
    clock.wall = wall
    budgets = Budgets("p", MemoryCounterStore(), clock, lambda data: "k")
    with pytest.raises(_ClockError):
        budgets._now_ns()  # private: the guard itself is the property under test


@pytest.mark.parametrize("wall", [0, 1, 2**70])
def test_a_wall_clock_at_or_above_zero_is_taken(wall: int) -> None:
    clock = _Clock()
    clock.wall = wall
    budgets = Budgets("p", MemoryCounterStore(), clock, lambda data: "k")
    assert budgets._now_ns() == wall


def test_a_limit_state_is_frozen() -> None:
    state = LimitState(rule="r", key_fingerprint="k", window_s=1, measure="count", used=0,
                       amount=1, maximum=1, exceeded=False, reserved=True)  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.used = 5  # type: ignore[misc]
