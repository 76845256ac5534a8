"""Shadow mode (ADR 0031): a candidate, or shadow rules, evaluated beside the policy, not enforced.

The properties: a shadow never changes the enforced decision (a gate with one
and a gate without decide identically, record for record, but for the
assessment's ``shadow`` key); the recorded shadow verdict is what a gate
enforcing the shadow decides; an error in the shadow is recorded, never
enforced; the shadow part holds no argument value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit import MemoryAuditSink
from runtime import (
    Action,
    CedarPolicy,
    ConditionError,
    Decision,
    Gate,
    Policy,
    PolicyBackend,
    PolicyError,
    Rule,
)
from runtime.testing import ManualClock
from tests.runtime.conftest import POLICY

KEY = b"k" * 32
SECRET = "AKIAIOSFODNN7EXAMPLE"
SHADOW_KEYS = {
    "mode", "policy_id", "policy_sha256", "verdict", "matched_policy", "matched_rules",
    "executed_args_sha256", "error", "eval_ns",
}  # fmt: skip
# What differs between two gates' records of one action by construction (ids, clocks).
_VOLATILE = {"decision_id", "trace_id", "span_id", "parent_span_id", "stamp_ns", "seq",
             "prev_sha256", "assessment_sha256", "eval_ns"}  # fmt: skip


def _gate(
    policy: PolicyBackend, shadow: PolicyBackend | None = None
) -> tuple[Gate, MemoryAuditSink]:
    sink = MemoryAuditSink(validate=True)
    gate = Gate(policy, sink=sink, clock=ManualClock(), fingerprint_key=KEY, shadow=shadow)
    return gate, sink


def _last(sink: MemoryAuditSink, topic: str) -> dict[str, Any]:
    return dict(sink.records(topic)[-1])


def _stable(record: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key not in _VOLATILE}


def _same_decision(one: Decision, other: Decision) -> None:
    for name in ("verdict", "args", "reason", "matched_policy", "policy_id", "policy_sha256"):
        assert getattr(one, name) == getattr(other, name), name


# --- random policies and actions -----------------------------------------------------------

VERBS = ("read", "send", "delete", "query")
RESOURCES = ("file:/d/a", "file:/d/b/c", "mail:x", "db:c", "file:/../x")


@st.composite
def rule_tables(draw: st.DrawFn, index: int) -> dict[str, Any]:
    effect = draw(st.sampled_from(("allow", "narrow", "approval", "deny")))
    rule: dict[str, Any] = {"id": f"r{index}", "effect": effect}
    if draw(st.booleans()):
        rule["verbs"] = draw(st.lists(st.sampled_from(VERBS), min_size=1, max_size=2, unique=True))
    if draw(st.booleans()):
        rule["resources"] = [draw(st.sampled_from(("file:/d/**", "mail:*", "db:c")))]
    if draw(st.booleans()):
        # Sometimes on a path an action may lack: an evaluation error, hence a deny.
        rule["when"] = {"n": {draw(st.sampled_from(("gt", "le"))): draw(st.integers(-2, 2))}}
    if effect == "narrow":
        rule["narrow"] = {"clamp": {"n": draw(st.integers(-2, 2))}, "set": {"flag": True}}
    if draw(st.integers(0, 3)) == 0:
        rule["shadow"] = True
    return rule


@st.composite
def policies(draw: st.DrawFn, policy_id: str) -> dict[str, Any]:
    count = draw(st.integers(0, 4))
    return {
        "policy_id": policy_id,
        "default": draw(st.sampled_from(("deny", "allow"))),
        "rules": [draw(rule_tables(index)) for index in range(count)],
    }


arguments = st.fixed_dictionaries(
    {},
    optional={
        "n": st.one_of(st.integers(-4, 4), st.text(max_size=2)),
        "note": st.sampled_from(["hi", f"key {SECRET}"]),
    },
)
actions = st.builds(
    Action,
    agent=st.sampled_from(("a", "b")),
    verb=st.sampled_from(VERBS),
    resource=st.sampled_from(RESOURCES),
    args=arguments,
)


def _without_shadow_rules(data: Mapping[str, Any], *, enforce: bool) -> Policy:
    """The policy with its shadow rules removed (``enforce=False``) or enforced."""
    rules = [
        {key: value for key, value in rule.items() if key != "shadow"}
        for rule in data["rules"]
        if enforce or not rule.get("shadow")
    ]
    return Policy.from_dict({**data, "rules": rules})


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policies("enforced"), policies("candidate"), actions)
def test_a_candidate_never_changes_the_decision_and_records_what_it_would_decide(
    enforced: dict[str, Any], candidate: dict[str, Any], action: Action
) -> None:
    policy, other = Policy.from_dict(enforced), Policy.from_dict(candidate)
    plain_gate, plain_sink = _gate(policy)
    shadowed_gate, shadowed_sink = _gate(policy, shadow=other)
    candidate_gate, candidate_sink = _gate(other)

    plain = plain_gate.check(action)
    shadowed = shadowed_gate.check(action)
    would = candidate_gate.check(action)

    # Identical decisions and records, but for the assessment's shadow key.
    _same_decision(plain, shadowed)
    assert _stable(_last(plain_sink, "/decisions")) == _stable(_last(shadowed_sink, "/decisions"))
    shadowed_assessment = _last(shadowed_sink, "/assessments")
    shadow = shadowed_assessment.pop("shadow")
    plain_assessment = _last(plain_sink, "/assessments")
    # Without a candidate, the policy's own shadow rules (if any) are the shadow.
    plain_shadow = plain_assessment.pop("shadow", None)
    assert _stable(plain_assessment) == _stable(shadowed_assessment)
    has_rules = any(rule.get("shadow") for rule in enforced["rules"])
    assert (plain_shadow is not None) == has_rules

    # The shadow is what a gate enforcing the candidate decides.
    assert set(shadow) == SHADOW_KEYS
    assert shadow["mode"] == "candidate"
    assert (shadow["policy_id"], shadow["policy_sha256"]) == ("candidate", other.policy_sha256)
    assert shadow["verdict"] == would.verdict.value
    assert shadow["matched_policy"] == would.matched_policy
    assert shadow["matched_rules"] == _last(candidate_sink, "/assessments")["matched_rules"]
    recorded = _last(candidate_sink, "/decisions")
    assert shadow["executed_args_sha256"] == recorded["executed_args_sha256"]
    assert (shadow["error"] is None) == (_last(candidate_sink, "/assessments")["errors"] == [])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policies("p"), actions)
def test_shadow_rules_are_never_enforced_and_record_the_policy_with_them_enforced(
    data: dict[str, Any], action: Action
) -> None:
    policy = Policy.from_dict(data)
    gate, sink = _gate(policy)
    without_gate, without_sink = _gate(_without_shadow_rules(data, enforce=False))
    with_gate, with_sink = _gate(_without_shadow_rules(data, enforce=True))

    decision = gate.check(action)
    without = without_gate.check(action)
    enforced = with_gate.check(action)

    for name in ("verdict", "args", "reason", "matched_policy"):
        assert getattr(decision, name) == getattr(without, name), name
    assessment = _last(sink, "/assessments")
    assert assessment["matched_rules"] == _last(without_sink, "/assessments")["matched_rules"]
    if not any(rule.get("shadow") for rule in data["rules"]):
        assert "shadow" not in assessment
        return
    shadow = assessment["shadow"]
    assert shadow["mode"] == "rules"
    assert (shadow["policy_id"], shadow["policy_sha256"]) == ("p", policy.policy_sha256)
    assert shadow["verdict"] == enforced.verdict.value
    assert shadow["matched_policy"] == enforced.matched_policy
    assert shadow["matched_rules"] == _last(with_sink, "/assessments")["matched_rules"]


# --- shadow rules, one at a time -----------------------------------------------------------

MAIL_DENY = {
    "policy_id": "mail",
    "rules": [
        {"id": "send-mail", "verbs": ["send"], "resources": ["mail:*"], "effect": "allow",
         "scrub_exempt": ["to"]},
        {"id": "no-external", "verbs": ["send"], "resources": ["mail:*"], "effect": "deny",
         "when": {"to": {"match": "@external\\."}}, "shadow": True},
    ],
}  # fmt: skip


def test_a_shadow_deny_rule_lets_the_action_run_and_records_that_it_would_have_denied() -> None:
    gate, sink = _gate(Policy.from_dict(MAIL_DENY))

    decision = gate.check(Action("bot", "send", "mail:out", {"to": "x@external.org"}))

    assert decision.verdict == "allow"
    assert decision.matched_policy == "send-mail"
    assessment = _last(sink, "/assessments")
    assert assessment["matched_rules"] == [{"id": "send-mail", "effect": "allow"}]
    assert assessment["shadow"]["verdict"] == "deny"
    assert assessment["shadow"]["matched_policy"] == "no-external"
    assert assessment["shadow"]["matched_rules"] == [
        {"id": "send-mail", "effect": "allow"},
        {"id": "no-external", "effect": "deny"},
    ]
    assert assessment["shadow"]["executed_args_sha256"] is None


def test_a_shadow_rule_whose_condition_fails_does_not_deny_the_action() -> None:
    gate, sink = _gate(Policy.from_dict(MAIL_DENY))

    # No "to": the shadow rule's condition is an evaluation error -- for the shadow only.
    decision = gate.check(Action("bot", "send", "mail:out", {"subject": "hi"}))

    assert decision.verdict == "allow"
    shadow = _last(sink, "/assessments")["shadow"]
    assert shadow["verdict"] == "deny"
    assert shadow["matched_rules"] == []
    assert "no-external" in shadow["error"]
    assert "ConditionError" in shadow["error"]


def test_a_policy_without_shadow_rules_records_no_shadow_key() -> None:
    gate, sink = _gate(Policy.from_dict(POLICY))
    gate.check(Action("bot", "search", "tool:search", {"q": "x"}))
    assert "shadow" not in _last(sink, "/assessments")
    assert Policy.from_dict(POLICY).with_shadow_rules() is None
    assert gate.shadow is None


def test_shadow_must_be_a_boolean() -> None:
    data = {"policy_id": "p", "rules": [{"id": "r", "effect": "allow", "shadow": "yes"}]}
    with pytest.raises(PolicyError) as caught:
        Policy.from_dict(data)
    assert (caught.value.rule, caught.value.field) == ("r", "shadow")


def test_a_candidate_supersedes_the_policys_shadow_rules() -> None:
    candidate = Policy.from_dict(POLICY)
    gate, sink = _gate(Policy.from_dict(MAIL_DENY), shadow=candidate)

    gate.check(Action("bot", "send", "mail:out", {"to": "x@external.org"}))

    shadow = _last(sink, "/assessments")["shadow"]
    assert shadow["mode"] == "candidate"
    assert shadow["policy_id"] == "test-policy"
    # The candidate's send-mail (which scrubs the address); no-external is not asked.
    assert (shadow["verdict"], shadow["matched_policy"]) == ("scrub", "send-mail")
    assert gate.shadow is candidate


# --- fail-safe -----------------------------------------------------------------------------


class _Raising:
    """A backend that answers every question but matching, which raises."""

    def __init__(self, exc: Exception) -> None:
        self._inner = Policy.from_dict(POLICY)
        self._exc = exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    policy_id = "raising"
    policy_sha256 = "0" * 64

    @property
    def default(self) -> Any:
        return self._inner.default

    @property
    def rules(self) -> tuple[Rule, ...]:
        return self._inner.rules

    @property
    def scrub(self) -> Any:
        return self._inner.scrub

    @property
    def source(self) -> bytes:
        return b"raising"

    source_name = "raising.txt"
    source_media_type = "text/plain"

    @property
    def source_sha256(self) -> str:
        from runtime import sha256_hex

        return sha256_hex(b"raising")

    def matching_rules(self, *args: object) -> tuple[Rule, ...]:
        raise self._exc


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (RuntimeError(f"boom {SECRET}"), "denied: evaluation failed with RuntimeError"),
        (
            ConditionError("r9", "amount", "missing"),
            "denied: rule 'r9': when 'amount': missing (ConditionError)",
        ),
        (RecursionError(), "denied: evaluation failed with RecursionError"),
    ],
)
def test_a_shadow_that_raises_is_recorded_and_changes_nothing(
    exc: Exception, expected: str
) -> None:
    policy = Policy.from_dict(POLICY)
    action = Action("bot", "query", "db:customers", {"table": "t", "limit": 500, "x": SECRET})
    plain_gate, _plain_sink = _gate(policy)
    gate, sink = _gate(policy, shadow=_Raising(exc))

    _same_decision(plain_gate.check(action), gate.check(action))

    shadow = _last(sink, "/assessments")["shadow"]
    assert shadow["verdict"] == "deny"
    assert shadow["error"] == expected
    assert shadow["matched_rules"] == []
    assert shadow["matched_policy"] is None
    logged = b"".join(entry.data for entry in sink.entries)
    assert SECRET.encode() not in logged
    assert b"boom" not in logged


def test_a_hostile_candidate_rule_is_a_recorded_shadow_deny() -> None:
    # A match pattern over a huge argument, a condition through a list: neither reaches
    # the enforced verdict.
    hostile = Policy.from_dict(
        {
            "policy_id": "hostile",
            "rules": [
                {"id": "slow", "effect": "allow", "when": {"q": {"match": "(a|aa)*$"}}},
                {"id": "through", "effect": "deny", "when": {"items.x": {"eq": 1}}},
            ],
        }
    )
    policy = Policy.from_dict(POLICY)
    action = Action("bot", "search", "tool:search", {"q": "a" * 50_000 + "!", "items": [1]})
    plain_gate, _ = _gate(policy)
    gate, sink = _gate(policy, shadow=hostile)

    _same_decision(plain_gate.check(action), gate.check(action))

    shadow = _last(sink, "/assessments")["shadow"]
    assert shadow["verdict"] == "deny"
    assert "through" in shadow["error"]


def test_an_action_the_gate_cannot_read_is_a_shadow_deny_not_evaluated() -> None:
    gate, sink = _gate(Policy.from_dict(POLICY), shadow=Policy.from_dict(POLICY))

    decision = gate.check(Action("bot", "search", "tool:search", {"s": {1, 2}}))

    assert decision.verdict == "deny"
    shadow = _last(sink, "/assessments")["shadow"]
    assert shadow["verdict"] == "deny"
    assert shadow["error"].startswith("not evaluated")


def test_shadow_must_be_a_policy_backend() -> None:
    with pytest.raises(TypeError, match="shadow must be a PolicyBackend"):
        Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), shadow="policy.toml")  # type: ignore[arg-type]


def test_the_shadow_part_records_no_argument_value() -> None:
    candidate = Policy.from_dict(
        {"policy_id": "c", "rules": [{"id": "q", "effect": "narrow", "narrow": {"set": {"z": 1}}}]}
    )
    gate, sink = _gate(Policy.from_dict(POLICY), shadow=candidate)
    args = {"table": "secret_table_name", "where": f"token={SECRET}", "limit": 123457}

    gate.check(Action("bot", "query", "db:customers", args))

    shadow = _last(sink, "/assessments")["shadow"]
    assert shadow["verdict"] == "narrow"
    text = json.dumps(shadow)
    for value in ("secret_table_name", SECRET, "123457", "token"):
        assert value not in text
    assert set(shadow) == SHADOW_KEYS


def test_latency_is_the_time_to_the_enforced_verdict() -> None:
    # Each clock read steps 1 us: the shadow's reads come after the verdict's.
    clock_plain, clock_shadow = ManualClock(step_ns=1_000), ManualClock(step_ns=1_000)
    policy = Policy.from_dict(POLICY)
    plain = Gate(policy, sink=MemoryAuditSink(), clock=clock_plain)
    sink = MemoryAuditSink()
    shadowed = Gate(policy, sink=sink, clock=clock_shadow, shadow=policy)
    action = Action("bot", "search", "tool:search", {"q": "x"})

    assert plain.check(action).latency_ns == shadowed.check(action).latency_ns
    assert _last(sink, "/assessments")["shadow"]["eval_ns"] > 0


# --- Cedar ---------------------------------------------------------------------------------

CEDAR_SHADOW = """
@id("send-mail")
@ghost_scrub_exempt("['to']")
permit(principal, action == Action::"send", resource);

