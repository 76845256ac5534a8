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
