"""The gate: each verdict's derivation, precedence, fail-closed, timing and recording."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from audit import MemoryAuditSink
from runtime import (
    Action,
    ActionDenied,
    ApprovalPending,
    AuditError,
    Gate,
    Policy,
    RunStart,
    RuntimeVerdict,
    content_address,
    value_sha256,
)
from runtime.testing import ManualClock
from tests.runtime.conftest import POLICY

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
EMAIL = "jane.doe@example.com"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n"
    "-----END RSA PRIVATE KEY-----"
)


def records(sink: MemoryAuditSink, topic: str) -> list[Mapping[str, Any]]:
    return list(sink.records(topic))


# --- each verdict --------------------------------------------------------------------


def test_allow(gate: Gate) -> None:
    decision = gate.check(Action("bot", "search", "tool:search", {"q": "weather"}))
    assert decision.verdict is RuntimeVerdict.ALLOW
    assert decision.matched_policy == "search"
    assert decision.args == {"q": "weather"}
    assert decision.reason == "allowed by rule 'search'"


def test_narrow_clamps_keeps_and_sets(gate: Gate) -> None:
    args = {"table": "customers", "limit": 5000, "secret_column": "ssn", "read_only": False}
    decision = gate.check(Action("analyst", "query", "db:customers", args))
    assert decision.verdict is RuntimeVerdict.NARROW
    assert decision.matched_policy == "query-customers"
    assert decision.args == {"table": "customers", "limit": 100, "read_only": True}
    assert args["limit"] == 5000  # the caller's arguments are never mutated


def test_narrowing_that_changes_nothing_is_allow(gate: Gate) -> None:
    args = {"table": "customers", "limit": 10, "read_only": True}
    decision = gate.check(Action("analyst", "query", "db:customers", args))
    assert decision.verdict is RuntimeVerdict.ALLOW
    assert decision.matched_policy == "query-customers"


def test_narrow_compares_type_strictly(gate: Gate) -> None:
    # read_only = 1 equals True in Python, but it is not what the policy sets.
    args = {"table": "customers", "limit": 10, "read_only": 1}
    decision = gate.check(Action("analyst", "query", "db:customers", args))
    assert decision.verdict is RuntimeVerdict.NARROW
    assert decision.args["read_only"] is True


def test_scrub(gate: Gate) -> None:
    decision = gate.check(Action("bot", "search", "tool:search", {"q": f"key {AWS_KEY}"}))
    assert decision.verdict is RuntimeVerdict.SCRUB
    assert decision.matched_policy == "search"
    assert AWS_KEY not in json.dumps(dict(decision.args))
    assert "[REDACTED:aws_access_key_id]" in decision.args["q"]


def test_pending_carries_the_arguments_that_would_run(gate: Gate) -> None:
    decision = gate.check(Action("bot", "refund", "payments:stripe", {"amount": 500}))
    assert decision.verdict is RuntimeVerdict.PENDING
    assert decision.matched_policy == "refunds-need-approval"
    assert decision.args == {"amount": 500}


def test_condition_not_met_falls_through_to_allow(gate: Gate) -> None:
    decision = gate.check(Action("bot", "refund", "payments:stripe", {"amount": 20}))
    assert decision.verdict is RuntimeVerdict.ALLOW
    assert decision.matched_policy == "small-refunds"


def test_deny_rule(gate: Gate) -> None:
    decision = gate.check(Action("bot", "delete", "file:/x", {"path": "/x"}))
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.matched_policy == "never-delete"
    assert decision.args == {}


def test_no_rule_matched_uses_the_default_deny(gate: Gate) -> None:
    decision = gate.check(Action("bot", "launch", "rocket:1"))
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.matched_policy is None
    assert "no rule matched" in decision.reason


def test_default_allow_still_scrubs() -> None:
    gate = Gate(Policy.from_dict({"policy_id": "open", "default": "allow"}), sink=MemoryAuditSink())
    clean = gate.check(Action("a", "anything", "x"))
    assert (clean.verdict, clean.matched_policy) == (RuntimeVerdict.ALLOW, None)
    dirty = gate.check(Action("a", "anything", "x", {"to": EMAIL}))
    assert (dirty.verdict, dirty.matched_policy) == (RuntimeVerdict.SCRUB, None)


# --- precedence ----------------------------------------------------------------------


def make_gate(*rules: dict[str, Any], **scrub: Any) -> tuple[Gate, MemoryAuditSink]:
    sink = MemoryAuditSink()
    policy = Policy.from_dict({"policy_id": "p", "rules": list(rules), "scrub": scrub})
    return Gate(policy, sink=sink), sink


ALLOW = {"id": "allow-all", "effect": "allow"}
DENY = {"id": "deny-all", "effect": "deny"}
APPROVAL = {"id": "approve-all", "effect": "approval"}
CLAMP = {"id": "clamp", "effect": "narrow", "narrow": {"clamp": {"n": 1}}}
NOOP_NARROW = {"id": "noop", "effect": "narrow", "narrow": {"clamp": {"other": 1}}}


@pytest.mark.parametrize(
    ("rules", "args", "verdict", "matched"),
    [
        ((ALLOW, APPROVAL, CLAMP, DENY), {"n": 5}, "deny", "deny-all"),
        ((ALLOW, CLAMP, APPROVAL), {"n": 5}, "pending", "approve-all"),
        ((ALLOW, CLAMP), {"n": 5, "m": EMAIL}, "narrow", "clamp"),
        ((NOOP_NARROW, CLAMP), {"n": 5}, "narrow", "clamp"),
        ((ALLOW, CLAMP), {"n": 0, "m": EMAIL}, "scrub", "allow-all"),
        ((NOOP_NARROW, ALLOW), {"n": 0, "m": EMAIL}, "scrub", "noop"),
        ((APPROVAL,), {"n": 0, "m": EMAIL}, "pending", "approve-all"),
        ((ALLOW,), {"n": 0}, "allow", "allow-all"),
    ],
)
def test_precedence(
    rules: tuple[dict[str, Any], ...], args: dict[str, Any], verdict: str, matched: str
) -> None:
    gate, _ = make_gate(*rules)
    decision = gate.check(Action("a", "v", "r", args))
    assert (decision.verdict.value, decision.matched_policy) == (verdict, matched)


def test_narrowings_that_cancel_out_are_not_a_narrowing() -> None:
    force = {"id": "force", "effect": "narrow", "narrow": {"set": {"mode": "safe"}}}
    undo = {"id": "undo", "effect": "narrow", "narrow": {"set": {"mode": "open"}}}
    gate, sink = make_gate(force, undo)
    decision = gate.check(Action("a", "v", "r", {"mode": "open"}))
    assert decision.verdict is RuntimeVerdict.ALLOW
    assert decision.args == {"mode": "open"}
    assert decision.matched_policy == "force"
    (assessment,) = records(sink, "/assessments")
    # The assessment still says what each rule did.
    assert [n["rule"] for n in assessment["narrowings"]] == ["force", "undo"]
    (record,) = records(sink, "/decisions")
    assert record["executed_args_sha256"] == assessment["args_sha256"]
    changed = gate.check(Action("a", "v", "r", {"mode": "other"}))
    assert (changed.verdict, changed.matched_policy) == (RuntimeVerdict.NARROW, "force")
    assert changed.args == {"mode": "open"}


def test_narrow_that_was_also_scrubbed_keeps_both_in_the_assessment() -> None:
    gate, sink = make_gate(ALLOW, CLAMP)
    decision = gate.check(Action("a", "v", "r", {"n": 5, "m": EMAIL}))
    assert decision.verdict is RuntimeVerdict.NARROW
    assert decision.args == {"n": 1, "m": "[REDACTED:email]"}
    (assessment,) = records(sink, "/assessments")
    assert assessment["narrowings"] == [{"rule": "clamp", "kind": "clamp", "path": "n"}]
    assert [f["detector"] for f in assessment["findings"]] == ["email"]
    assert assessment["matched_rules"] == [
        {"id": "allow-all", "effect": "allow"},
        {"id": "clamp", "effect": "narrow"},
    ]


def test_blocking_detector_denies_even_under_approval() -> None:
    gate, sink = make_gate(APPROVAL, block=["private_key"])
    decision = gate.check(Action("a", "v", "r", {"key": PEM}))
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.matched_policy is None
    assert "private_key" in decision.reason
    assert "BEGIN RSA" not in repr(sink.entries)


def test_scrub_exempt_paths_go_unscrubbed_but_blocking_detectors_still_apply(gate: Gate) -> None:
    exempt = {**POLICY["rules"][5], "scrub_exempt": ["to"]}
    gate, _ = make_gate(exempt, block=["private_key"])
    decision = gate.check(Action("mailer", "send", "mail:x", {"to": EMAIL, "body": EMAIL}))
    assert decision.verdict is RuntimeVerdict.SCRUB
    assert decision.args == {"to": EMAIL, "body": "[REDACTED:email]"}
    blocked = gate.check(Action("mailer", "send", "mail:x", {"to": PEM}))
    assert blocked.verdict is RuntimeVerdict.DENY


def test_within_confines_and_denies_escapes(gate: Gate) -> None:
    ok = gate.check(Action("a", "read", "file:/data/public/q3", {"path": "/data/public/./q3.txt"}))
    assert (ok.verdict, ok.args) == (RuntimeVerdict.NARROW, {"path": "/data/public/q3.txt"})
    inside = gate.check(Action("a", "read", "file:/data/public/q3", {"path": "/data/public/q3"}))
    assert inside.verdict is RuntimeVerdict.ALLOW
    for escape in ("/data/public/../secret", "../../etc/passwd", "/etc/passwd", "/data/publicity"):
        decision = gate.check(Action("a", "read", "file:/data/public/q3", {"path": escape}))
        assert decision.verdict is RuntimeVerdict.DENY, escape
        assert "escapes" in decision.reason


# --- fail closed ---------------------------------------------------------------------


class Exploding(Mapping[str, Any]):
    """A mapping that fails with a message holding a secret."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError(f"boom {AWS_KEY}")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError(f"boom {AWS_KEY}")

    def __len__(self) -> int:
        return 1


