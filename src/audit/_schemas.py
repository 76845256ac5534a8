"""The record schemas of a ghost audit log, one JSON Schema (draft 2020-12) per topic.

Each record is a JSON object whose ``schema`` field names one of these; the
MCAP channel of its topic carries the same JSON Schema (``encoding="jsonschema"``),
so that Foxglove and the ``mcap`` tools can show the records. Every schema
closes its objects (``additionalProperties: false``) and requires every field
it lists: a record always writes its nullable fields as ``null``, never omits
them, so two writers cannot disagree about what an absent field means. The
one kind of exception is a field a writer opts in to (the assessment's
``args_scrubbed``, ADR 0033): absent means "not opted in", null "opted in, not
storable".

Records hold only JSON's exact types (strings, integers, booleans, null,
arrays, objects); times and durations are integer nanoseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from runtime import canonical_bytes

__all__ = [
    "MESSAGE_ENCODING",
    "SCHEMAS",
    "SCHEMA_ENCODING",
    "TOPICS",
    "accepted_schema_data",
    "schema_data",
]

SCHEMA_ENCODING: Final = "jsonschema"
"""The MCAP schema encoding of every ghost channel."""

MESSAGE_ENCODING: Final = "json"
"""The MCAP message encoding of every ghost channel."""

_DRAFT: Final = "https://json-schema.org/draft/2020-12/schema"
_INT64_MAX: Final = 2**63 - 1

_SHA256: Final = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_SHA256_OR_NULL: Final = {"type": ["string", "null"], "pattern": "^[0-9a-f]{64}$"}
_UUID: Final = {
    "type": "string",
    "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
}
_NS: Final = {"type": "integer", "minimum": 0, "maximum": _INT64_MAX}
_TRACE_ID: Final = {"type": "string", "pattern": "^[0-9a-f]{32}$"}
_SPAN_ID: Final = {"type": "string", "pattern": "^[0-9a-f]{16}$"}
_STRING: Final = {"type": "string"}
_STRING_OR_NULL: Final = {"type": ["string", "null"]}
_VERDICT: Final = {"enum": ["deny", "pending", "narrow", "scrub", "allow"]}
# An approval ends pending: the action runs under what pending was holding, or not at all.
_FINAL_VERDICT: Final = {"enum": ["deny", "narrow", "scrub", "allow"]}
_EFFECT: Final = {"enum": ["allow", "narrow", "approval", "deny"]}
_SIZE: Final = {"type": "integer", "minimum": 1, "maximum": _INT64_MAX}
# C2SP signed-note: a key name is non-empty, with no space, no '+', no control character.
_KEY_NAME: Final = {"type": "string", "pattern": "^[^\\s+\\x00-\\x1f]+$"}
_ED25519_PUBLIC_KEY: Final = {"type": "string", "pattern": "^[A-Za-z0-9+/]{43}=$"}
# The shape of a checkpoint note (audit._note parses it exactly): origin, size, base64
# root, then, when signed, a blank line and signature lines opening with an em dash.
_CHECKPOINT_NOTE: Final = {
    "type": "string",
    "pattern": (
        "^ghost\\.run/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\\n"
        "[1-9][0-9]{0,18}\\n[A-Za-z0-9+/]{43}=\\n"
        "(\\n(\u2014 [^\\s+\\x00-\\x1f]+ [A-Za-z0-9+/]+={0,2}\\n)+)?$"
    ),
}


def _object(
    properties: Mapping[str, Any], optional: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    # `optional`: fields a record holds only when the writer opted in to them.
    return {
        "type": "object",
        "properties": {**properties, **(optional or {})},
        "required": sorted(properties),
        "additionalProperties": False,
    }


def _array_of(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": _object(properties)}


def _record_schema(
    name: str,
    description: str,
    fields: Mapping[str, Any],
    optional: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    # seq 0 is the /run record, whose prev_sha256 is null; every other record links back.
    prev: Mapping[str, Any] = {"type": "null"} if name == "ghost.run/1" else _SHA256
    properties = {
        "schema": {"const": name},
        "seq": _NS,
        "prev_sha256": prev,
        "stamp_ns": _NS,
        **fields,
    }
    return {
        "$schema": _DRAFT,
        "title": name,
        "description": description,
        **_object(properties, optional),
    }


_RUN = _record_schema(
    "ghost.run/1",
    "First record of a run: who wrote the log, under which policy, how durably.",
    {
        "run_id": _UUID,
        "sdk_version": _STRING,
        "host": _STRING,
        "pid": _NS,
        "policy_id": _STRING,
        "policy_sha256": _SHA256,
        "policy_source_sha256": _SHA256,
        "durability": {"enum": ["process", "fsync", "chunk"]},
        # Null for an unsigned run; else the key its checkpoint notes are signed with.
        "signing": {
            "anyOf": [
                {"type": "null"},
                _object(
                    {
                        # SHA-256 hex of the raw public key.
                        "key_id": _SHA256,
                        # The name in the notes' signature lines (C2SP signed-note).
                        "key_name": _KEY_NAME,
                        # The raw 32-byte Ed25519 public key, standard base64.
                        "public_key": _ED25519_PUBLIC_KEY,
                    }
                ),
            ]
        },
    },
)

_ASSESSMENT = _record_schema(
    "ghost.assessment/1",
    "What the gate saw and concluded about one action before its verdict.",
    {
        "decision_id": _UUID,
        "agent": _STRING,
        "verb": _STRING,
        "resource": _STRING,
        # Null when the arguments have no canonical form (too deep, cyclic): the
        # action is denied, and `errors` names why.
        "args_sha256": _SHA256_OR_NULL,
        "policy_id": _STRING,
        "policy_sha256": _SHA256,
        "matched_rules": _array_of({"id": _STRING, "effect": _EFFECT}),
        "findings": _array_of({"detector": _STRING, "path": _STRING, "fingerprint": _STRING}),
        "narrowings": _array_of(
            {"rule": _STRING, "kind": {"enum": ["clamp", "keep", "set", "within"]}, "path": _STRING}
        ),
        "errors": {"type": "array", "items": _STRING},
        "stage_ns": _object({"policy": _NS, "narrow": _NS, "scrub": _NS}),
        "trace_id": _TRACE_ID,
        "span_id": _SPAN_ID,
        "parent_span_id": {"type": ["string", "null"], "pattern": "^[0-9a-f]{16}$"},
    },
    # Only with Gate(..., record_args="scrubbed") (ADR 0033): the arguments that came
    # in, scrubbed by every detector, as RFC 8785 JSON text; null when not storable.
    {"args_scrubbed": _STRING_OR_NULL},
)

_DECISION = _record_schema(
    "ghost.decision/1",
    "The verdict on one action, what it rests on, and how long it took.",
    {
        "decision_id": _UUID,
        "verdict": _VERDICT,
        "reason": _STRING,
        "matched_policy": _STRING_OR_NULL,
        "policy_id": _STRING,
        "policy_sha256": _SHA256,
        "assessment_sha256": _SHA256_OR_NULL,
        "trace_id": _TRACE_ID,
        "span_id": _SPAN_ID,
        "trace_origin": {"enum": ["supplied", "otel", "generated", "replaced_invalid"]},
        "latency_ns": _NS,
        "executed_args_sha256": _SHA256_OR_NULL,
    },
)

_APPROVAL = _record_schema(
    "ghost.approval/1",
    "The resolution of a pending decision: approved, rejected or expired.",
    {
        "decision_id": _UUID,
        "decision_sha256": _SHA256,
        "outcome": {"enum": ["approved", "rejected", "expired"]},
        "approver": _STRING_OR_NULL,
        "wait_ns": _NS,
        "final_verdict": _FINAL_VERDICT,
        "executed_args_sha256": _SHA256_OR_NULL,
        "policy_sha256": _SHA256,
        # The run whose log holds the decision, when it is not this run (the
        # agent restarted while it waited); null: this run (ADR 0016).
        "decision_run_id": {"type": ["string", "null"], "pattern": _UUID["pattern"]},
        # The wall-clock deadline the decision was held until.
        "expires_ns": _NS,
    },
)

_CHECKPOINT = _record_schema(
    "ghost.checkpoint/1",
    "A tree head: the RFC 6962 root of every record before it, and the same as a C2SP note.",
    {
        # The records seq 0 .. tree_size - 1 are covered (ghost: every record before this one).
        "tree_size": _SIZE,
        "root_hash": _SHA256,
        # The content address of record tree_size - 1.
        "head_sha256": _SHA256,
        "note": _CHECKPOINT_NOTE,
    },
)

_SEAL = _record_schema(
    "ghost.seal/1",
    "Last record of a cleanly closed run: how many records precede it, and the last one's address.",
    {"record_count": _NS, "head_sha256": _SHA256},
)


def _freeze(value: Any) -> Any:
    # Deeply read-only, so no caller can change what every later sink registers.
    if isinstance(value, Mapping):
        return MappingProxyType({key: _freeze(item) for key, item in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(item) for item in value)
    return value


SCHEMAS: Final[Mapping[str, Mapping[str, Any]]] = MappingProxyType(
    {
        schema["title"]: _freeze(schema)
        for schema in (_RUN, _ASSESSMENT, _DECISION, _APPROVAL, _SEAL, _CHECKPOINT)
    }
)
"""Schema name (``ghost.decision/1``) -> its JSON Schema, deeply read-only."""

TOPICS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "/run": "ghost.run/1",
        "/assessments": "ghost.assessment/1",
        "/decisions": "ghost.decision/1",
        "/approvals": "ghost.approval/1",
        "/seal": "ghost.seal/1",
        # Added after the first five, so that their channel ids (1-5) stay what they were.
        "/checkpoints": "ghost.checkpoint/1",
    }
)
"""Topic (``/decisions``) -> the schema name of its records, in channel registration order."""

_SCHEMA_DATA: Final[Mapping[str, bytes]] = MappingProxyType(
    {name: canonical_bytes(schema) for name, schema in SCHEMAS.items()}
)


def _without_opt_in(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    required = set(schema["required"])
    properties = {k: v for k, v in schema["properties"].items() if k in required}
    return {**schema, "properties": properties}


# What a run written before an opt-in field existed carries: the schema without its
# opt-in properties (ADR 0033), byte for byte, since canonical bytes sort keys.
_ACCEPTED: Final[Mapping[str, frozenset[bytes]]] = MappingProxyType(
    {
        name: frozenset({_SCHEMA_DATA[name], canonical_bytes(_without_opt_in(schema))})
        for name, schema in SCHEMAS.items()
    }
)


def accepted_schema_data(name: str) -> frozenset[bytes]:
    """The schema bytes a ghost channel may carry for ``name``: `schema_data`'s, and the
    bytes of the same schema before its opt-in fields were added (older runs).

    Raises:
        KeyError: ``name`` is not a ghost schema.
    """
    return _ACCEPTED[name]


def schema_data(name: str) -> bytes:
    """Return the bytes an MCAP Schema record carries for schema ``name``.

    They are the schema's canonical JSON, so every ghost file carries the
    same bytes for the same schema.

    Raises:
        KeyError: ``name`` is not a ghost schema.
    """
    return _SCHEMA_DATA[name]
