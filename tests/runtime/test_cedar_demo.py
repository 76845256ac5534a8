"""The bundled demo policy in TOML and in Cedar decides the demo script identically (issue 11)."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from typing import Any

import pytest

from analysis._demo import SCRIPT, demo_cedar_policy, demo_cedar_policy_path, demo_policy_path
from audit import MemoryAuditSink
from runtime import (
    CEDAR_BUNDLE_MEDIA_TYPE,
    Action,
    ApprovalError,
    CedarPolicy,
    Decision,
    Gate,
    Policy,
    PolicyBackend,
    RuntimeVerdict,
    sha256_hex,
)
from runtime.testing import ManualClock

pytest.importorskip("cedarpy", reason="the Cedar backend needs cedarpy (ghost-sdk[cedar])")

KEY = b"k" * 32


def _gate(policy: PolicyBackend) -> tuple[Gate, MemoryAuditSink]:
    sink = MemoryAuditSink(validate=True)
    return Gate(policy, sink=sink, clock=ManualClock(step_ns=1_000), fingerprint_key=KEY), sink


def _assessment(sink: MemoryAuditSink, decision: Decision) -> Mapping[str, Any]:
    (entry,) = [
        e
        for e in sink.entries
        if e.topic == "/assessments" and e.record["decision_id"] == decision.decision_id
    ]
    return entry.record


def _picture(sink: MemoryAuditSink, decision: Decision) -> dict[str, Any]:
    """What must agree between the backends: everything but ids, hashes of the policy, times."""
    record = _assessment(sink, decision)
    return {
        "verdict": decision.verdict,
        "args": decision.args,
        "matched_policy": decision.matched_policy,
        "matched_rules": record["matched_rules"],
        "narrowings": record["narrowings"],
        "findings": record["findings"],
        "args_sha256": record["args_sha256"],
        "no_errors": not record["errors"],
    }


def test_the_demo_script_gets_the_same_decisions_under_both_backends() -> None:
    toml_gate, toml_sink = _gate(Policy.from_toml(demo_policy_path()))
    cedar_gate, cedar_sink = _gate(demo_cedar_policy())
    verdicts = set()
    for call in SCRIPT:
        toml = toml_gate.check(call.action, traceparent=call.traceparent)
        cedar = cedar_gate.check(call.action, traceparent=call.traceparent)
        assert _picture(cedar_sink, cedar) == _picture(toml_sink, toml), call.action
        verdicts.add(toml.verdict)
        if toml.verdict is RuntimeVerdict.PENDING and call.human is not None:
            what, who = call.human
            if what == "ignore":
                continue
            # The approval terms (approvers) came from annotations: the same people may act.
            for gate in (toml_gate, cedar_gate):
                decision = toml if gate is toml_gate else cedar
                with pytest.raises(ApprovalError):
                    gate.approvals.resolve(decision.decision_id, approved=True, approver="eve")
            outcomes = [
                gate.approvals.resolve(d.decision_id, approved=what == "approve", approver=str(who))
                for gate, d in ((toml_gate, toml), (cedar_gate, cedar))
            ]
            assert outcomes[0].outcome == outcomes[1].outcome
            assert outcomes[0].final_verdict is outcomes[1].final_verdict
    assert verdicts == set(RuntimeVerdict)  # the script reaches all five


def test_a_condition_on_the_wrong_type_denies_under_both_backends_naming_the_rule() -> None:
    action = Action("support", "refund", "payments:stripe", {"amount": "900", "currency": "EUR"})
    toml = _gate(Policy.from_toml(demo_policy_path()))[0].check(action)
    cedar_gate, cedar_sink = _gate(demo_cedar_policy())
    cedar = cedar_gate.check(action)
    assert toml.verdict is cedar.verdict is RuntimeVerdict.DENY
    assert cedar.matched_policy is None
    assert "'large-refunds-need-approval'" in cedar.reason
    assert "900" not in cedar.reason  # Cedar's own message quotes the value: never kept
    assert _assessment(cedar_sink, cedar)["errors"] == ["CedarEvaluationError"]


def test_the_wire_transfer_approval_timeout_comes_from_the_annotation() -> None:
    clock = ManualClock(step_ns=1_000)
    sink = MemoryAuditSink()
    gate = Gate(demo_cedar_policy(), sink=sink, clock=clock, fingerprint_key=KEY)
    action = Action("support", "transfer", "bank:wire", {"amount": 1, "currency": "EUR"})
    decision = gate.check(action)
    assert decision.verdict is RuntimeVerdict.PENDING

    def waiting() -> list[str]:
        return [p.decision_id for p in gate.approvals.pending()]

    clock.advance(200_000_000)  # 0.2 s: not yet
    gate.check(Action("support", "search", "tool:web_search", {"query": "x"}))
    assert waiting() == [decision.decision_id]
    clock.advance(100_000_000)  # past 0.25 s
    gate.check(Action("support", "search", "tool:web_search", {"query": "x"}))
    assert waiting() == []
    (approval,) = [e.record for e in sink.entries if e.topic == "/approvals"]
    assert approval["decision_id"] == decision.decision_id
    assert approval["outcome"] == "expired"


def test_the_cedar_source_is_attached_to_the_run_and_hashed() -> None:
    policy = demo_cedar_policy()
    _, sink = _gate(policy)
    run = sink.run
    assert run is not None
    text = demo_cedar_policy_path().read_text()
    # The demo has scrub settings: the run attaches them with the text, as a bundle
    # that rebuilds the very policy (a run is self-contained).
    bundle = json.loads(run.policy_source)
    assert bundle["cedar"] == text
    assert bundle["scrub"] == tomllib.loads(demo_policy_path().read_text())["scrub"]
    assert run.policy_source_media_type == CEDAR_BUNDLE_MEDIA_TYPE
    assert run.policy_source_name == "demo_policy.cedar.json"
    assert run.policy_source_sha256 == sha256_hex(run.policy_source)
    assert CedarPolicy.from_bundle(run.policy_source).policy_sha256 == policy.policy_sha256
    assert run.policy_id == "demo-support-desk"
    assert run.policy_sha256 == policy.policy_sha256


def test_policy_sha256_covers_the_text_the_schema_the_scrub_settings_and_the_id() -> None:
    text = demo_cedar_policy_path().read_text()
    base = CedarPolicy.from_str(text).policy_sha256
    assert CedarPolicy.from_str(text).policy_sha256 == base  # deterministic
    assert CedarPolicy.from_str(text + "\n// a comment\n").policy_sha256 != base
    assert CedarPolicy.from_str(text, policy_id="other").policy_sha256 != base
    assert CedarPolicy.from_str(text, scrub={"block": ["jwt"]}).policy_sha256 != base
    schema = "entity Agent { name: String };\nentity Resource { kind: String, path: String };\n"
    schema += 'action "go" appliesTo { principal: Agent, resource: Resource, context: {} };\n'
    simple = 'permit (principal, action == Action::"go", resource);'
    assert (
        CedarPolicy.from_str(simple, schema=schema).policy_sha256
        != CedarPolicy.from_str(simple).policy_sha256
    )
