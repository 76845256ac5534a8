"""Limited rules through the gate (ADR 0032): budgets and rates, end to end.

A limited rule matches only when the action would exceed its limit, so the
policies here are "a limited deny (or approval) rule beside an allow rule".
The clock is a `ManualClock`; windows are checked at their exact end; what a
denied, rejected or expired action reserved is given back; hostile amounts
and keys deny without counting; the assessment records the counters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from audit import McapAuditSink, MemoryAuditSink, schema_problems
from runtime import (
    Action,
    CedarPolicy,
    Decision,
    Gate,
    MemoryCounterStore,
    Policy,
    PolicyError,
    RuntimeVerdict,
    SqliteCounterStore,
)
from runtime.testing import ManualClock
from tests.strategies import budget_steps

SECOND = 1_000_000_000
HOUR = 3600 * SECOND


def _policy(limit: Mapping[str, Any], effect: str = "deny", **extra: Any) -> Policy:
    return Policy.from_dict(
        {
            "policy_id": "budgets",
            "rules": [
                {"id": "budget", "verbs": ["refund"], "effect": effect, "limit": dict(limit),
                 **extra},
                {"id": "no-test", "verbs": ["refund"], "effect": "deny",
                 "when": {"test": {"exists": True, "eq": True}}},
                {"id": "refunds", "verbs": ["refund"], "effect": "allow"},
            ],
            "scrub": {"block": ["private_key"]},
        }
    )  # fmt: skip


COUNT = {"key": "agent", "window_s": 3600, "max_count": 3}
SUM = {"key": ["agent", "args.currency"], "window_s": 3600, "max_sum": "args.amount",
       "sum_max": 500}  # fmt: skip


def _gate(
    policy: Policy | CedarPolicy, clock: ManualClock, **kwargs: Any
) -> tuple[Gate, MemoryAuditSink]:
    sink = MemoryAuditSink()
    return Gate(policy, sink=sink, clock=clock, **kwargs), sink


def _refund(gate: Gate, amount: object = 1, agent: str = "a", **args: object) -> Decision:
    return gate.check(
        Action(agent=agent, verb="refund", resource="pay:1",
               args={"amount": amount, "currency": "EUR", **args})
    )  # fmt: skip


def _verdicts(decisions: list[Decision]) -> list[str]:
    return [d.verdict.value for d in decisions]


def _last_assessment(sink: MemoryAuditSink) -> Mapping[str, Any]:
    return sink.records("/assessments")[-1]


# --- windows ---------------------------------------------------------------------------------


def test_a_count_limit_allows_up_to_the_maximum_then_denies_by_the_limited_rule() -> None:
    gate, _ = _gate(_policy(COUNT), ManualClock())
    decisions = [_refund(gate) for _ in range(4)]
    assert _verdicts(decisions) == ["allow", "allow", "allow", "deny"]
    assert decisions[2].matched_policy == "refunds"
    assert decisions[3].matched_policy == "budget"
    assert decisions[3].reason == "denied by rule 'budget' (over its limit)"
    assert _refund(gate, agent="b").verdict is RuntimeVerdict.ALLOW  # another key


def test_the_window_slides_and_ends_exactly_window_s_after_each_action() -> None:
    clock = ManualClock()
    gate, _ = _gate(_policy(COUNT), clock)
    _refund(gate)  # t = 0
    clock.advance(10 * SECOND)
    _refund(gate)  # t = 10 s
    _refund(gate)  # t = 10 s
    clock.advance(HOUR - 10 * SECOND - 1)  # 1 ns before the first leaves
    assert _refund(gate).verdict is RuntimeVerdict.DENY
    clock.advance(1)  # exactly one hour after the first: it no longer counts
    assert _refund(gate).verdict is RuntimeVerdict.ALLOW
    assert _refund(gate).verdict is RuntimeVerdict.DENY  # the two at 10 s and this one
    clock.advance(10 * SECOND)  # the two at 10 s leave
    assert _verdicts([_refund(gate), _refund(gate), _refund(gate)]) == ["allow", "allow", "deny"]


def test_a_sum_limit_counts_exact_decimals() -> None:
    gate, sink = _gate(_policy(SUM), ManualClock())
    amounts = [200, 250.5, 49.4, 0.1, 0.000001]
    assert _verdicts([_refund(gate, a) for a in amounts]) == [
        "allow", "allow", "allow", "allow", "deny"
    ]  # fmt: skip
    # 200 + 250.5 + 49.4 + 0.1 is exactly 500: floats added as floats would not say so.
    limits = _last_assessment(sink)["limits"]
    assert limits == [
        {"rule": "budget", "key": limits[0]["key"], "window_s": 3600, "measure": "sum",
         "used": "500", "amount": "0.000001", "max": "500", "exceeded": True, "reserved": False}
    ]  # fmt: skip
    assert _refund(gate, 0, currency="USD").verdict is RuntimeVerdict.ALLOW  # another key


# --- what does not run spends nothing -------------------------------------------------------


def test_an_action_denied_by_another_rule_or_the_scrubber_spends_nothing() -> None:
    gate, sink = _gate(_policy({**COUNT, "max_count": 1}), ManualClock())
    assert _refund(gate, test=True).verdict is RuntimeVerdict.DENY  # a plain deny rule
    assert "limits" not in _last_assessment(sink)  # denied anyway: no counter asked
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf\n"
    blocked = _refund(gate, note=key + "-----END RSA PRIVATE KEY-----")
    assert blocked.verdict is RuntimeVerdict.DENY
    assert _last_assessment(sink)["limits"][0]["reserved"] is True  # reserved, then released
    assert _refund(gate).verdict is RuntimeVerdict.ALLOW
    assert _refund(gate).verdict is RuntimeVerdict.DENY


def test_a_decision_that_cannot_be_recorded_spends_nothing() -> None:
    class Failing(MemoryAuditSink):
        fail = False

        def append(self, *args: Any, **kwargs: Any) -> Any:
            if self.fail:
                raise OSError("disk full")
            return super().append(*args, **kwargs)

    sink = Failing()
    store = MemoryCounterStore()
    gate = Gate(_policy({**COUNT, "max_count": 1}), sink=sink, clock=ManualClock(),
                counters=store)  # fmt: skip
    sink.fail = True
    with pytest.raises(Exception, match="could not be recorded"):
        _refund(gate)
    sink.fail = False
    assert _refund(gate).verdict is RuntimeVerdict.ALLOW


def _approval_policy() -> Policy:
    return Policy.from_dict(
        {
            "policy_id": "approvals",
            "rules": [
                {"id": "budget", "verbs": ["refund"], "effect": "deny", "limit": COUNT | {
                    "max_count": 1}},
                {"id": "big", "verbs": ["refund"], "effect": "approval",
                 "when": {"amount": {"gt": 100}}, "approval": {"timeout_s": 60}},
                {"id": "refunds", "verbs": ["refund"], "effect": "allow"},
            ],
        }
    )  # fmt: skip


@pytest.mark.parametrize("answer", ["rejected", "expired"])
def test_a_pending_action_holds_its_budget_until_rejected_or_expired(answer: str) -> None:
    clock = ManualClock()
    gate, _ = _gate(_approval_policy(), clock)
    held = _refund(gate, 500)
    assert held.verdict is RuntimeVerdict.PENDING
    assert _refund(gate).verdict is RuntimeVerdict.DENY  # the held one counts
    if answer == "rejected":
        gate.approvals.resolve(held.decision_id, approved=False, approver="alice")
    else:
        clock.advance(61 * SECOND)
        gate.approvals.sweep(force=True)
    assert _refund(gate).verdict is RuntimeVerdict.ALLOW  # given back
    assert _refund(gate).verdict is RuntimeVerdict.DENY


def test_an_approved_action_spends_its_budget() -> None:
    gate, _ = _gate(_approval_policy(), ManualClock())
    held = _refund(gate, 500)
    approval = gate.approvals.resolve(held.decision_id, approved=True, approver="alice")
    assert approval.final_verdict is RuntimeVerdict.ALLOW
    assert _refund(gate).verdict is RuntimeVerdict.DENY


def test_a_limited_approval_rule_asks_over_the_limit_and_counts_what_is_approved() -> None:
    gate, sink = _gate(_policy({**SUM, "sum_max": 100}, effect="approval"), ManualClock())
    assert _refund(gate, 60).verdict is RuntimeVerdict.ALLOW
    over = _refund(gate, 50)
    assert over.verdict is RuntimeVerdict.PENDING
    assert over.reason == "held for approval by rule 'budget' (over its limit)"
    assert _last_assessment(sink)["limits"][0] | {"key": ""} == {
        "rule": "budget", "key": "", "window_s": 3600, "measure": "sum", "used": "60",
        "amount": "50", "max": "100", "exceeded": True, "reserved": True,
    }  # fmt: skip
    gate.approvals.resolve(over.decision_id, approved=True, approver="alice")
    # 110 spent: even 0 more needs no approval, but 1 does.
    assert _refund(gate, 1).verdict is RuntimeVerdict.PENDING


# --- hostile input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("amount", "problem"),
    [
        (True, "is a boolean, not a number"),
        ("100", "is a string, not a number"),
        (None, "is a null, not a number"),
        ([1], "is a list, not a number"),
        ({"value": 1}, "is a dict, not a number"),
        (-5, "is negative"),
        (-0.5, "is negative"),
        (10**400, "is larger than"),
        (1e300, "is larger than"),
        (0.1 + 0.2, "has more than six decimal places"),
        (1e-7, "has more than six decimal places"),
    ],
)
def test_a_hostile_amount_denies_and_counts_nothing(amount: object, problem: str) -> None:
    gate, sink = _gate(_policy({**SUM, "sum_max": 10}), ManualClock())
    decision = _refund(gate, amount)
    assert decision.verdict is RuntimeVerdict.DENY
    assert "LimitError" in decision.reason
    assert "'args.amount'" in decision.reason
    assert problem in decision.reason
    assert "LimitError" in _last_assessment(sink)["errors"]
    assert _refund(gate, 10).verdict is RuntimeVerdict.ALLOW  # nothing was spent


def test_nan_and_infinity_never_reach_the_budget() -> None:
    gate, _ = _gate(_policy(SUM), ManualClock())
    for amount in (float("nan"), float("inf")):
        assert _refund(gate, amount).verdict is RuntimeVerdict.DENY
    assert _refund(gate, 500).verdict is RuntimeVerdict.ALLOW


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"amount": 1}, "'args.currency': is missing"),
        ({"amount": 1, "currency": ["EUR"]}, "is a list; a key part"),
        ({"amount": 1, "currency": {"code": "EUR"}}, "is a dict; a key part"),
        ({"amount": 1, "currency": 1.5}, "is a number; a key part"),
    ],
)
def test_a_missing_or_odd_key_part_denies(args: dict[str, object], problem: str) -> None:
    gate, _ = _gate(_policy(SUM), ManualClock())
    decision = gate.check(Action(agent="a", verb="refund", resource="pay:1", args=args))
    assert decision.verdict is RuntimeVerdict.DENY
    assert problem in decision.reason


def test_a_deep_key_path_through_a_non_dict_denies() -> None:
    limit = {"key": "args.a.b.c", "window_s": 60, "max_count": 5}
    gate, _ = _gate(_policy(limit), ManualClock())
    deep: dict[str, object] = {"a": {"b": "text"}}
    decision = gate.check(Action(agent="a", verb="refund", resource="r", args=deep))
    assert decision.verdict is RuntimeVerdict.DENY
    assert "runs through a string at 'a.b'" in decision.reason
    ok = gate.check(Action(agent="a", verb="refund", resource="r", args={"a": {"b": {"c": 7}}}))
    assert ok.verdict is RuntimeVerdict.ALLOW


def test_key_values_never_reach_the_log() -> None:
    secret = "customer-4417@example.com"
    limit = {"key": ["agent", "args.to"], "window_s": 60, "max_count": 5}
    gate, sink = _gate(_policy(limit), ManualClock())
    first = gate.check(Action(agent="a", verb="refund", resource="r", args={"to": secret}))
    second = gate.check(Action(agent="a", verb="refund", resource="r", args={"to": secret}))
    other = gate.check(Action(agent="a", verb="refund", resource="r", args={"to": "x"}))
    assert (first.verdict, second.verdict) == (RuntimeVerdict.SCRUB, RuntimeVerdict.SCRUB)
    assert other.verdict is RuntimeVerdict.ALLOW
    keys = [record["limits"][0]["key"] for record in sink.records("/assessments")]
    assert keys[0] == keys[1] != keys[2]  # they correlate within the run
    assert secret not in json.dumps([dict(r) for r in sink.records("/assessments")])


def test_the_limits_record_matches_the_assessment_schema() -> None:
    gate, sink = _gate(_policy(SUM), ManualClock())
    _refund(gate, 499.75)
    _refund(gate, 1)
    for record in sink.records("/assessments"):
        assert not schema_problems(record)
    assert [r["limits"][0]["used"] for r in sink.records("/assessments")] == ["0", "499.75"]


def test_a_policy_without_limits_writes_no_limits_key() -> None:
    policy = Policy.from_dict({"policy_id": "p", "rules": [{"id": "a", "effect": "allow"}]})
    gate, sink = _gate(policy, ManualClock())
    gate.check(Action(agent="a", verb="v", resource="r"))
    assert "limits" not in _last_assessment(sink)


# --- state across gates and processes --------------------------------------------------------


def test_a_restarted_gate_on_a_sqlite_store_keeps_the_counts(tmp_path: Path) -> None:
    path = tmp_path / "counters.db"
    clock = ManualClock()
    with SqliteCounterStore(path) as store:
        gate, _ = _gate(_policy(COUNT), clock, counters=store)
        assert _verdicts([_refund(gate), _refund(gate)]) == ["allow", "allow"]
    with SqliteCounterStore(path) as store:
        gate, _ = _gate(_policy(COUNT), clock, counters=store)
        assert _verdicts([_refund(gate), _refund(gate)]) == ["allow", "deny"]
        assert gate.counters is store


def test_a_run_with_limits_verifies(tmp_path: Path) -> None:
    from analysis import verify_run

    path = tmp_path / "run.mcap"
    with McapAuditSink(path) as sink:
        gate = Gate(_policy(SUM), sink=sink, clock=ManualClock())
        for amount in (300, 300, 1.5):
            _refund(gate, amount)
    result = verify_run(path)
    assert result.status.value == "intact", result.problems


def test_cedar_limits_count_the_same_way() -> None:
    text = """
    @id("budget")
    @ghost_limit("{ key = 'agent', window_s = 3600, max_count = 2 }")
    forbid (principal, action == Action::"refund", resource);
    @id("refunds")
    permit (principal, action == Action::"refund", resource);
    """
    gate, _ = _gate(CedarPolicy.from_str(text, policy_id="c"), ManualClock())
    decisions = [_refund(gate) for _ in range(3)]
    assert _verdicts(decisions) == ["allow", "allow", "deny"]
    assert decisions[-1].matched_policy == "budget"


def test_cedar_limit_mistakes_name_the_annotation() -> None:
    text = """
    @ghost_limit("{ key = 'agent', window_s = 3600 }")
    forbid (principal, action, resource);
    """
    with pytest.raises(PolicyError, match=r"@ghost_limit \(limit\)"):
        CedarPolicy.from_str(text, policy_id="c")


# --- loading ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "effect", "field", "problem"),
    [
        (COUNT, "allow", "limit", "belongs on a deny or approval rule"),
        ({**COUNT, "extra": 1}, "deny", "limit.extra", "unknown key"),
        ({**COUNT, "key": []}, "deny", "limit.key", "needs a key part"),
        ({**COUNT, "key": "args"}, "deny", "limit.key", "is not agent, verb"),
        ({**COUNT, "key": "args.a..b"}, "deny", "limit.key", "not a dotted argument path"),
        ({**COUNT, "key": ["agent", "agent"]}, "deny", "limit.key", "twice"),
        ({**COUNT, "window_s": 0}, "deny", "limit.window_s", "whole number"),
        ({**COUNT, "window_s": 1.5}, "deny", "limit.window_s", "whole number"),
        ({**COUNT, "window_s": True}, "deny", "limit.window_s", "whole number"),
        ({**COUNT, "max_count": -1}, "deny", "limit.max_count", "an integer"),
        ({**COUNT, "max_count": 2.0}, "deny", "limit.max_count", "an integer"),
        ({**COUNT, "max_sum": "args.x"}, "deny", "limit", "exactly one of"),
        ({**COUNT, "sum_max": 5}, "deny", "limit.sum_max", "goes with max_sum"),
        ({**SUM, "max_sum": "amount"}, "deny", "limit.max_sum", "is not an args."),
        ({**SUM, "sum_max": 0.0000001}, "deny", "limit.sum_max", "six decimal places"),
        ({**SUM, "sum_max": "500"}, "deny", "limit.sum_max", "not a number"),
        ({**SUM, "sum_max": 10**13}, "deny", "limit.sum_max", "larger than"),
    ],
)
def test_malformed_limits_are_policy_errors(
    limit: dict[str, object], effect: str, field: str, problem: str
) -> None:
    with pytest.raises(PolicyError, match=problem) as caught:
        _policy(limit, effect=effect)
    assert caught.value.field == field
    assert caught.value.rule == "budget"


def test_the_limit_is_part_of_the_policy_hash() -> None:
    assert _policy(COUNT).policy_sha256 != _policy({**COUNT, "max_count": 4}).policy_sha256


# --- the invariant ---------------------------------------------------------------------------

WINDOW_NS = SECOND
MAX_SUM = 10


@settings(max_examples=60, deadline=None)
@given(steps=budget_steps)
def test_never_more_than_the_maximum_runs_in_any_window(
    steps: list[tuple[int, int, bool]],
) -> None:
    """Against a reference model: allowed exactly when what ran in the window leaves room."""
    clock = ManualClock()
    limit = {"key": "agent", "window_s": 1, "max_sum": "args.amount", "sum_max": MAX_SUM}
    gate, _ = _gate(_policy(limit), clock)
    ran: list[tuple[int, int]] = []  # (stamp_ns, amount) of every action that runs
    for advance, amount, denied_anyway in steps:
        clock.advance(advance * 1_000_000)  # steps are in microseconds of a 1 s window
        now = clock.time_ns()
        in_window = sum(a for t, a in ran if now - WINDOW_NS < t)
        decision = _refund(gate, amount, test=denied_anyway)
        expected = not denied_anyway and in_window + amount <= MAX_SUM
        assert (decision.verdict is RuntimeVerdict.ALLOW) == expected
        if expected:
            ran.append((now, amount))
    for t, _ in ran:  # the invariant itself, over every window ending at an admission
        assert sum(a for s, a in ran if t - WINDOW_NS < s <= t) <= MAX_SUM


def test_counters_must_be_a_counter_store() -> None:
    with pytest.raises(TypeError, match="counters must be a CounterStore"):
        Gate(_policy(COUNT), sink=MemoryAuditSink(), counters=object())  # type: ignore[arg-type]


def test_a_store_that_fails_denies_and_a_failing_settle_never_lets_more_run() -> None:
    class Broken(MemoryCounterStore):
        reserve_fails = False
        settle_fails = False

        def reserve(self, *args: Any, **kwargs: Any) -> Any:
            if self.reserve_fails:
                raise OSError("disk")
            return super().reserve(*args, **kwargs)

        def settle(self, holder: str, *, consumed: bool) -> None:
            if self.settle_fails:
                raise OSError("disk")
            super().settle(holder, consumed=consumed)

    store = Broken()
    gate, _ = _gate(_policy({**COUNT, "max_count": 1}), ManualClock(), counters=store)
    store.reserve_fails = True
    denied = _refund(gate)
    assert denied.verdict is RuntimeVerdict.DENY
    assert denied.reason == "denied: evaluation failed with OSError"
    store.reserve_fails = False
    store.settle_fails = True
    assert _refund(gate, test=False, note="x").verdict is RuntimeVerdict.ALLOW  # held, unsettled
    assert _refund(gate).verdict is RuntimeVerdict.DENY  # the held entry still counts