class BadStr:
    def __str__(self) -> str:
        raise RuntimeError("no")

    __repr__ = __str__


def deep(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"x": value}
    return value


def cyclic() -> Any:
    loop: list[Any] = []
    loop.append(loop)
    return {"loop": loop}


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (Exploding(), "InvalidAction"),
        ({"nested": Exploding()}, "UnsupportedValue"),
        (cyclic(), "SnapshotLimitExceeded"),
        ({"deep": deep(20_000)}, "SnapshotLimitExceeded"),
        ({"text": "x" * (3 << 20)}, "SnapshotLimitExceeded"),
        (["not", "a", "mapping"], "InvalidAction"),
        ({"s": "\ud800"}, "UnsupportedValue"),
    ],
)
def test_any_doubt_becomes_a_recorded_deny(
    gate: Gate, sink: MemoryAuditSink, args: Any, why: str
) -> None:
    decision = gate.check(Action("a", "search", "tool:search", args))
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.args == {}
    assert decision.matched_policy is None
    assert why in decision.reason
    (assessment,) = records(sink, "/assessments")
    assert why in assessment["errors"]
    assert AWS_KEY not in repr(sink.entries)
    assert len(records(sink, "/decisions")) == 1


def test_opaque_objects_deny_without_being_stringified(gate: Gate) -> None:
    # Not plain data (SPEC §3): denied by type, and never turned into text.
    decision = gate.check(Action("a", "search", "tool:search", {"obj": BadStr()}))
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.reason.startswith("denied: argument $.obj is a BadStr, which is not plain data")
    assert decision.args == {}


