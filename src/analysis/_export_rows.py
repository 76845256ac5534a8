"""A record's values, coerced to the columns of its exported table (ADR 0030).

The export never invents a value and never fails on a crafted one: a value
of the wrong JSON type, an integer outside the signed 64-bit range, or text
that is not Unicode (a lone surrogate from a ``\\ud800`` escape) becomes
null; and a record that lacks a valid value for a column declared
``required`` is left out, as the decision trace report leaves out the
records it cannot read -- so ``ghost fleet summary`` counts what
``ghost trace-decisions`` counts. A decision whose verdict, or an approval
whose outcome, is not one ghost writes is left out for the same reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from analysis._export_schema import EXPORT_SCHEMA_VERSION, Column, Kind
from analysis._trace_model import APPROVAL_OUTCOMES
from runtime import RuntimeVerdict

__all__ = ["as_int", "as_text", "record_row"]

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_VERDICTS: Final = frozenset(verdict.value for verdict in RuntimeVerdict)
_OUTCOMES: Final = frozenset(APPROVAL_OUTCOMES)
# The value sets a record must respect to be readable, by (topic, column).
_CLOSED: Final[Mapping[tuple[str, str], frozenset[str]]] = {
    ("/decisions", "verdict"): _VERDICTS,
    ("/assessments", "shadow_verdict"): _VERDICTS,
    ("/approvals", "outcome"): _OUTCOMES,
}
_STRUCT_FIELDS: Final[Mapping[Kind, tuple[str, ...]]] = {
    Kind.RULES: ("id", "effect"),
    Kind.FINDINGS: ("detector", "path", "fingerprint"),
    Kind.NARROWINGS: ("rule", "kind", "path"),
}


def as_text(value: object) -> str | None:
    """``value`` if it is a str that UTF-8 can encode, else None."""
    if not isinstance(value, str):
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


def as_int(value: object) -> int | None:
    """``value`` if it is an int (not a bool) in the signed 64-bit range, else None."""
    if type(value) is not int or not _INT64_MIN <= value <= _INT64_MAX:
        return None
    return value


def record_row(
    topic: str,
    record: Mapping[str, Any],
    columns: tuple[Column, ...],
    *,
    run_id: str | None,
    record_sha256: str,
) -> dict[str, object] | None:
    """Return the row of one record for its table, or None if the record is not readable.

    Args:
        topic: the record's topic (``/decisions``), for its closed value sets.
        record: the parsed record, already known to carry its topic's schema.
        columns: its table's columns.
        run_id: the run's id, as its ``/run`` record states it (None if unreadable).
        record_sha256: SHA-256 hex of the record's stored bytes.
    """
    row: dict[str, object] = {}
    for column in columns:
        if column.name == "schema_version":
            value: object = EXPORT_SCHEMA_VERSION
        elif column.name == "run_id":
            value = run_id
        elif column.name == "record_sha256":
            value = record_sha256
        else:
            value = _coerce(column.kind, _lookup(record, column.field))
            allowed = _CLOSED.get((topic, column.name))
            if allowed is not None and value not in allowed:
                value = None
        if value is None and column.required:
            return None
        row[column.name] = value
    return row


def _lookup(record: Mapping[str, Any], field: str) -> object:
    value: object = record
    for part in field.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _coerce(kind: Kind, value: object) -> object:
    if kind is Kind.TEXT:
        return as_text(value)
    if kind in (Kind.INT, Kind.STAMP):
        return as_int(value)
    if kind is Kind.BOOL:
        return value if isinstance(value, bool) else None
    if not isinstance(value, list):
        return None
    if kind is Kind.TEXTS:
        return [as_text(item) for item in value]
    fields = _STRUCT_FIELDS[kind]
    return [
        {name: as_text(item.get(name)) for name in fields}
        for item in value
        if isinstance(item, Mapping)
    ]
