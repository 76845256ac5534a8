"""Property-based invariants of the gate: for any action, a recorded, consistent verdict."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit import MemoryAuditSink
from runtime import Action, Effect, Gate, Policy, RuntimeVerdict, content_address
from tests.runtime.conftest import POLICY
from tests.strategies import json_values

SECRETS = ["AKIAIOSFODNN7EXAMPLE", "jane.doe@example.com", "4111111111111111"]
POLICY_OBJ = Policy.from_dict(POLICY)

agents = st.sampled_from(["bot", "analyst", "mailer", "support", "x"])
verbs = st.sampled_from(["read", "query", "refund", "send", "delete", "search", "launch"])
resources = st.sampled_from(
    ["tool:search", "db:customers", "payments:stripe", "mail:x", "file:/data/public/a", "z"]
)


@st.composite
def arguments(draw: st.DrawFn) -> dict[str, Any]:
    args = draw(st.dictionaries(st.text(max_size=6), json_values(), max_size=5))
    if draw(st.booleans()):
        args[draw(st.text(max_size=6))] = f"x {draw(st.sampled_from(SECRETS))} y"
    for key in ("limit", "amount"):
        if draw(st.booleans()):
            args[key] = draw(st.one_of(st.integers(-10, 10**6), st.text(max_size=3)))
    return args


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(agents, verbs, resources, arguments())
def test_every_check_is_recorded_and_consistent(
    agent: str, verb: str, resource: str, args: dict[str, Any]
) -> None:
    sink = MemoryAuditSink()
    gate = Gate(POLICY_OBJ, sink=sink)
    before = json.dumps(args, sort_keys=True)
    decision = gate.check(Action(agent, verb, resource, args))

    # Never a lost record: exactly one assessment and one decision, chained.
    (assessment,) = sink.records("/assessments")
    (record,) = sink.records("/decisions")
    assert record["assessment_sha256"] == content_address(assessment)
    assert record["verdict"] == decision.verdict.value

    # The caller's arguments are untouched; denial executes nothing.
    assert json.dumps(args, sort_keys=True) == before
    if decision.verdict is RuntimeVerdict.DENY:
        assert decision.args == {}

    # No raw secret in what would execute (nothing here is scrub-exempt) or in the log.
    logged = b"".join(entry.data for entry in sink.entries)
    for secret in SECRETS:
        assert secret.encode() not in logged
        if decision.verdict is not RuntimeVerdict.DENY:
            assert secret not in json.dumps(dict(decision.args))

    # Precedence: a matching deny rule always wins.
    effects = {rule["effect"] for rule in assessment["matched_rules"]}
    if Effect.DENY.value in effects:
        assert decision.verdict is RuntimeVerdict.DENY
    if decision.verdict is RuntimeVerdict.PENDING:
        assert Effect.APPROVAL.value in effects
    if decision.verdict is RuntimeVerdict.NARROW:
        assert assessment["narrowings"]
    if decision.verdict is RuntimeVerdict.SCRUB:
        assert assessment["findings"]
        assert not assessment["narrowings"]