def test_condition_on_the_wrong_type_denies_instead_of_skipping_approval(gate: Gate) -> None:
    decision = gate.check(Action("bot", "refund", "payments:stripe", {"amount": "5000"}))
    assert decision.verdict is RuntimeVerdict.DENY
    assert "ConditionTypeError" in decision.reason


def test_non_string_action_fields_deny_and_are_recorded_by_type(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    decision = gate.check(Action(42, "search", "tool:search"))  # type: ignore[arg-type]
    assert decision.verdict is RuntimeVerdict.DENY
    assert records(sink, "/assessments")[0]["agent"] == "<not a string: int>"


# --- recording -----------------------------------------------------------------------


def test_records_chain_to_what_was_decided(gate: Gate, sink: MemoryAuditSink) -> None:
    decision = gate.check(Action("bot", "search", "tool:search", {"q": "x"}))
    (assessment,) = records(sink, "/assessments")
    (record,) = records(sink, "/decisions")
    assert decision.assessment_sha256 == content_address(assessment)
    assert record["assessment_sha256"] == decision.assessment_sha256
    assert decision.decision_sha256 == content_address(record)
    assert record["decision_id"] == assessment["decision_id"] == decision.decision_id
    assert record["verdict"] == "allow"
    assert record["latency_ns"] == decision.latency_ns
    assert record["executed_args_sha256"] == value_sha256({"q": "x"})
    assert assessment["args_sha256"] == value_sha256({"q": "x"})
    assert record["policy_sha256"] == gate.policy.policy_sha256


def test_the_run_is_opened_with_the_policy_source(sink: MemoryAuditSink, gate: Gate) -> None:
    run = sink.run
    assert isinstance(run, RunStart)
    assert run.policy_id == "test-policy"
    assert run.policy_sha256 == gate.policy.policy_sha256
    assert run.policy_source == gate.policy.source


def test_raw_secrets_reach_neither_the_arguments_nor_the_log(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    decision = gate.check(
        Action("mailer", "send", f"mail:{EMAIL}", {"body": f"use {AWS_KEY}", EMAIL: "key"})
    )
    assert decision.verdict is RuntimeVerdict.SCRUB
    assert decision.matched_policy == "send-mail"  # matching saw the real resource
    logged = b"".join(entry.data for entry in sink.entries)
    for secret in (AWS_KEY, EMAIL):
        assert secret.encode() not in logged
        assert secret not in json.dumps(dict(decision.args))
    assert records(sink, "/assessments")[0]["resource"] == "mail:[REDACTED:email]"


def test_decision_ids_are_unique_uuid7(gate: Gate) -> None:
    ids = {gate.check(Action("a", "search", "s")).decision_id for _ in range(50)}
    assert len(ids) == 50
    assert all(i[14] == "7" for i in ids)


# --- timing --------------------------------------------------------------------------


def test_latency_and_stages_come_from_the_monotonic_clock(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    # ManualClock(step_ns=1000): every read advances 1 µs, so each stage is one step
    # and the whole check (entry, three stage marks, scrub end, verdict) is five.
    decision = gate.check(Action("bot", "search", "tool:search", {"q": "x"}))
    assert decision.latency_ns == 5_000
    assert records(sink, "/assessments")[0]["stage_ns"] == {
        "policy": 1_000,
        "narrow": 1_000,
        "scrub": 1_000,
    }


class SlowSink(MemoryAuditSink):
    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.clock = clock

    def append(self, topic: str, record: Mapping[str, Any]) -> str:
        self.clock.advance(10**9)
        return super().append(topic, record)


def test_the_audit_write_is_not_part_of_latency() -> None:
    clock = ManualClock(step_ns=1_000)
    gate = Gate(Policy.from_dict(POLICY), sink=SlowSink(clock), clock=clock)
    assert gate.check(Action("bot", "search", "tool:search")).latency_ns == 5_000


def test_wall_clock_only_stamps(gate: Gate, clock: ManualClock, sink: MemoryAuditSink) -> None:
    decision = gate.check(Action("bot", "search", "tool:search"))
    assert decision.stamp_ns == clock.time_ns()
    assert records(sink, "/assessments")[0]["stamp_ns"] == clock.time_ns()


# --- sink failures -------------------------------------------------------------------


class BrokenSink(MemoryAuditSink):
    def append(self, topic: str, record: Mapping[str, Any]) -> str:
        raise OSError("disk full")


def test_a_decision_that_cannot_be_recorded_raises_audit_error() -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=BrokenSink())
    with pytest.raises(AuditError, match="must not run"):
        gate.check(Action("bot", "search", "tool:search"))


def test_a_sink_that_cannot_open_the_run_fails_the_gate() -> None:
    class NoRun(MemoryAuditSink):
        def open_run(self, run: RunStart) -> None:
            raise PermissionError("read-only")

    with pytest.raises(AuditError, match="could not begin the run"):
        Gate(Policy.from_dict(POLICY), sink=NoRun())


# --- enforce and acheck --------------------------------------------------------------


def test_enforce_raises_for_deny_and_pending(gate: Gate) -> None:
    with pytest.raises(ActionDenied) as denied:
        gate.enforce(Action("bot", "delete", "x"))
    assert denied.value.decision.matched_policy == "never-delete"
    with pytest.raises(ApprovalPending) as pending:
        gate.enforce(Action("bot", "refund", "payments:x", {"amount": 99}))
    assert pending.value.decision.verdict is RuntimeVerdict.PENDING
    assert gate.enforce(Action("bot", "search", "s")).verdict is RuntimeVerdict.ALLOW


def test_acheck_decides_like_check(gate: Gate, sink: MemoryAuditSink) -> None:
    async def main() -> list[RuntimeVerdict]:
        decisions = await asyncio.gather(
            gate.acheck(Action("bot", "search", "s")),
            gate.acheck(Action("bot", "delete", "s")),
        )
        return [d.verdict for d in decisions]

    assert asyncio.run(main()) == [RuntimeVerdict.ALLOW, RuntimeVerdict.DENY]
    assert len(records(sink, "/decisions")) == 2


@pytest.mark.parametrize(
    ("action", "verdict"),
    [
        (Action("bot", "search", "tool:search", {"q": "x"}), RuntimeVerdict.ALLOW),
        (Action("a", "query", "db:customers", {"table": "t", "limit": 900}), RuntimeVerdict.NARROW),
        (Action("bot", "search", "tool:search", {"q": EMAIL}), RuntimeVerdict.SCRUB),
        (Action("bot", "refund", "payments:x", {"amount": 99}), RuntimeVerdict.PENDING),
        (Action("bot", "delete", "file:/x", {"path": "/x"}), RuntimeVerdict.DENY),
    ],
)
def test_recorded_hashes_address_what_came_in_and_what_runs(
    gate: Gate, sink: MemoryAuditSink, action: Action, verdict: RuntimeVerdict
) -> None:
    decision = gate.check(action)
    assert decision.verdict is verdict
    (assessment,) = records(sink, "/assessments")
    (record,) = records(sink, "/decisions")
    assert assessment["args_sha256"] == value_sha256(action.args)
    expected = None if verdict is RuntimeVerdict.DENY else value_sha256(dict(decision.args))
    assert record["executed_args_sha256"] == expected


def test_a_non_action_is_misuse_not_a_decision(gate: Gate, sink: MemoryAuditSink) -> None:
    with pytest.raises(TypeError, match="takes an Action, not dict"):
        gate.check({"agent": "a"})  # type: ignore[arg-type]
    assert sink.records("/decisions") == ()
