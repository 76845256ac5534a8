"""A shadow's limited rules count on counters of their own, never on the enforced ones."""

from __future__ import annotations

from typing import Any

from audit import MemoryAuditSink
from runtime import Action, Gate, MemoryCounterStore, Policy
from runtime.testing import ManualClock

ALLOW_ALL = {"policy_id": "budgets", "rules": [{"id": "all", "effect": "allow"}]}


def _limited(max_count: int, *, shadow: bool = False) -> dict[str, Any]:
    limit = {"key": "agent", "window_s": 3600, "max_count": max_count}
    over: dict[str, Any] = {"id": "rate", "verbs": ["send"], "effect": "deny", "limit": limit}
    if shadow:
        over["shadow"] = True
    return {
        "policy_id": "budgets",  # the same id as the enforced policy: namespaces keep them apart
        "rules": [over, {"id": "send", "verbs": ["send"], "effect": "allow"}],
    }


def _send(gate: Gate) -> None:
    gate.check(Action(agent="a", verb="send", resource="mail:x"))


def _shadow_verdicts(sink: MemoryAuditSink) -> list[str]:
    return [a["shadow"]["verdict"] for a in sink.records("/assessments")]


def test_a_candidate_s_budget_counts_what_the_candidate_would_have_run() -> None:
    sink, store = MemoryAuditSink(), MemoryCounterStore()
    gate = Gate(
        Policy.from_dict(ALLOW_ALL),
        sink=sink,
        clock=ManualClock(),
        counters=store,
        shadow=Policy.from_dict(_limited(2)),
    )
    for _ in range(5):
        _send(gate)
    assert [d["verdict"] for d in sink.records("/decisions")] == ["allow"] * 5
    # Two sends fit the candidate's budget; what it would have denied spends nothing.
    assert _shadow_verdicts(sink) == ["allow", "allow", "deny", "deny", "deny"]
    assert sink.records("/assessments")[2]["shadow"]["matched_policy"] == "rate"
    assert all("limits" not in a for a in sink.records("/assessments"))  # enforced: no limit


def test_shadowing_a_budget_never_spends_the_enforced_one() -> None:
    sink, store = MemoryAuditSink(), MemoryCounterStore()
    gate = Gate(
        Policy.from_dict(_limited(3)),
        sink=sink,
        clock=ManualClock(),
        counters=store,
        shadow=Policy.from_dict(_limited(1)),
    )
    for _ in range(5):
        _send(gate)
    assert [d["verdict"] for d in sink.records("/decisions")] == ["allow"] * 3 + ["deny"] * 2
    assert _shadow_verdicts(sink) == ["allow"] + ["deny"] * 4
    used = [a["limits"][0]["used"] for a in sink.records("/assessments")]
    assert used == ["0", "1", "2", "3", "3"]  # the enforced counter saw only enforced spends


def test_a_limited_shadow_rule_counts_apart_from_the_enforced_rules() -> None:
    sink = MemoryAuditSink()
    gate = Gate(Policy.from_dict(_limited(2, shadow=True)), sink=sink, clock=ManualClock())
    for _ in range(4):
        _send(gate)
    assert [d["verdict"] for d in sink.records("/decisions")] == ["allow"] * 4
    assert _shadow_verdicts(sink) == ["allow", "allow", "deny", "deny"]
    assert all("limits" not in a for a in sink.records("/assessments"))
