"""Loading policies: strict, located errors; immutable, content-addressed result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import Effect, Policy, PolicyError

EXAMPLE = """
policy_id = "support-agent"
default = "deny"

[[rules]]
id = "read-public"
verbs = ["read"]
resources = ["file:/data/public/**"]
effect = "allow"

[[rules]]
id = "query-customers"
verbs = ["query"]
resources = ["db:customers"]
effect = "narrow"
narrow.clamp = { limit = 100 }
narrow.keep = ["table", "columns", "limit", "where"]
narrow.set = { read_only = true }
narrow.within = { path = "/data/public" }

[[rules]]
id = "refunds-need-approval"
verbs = ["refund"]
resources = ["payments:*"]
effect = "approval"
when = { amount = { gt = 50 } }
approval = { timeout_s = 600, approvers = ["alice", "bob"] }

[[rules]]
id = "never-delete"
verbs = ["delete"]
effect = "deny"

[scrub]
detectors = ["*"]
action = "redact"
block = ["private_key"]
"""


def base(**extra: Any) -> dict[str, Any]:
    return {"policy_id": "p", **extra}


def rule(**fields: Any) -> dict[str, Any]:
    return {"id": "r", "effect": "allow", **fields}


def test_the_spec_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(EXAMPLE)
    policy = Policy.from_toml(path)
    assert policy.policy_id == "support-agent"
    assert policy.default is Effect.DENY
    assert [r.id for r in policy.rules] == [
        "read-public",
        "query-customers",
        "refunds-need-approval",
        "never-delete",
    ]
    assert policy.rules[2].approval is not None
    assert policy.rules[2].approval.approvers == ("alice", "bob")
    assert policy.scrub.block == ("private_key",)
    assert policy.source == EXAMPLE.encode()
    assert policy.source_media_type == "application/toml"
    assert len(policy.policy_sha256) == 64


def test_policy_sha256_is_the_content_address_of_the_data_not_the_text(tmp_path: Path) -> None:
    a = tmp_path / "a.toml"
    b = tmp_path / "b.toml"
    a.write_text(EXAMPLE)
    b.write_text("# a comment changes the text, not the policy\n" + EXAMPLE)
    pa, pb = Policy.from_toml(a), Policy.from_toml(b)
    assert pa.policy_sha256 == pb.policy_sha256
    assert pa.source_sha256 != pb.source_sha256
    changed = tmp_path / "c.toml"
    changed.write_text(EXAMPLE.replace("limit = 100", "limit = 101"))
    assert Policy.from_toml(changed).policy_sha256 != pa.policy_sha256


def test_from_dict_and_from_toml_agree_on_the_policy_address(tmp_path: Path) -> None:
    import tomllib

    path = tmp_path / "policy.toml"
    path.write_text(EXAMPLE)
    assert Policy.from_dict(tomllib.loads(EXAMPLE)).policy_sha256 == (
        Policy.from_toml(path).policy_sha256
    )


def test_policy_is_immutable() -> None:
    policy = Policy.from_dict(base())
    with pytest.raises(AttributeError, match="immutable"):
        policy.policy_id = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("data", "rule_id", "field", "problem"),
    [
        (base(defualt="deny"), None, "defualt", "unknown key"),
        (base(default="maybe"), None, "default", "'deny' or 'allow'"),
        ({"default": "deny"}, None, "policy_id", "required"),
        (base(rules=[rule(effcet="allow")]), "r", "effcet", "unknown key"),
        (base(rules=[rule(), rule()]), "r", "id", "duplicate rule id"),
        (base(rules=[rule(effect="permit")]), "r", "effect", "one of allow, narrow"),
        (base(rules=[rule(resources=["a**"])]), "r", "resources", "whole segment"),
        (base(rules=[rule(verbs="read")]), "r", "verbs", "array"),
        (base(rules=[rule(agents=[])]), "r", "agents", "non-empty"),
        (base(rules=[rule(when={"x": {"match": "("}})]), "r", "when.x.match", "bad regex"),
        (base(rules=[rule(when={"x": {"gt": "5"}})]), "r", "when.x.gt", "needs a number"),
        (base(rules=[rule(when={"x": {"like": 1}})]), "r", "when.x.like", "unknown operator"),
        (base(rules=[rule(when={"x": 5})]), "r", "when.x", "table of operators"),
        (base(rules=[rule(narrow={"keep": ["a"]})]), "r", "narrow", "effect = 'narrow'"),
        (base(rules=[rule(effect="narrow")]), "r", "narrow", "needs a narrow table"),
        (base(rules=[rule(effect="narrow", narrow={"clip": {}})]), "r", "narrow.clip", "unknown"),
        (
            base(rules=[rule(effect="narrow", narrow={"clamp": {"n": "9"}})]),
            "r",
            "narrow.clamp.n",
            "finite number",
        ),
        (
            base(rules=[rule(effect="narrow", narrow={"within": {"p": "rel"}})]),
            "r",
            "narrow.within.p",
            "absolute path",
        ),
        (
            base(rules=[rule(effect="approval", approval={"timeout_s": 0})]),
            "r",
            "approval.timeout_s",
            "positive",
        ),
        (base(rules=[rule(approval={"timeout_s": 5})]), "r", "approval", "effect = 'approval'"),
        (base(scrub={"detectors": ["emial"]}), None, "scrub.detectors", "unknown detector 'emial'"),
        (base(scrub={"block": ["nope"]}), None, "scrub.block", "unknown detector"),
        (base(scrub={"action": "hide"}), None, "scrub.action", "'redact' or 'block'"),
        (base(scrub={"max_depth": 0}), None, "scrub.max_depth", "positive integer"),
        (base(scrub={"color": "red"}), None, "scrub.color", "unknown key"),
        (base(rules=[{"effect": "allow"}]), "#0", "id", "required"),
    ],
)
def test_malformed_policies_name_the_rule_and_field(
    data: dict[str, Any], rule_id: str | None, field: str, problem: str
) -> None:
    with pytest.raises(PolicyError) as info:
        Policy.from_dict(data, origin="policy.toml")
    error = info.value
    assert (error.source, error.rule, error.field) == ("policy.toml", rule_id, field)
    assert problem in error.problem
    assert str(error).startswith("policy.toml")


def test_toml_errors_name_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text('policy_id = "p"\n[[rules]\n')
    with pytest.raises(PolicyError, match=r"broken\.toml: not valid TOML"):
        Policy.from_toml(broken)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(PolicyError, match="not UTF-8"):
        Policy.from_toml(binary)
    with pytest.raises(PolicyError, match="cannot read the file"):
        Policy.from_toml(tmp_path / "missing.toml")


def test_toml_dates_are_rejected_as_non_json(tmp_path: Path) -> None:
    path = tmp_path / "dated.toml"
    path.write_text(
        'policy_id = "p"\n[[rules]]\nid = "r"\neffect = "narrow"\n'
        "narrow.set = { since = 2026-01-01 }\n"
    )
    with pytest.raises(PolicyError, match="JSON values only") as info:
        Policy.from_toml(path)
    assert info.value.field == "narrow.set.since"


def test_scrub_action_block_blocks_every_listed_detector() -> None:
    policy = Policy.from_dict(base(scrub={"detectors": ["email", "jwt"], "action": "block"}))
    assert policy.scrub.detectors == ("email", "jwt")
    assert policy.scrub.block == ("email", "jwt")


def test_candidate_rules_keep_file_order_across_literal_and_glob_verbs() -> None:
    policy = Policy.from_dict(
        base(
            rules=[
                rule(id="a", verbs=["read"]),
                rule(id="b", verbs=["*"]),
                rule(id="c", verbs=["write"]),
                rule(id="d", verbs=["re?d", "read"]),
            ]
        )
    )
    assert [r.id for r in policy.candidate_rules("read")] == ["a", "b", "d"]
    assert [r.id for r in policy.candidate_rules("write")] == ["b", "c", "d"]
    assert [r.id for r in policy.candidate_rules("other")] == ["b", "d"]


# --- issue 5: validated on load, deep-frozen, defaults that match everything --------------


@pytest.mark.parametrize(
    ("data", "rule_id", "field", "problem"),
    [
        (base(rules=[rule(scrub_exempt=["to..cc"])]), "r", "scrub_exempt", "dotted argument path"),
        (base(rules=[rule(scrub_exempt=[".to"])]), "r", "scrub_exempt", "dotted argument path"),
        (base(rules=[rule(scrub_exempt=["to."])]), "r", "scrub_exempt", "dotted argument path"),
        (base(rules=[rule(when={"a..b": {"gt": 1}})]), "r", "when", "dotted argument path"),
        (base(rules=[rule(when={"": {"gt": 1}})]), "r", "when", "dotted argument path"),
        (
            base(rules=[rule(effect="narrow", narrow={"clamp": {"a..b": 1}})]),
            "r",
            "narrow.clamp",
            "dotted argument path",
        ),
        (
            base(rules=[rule(effect="narrow", narrow={"set": {".x": 1}})]),
            "r",
            "narrow.set",
            "dotted argument path",
        ),
        (
            base(rules=[rule(effect="narrow", narrow={"within": {"p.": "/data"}})]),
            "r",
            "narrow.within",
            "dotted argument path",
        ),
        (
            base(rules=[rule(effect="narrow", narrow={"keep": ["a.b"]})]),
            "r",
            "narrow.keep",
            "top-level arguments",
        ),
        (
            base(rules=[rule(effect="narrow", narrow={"within": {"p": "/data/"}})]),
            "r",
            "narrow.within.p",
            "write '/data'",
        ),
        (
            base(rules=[rule(effect="narrow", narrow={"within": {"p": "/data/../etc"}})]),
            "r",
            "narrow.within.p",
            "canonical form",
        ),
        (
            base(rules=[rule(effect="narrow", narrow={"within": {"p": "//data"}})]),
            "r",
            "narrow.within.p",
            "absolute path",
        ),
        (
            base(rules=[rule(effect="narrow", narrow={"clamp": {"n": True}})]),
            "r",
            "narrow.clamp.n",
            "finite number",
        ),
        (base(rules=[rule(when={"x": {"gt": True}})]), "r", "when.x.gt", "needs a number"),
        (base(rules=[rule(when={"x": {"in": []}})]), "r", "when.x.in", "non-empty array"),
        (base(rules=[rule(when={"x": {"in": "ab"}})]), "r", "when.x.in", "non-empty array"),
        (base(rules=[rule(when={"x": {"prefix": 5}})]), "r", "when.x.prefix", "needs a string"),
        (base(rules=[rule(when={"x": {"exists": 1}})]), "r", "when.x.exists", "true or false"),
        (
            base(rules=[rule(when={"x": {"exists": False, "eq": 1}})]),
            "r",
            "when.x",
            "stands alone",
        ),
        (
            base(rules=[rule(when={"x": {"match": "(?<=a)b"}})]),
            "r",
            "when.x.match",
            "bad regex (RE2 syntax)",
        ),
        (base(rules=[rule(when={"x": {"match": r"(a)\1"}})]), "r", "when.x.match", "RE2"),
        (
            base(rules=[rule(when={"to": {"domain": {"ne": "x"}}})]),
            "r",
            "when.to.domain",
            'quote the dotted path: "a.b"',
        ),
        (base(rules=[rule(resources=["file:/data/"])]), "r", "resources", "write 'file:/data'"),
        (base(rules=[rule(resources=["file:/a/../b"])]), "r", "resources", "canonical form"),
        (base(rules=[rule(resources=["file:/a\\b"])]), "r", "resources", "backslash"),
        (base(rules=[rule(resources=["file:/%2e%2e"])]), "r", "resources", "never match"),
        (base(rules=[rule(agents=["bot\n"])]), "r", "agents", "control character"),
        (base(rules=[rule(verbs=["re\x00ad"])]), "r", "verbs", "control character"),
        (base(scrub={"max_depth": 257}), None, "scrub.max_depth", "at most 256"),
        (base(rules={"r": {}}), None, "rules", "array of tables"),
        (base(rules=[5]), "#0", None, "a rule must be a table"),
        (base(rules=[rule(when=5)]), "r", "when", "table of conditions"),
        (base(rules=[rule(when={"x": {"lt": "5"}})]), "r", "when.x.lt", "needs a number"),
        (base(rules=[rule(when={"x": {"le": "5"}})]), "r", "when.x.le", "needs a number"),
        (base(rules=[rule(when={"x": {"ge": "5"}})]), "r", "when.x.ge", "needs a number"),
        (base(rules=[rule(when={"x": {"eq": float("nan")}})]), "r", "when.x.eq", "NaN"),
        (base(rules=[rule(when={"x": {"in": [1, [float("inf")]]}})]), "r", "when.x.in", "NaN"),
        (
            base(rules=[rule(effect="narrow", narrow={"set": {"x": [{"y": float("nan")}]}})]),
            "r",
            "narrow.set.x",
            "NaN and infinities are not allowed",
        ),
        (
            base(rules=[rule(effect="narrow", narrow={"set": {"x": [None]}})]),
            "r",
            "narrow.set.x",
            "a NoneType value is not allowed (JSON values only)",
        ),
        (base(scrub={"max_depth": True}), None, "scrub.max_depth", "positive integer"),
        (base(rules=[rule(description=5)]), "r", "description", "must be a string"),
        (
            base(rules=[rule(effect="approval", approval={"timeout_s": True})]),
            "r",
            "approval.timeout_s",
            "positive",
        ),
        (
            base(rules=[rule(effect="approval", approval={"timeout_s": float("inf")})]),
            "r",
            "approval.timeout_s",
            "positive",
        ),
    ],
)
def test_every_path_like_and_pattern_field_is_validated_on_load(
    data: dict[str, Any], rule_id: str | None, field: str, problem: str
) -> None:
    with pytest.raises(PolicyError) as info:
        Policy.from_dict(data, origin="policy.toml")
    error = info.value
    assert (error.source, error.rule, error.field) == ("policy.toml", rule_id, field)
    assert problem in error.problem


def test_scrub_max_depth_may_be_256() -> None:
    assert Policy.from_dict(base(scrub={"max_depth": 256})).scrub.max_depth == 256


def test_non_string_keys_and_cycles_are_policy_errors() -> None:
    with pytest.raises(PolicyError, match="keys are strings") as info:
        Policy.from_dict(base(rules=[rule(when={1: {"gt": 1}})]))
    assert info.value.field == "rules[0].when"
    loop: dict[str, Any] = base()
    loop["rules"] = [rule(when={"x": {"eq": []}})]
    loop["rules"][0]["when"]["x"]["eq"].append(loop)
    with pytest.raises(PolicyError, match="nests deeper than 64 levels"):
        Policy.from_dict(loop)


def test_python_values_are_taken_as_their_plain_form() -> None:
    from enum import IntEnum

    class Limit(IntEnum):
        HUNDRED = 100

    plain = base(rules=[rule(id="n", effect="narrow", narrow={"clamp": {"n": 100}},
                             verbs=["read", "write"])])  # fmt: skip
    fancy = base(rules=[rule(id="n", effect=Effect.NARROW, narrow={"clamp": {"n": Limit.HUNDRED}},
                             verbs=("read", "write"))])  # fmt: skip
    a, b = Policy.from_dict(plain), Policy.from_dict(fancy)
    assert a.policy_sha256 == b.policy_sha256
    assert a.source == b.source
    assert b.rules[0].narrow is not None
    assert type(b.rules[0].narrow.clamp[0][1]) is int
    assert b.rules[0].verbs == ("read", "write")


RICH: dict[str, Any] = {
    "policy_id": "rich",
    "rules": [
        {
            "id": "q",
            "agents": ["ops/*"],
            "verbs": ["query"],
            "resources": ["db:customers"],
            "effect": "narrow",
            "when": {"env": {"in": ["prod", "staging"]}, "limit": {"exists": True}},
            "narrow": {
                "clamp": {"limit": 100},
                "keep": ["env", "limit", "flags"],
                "set": {"flags": {"read_only": True, "tags": ["audited"]}},
                "within": {"path": "/data/public"},
            },
            "scrub_exempt": ["to"],
        },
        {
            "id": "a",
            "verbs": ["refund"],
            "effect": "approval",
            "when": {"amount": {"gt": 50}},
            "approval": {"timeout_s": 60, "approvers": ["alice"]},
        },
    ],
    "scrub": {"detectors": ["email"], "block": ["email"]},
}


def _mutate_everything(value: Any) -> None:
    """Change every list and dict reachable from ``value``, in place."""
    if isinstance(value, dict):
        for key in list(value):
            _mutate_everything(value[key])
            if isinstance(value[key], str):
                value[key] = value[key] + "-changed"
            elif isinstance(value[key], int | float) and not isinstance(value[key], bool):
                value[key] = value[key] * 7 + 1
        value["injected"] = ["*"]
    elif isinstance(value, list):
        for item in value:
            _mutate_everything(item)
        value.append("injected")


def _behaviour(policy: Policy) -> list[Any]:
    args = {"env": "prod", "limit": 500, "flags": {}, "drop": 1}
    (rule_q, rule_a) = policy.rules
    changes: list[tuple[str, str]] = []
    assert rule_q.narrow is not None
    narrowed = rule_q.narrow.apply(rule_q.id, dict(args), changes)
    return [
        policy.policy_sha256,
        policy.source,
        repr(policy.rules),
        [r.id for r in policy.matching_rules("ops/x", "query", "db:customers", args)],
        [r.id for r in policy.matching_rules("ops/x", "refund", "pay", {"amount": 60})],
        [r.id for r in policy.matching_rules("ops/x", "refund", "pay", {"amount": 40})],
        narrowed,
        changes,
        rule_a.approval,
        policy.scrub,
    ]


def test_a_loaded_policy_does_not_change_when_its_source_mapping_does() -> None:
    import copy

    source = copy.deepcopy(RICH)
    policy = Policy.from_dict(source)
    before = _behaviour(policy)
    assert policy.policy_sha256 == Policy.from_dict(copy.deepcopy(RICH)).policy_sha256
    _mutate_everything(source)
    assert source != RICH  # the caller's mapping really changed
    assert _behaviour(policy) == before


def test_a_rules_terms_cannot_be_mutated_through_the_rule() -> None:
    policy = Policy.from_dict(RICH)
    rule_q = policy.rules[0]
    assert rule_q.narrow is not None
    (_, flags) = rule_q.narrow.set[0]
    with pytest.raises(TypeError):
        flags["read_only"] = False
    assert isinstance(flags["tags"], tuple)
    (_, candidates) = rule_q.when[0].operators[0]
    assert isinstance(candidates, tuple)
    with pytest.raises(AttributeError):
        rule_q.id = "other"  # type: ignore[misc]
    # what set hands out is a fresh plain copy: mutating it changes no later call
    out = rule_q.narrow.apply("q", {}, [])
    out["flags"]["tags"].append("mutated")
    assert rule_q.narrow.apply("q", {}, [])["flags"] == {"read_only": True, "tags": ["audited"]}


@pytest.mark.parametrize(
    ("agent", "verb", "resource"),
    [
        ("ops/cleaner", "fs/read", "file:/data/x"),
        ("mcp:client/1", "tools/call", "https://h/a?b"),
        ("", "", ""),
        ("a b", "ü", "db:customers"),
    ],
)
def test_default_globs_match_every_name_and_resource(agent: str, verb: str, resource: str) -> None:
    policy = Policy.from_dict(
        base(rules=[rule(id="deny-all", effect="deny"), rule(id="allow-all")])
    )
    assert [r.id for r in policy.matching_rules(agent, verb, resource, {})] == [
        "deny-all",
        "allow-all",
    ]
    explicit = Policy.from_dict(
        base(rules=[rule(id="d", effect="deny", agents=["*"], verbs=["*"], resources=["**"])])
    )
    assert [r.id for r in explicit.matching_rules(agent, verb, resource, {})] == ["d"]


def test_matching_rules_judges_the_canonical_resource() -> None:
    from runtime import AmbiguousResource

    policy = Policy.from_dict(
        base(rules=[rule(id="public", verbs=["read"], resources=["file:/data/public/**"])])
    )
    assert [r.id for r in policy.matching_rules("a", "read", "file:/data/public/x", {})] == [
        "public"
    ]
    assert policy.matching_rules("a", "read", "file:/data/public/../secret", {}) == ()
    assert policy.matching_rules("a", "read", "file:/data/public//../secret", {}) == ()
    for hostile in ("file:/data/public/%2e%2e/secret", "file:/data/public/..\\secret",
                    "file:/../data/public/x"):  # fmt: skip
        with pytest.raises(AmbiguousResource):
            policy.matching_rules("a", "read", hostile, {})


def test_conditions_are_evaluated_only_for_rules_whose_globs_match() -> None:
    from runtime import ConditionError

    policy = Policy.from_dict(
        base(rules=[rule(id="big", verbs=["refund"], effect="deny", when={"amount": {"gt": 50}})])
    )
    assert policy.matching_rules("a", "search", "x", {}) == ()  # no amount, not a refund
    with pytest.raises(ConditionError, match="rule 'big': when 'amount': is missing"):
        policy.matching_rules("a", "refund", "x", {})
    with pytest.raises(ConditionError, match="needs a number, not a list"):
        policy.matching_rules("a", "refund", "x", {"amount": [5000]})
    assert policy.matching_rules("a", "refund", "x", {"amount": 10}) == ()


def test_the_verb_index_is_built_once() -> None:
    policy = Policy.from_dict(base(rules=[rule(id="a", verbs=["read"]), rule(id="b")]))
    assert policy.candidate_rules("read") is policy.candidate_rules("read")
    assert policy.candidate_rules("other") is policy.candidate_rules("else")
    assert [r.id for r in policy.candidate_rules("other")] == ["b"]


def test_defaults_of_a_bare_policy() -> None:
    import dataclasses

    policy = Policy.from_dict(base(rules=[rule(effect="approval")]))
    assert policy.scrub.max_depth == 32
    assert policy.scrub.max_bytes == 1 << 20
    assert policy.scrub.block == ()
    assert policy.rules[0].approval is not None
    assert policy.rules[0].approval.timeout_s == 600
    assert policy.rules[0].approval.approvers is None
    assert (policy.rules[0].agents, policy.rules[0].verbs, policy.rules[0].resources) == (
        ("*",),
        ("*",),
        ("**",),
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.scrub.max_depth = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.rules[0].approval.timeout_s = 1  # type: ignore[misc]


def _nested_operand(levels: int) -> dict[str, Any]:
    operand: Any = 1
    for _ in range(levels):
        operand = [operand]
    return base(rules=[rule(when={"x": {"eq": operand}})])


def test_a_policy_may_nest_64_levels_and_no_more() -> None:
    # policy(0) > rules(1) > rule(2) > when(3) > x(4) > lists from 5 on > the leaf
    Policy.from_dict(_nested_operand(59))  # the leaf is at level 64
    with pytest.raises(PolicyError, match="nests deeper than 64 levels") as info:
        Policy.from_dict(_nested_operand(60))
    assert info.value.field == "rules[0].when.x.eq" + "[0]" * 60


def test_subclasses_of_str_and_float_become_their_base_type() -> None:
    class Name(str):
        pass

    class Bound(float):
        pass

    policy = Policy.from_dict(
        base(rules=[rule(id=Name("n"), effect="narrow", narrow={"clamp": {Name("x"): Bound(1.5)}})])
    )
    assert type(policy.rules[0].id) is str
    assert policy.rules[0].narrow is not None
    ((path, bound),) = policy.rules[0].narrow.clamp
    assert type(path[0]) is str
    assert type(bound) is float


def test_a_rule_built_by_hand_matches_everything_by_default() -> None:
    from runtime import Rule

    everything = Rule(id="r", effect=Effect.DENY)
    assert everything.matches("ops/cleaner", "fs/read", "file:/a/b", {})
    assert everything.matches("", "", "", {})
    assert Rule(id="r", effect=Effect.DENY) == everything  # compiled globs are not compared
    assert "GlobSet" not in repr(everything)


def test_a_rules_resources_use_the_resource_dialect_and_names_the_name_dialect() -> None:
    from runtime import Rule, UnsupportedValue

    rule_ = Rule(id="r", effect=Effect.ALLOW, agents=("ops/*",), resources=("payments:*",))
    assert rule_.matches("ops/a/b", "refund", "payments:stripe", {})
    assert not rule_.matches("ops/a", "refund", "payments:a/b", {})
    for field, action in (
        ("agent", (5, "v", "payments:x")),
        ("verb", ("ops/a", 5, "payments:x")),
        ("resource", ("ops/a", "v", 5)),
    ):
        with pytest.raises(UnsupportedValue, match=f"argument {field} is not a string"):
            rule_.matches(*action, {})  # type: ignore[arg-type]


def test_scrub_limits_are_read() -> None:
    policy = Policy.from_dict(base(scrub={"max_bytes": 1000, "max_depth": 7}))
    assert (policy.scrub.max_bytes, policy.scrub.max_depth) == (1000, 7)


@pytest.mark.parametrize(
    ("data", "rule_id", "field", "problem"),
    [
        (
            base(policy_id=""),
            None,
            "policy_id",
            "policy_id is required and must be a non-empty string",
        ),
        (
            {"policy_id": 5},
            None,
            "policy_id",
            "policy_id is required and must be a non-empty string",
        ),
        (base(description=5), None, "description", "must be a string"),
        (base(scrub=5), None, "scrub", "must be a table, not int"),
        (
            base(scrub={"block": "private_key"}),
            None,
            "scrub.block",
            "must be an array of detector names",
        ),
        (base(scrub={"block": [5]}), None, "scrub.block", "must be an array of detector names"),
        (
            base(scrub={"detectors": 5}),
            None,
            "scrub.detectors",
            'must be "*" or an array of detector names',
        ),
        (
            base(scrub={"detectors": ["email", 5]}),
            None,
            "scrub.detectors",
            'must be "*" or an array of detector names',
        ),
        (
            base(rules=[rule(effect="narrow", narrow={})]),
            "r",
            "narrow",
            "needs at least one of clamp, keep, set, within",
        ),
        (
            base(rules=[rule(effect="narrow", narrow={"clamp": 5})]),
            "r",
            "narrow.clamp",
            "must be a table",
        ),
        (
            base(rules=[rule(effect="narrow", narrow={"set": [1]})]),
            "r",
            "narrow.set",
            "must be a table",
        ),
        (
            base(rules=[rule(effect="narrow", narrow={"within": "/data"})]),
            "r",
            "narrow.within",
            "must be a table",
        ),
        (
            base(rules=[rule(effect="narrow", narrow={"within": {"p": 5}})]),
            "r",
            "narrow.within.p",
            "a within prefix must be a string",
        ),
        (
            base(rules=[rule(effect="approval", approval={"timeout": 5})]),
            "r",
            "approval.timeout",
            "unknown key (allowed here: approvers, timeout_s)",
        ),
        (
            base(rules=[rule(effect="approval", approval={"approvers": []})]),
            "r",
            "approvers",
            "must be a non-empty array of non-empty strings",
        ),
        (
            base(rules=[rule(effect="approval", approval=5)]),
            "r",
            "approval",
            "must be a table, not int",
        ),
    ],
)
def test_more_malformed_policies_name_the_rule_and_field(
    data: dict[str, Any], rule_id: str | None, field: str, problem: str
) -> None:
    with pytest.raises(PolicyError) as info:
        Policy.from_dict(data, origin="policy.toml")
    error = info.value
    assert (error.source, error.rule, error.field, error.problem) == (
        "policy.toml",
        rule_id,
        field,
        problem,
    )


def test_the_smallest_legal_values_load() -> None:
    policy = Policy.from_dict(
        base(
            rules=[
                rule(id="a", when={"x": {"exists": False}}),
                rule(id="b", effect="approval", approval={"timeout_s": 0.001, "approvers": ["z"]}),
            ],
            scrub={"max_depth": 1, "max_bytes": 1, "detectors": [], "block": []},
        )
    )
    assert policy.rules[0].matches("a", "v", "r", {})
    assert not policy.rules[0].matches("a", "v", "r", {"x": 1})
    assert policy.rules[1].approval is not None
    assert policy.rules[1].approval.approvers == ("z",)
    assert (policy.scrub.max_depth, policy.scrub.max_bytes, policy.scrub.detectors) == (1, 1, ())


def test_from_dict_describes_its_source_and_refuses_a_non_mapping() -> None:
    policy = Policy.from_dict(base())
    assert (policy.source_name, policy.source_media_type) == ("policy.json", "application/json")
    assert policy.source == b'{"policy_id":"p"}'
    assert (
        repr(policy)
        == f"Policy(policy_id='p', rules=0, policy_sha256={policy.policy_sha256[:12]}...)"
    )
    with pytest.raises(PolicyError) as info:
        Policy.from_dict([("policy_id", "p")])  # type: ignore[arg-type]
    assert str(info.value) == "<dict>: a policy must be a mapping, not list"
