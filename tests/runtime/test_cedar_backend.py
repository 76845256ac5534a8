"""The Cedar backend: loading, the request convention, hostile input, failing closed (ADR 0028)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from audit import MemoryAuditSink
from runtime import (
    Action,
    CedarEntity,
    CedarEvaluationError,
    CedarPolicy,
    CedarRequest,
    CedarValueError,
    Decision,
    Effect,
    Gate,
    PolicyError,
    RuntimeVerdict,
    convention_request,
)
from runtime._cedar_request import MAX_CEDAR_DEPTH, encode_request
from runtime.testing import ManualClock

cedarpy = pytest.importorskip("cedarpy", reason="the Cedar backend needs cedarpy")

ALLOW_ALL = "permit (principal, action, resource);"


def decide(policy: CedarPolicy, action: Action) -> tuple[Decision, Mapping[str, Any]]:
    sink = MemoryAuditSink()
    gate = Gate(policy, sink=sink, clock=ManualClock(step_ns=1_000), fingerprint_key=b"k" * 32)
    decision = gate.check(action)
    (record,) = [e.record for e in sink.entries if e.topic == "/assessments"]
    return decision, record


def verdict(text: str, action: Action, **options: Any) -> RuntimeVerdict:
    return decide(CedarPolicy.from_str(text, **options), action)[0].verdict


def act(agent: str = "bot", verb: str = "go", resource: str = "res:x", **args: Any) -> Action:
    return Action(agent, verb, resource, args)


# -- imports -------------------------------------------------------------------------------


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.strip()


def test_import_runtime_does_not_import_cedarpy_until_a_cedar_policy_is_built() -> None:
    code = (
        "import sys, runtime\n"
        "print('cedarpy' in sys.modules)\n"
        "runtime.CedarPolicy.from_str('permit (principal, action, resource);')\n"
        "print('cedarpy' in sys.modules)\n"
    )
    assert _python(code).split() == ["False", "True"]


def test_without_cedarpy_building_a_cedar_policy_says_what_to_install() -> None:
    code = (
        "import sys\n"
        "sys.modules['cedarpy'] = None  # what an absent package looks like to import\n"
        "import runtime\n"
        "try:\n"
        "    runtime.CedarPolicy.from_str('permit (principal, action, resource);')\n"
        "except runtime.PolicyError as exc:\n"
        "    print(exc)\n"
    )
    assert "install ghost-sdk[cedar]" in _python(code)


# -- loading ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ('@ghost_efect("narrow") ' + ALLOW_ALL, "@ghost_efect", "unknown annotation"),
        ('@Ghost_effect("narrow") ' + ALLOW_ALL, "@Ghost_effect", "unknown annotation"),
        ('@ghost_effect("deny") ' + ALLOW_ALL, "@ghost_effect", "write forbid"),
        ('@ghost_effect("pending") ' + ALLOW_ALL, "@ghost_effect", "not 'pending'"),
        ('@ghost_effect("approval") forbid (principal, action, resource);', "@ghost_effect",
         "belongs on a permit"),
        ('@ghost_effect("narrow") ' + ALLOW_ALL, "@ghost_effect (narrow)", "narrow table"),
        ('@ghost_narrow_clamp("{ n = 1 }") ' + ALLOW_ALL, "@ghost_effect (narrow)",
         "only a rule with effect = 'narrow'"),
        ('@ghost_narrow_clamp("{ n = 1 }") forbid (principal, action, resource);',
         "@ghost_effect (narrow)", "only a rule with effect = 'narrow'"),
        ('@ghost_approval_timeout_s("5") ' + ALLOW_ALL, "@ghost_effect (approval)",
         "only a rule with effect = 'approval'"),
        ('@ghost_effect("narrow") @ghost_narrow_clamp("{ n = \'x\' }") ' + ALLOW_ALL,
         "@ghost_narrow_clamp (narrow.clamp.n)", "finite number"),
        ('@ghost_effect("narrow") @ghost_narrow_keep("[\'a.b\']") ' + ALLOW_ALL,
         "@ghost_narrow_keep (narrow.keep)", "top-level"),
        ('@ghost_effect("narrow") @ghost_narrow_set("{ a = 1 ") ' + ALLOW_ALL,
         "@ghost_narrow_set", "not a TOML value"),
        ('@ghost_effect("narrow") @ghost_narrow_within("{ p = \'rel\' }") ' + ALLOW_ALL,
         "@ghost_narrow_within (narrow.within.p)", "within prefix"),
        ('@ghost_effect("approval") @ghost_approval_timeout_s("0") ' + ALLOW_ALL,
         "@ghost_approval_timeout_s (approval.timeout_s)", "positive number"),
        ('@ghost_effect("approval") @ghost_approval_approvers("[]") ' + ALLOW_ALL,
         "@ghost_approval_approvers (approvers)", "non-empty array"),
        ('@ghost_scrub_exempt("[\'to..cc\']") ' + ALLOW_ALL, "@ghost_scrub_exempt (scrub_exempt)",
         "dotted argument path"),
        ('@ghost_approval_timeout_s("5\\nx = 1") @ghost_effect("approval") ' + ALLOW_ALL,
         "@ghost_approval_timeout_s", "exactly one TOML value"),
    ],
)  # fmt: skip
def test_a_malformed_annotation_is_a_policy_error_naming_rule_and_annotation(
    text: str, field: str, words: str
) -> None:
    with pytest.raises(PolicyError) as raised:
        CedarPolicy.from_str(text)
    assert raised.value.field == field
    assert raised.value.rule == "policy0"
    assert words in str(raised.value)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("permit (principal, action, resource", "not valid Cedar"),
        (f'@id("a") {ALLOW_ALL}\n@id("a") {ALLOW_ALL}', "duplicate rule id"),
        (f'@id("") {ALLOW_ALL}', "@id must not be empty"),
        ("permit (principal == ?principal, action, resource);", "templates are not supported"),
    ],
)
def test_a_malformed_policy_set_is_a_policy_error(text: str, words: str) -> None:
    with pytest.raises(PolicyError) as raised:
        CedarPolicy.from_str(text)
    assert words in str(raised.value)


def test_statements_become_rules_in_file_order_with_annotation_ids_or_positional_ones() -> None:
    policy = CedarPolicy.from_str(
        'forbid (principal, action == Action::"rm", resource);\n'
        '@id("ask") @ghost_effect("approval") @ghost_approval_timeout_s("30")\n'
        "@ghost_approval_approvers(\"['alice']\") " + ALLOW_ALL + "\n"
        '@ghost_effect("allow") @ghost_scrub_exempt("[\'to\']") ' + ALLOW_ALL,
        policy_id="mine",
    )
    assert [(r.id, r.effect) for r in policy.rules] == [
        ("policy0", Effect.DENY),
        ("ask", Effect.APPROVAL),
        ("policy2", Effect.ALLOW),
    ]
    ask = policy.rules[1].approval
    assert ask is not None
    assert (ask.timeout_s, ask.approvers) == (30.0, ("alice",))
    assert policy.rules[2].scrub_exempt == ("to",)
    assert policy.policy_id == "mine"
    assert policy.default is Effect.DENY
    with pytest.raises(AttributeError, match="immutable"):
        policy.policy_id = "other"  # type: ignore[misc]
    assert "CedarPolicy(policy_id='mine', rules=3" in repr(policy)


def test_from_file_reads_the_policy_and_a_schema_file(tmp_path: Path) -> None:
    path = tmp_path / "shop.cedar"
    path.write_text('permit (principal, action == Action::"go", resource);')
    schema = tmp_path / "shop.cedarschema"
    schema.write_text(
        "entity Agent { name: String };\nentity Resource { kind: String, path: String };\n"
        'action "go" appliesTo { principal: Agent, resource: Resource, context: { n: Long } };\n'
    )
    policy = CedarPolicy.from_file(path, schema=schema)
    assert policy.policy_id == "shop"
    # With a schema, the run attaches the bundle of the text and the schema.
    assert policy.source_name == "shop.cedar.json"
    assert json.loads(policy.source)["schema"] == schema.read_text()
    assert json.loads(policy.source)["cedar"] == path.read_text()
    assert policy.schema_text == schema.read_text()
    assert decide(policy, act(n=1))[0].verdict is RuntimeVerdict.ALLOW
    # The request is validated against the schema too: a context of the wrong shape denies.
    decision, record = decide(policy, act(n="1"))
    assert decision.verdict is RuntimeVerdict.DENY
    assert record["errors"] == ["CedarEvaluationError"]


def test_unreadable_files_schemas_and_settings_are_policy_errors(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read the file"):
        CedarPolicy.from_file(tmp_path / "absent.cedar")
    (tmp_path / "bad.cedar").write_bytes(b"\xff\xfe")
    with pytest.raises(PolicyError, match="not UTF-8"):
        CedarPolicy.from_file(tmp_path / "bad.cedar")
    with pytest.raises(PolicyError, match="not a valid Cedar schema") as raised:
        CedarPolicy.from_str(ALLOW_ALL, schema="entity {")
    assert raised.value.field == "schema"
    with pytest.raises(PolicyError, match="not a valid Cedar schema"):
        CedarPolicy.from_str(ALLOW_ALL, schema='{"": {"entityTypes": 3}}')
    schema = 'entity Agent;\nentity Resource;\naction "go" appliesTo { principal: Agent,'
    schema += " resource: Resource };\n"
    with pytest.raises(PolicyError, match="does not validate against the schema") as raised:
        CedarPolicy.from_str(
            '@id("typo") permit (principal, action == Action::"og", resource);', schema=schema
        )
    assert raised.value.rule == "typo"
    assert raised.value.field == "schema"
    with pytest.raises(PolicyError, match="unknown detector"):
        CedarPolicy.from_str(ALLOW_ALL, scrub={"block": ["nope"]})
    with pytest.raises(PolicyError, match="scrub must be a mapping"):
        CedarPolicy.from_str(ALLOW_ALL, scrub=["email"])  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="mapping must be callable"):
        CedarPolicy.from_str(ALLOW_ALL, mapping="convention")  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="must be a str"):
        CedarPolicy(b"permit", policy_id="p")  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="schema must be text"):
        CedarPolicy.from_str(ALLOW_ALL, schema=3)  # type: ignore[arg-type]


def test_the_scrub_settings_apply_as_in_the_toml_format() -> None:
    pem = (
        "-----BEGIN RSA PRIVATE KEY-----\n"
        "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6\n-----END RSA PRIVATE KEY-----"
    )
    blocking = CedarPolicy.from_str(ALLOW_ALL, scrub={"block": ["private_key"]})
    assert decide(blocking, act(body=pem))[0].verdict is RuntimeVerdict.DENY
    redacting = CedarPolicy.from_str(ALLOW_ALL)
    decision = decide(redacting, act(body=pem))[0]
    assert decision.verdict is RuntimeVerdict.SCRUB
    assert decision.args == {"body": "[REDACTED:private_key]"}


def test_the_gate_refuses_something_that_is_not_a_policy_backend() -> None:
    with pytest.raises(TypeError, match="PolicyBackend"):
        Gate(object(), sink=MemoryAuditSink())  # type: ignore[arg-type]


def test_the_parsed_policy_set_is_reused_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = CedarPolicy.from_str('permit (principal == Agent::"bot", action, resource);')

    def parse_again(*_: object, **__: object) -> None:
        raise AssertionError("parsed again")

    for name in ("policies_to_json_str", "policies_from_json_str"):
        monkeypatch.setattr(cedarpy, name, parse_again)
    monkeypatch.setattr(cedarpy, "PolicySet", parse_again)
    for _ in range(3):
        assert decide(policy, act())[0].verdict is RuntimeVerdict.ALLOW


# -- the convention --------------------------------------------------------------------------


def test_the_convention_maps_names_and_the_canonical_resource() -> None:
    text = (
        '@id("r") permit (principal, action == Action::"read", resource) when {'
        ' principal.name like "ops/*" && resource.kind == "file"'
        ' && resource.path == "/data/q3.txt" && resource == Resource::"file:/data/q3.txt" };'
    )
    policy = CedarPolicy.from_str(text)
    for resource in ("file:/data/q3.txt", "file:/data/x/../q3.txt", "file:/data//q3.txt/"):
        decision = decide(policy, act("ops/cleaner", "read", resource))[0]
        assert (decision.verdict, decision.matched_policy) == (RuntimeVerdict.ALLOW, "r"), resource
    assert decide(policy, act("ops", "read", "file:/data/q3.txt"))[0].verdict is RuntimeVerdict.DENY
    request = convention_request("a", "v", "db:customers", {})
    assert request.entities[1].attrs == {"kind": "db", "path": "customers"}
    assert convention_request("a", "v", "/etc", {}).entities[1].attrs == {
        "kind": "",
        "path": "/etc",
    }


def test_an_ambiguous_resource_denies_before_cedar_is_asked() -> None:
    decision, record = decide(CedarPolicy.from_str(ALLOW_ALL), act(resource="file:/../etc"))
    assert decision.verdict is RuntimeVerdict.DENY
    assert record["errors"] == ["AmbiguousResource"]


@pytest.mark.parametrize(
    ("args", "test", "expected"),
    [
        ({"n": 2**63 - 1}, "context.n > 0", RuntimeVerdict.ALLOW),
        ({"n": -(2**63)}, "context.n < 0", RuntimeVerdict.ALLOW),
        ({"x": 2.5}, 'context.x.greaterThan(decimal("2.4999"))', RuntimeVerdict.ALLOW),
        ({"x": 2.5}, 'context.x.lessThan(decimal("2.5"))', RuntimeVerdict.DENY),
        ({"x": -3.0}, 'context.x == decimal("-3.0")', RuntimeVerdict.ALLOW),
        ({"x": 0.0001}, 'context.x == decimal("0.0001")', RuntimeVerdict.ALLOW),
        ({"x": 922337203685477.5}, "true", RuntimeVerdict.ALLOW),
        ({"tags": ["a", "b", "a"]}, 'context.tags.contains("a") && context.tags.containsAll(["b"])',
         RuntimeVerdict.ALLOW),
        ({"tags": ("a",)}, 'context.tags.contains("a")', RuntimeVerdict.ALLOW),
        ({"r": {"s": {"t": "deep"}}}, 'context.r.s.t == "deep"', RuntimeVerdict.ALLOW),
        ({"s": 'x" || true || "'}, 'context.s == "y"', RuntimeVerdict.DENY),
    ],
)  # fmt: skip
def test_representable_values_reach_cedar_exactly(
    args: dict[str, Any], test: str, expected: RuntimeVerdict
) -> None:
    text = f"permit (principal, action, resource) when {{ {test} }};"
    assert verdict(text, act(**args)) is expected


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"n": None}, "$.n is a null"),
        ({"n": b"raw"}, "$.n is a bytes"),
        ({"n": 2**63}, "$.n is a int"),
        ({"n": -(2**63) - 1}, "outside the signed 64-bit range"),
        ({"x": 0.00001}, "$.x is a float"),
        ({"x": 1e300}, "$.x is a float"),
        ({"x": 922337203685478.0}, "at most 4 digits"),
        ({"items": [1, None]}, "$.items[1] is a null"),
        ({"odd key": None}, '$["?"] is a null'),
        ({"owner": {"__entity": {"type": "Agent", "id": "root"}}}, "Cedar's JSON escapes"),
        ({"x": {"__extn": {"fn": "decimal", "arg": "1.0"}}}, "Cedar's JSON escapes"),
    ],
)
def test_a_value_cedar_cannot_hold_denies_and_is_never_dropped(
    args: dict[str, Any], words: str
) -> None:
    # The forbid would not fire if the value were dropped: denial must come from the value.
    text = ALLOW_ALL + "\nforbid (principal, action, resource) when { context has n };"
    decision, record = decide(CedarPolicy.from_str(text), act(**args))
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.matched_policy is None
    assert record["errors"] == ["CedarValueError"]
    assert words in decision.reason


def test_nesting_is_bounded() -> None:
    value: Any = "leaf"
    for _ in range(MAX_CEDAR_DEPTH - 1):
        value = {"k": value}
    # context.v is depth 1, its leaf depth 32: the deepest allowed.
    assert verdict(ALLOW_ALL, act(v=value)) is RuntimeVerdict.ALLOW
    decision, _ = decide(CedarPolicy.from_str(ALLOW_ALL), act(v={"k": value}))
    assert decision.verdict is RuntimeVerdict.DENY
    assert "nested deeper than 32" in decision.reason


def test_an_argument_cannot_forge_an_entity_to_pass_an_equality_with_the_principal() -> None:
    text = "permit (principal, action, resource) when { context.owner == principal };"
    forged = {"__entity": {"type": "Agent", "id": "mallory"}}
    assert verdict(text, act("mallory", owner=forged)) is RuntimeVerdict.DENY
    # ... while bare cedarpy, given the same JSON, would have allowed it.
    answer = cedarpy.is_authorized(
        {
            "principal": {"type": "Agent", "id": "mallory"},
            "action": {"type": "Action", "id": "go"},
            "resource": {"type": "Resource", "id": "res:x"},
            "context": {"owner": forged},
        },
        text,
        "[]",
    )
    assert answer.allowed


@pytest.mark.parametrize(
    "agent",
    [
        'admin"',
        'x" || principal == Agent::"admin',
        'Agent::"admin"',
        "admin ",
        "ADMIN",
        "admin\u200b",
        "a" * 4096,
    ],
)
def test_a_crafted_name_is_one_entity_id_never_cedar_syntax(agent: str) -> None:
    text = 'permit (principal == Agent::"admin", action, resource);'
    assert verdict(text, act(agent)) is RuntimeVerdict.DENY
    assert verdict(text, act("admin")) is RuntimeVerdict.ALLOW


@pytest.mark.parametrize(
    "verb",
    ['read", resource)', 'read"', "Action::read", 'read";permit(principal,action,resource);//'],
)
def test_a_crafted_verb_or_resource_is_one_entity_id(verb: str) -> None:
    text = 'permit (principal, action == Action::"read", resource == Resource::"db:x");'
    assert verdict(text, act(verb=verb, resource="db:x")) is RuntimeVerdict.DENY
    assert verdict(text, act(verb="read", resource='db:x"')) is RuntimeVerdict.DENY
    assert verdict(text, act(verb="read", resource="db:x")) is RuntimeVerdict.ALLOW


def test_an_erring_forbid_denies_where_cedar_alone_would_allow() -> None:
    text = ALLOW_ALL + '\n@id("limit") forbid (principal, action, resource) when { context.n > 5 };'
    decision, record = decide(CedarPolicy.from_str(text), act(n="9"))
    assert decision.verdict is RuntimeVerdict.DENY
    assert "rule 'limit'" in decision.reason
    assert "9" not in decision.reason
    assert record["errors"] == ["CedarEvaluationError"]
    assert record["matched_rules"] == []
    assert cedarpy.is_authorized(  # Cedar skips the statement that failed, and allows
        {
            "principal": {"type": "Agent", "id": "bot"},
            "action": {"type": "Action", "id": "go"},
            "resource": {"type": "Resource", "id": "res:x"},
            "context": {"n": "9"},
        },
        text,
        "[]",
    ).allowed


def test_every_satisfied_statement_is_matched_forbids_and_permits_alike() -> None:
    text = (
        '@id("p1") permit (principal, action, resource);\n'
        '@id("f1") forbid (principal, action == Action::"go", resource);\n'
        '@id("p2") permit (principal, action == Action::"other", resource);\n'
        '@id("f2") forbid (principal, action, resource);\n'
    )
    decision, record = decide(CedarPolicy.from_str(text), act())
    assert (decision.verdict, decision.matched_policy) == (RuntimeVerdict.DENY, "f1")
    assert record["matched_rules"] == [
        {"id": "p1", "effect": "allow"},
        {"id": "f1", "effect": "deny"},
        {"id": "f2", "effect": "deny"},
    ]


def test_no_satisfied_permit_is_cedars_default_deny() -> None:
    decision = decide(CedarPolicy.from_str('permit (principal == Agent::"x", action, resource);'),
                      act())[0]  # fmt: skip
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.reason == "no rule matched; the policy default is deny"
    empty = decide(CedarPolicy.from_str("// nothing"), act())[0]
    assert empty.verdict is RuntimeVerdict.DENY


# -- a custom mapping ------------------------------------------------------------------------


def test_a_custom_mapping_replaces_the_convention() -> None:
    def mapping(agent: str, verb: str, resource: str, args: Mapping[str, Any]) -> CedarRequest:
        user = ("User", agent)
        return CedarRequest(
            principal=user,
            action=("Action", verb),
            resource=("Doc", resource),
            context={"size": len(args)},
            entities=(CedarEntity(user, {"tier": "gold"}, parents=(("Group", "ops"),)),),
        )

    text = (
        '@id("ops") permit (principal in Group::"ops", action, resource is Doc)'
        ' when { principal.tier == "gold" && context.size < 2 };'
    )
    policy = CedarPolicy.from_str(text, mapping=mapping)
    decision = decide(policy, act(a=1))[0]
    assert (decision.verdict, decision.matched_policy) == (RuntimeVerdict.ALLOW, "ops")
    assert decide(policy, act(a=1, b=2))[0].verdict is RuntimeVerdict.DENY
    assert policy.policy_sha256 != CedarPolicy.from_str(text).policy_sha256


@pytest.mark.parametrize(
    ("returned", "words"),
    [
        ({"principal": "User::\"x\""}, "not a CedarRequest"),
        (CedarRequest(("User", "x"), ("Action", 3), ("Doc", "d"), {}), "(type, id) pair"),  # type: ignore[arg-type]
        (CedarRequest(("User",), ("Action", "a"), ("Doc", "d"), {}), "(type, id) pair"),  # type: ignore[arg-type]
        (CedarRequest(["User", "x"], ("Action", "a"), ("Doc", "d"), {}), "(type, id) pair"),  # type: ignore[arg-type]
        (CedarRequest(("User", 1), ("Action", "a"), ("Doc", "d"), {}), "(type, id) pair"),  # type: ignore[arg-type]
        (CedarRequest(("User", "x"), ("Action", "a"), ("Doc", "d"), {},
                      (CedarEntity(("User", "x"), parents=(("Group",),)),)), "(type, id) pair"),  # type: ignore[arg-type]
        (CedarRequest(("User", "x"), ("Action", "a"), ("Doc", "d"), {}, ("e",)),  # type: ignore[arg-type]
         "not a CedarEntity"),
        (CedarRequest(("User", "x"), ("Action", "a"), ("Doc", "d"), [1]), "a record must be"),  # type: ignore[arg-type]
        (CedarRequest(("User", "x"), ("Action", "a"), ("Doc", "d"), {1: 2}), "key is not a string"),  # type: ignore[dict-item]
        (CedarRequest(("User", "x"), ("Action", "a"), ("Doc", "d"), {},
                      (CedarEntity(("User", "x"), {"k": None}),)), "entity.k is a null"),
    ],
)  # fmt: skip
def test_what_a_mapping_returns_is_checked_and_anything_wrong_denies(
    returned: object, words: str
) -> None:
    policy = CedarPolicy.from_str(ALLOW_ALL, mapping=lambda *_: returned)  # type: ignore[arg-type, return-value]
    decision, record = decide(policy, act())
    assert decision.verdict is RuntimeVerdict.DENY
    assert words in decision.reason
    assert record["errors"][0] in ("CedarEvaluationError", "CedarValueError")


def test_a_mapping_that_raises_denies_by_type_alone() -> None:
    def mapping(*_: object) -> CedarRequest:
        raise RuntimeError("secret sk-live-123")

    decision, record = decide(CedarPolicy.from_str(ALLOW_ALL, mapping=mapping), act())
    assert decision.verdict is RuntimeVerdict.DENY
    assert "secret" not in decision.reason
    assert record["errors"] == ["RuntimeError"]


def test_an_entity_type_cedar_refuses_is_an_evaluation_error() -> None:
    request = CedarRequest(("Not a type", "x"), ("Action", "a"), ("Doc", "d"), {})
    policy = CedarPolicy.from_str(ALLOW_ALL, mapping=lambda *_: request)
    decision, record = decide(policy, act())
    assert decision.verdict is RuntimeVerdict.DENY
    assert record["errors"] == ["CedarEvaluationError"]
    assert "the request was refused" in decision.reason


def test_encode_request_errors_are_cedar_evaluation_errors() -> None:
    with pytest.raises(CedarValueError) as raised:
        encode_request(convention_request("a", "v", "r:x", {"n": None}))
    assert (raised.value.path, raised.value.kind) == ("$.n", "null")
    assert isinstance(raised.value, CedarEvaluationError)
    with pytest.raises(CedarEvaluationError, match="not a CedarRequest"):
        encode_request(None)


@pytest.mark.parametrize("number", [float("nan"), float("inf"), -float("inf")])
def test_nan_and_infinities_from_a_mapping_deny(number: float) -> None:
    request = CedarRequest(("User", "x"), ("Action", "a"), ("Doc", "d"), {"x": number})
    policy = CedarPolicy.from_str(ALLOW_ALL, mapping=lambda *_: request)
    decision, record = decide(policy, act())
    assert decision.verdict is RuntimeVerdict.DENY
    assert record["errors"] == ["CedarValueError"]
    assert "NaN and infinities" in decision.reason


def test_rules_keep_file_order_past_ten_statements() -> None:
    # Cedar's positional ids sort as text (policy10 < policy2): the order must be the file's.
    text = "\n".join(f'@id("r{i:02}") {ALLOW_ALL}' for i in range(12))
    policy = CedarPolicy.from_str(text)
    assert [r.id for r in policy.rules] == [f"r{i:02}" for i in range(12)]
    _, record = decide(policy, act())
    assert [m["id"] for m in record["matched_rules"]] == [f"r{i:02}" for i in range(12)]
    unnamed = CedarPolicy.from_str("\n".join([ALLOW_ALL] * 12))
    assert [r.id for r in unnamed.rules] == [f"policy{i}" for i in range(12)]


def test_a_json_schema_is_accepted_too() -> None:
    schema = {
        "": {
            "entityTypes": {"Agent": {}, "Resource": {}},
            "actions": {
                "go": {"appliesTo": {"principalTypes": ["Agent"], "resourceTypes": ["Resource"]}}
            },
        }
    }
    text = 'permit (principal, action == Action::"go", resource);'
    policy = CedarPolicy.from_str(text, schema=json.dumps(schema), mapping=_bare_names)
    assert decide(policy, act())[0].verdict is RuntimeVerdict.ALLOW
    with pytest.raises(PolicyError, match="does not validate against the schema") as raised:
        CedarPolicy.from_str(
            'permit (principal, action == Action::"og", resource);', schema=json.dumps(schema)
        )
    assert raised.value.rule == "policy0"


def _bare_names(agent: str, verb: str, resource: str, args: Mapping[str, Any]) -> CedarRequest:
    """The convention without entity attributes (what a schema with no attributes expects)."""
    return CedarRequest(("Agent", agent), ("Action", verb), ("Resource", resource), args)


def test_requests_and_entities_are_frozen() -> None:
    entity = CedarEntity(("User", "x"))
    request = CedarRequest(("User", "x"), ("Action", "a"), ("Doc", "d"), {}, (entity,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.context = {"n": 1}  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        entity.attrs = {"n": 1}  # type: ignore[misc]


def test_list_nesting_is_bounded_too() -> None:
    value: Any = "leaf"
    for _ in range(MAX_CEDAR_DEPTH - 1):
        value = [value]
    assert verdict(ALLOW_ALL, act(v=value)) is RuntimeVerdict.ALLOW
    decision = decide(CedarPolicy.from_str(ALLOW_ALL), act(v=[value]))[0]
    assert decision.verdict is RuntimeVerdict.DENY
    assert "nested deeper than 32" in decision.reason


def test_a_mapping_may_hand_over_read_only_mappings_but_not_other_types() -> None:
    context = types.MappingProxyType({"n": 1, "r": types.MappingProxyType({"s": "t"})})
    request = CedarRequest(("User", "x"), ("Action", "a"), ("Doc", "d"), context)
    text = 'permit (principal, action, resource) when { context.n == 1 && context.r.s == "t" };'
    assert decide(CedarPolicy.from_str(text, mapping=lambda *_: request), act())[0].verdict is (
        RuntimeVerdict.ALLOW
    )
    odd = CedarRequest(("User", "x"), ("Action", "a"), ("Doc", "d"), {"x": {1, 2}})
    decision = decide(CedarPolicy.from_str(ALLOW_ALL, mapping=lambda *_: odd), act())[0]
    assert decision.verdict is RuntimeVerdict.DENY
    assert "$.x is a set Cedar cannot represent (only str, bool, int, float, list, dict)" in (
        decision.reason
    )


def test_an_empty_id_names_the_annotation() -> None:
    with pytest.raises(PolicyError) as raised:
        CedarPolicy.from_str(f'@id("") {ALLOW_ALL}')
    assert (raised.value.rule, raised.value.field) == ("policy0", "@id")