@id("no-external")
@ghost_shadow
forbid(principal, action == Action::"send", resource)
when { context.to like "*@external.*" };

@id("flagged")
@ghost_shadow("true")
forbid(principal, action, resource) when { context.flag };
"""


def test_cedar_ghost_shadow_statements_are_evaluated_not_enforced() -> None:
    pytest.importorskip("cedarpy", reason="the Cedar backend needs cedarpy")
    policy = CedarPolicy.from_str(CEDAR_SHADOW, policy_id="mail")
    assert [rule.shadow for rule in policy.rules] == [False, True, True]
    gate, sink = _gate(policy)

    allowed = gate.check(Action("bot", "send", "mail:out", {"to": "x@external.org"}))
    # context.flag is missing: an evaluation error of a shadow statement only.
    erring = gate.check(Action("bot", "send", "mail:out", {"to": "x@inside.org"}))

    assert (allowed.verdict, erring.verdict) == ("allow", "allow")
    first, second = (dict(record) for record in sink.records("/assessments"))
    assert first["matched_rules"] == [{"id": "send-mail", "effect": "allow"}]
    assert first["shadow"]["mode"] == "rules"
    assert second["shadow"]["verdict"] == "deny"


def test_cedar_ghost_shadow_false_is_enforced() -> None:
    pytest.importorskip("cedarpy", reason="the Cedar backend needs cedarpy")
    text = '@id("x")\n@ghost_shadow("false")\nforbid(principal, action, resource);'
    policy = CedarPolicy.from_str(text)
    assert policy.with_shadow_rules() is None
    gate, _ = _gate(policy)
    assert gate.check(Action("a", "read", "file:/x")).verdict == "deny"


def test_a_cedar_candidate_beside_a_toml_policy() -> None:
    pytest.importorskip("cedarpy", reason="the Cedar backend needs cedarpy")
    candidate = CedarPolicy.from_str(
        '@id("only-reads")\npermit(principal, action == Action::"read", resource);',
        policy_id="cedar-candidate",
    )
    gate, sink = _gate(Policy.from_dict(POLICY), shadow=candidate)

    decision = gate.check(Action("bot", "search", "tool:search", {"q": "x"}))

    assert decision.verdict == "allow"
    shadow = _last(sink, "/assessments")["shadow"]
    assert (shadow["policy_id"], shadow["verdict"]) == ("cedar-candidate", "deny")
    assert shadow["policy_sha256"] == candidate.policy_sha256
