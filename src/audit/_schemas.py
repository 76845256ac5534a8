"""The record schemas of a ghost audit log, one JSON Schema (draft 2020-12) per topic.

Each record is a JSON object whose ``schema`` field names one of these; the
MCAP channel of its topic carries the same JSON Schema (``encoding="jsonschema"``),
so that Foxglove and the ``mcap`` tools can show the records. Every schema
closes its objects (``additionalProperties: false``) and requires every field
it lists: a record always writes its nullable fields as ``null``, never omits
them, so two writers cannot disagree about what an absent field means.

The one exception is a field added to a schema after records of it were
written, where writing it always would change every record's bytes (and
content address) for gates that do not use it: such a field is optional,
and its absence has one documented meaning. So far: ``shadow`` on
``ghost.assessment/1`` and ``ghost.run/1`` (ADR 0031), absent when the gate
has no shadow; ``limits`` on ``ghost.assessment/1`` (ADR 0032), absent when
no limited rule asked a counter; ``args_scrubbed`` on ``ghost.assessment/1``
(ADR 0033), absent when the gate did not opt in to storing scrubbed
arguments (null: opted in, not storable); ``writer`` and ``peer`` on ``ghost.run/1``
and ``ended`` on ``ghost.seal/1`` (ADR 0034), written only by
``ghost audit-daemon``; ``follows`` on ``ghost.run/1`` (ADR 0034, addendum),
written by the daemon only for a run a gate opened after a reconnect. A file
made before such fields were added carries the schema without them, which
``ghost verify`` still accepts (`schema_versions`).

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
    "SEAL_ENDINGS",
    "TOPICS",
    "schema_data",
    "schema_versions",
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


_PROCESS_IDENTITY: Final = {
    "type": "object",
    "properties": {"pid": _NS, "uid": _NS, "gid": _NS},
    "required": ["gid", "pid", "uid"],
    "additionalProperties": False,
}

SEAL_ENDINGS: Final = ("disconnected", "protocol_error", "daemon_stopped")
"""Why `ghost audit-daemon` sealed a run its agent did not close (the seal's ``ended``).

``disconnected``: the agent's connection ended without a close (it exited,
crashed or was killed); ``protocol_error``: the daemon cut a connection that
broke the wire protocol; ``daemon_stopped``: the daemon was stopped (SIGTERM).
"""


def _object(
    properties: Mapping[str, Any], optional: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    # `optional`: fields a record may lack (see the module docstring), listed after the rest.
    return {
        "type": "object",
        "properties": {**properties, **(optional or {})},
        "required": sorted(properties),
        "additionalProperties": False,
    }


def _without_optional(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` as it was before its optional fields were added (the bytes earlier runs carry)."""
    required = set(schema["required"])
    properties = {key: sub for key, sub in schema["properties"].items() if key in required}
    return {**schema, "properties": properties}


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
    optional={
        # A run with a shadow candidate (ADR 0031): its identity, and the attachment
        # holding its source, bound to the chain as policy_source_sha256 binds the policy's.
        "shadow": _object(
            {"policy_id": _STRING, "policy_sha256": _SHA256, "policy_source_sha256": _SHA256}
        ),
        # Written only by `ghost audit-daemon` (ADR 0034): the daemon process that wrote the
        # file, and the agent process at the other end of its socket as the kernel names it
        # (SO_PEERCRED). A run written in-process has neither.
        "writer": _PROCESS_IDENTITY,
        "peer": _PROCESS_IDENTITY,
        # A run a gate opened after losing its daemon (ADR 0034, addendum): the run it
        # continues and that run's head as acknowledged, which the daemon confirmed in
        # the old run's file before writing this. A first run has no such key.
        "follows": _object({"run_id": _UUID, "record_count": _NS, "head_sha256": _SHA256}),
    },
)

_DECIMAL: Final = {"type": "string", "pattern": "^(0|[1-9][0-9]*)(\\.[0-9]{0,5}[1-9])?$"}
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
    # What the shadow -- a candidate, or the policy's shadow rules -- would have
    # decided (ADR 0031); absent when the gate has no shadow. No argument value.
    optional={
        # Only with Gate(..., record_args="scrubbed") (ADR 0033): the arguments that came
        # in, scrubbed by every detector, as RFC 8785 JSON text; null when not storable.
        "args_scrubbed": _STRING_OR_NULL,
        # What each limited rule's counter held, in the order they were asked (ADR 0032);
        # present only when a check asked a counter.
        "limits": _array_of(
            {
                "rule": _STRING,
                # HMAC-SHA256 of the key's values under the gate's fingerprint key.
                "key": _SHA256,
                "window_s": _SIZE,
                "measure": {"enum": ["count", "sum"]},
                # Exact decimal text: counts, or sums to six decimal places.
                "used": _DECIMAL,
                "amount": _DECIMAL,
                "max": _DECIMAL,
                "exceeded": {"type": "boolean"},
                "reserved": {"type": "boolean"},
            }
        ),
        "shadow": _object(
            {
                "mode": {"enum": ["candidate", "rules"]},
                "policy_id": _STRING,
                "policy_sha256": _SHA256,
                "verdict": _VERDICT,
                "matched_policy": _STRING_OR_NULL,
                "matched_rules": _array_of({"id": _STRING, "effect": _EFFECT}),
                # The arguments the shadow would have run; null for deny.
                "executed_args_sha256": _SHA256_OR_NULL,
                # Why the shadow could not be evaluated (its verdict is then deny).
                "error": _STRING_OR_NULL,
                "eval_ns": _NS,
            }
        ),
    },
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
    # Written only by `ghost audit-daemon` when it seals a run the agent did not close
    # (ADR 0034): why the run ended. A run the gate closed has no such field.
    optional={"ended": {"enum": list(SEAL_ENDINGS)}},
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
# Each schema's bytes now and, when it gained optional fields since, before them.
_SCHEMA_VERSIONS: Final[Mapping[str, tuple[bytes, ...]]] = MappingProxyType(
    {
        name: tuple(dict.fromkeys((_SCHEMA_DATA[name], canonical_bytes(_without_optional(schema)))))
        for name, schema in SCHEMAS.items()
    }
)


def schema_data(name: str) -> bytes:
    """Return the bytes an MCAP Schema record carries for schema ``name``.

    They are the schema's canonical JSON, so every ghost file carries the
    same bytes for the same schema.

    Raises:
        KeyError: ``name`` is not a ghost schema.
    """
    return _SCHEMA_DATA[name]


def schema_versions(name: str) -> tuple[bytes, ...]:
    """Return every form of schema ``name`` a ghost file may carry, the current one first.

    A schema that gained an optional field (module docstring) was carried
    without it by the runs written before: those bytes are the same schema,
    and their records are valid under the current one. ``ghost verify``
    accepts each of them.

    Raises:
        KeyError: ``name`` is not a ghost schema.
    """
    return _SCHEMA_VERSIONS[name]
