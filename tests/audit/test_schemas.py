"""The record schemas: well-formed, closed, and matching what the gate emits."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit import SCHEMAS, TOPICS, MemoryAuditSink, schema_problems, schema_versions
from audit._schemas import schema_data
from audit._validate import SUPPORTED_KEYWORDS
from runtime import canonical_bytes
from tests.records import append_decisions, assessment, make_run_start

EXPECTED_FIELDS = {
    "ghost.run/1": {
        "run_id", "sdk_version", "host", "pid", "policy_id", "policy_sha256",
        "policy_source_sha256", "durability", "signing",
    },
    "ghost.assessment/1": {
        "decision_id", "agent", "verb", "resource", "args_sha256", "policy_id",
        "policy_sha256", "matched_rules", "findings", "narrowings", "errors", "stage_ns",
        "trace_id", "span_id", "parent_span_id",
    },
    "ghost.decision/1": {
        "decision_id", "verdict", "reason", "matched_policy", "policy_id", "policy_sha256",
        "assessment_sha256", "trace_id", "span_id", "trace_origin", "latency_ns",
        "executed_args_sha256",
    },
    "ghost.approval/1": {
        "decision_id", "decision_sha256", "outcome", "approver", "wait_ns", "final_verdict",
        "executed_args_sha256", "policy_sha256", "decision_run_id", "expires_ns",
    },
    "ghost.seal/1": {"record_count", "head_sha256"},
    "ghost.checkpoint/1": {"tree_size", "root_hash", "head_sha256", "note"},
}  # fmt: skip
COMMON = {"schema", "seq", "prev_sha256", "stamp_ns"}
# Fields a record may lack, added after records of the schema were written (ADRs 0031,
# 0032, 0033, 0034): records written before them still validate.
OPTIONAL_FIELDS = {
    "ghost.run/1": {"shadow", "writer", "peer", "follows"},
    "ghost.assessment/1": {"shadow", "limits", "args_scrubbed"},
    "ghost.seal/1": {"ended"},
}


def _walk(schema: Any) -> list[Mapping[str, Any]]:
    """Every schema object nested in ``schema`` (itself included)."""
    found: list[Mapping[str, Any]] = []
    if isinstance(schema, Mapping):
        found.append(schema)
        for key, value in schema.items():
            if key == "properties":
                for sub in value.values():
                    found += _walk(sub)
            elif key == "items":
                found += _walk(value)
            elif key == "anyOf":
                for sub in value:
                    found += _walk(sub)
    return found


def test_topics_and_schemas_correspond_one_to_one() -> None:
    assert dict(TOPICS) == {
        "/run": "ghost.run/1",
        "/assessments": "ghost.assessment/1",
        "/decisions": "ghost.decision/1",
        "/approvals": "ghost.approval/1",
        "/seal": "ghost.seal/1",
        "/checkpoints": "ghost.checkpoint/1",
    }
    # Channel ids follow this order: the first five kept theirs when /checkpoints came.
    assert list(TOPICS) == [
        "/run",
        "/assessments",
        "/decisions",
        "/approvals",
        "/seal",
        "/checkpoints",
    ]
    assert set(TOPICS.values()) == set(SCHEMAS)


@pytest.mark.parametrize("name", sorted(EXPECTED_FIELDS))
def test_each_schema_lists_exactly_the_agreed_fields(name: str) -> None:
    schema = SCHEMAS[name]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == name
    optional = OPTIONAL_FIELDS.get(name, set())
    assert set(schema["properties"]) == EXPECTED_FIELDS[name] | COMMON | optional
    assert set(schema["required"]) == EXPECTED_FIELDS[name] | COMMON
    assert schema["properties"]["schema"] == {"const": name}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_object_is_closed_and_requires_all_its_fields(name: str) -> None:
    top = SCHEMAS[name]
    for sub in _walk(top):
        assert set(sub) <= SUPPORTED_KEYWORDS, "the validator would ignore a keyword"
        if sub.get("type") == "object":
            assert sub["additionalProperties"] is False
            optional = OPTIONAL_FIELDS.get(name, set()) if sub is top else set()
            assert set(sub["required"]) == set(sub["properties"]) - optional


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_versions_are_the_current_bytes_then_those_before_the_optional_fields(
    name: str,
) -> None:
    versions = schema_versions(name)
    assert versions[0] == schema_data(name)
    if name not in OPTIONAL_FIELDS:
        assert versions == (schema_data(name),)
        return
    assert len(versions) == 2
    earlier = json.loads(versions[1])
    assert set(earlier["properties"]) == EXPECTED_FIELDS[name] | COMMON
    assert earlier["required"] == sorted(earlier["properties"])


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_data_is_the_canonical_json_of_the_schema(name: str) -> None:
    data = schema_data(name)
    assert json.loads(data) == json.loads(json.dumps(_thaw(SCHEMAS[name])))
    assert data == canonical_bytes(SCHEMAS[name])


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_thaw(item) for item in value]
    return value


def test_schemas_are_read_only() -> None:
    with pytest.raises(TypeError):
        SCHEMAS["ghost.seal/1"]["title"] = "x"  # type: ignore[index]


@pytest.mark.parametrize("signed", [False, True])
def test_every_record_of_a_run_validates(signed: bool) -> None:
    key = Ed25519PrivateKey.generate() if signed else None
    with MemoryAuditSink(validate=False, signing_key=key, checkpoint_every_records=2) as sink:
        sink.open_run(make_run_start())
        append_decisions(sink, 3)
    assert {entry.topic for entry in sink.entries} == set(TOPICS)
    for entry in sink.entries:
        assert schema_problems(entry.record) == (), entry.topic


def _full_assessment() -> dict[str, Any]:
    record = assessment("01a22865-5348-7e1b-9d2f-351c74086c5e")
    record.update(seq=1, prev_sha256="d" * 64)
    return record


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"extra": 1}, "$: unexpected field 'extra'"),
        ({"stamp_ns": 1.5}, "$.stamp_ns: expected integer, got a float"),
        ({"stamp_ns": True}, "$.stamp_ns: expected integer, got a boolean"),
        ({"seq": -1}, "$.seq: must be at least 0"),
        ({"trace_id": "4BF92F3577B34DA6A3CE929D0E0E4736"}, "$.trace_id: does not match"),
        ({"parent_span_id": 7}, "$.parent_span_id: expected string or null, got an integer"),
        ({"stage_ns": {"policy": 1, "narrow": 2}}, "$.stage_ns: missing field 'scrub'"),
        ({"matched_rules": [{"id": "r", "effect": "scrub"}]}, "$.matched_rules[0].effect"),
        ({"narrowings": [{"rule": "r", "kind": "drop", "path": "$"}]}, "$.narrowings[0].kind"),
        ({"errors": ["ok", 3]}, "$.errors[1]: expected string"),
        ({"schema": "ghost.assessment/2"}, "$.schema: 'ghost.assessment/2' is not a ghost"),
    ],
)
def test_schema_problems_names_the_path(change: dict[str, Any], expected: str) -> None:
    record = _full_assessment()
    record.update(change)
    problems = schema_problems(record)
    assert any(problem.startswith(expected) for problem in problems), problems


def test_schema_problems_reports_missing_fields() -> None:
    record = _full_assessment()
    del record["agent"]
    assert schema_problems(record) == ("$: missing field 'agent'",)


def test_run_signing_is_null_or_a_key() -> None:
    with MemoryAuditSink() as sink:
        sink.open_run(make_run_start())
    run = dict(sink.records("/run")[0])
    assert run["signing"] is None
    key = {"key_id": "e" * 64, "key_name": "ghost/eeeeeeeeeeeeeeee", "public_key": "A" * 43 + "="}
    run["signing"] = key
    assert schema_problems(run) == ()
    for bad in (
        "yes",
        {**key, "public_key": "MCowBQYDK2VwAyEA"},  # DER, not the raw 32 bytes
        {**key, "public_key": "A" * 44},
        {**key, "key_name": "ghost key"},
        {**key, "key_name": "ghost+key"},
        {**key, "key_name": ""},
        {**key, "key_id": "E" * 64},
        {k: v for k, v in key.items() if k != "key_name"},
        {**key, "algorithm": "ed25519"},
    ):
        run["signing"] = bad
        problems = schema_problems(run)
        assert problems == ("$.signing: " + _describe(bad) + " matches none of the allowed forms",)


def _describe(value: object) -> str:
    return "a string" if isinstance(value, str) else "an object"


def _checkpoint() -> dict[str, Any]:
    with MemoryAuditSink(signing_key=Ed25519PrivateKey.generate()) as sink:
        sink.open_run(make_run_start())
    return dict(sink.records("/checkpoints")[0])


def test_checkpoint_records_are_checked_field_by_field() -> None:
    record = _checkpoint()
    assert schema_problems(record) == ()
    note: str = record["note"]
    cases = [
        ({"tree_size": 0}, "$.tree_size: must be at least 1"),
        ({"tree_size": 2**63}, "$.tree_size: must be at most"),
        ({"root_hash": record["root_hash"].upper()}, "$.root_hash: does not match"),
        ({"head_sha256": None}, "$.head_sha256: expected string"),
        ({"note": note.replace("\u2014", "-")}, "$.note: does not match"),
        ({"note": note.replace("ghost.run/", "other.run/")}, "$.note: does not match"),
        ({"note": note.split("\n\n")[0]}, "$.note: does not match"),  # no final newline
        ({"note": note + "\n"}, "$.note: does not match"),
        ({"note": 7}, "$.note: expected string"),
    ]
    for change, expected in cases:
        problems = schema_problems({**record, **change})
        assert any(p.startswith(expected) for p in problems), (change, problems)
    unsigned = note.split("\n\n")[0] + "\n"
    assert schema_problems({**record, "note": unsigned}) == ()


def test_a_trailing_newline_does_not_pass_an_anchored_pattern() -> None:
    # ECMA-262 '$' is the end of the text; Python's would also match before a final newline.
    record = _full_assessment()
    record["args_sha256"] = "b" * 64 + "\n"
    assert schema_problems(record) == ("$.args_sha256: does not match the pattern ^[0-9a-f]{64}$",)
    record = _checkpoint()
    record["head_sha256"] = record["head_sha256"] + "\n"
    assert schema_problems(record)[0].startswith("$.head_sha256: does not match")


def _leaf_schemas(schema: Any, path: str = "$") -> list[tuple[str, Mapping[str, Any]]]:
    """(path, schema) of every field that holds a value rather than more fields."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    if "properties" in schema:
        for key, sub in schema["properties"].items():
            found += _leaf_schemas(sub, f"{path}.{key}")
    elif schema.get("type") == "array":
        found += _leaf_schemas(schema["items"], f"{path}[]")
    elif "anyOf" in schema:
        for index, sub in enumerate(schema["anyOf"]):
            found += _leaf_schemas(sub, f"{path}|{index}")
    else:
        found.append((path, schema))
    return found


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_field_is_constrained_and_every_integer_is_int64(name: str) -> None:
    for path, schema in _leaf_schemas(SCHEMAS[name]):
        assert {"type", "const", "enum"} & set(schema), f"{path} accepts anything"
        types = schema.get("type", ())
        if "integer" in ((types,) if isinstance(types, str) else types):
            assert schema["minimum"] >= 0, path
            assert schema["maximum"] == 2**63 - 1, path


def test_schema_problems_never_echoes_values() -> None:
    record = _full_assessment()
    record["agent"] = ["sk-live-secret"]
    assert not any("sk-live" in problem for problem in schema_problems(record))


def test_record_without_schema_name() -> None:
    assert schema_problems({"seq": 0}) == ("$.schema: missing, or not a string",)


def test_args_sha256_is_null_when_the_arguments_have_no_canonical_form() -> None:
    record = _full_assessment()
    record["args_sha256"] = None
    record["errors"] = ["CanonicalEncodingError"]
    assert schema_problems(record) == ()
