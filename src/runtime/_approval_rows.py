"""How a SQLite approval store lays out its file: the schema, the statements, the row codec.

`runtime._approval_sqlite` holds the store's behaviour (opening, locking,
the compare-and-set); this module holds what its bytes mean (ADR 0017):

* the schema: ``ghost_schema(format, version)``, the ``approvals`` table
  (exactly the fields of `PendingApproval`) and the ``resolutions`` table
  (those of `Resolution`, their order ``seq`` and the ``approval_sha256`` of
  the record that logged each one); nothing of the arguments but their hash;
* the encoding: text as TEXT (valid Unicode only: a lone surrogate is
  refused, as the log refuses it), integers as canonical decimal TEXT (exact
  beyond SQLite's 64 bits), approvers as a JSON list or NULL (None, "anyone",
  stays distinct from ``()``, "no one"); subclasses of str and int are
  stored as their plain values, without calling their methods;
* the decoding: a row is checked as strictly as it was written; anything
  else raises `DamagedRow`.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, cast

from runtime._approval_store import Outcome, PendingApproval, Resolution, ResolutionRecord
from runtime._errors import ApprovalError
from runtime._verdict import RuntimeVerdict

__all__ = [
    "APPLICATION_ID",
    "FORMAT",
    "INSERT_PENDING",
    "INSERT_RESOLUTION",
    "PENDING_WIDTH",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SELECT_LOGGED_DEADLINES",
    "SELECT_ONE",
    "SELECT_PENDING",
    "SELECT_RESOLUTION_STATE",
    "SELECT_UNRECORDED",
    "DamagedRow",
    "ResolutionState",
    "decode_deadline",
    "decode_row",
    "decode_state",
    "integer_value",
    "lookup_key",
    "optional_text",
    "pending_row",
    "text_value",
]

SCHEMA_VERSION: Final = 1
"""The schema this ghost writes and reads; a store of a newer version is refused."""
FORMAT: Final = "ghost-approvals"
# PRAGMA application_id: "GHAP" in ASCII, so `file(1)` and we can tell the file apart.
APPLICATION_ID: Final = 0x47484150
SCHEMA: Final = (
    "CREATE TABLE ghost_schema (format TEXT NOT NULL, version INTEGER NOT NULL)",
    # Integers are decimal text (exact beyond 64 bits); approvers a JSON list or NULL.
    """CREATE TABLE approvals (
        decision_id TEXT PRIMARY KEY NOT NULL,
        decision_sha256 TEXT NOT NULL,
        run_id TEXT,
        agent TEXT NOT NULL,
        verb TEXT NOT NULL,
        resource TEXT NOT NULL,
        reason TEXT NOT NULL,
        matched_policy TEXT,
        held_verdict TEXT NOT NULL,
        executed_args_sha256 TEXT NOT NULL,
        policy_sha256 TEXT NOT NULL,
        approvers TEXT,
        created_ns TEXT NOT NULL,
        expires_ns TEXT NOT NULL
    )""",
    # seq: the order resolutions were stored in (unrecorded() hands them over in it).
    # recorder, claimed_until_ns: the queue that claimed the logging, and until when.
    # approval_sha256, wait_ns: the audit record that holds the resolution, once logged.
    # executed: 1 once an approval has run (it runs once, whichever process runs it).
    """CREATE TABLE resolutions (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        decision_id TEXT NOT NULL UNIQUE REFERENCES approvals (decision_id),
        outcome TEXT NOT NULL,
        approver TEXT,
        resolved_ns TEXT NOT NULL,
        recorder TEXT,
        claimed_until_ns TEXT,
        approval_sha256 TEXT,
        wait_ns TEXT,
        executed INTEGER NOT NULL DEFAULT 0
    )""",
)
# The columns of `approvals`, in the order of PendingApproval's fields; then a resolution's.
PENDING_WIDTH: Final = 14
INSERT_PENDING: Final = """INSERT INTO approvals (
    decision_id, decision_sha256, run_id, agent, verb, resource, reason,
    matched_policy, held_verdict, executed_args_sha256, policy_sha256, approvers,
    created_ns, expires_ns
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
SELECT_ONE: Final = """SELECT
    a.decision_id, a.decision_sha256, a.run_id, a.agent, a.verb, a.resource, a.reason,
    a.matched_policy, a.held_verdict, a.executed_args_sha256, a.policy_sha256, a.approvers,
    a.created_ns, a.expires_ns,
    r.outcome, r.approver, r.resolved_ns
FROM approvals a LEFT JOIN resolutions r ON r.decision_id = a.decision_id
WHERE a.decision_id = ?"""
SELECT_PENDING: Final = """SELECT
    a.decision_id, a.decision_sha256, a.run_id, a.agent, a.verb, a.resource, a.reason,
    a.matched_policy, a.held_verdict, a.executed_args_sha256, a.policy_sha256, a.approvers,
    a.created_ns, a.expires_ns
FROM approvals a LEFT JOIN resolutions r ON r.decision_id = a.decision_id
WHERE r.decision_id IS NULL"""
SELECT_UNRECORDED: Final = """SELECT
    a.decision_id, a.decision_sha256, a.run_id, a.agent, a.verb, a.resource, a.reason,
    a.matched_policy, a.held_verdict, a.executed_args_sha256, a.policy_sha256, a.approvers,
    a.created_ns, a.expires_ns,
    r.outcome, r.approver, r.resolved_ns
FROM resolutions r JOIN approvals a ON a.decision_id = r.decision_id
WHERE r.approval_sha256 IS NULL ORDER BY r.seq"""
# The compare-and-set: inserts only for a known decision; UNIQUE(decision_id) lets one win.
INSERT_RESOLUTION: Final = (
    "INSERT INTO resolutions (decision_id, outcome, approver, resolved_ns)"
    " SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM approvals WHERE decision_id = ?)"
)
# Prune's candidates: logged resolutions, with their decision's deadline (compared in Python:
# the decimal text of an integer beyond 64 bits does not compare as a number in SQL).
SELECT_LOGGED_DEADLINES: Final = """SELECT a.decision_id, a.expires_ns
FROM resolutions r JOIN approvals a ON a.decision_id = r.decision_id
WHERE r.approval_sha256 IS NOT NULL"""
SELECT_RESOLUTION_STATE: Final = (
    "SELECT recorder, claimed_until_ns, approval_sha256, wait_ns, executed"
    " FROM resolutions WHERE decision_id = ?"
)
_DECIMAL: Final = re.compile(r"-?(?:0|[1-9][0-9]*)")


class DamagedRow(Exception):
    """A row or the schema table holds something a store never writes."""


# --- records to rows ----------------------------------------------------------------------


def pending_row(pending: PendingApproval) -> tuple[str | None, ...]:
    """Return the parameters of `INSERT_PENDING` for ``pending``.

    Raises:
        ApprovalError: a field that cannot be kept exactly (see `text_value`,
            `integer_value`).
    """
    approvers = pending.approvers
    return (
        text_value(pending.decision_id, "decision_id"),
        text_value(pending.decision_sha256, "decision_sha256"),
        optional_text(pending.run_id, "run_id"),
        text_value(pending.agent, "agent"),
        text_value(pending.verb, "verb"),
        text_value(pending.resource, "resource"),
        text_value(pending.reason, "reason"),
        optional_text(pending.matched_policy, "matched_policy"),
        RuntimeVerdict(pending.held_verdict).value,
        text_value(pending.executed_args_sha256, "executed_args_sha256"),
        text_value(pending.policy_sha256, "policy_sha256"),
        None
        if approvers is None
        else json.dumps([text_value(name, "approvers") for name in approvers]),
        integer_value(pending.created_ns, "created_ns"),
        integer_value(pending.expires_ns, "expires_ns"),
    )


def _pending_from(row: Sequence[object]) -> PendingApproval:
    (
        decision_id,
        decision_sha256,
        run_id,
        agent,
        verb,
        resource,
        reason,
        matched_policy,
        held_verdict,
        executed_args_sha256,
        policy_sha256,
        approvers,
        created_ns,
        expires_ns,
    ) = row
    return PendingApproval(
        decision_id=_stored_text(decision_id),
        decision_sha256=_stored_text(decision_sha256),
        run_id=_stored_optional(run_id),
        agent=_stored_text(agent),
        verb=_stored_text(verb),
        resource=_stored_text(resource),
        reason=_stored_text(reason),
        matched_policy=_stored_optional(matched_policy),
        held_verdict=RuntimeVerdict(_stored_text(held_verdict)),
        executed_args_sha256=_stored_text(executed_args_sha256),
        policy_sha256=_stored_text(policy_sha256),
        approvers=None if approvers is None else _stored_names(approvers),
        created_ns=_stored_int(created_ns),
        expires_ns=_stored_int(expires_ns),
    )


def lookup_key(decision_id: object) -> str:
    """Return ``decision_id`` as a plain str to look up.

    Raises:
        ApprovalError: it cannot be an id (not a str, invalid Unicode): no such
            decision, as the memory store says.
    """
    if isinstance(decision_id, str) and _encodable(decision_id):
        return str.__str__(decision_id)
    raise ApprovalError(f"no decision {decision_id!r} awaits approval")


def text_value(value: object, field: str) -> str:
    """Return ``value`` as a plain str to store as ``field``.

    Raises:
        ApprovalError: it is not a str, or holds a lone surrogate.
    """
    if not isinstance(value, str):
        raise ApprovalError(f"{field} is a {type(value).__name__}, not a string: it cannot be kept")
    if not _encodable(value):
        raise ApprovalError(
            f"{field} is not valid Unicode (a lone surrogate): the store keeps text in the"
            " escaped form the log keeps"
        )
    return str.__str__(value)  # a plain str, whatever subclass came in


def optional_text(value: object, field: str) -> str | None:
    """`text_value`, or None for None."""
    return None if value is None else text_value(value, field)


def integer_value(value: object, field: str) -> str:
    """Return ``value`` as canonical decimal text to store as ``field``.

    Raises:
        ApprovalError: it is not an int, or has more digits than Python will write.
    """
    if not isinstance(value, int):
        raise ApprovalError(
            f"{field} is a {type(value).__name__}, not an integer: it cannot be kept"
        )
    try:
        return str(int(value))
    except ValueError:  # past sys.get_int_max_str_digits(): no clock reads that
        raise ApprovalError(f"{field} is too large to keep") from None


def _encodable(text: str) -> bool:
    try:
        str.encode(text, "utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _stored_text(value: object) -> str:
    if type(value) is not str:
        raise DamagedRow
    return value


def _stored_optional(value: object) -> str | None:
    return None if value is None else _stored_text(value)


def _stored_int(value: object) -> int:
    text = _stored_text(value)
    if _DECIMAL.fullmatch(text) is None:
        raise DamagedRow
    return int(text)


def _stored_names(value: object) -> tuple[str, ...]:
    names = json.loads(_stored_text(value))
    if type(names) is not list or not all(type(name) is str for name in names):
        raise DamagedRow
    return tuple(names)


def decode_row(
    row: Sequence[object], *, resolved: bool
) -> tuple[PendingApproval, Resolution | None]:
    """Return the approval a row of `SELECT_ONE` (``resolved``) or `SELECT_PENDING` holds.

    Raises:
        DamagedRow: the row holds something a store never writes.
    """
    try:
        pending = _pending_from(row[:PENDING_WIDTH])
        if not resolved or row[PENDING_WIDTH] is None:
            return pending, None
        outcome, approver, resolved_ns = row[PENDING_WIDTH:]
        return pending, Resolution(
            decision_id=pending.decision_id,
            outcome=cast("Outcome", _stored_text(outcome)),  # Resolution checks it
            approver=_stored_optional(approver),
            resolved_ns=_stored_int(resolved_ns),
        )
    except (ValueError, TypeError, RecursionError):  # the records' own checks, json
        raise DamagedRow from None


@dataclass(frozen=True, slots=True)
class ResolutionState:
    """What a resolution row says beyond the resolution: its claim, its record, its run."""

    recorder: str | None
    claimed_until_ns: int | None
    record: ResolutionRecord | None
    executed: bool


def decode_state(row: Sequence[object]) -> ResolutionState:
    """Return the state a row of `SELECT_RESOLUTION_STATE` holds.

    Raises:
        DamagedRow: the row holds something a store never writes.
    """
    recorder, claimed_until_ns, approval_sha256, wait_ns, executed = row
    if (approval_sha256 is None) != (wait_ns is None) or executed not in (0, 1):
        raise DamagedRow
    if (recorder is None) != (claimed_until_ns is None) or type(executed) is not int:
        raise DamagedRow
    try:
        return ResolutionState(
            recorder=_stored_optional(recorder),
            claimed_until_ns=None if claimed_until_ns is None else _stored_int(claimed_until_ns),
            record=None
            if approval_sha256 is None
            else ResolutionRecord(_stored_text(approval_sha256), _stored_int(wait_ns)),
            executed=executed == 1,
        )
    except ValueError:  # a decimal past Python's digit limit
        raise DamagedRow from None


def decode_deadline(row: Sequence[object]) -> tuple[str, int]:
    """Return the decision id and deadline a row of `SELECT_LOGGED_DEADLINES` holds.

    Raises:
        DamagedRow: the row holds something a store never writes.
    """
    decision_id, expires_ns = row
    try:
        return _stored_text(decision_id), _stored_int(expires_ns)
    except ValueError:  # a decimal past Python's digit limit
        raise DamagedRow from None
