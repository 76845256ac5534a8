"""What verification knows about one stored record, decoded once (ADR 0013).

Every check reads records through `RecordFacts`, built by `read_facts` in
three steps that are themselves checks of the record alone:

1. **json** — the message is a strict JSON object (the reader parsed it).
2. **schema** — it matches the ghost schema of its topic, field by field
   (`audit.schema_problems`), and its ``schema`` is its topic's.
3. **canonical** — it is stored in its canonical bytes: re-encoding the
   parsed record with `runtime.canonical_bytes` gives the stored bytes back.
   A record that parses to the same JSON but is stored differently was
   re-encoded by someone other than the sink.

A record's content address (what ``prev_sha256``, ``assessment_sha256``,
``decision_sha256`` and ``head_sha256`` name) is the SHA-256 of its canonical
bytes: the stored bytes when they are canonical. A record re-encoded
non-canonically keeps the address of its canonical form, so that tamper is
named once, at the record, and not again at every link that names it.

Only values verification has validated are copied into messages: hashes
that are 64 hex digits, UUID-shaped decision ids, integers. Anything else a
record holds is described by its JSON type, so a crafted record cannot put
text of its choosing (a newline, a terminal escape) into the report.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeGuard

import orjson

from analysis._json_types import json_type_name
from analysis._verify_model import IntegrityCheck, RunProblem
from runtime import CanonicalEncodingError, canonical_bytes, sha256_hex

if TYPE_CHECKING:
    from audit import LoggedAttachment, LoggedRecord

__all__ = [
    "APPROVALS_TOPIC",
    "ASSESSMENTS_TOPIC",
    "CHECKPOINTS_TOPIC",
    "DECISIONS_TOPIC",
    "RUN_TOPIC",
    "SEAL_TOPIC",
    "RecordCheck",
    "RecordFacts",
    "RunEnd",
    "SealWatch",
    "is_sealed",
    "is_uuid",
    "read_facts",
    "record_label",
    "seal_problems",
    "seals_the_run",
    "shown",
    "shown_schema",
]

RUN_TOPIC: Final = "/run"
ASSESSMENTS_TOPIC: Final = "/assessments"
DECISIONS_TOPIC: Final = "/decisions"
APPROVALS_TOPIC: Final = "/approvals"
SEAL_TOPIC: Final = "/seal"
CHECKPOINTS_TOPIC: Final = "/checkpoints"

_SHA256_HEX: Final = re.compile(r"[0-9a-f]{64}")
_UUID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_MAX_SHOWN_INT: Final = 10**20
# A record's own message about its canonical form can quote an integer of 4000 digits.
_MAX_DETAIL: Final = 160
_dumps = orjson.dumps
_SORTED: Final = orjson.OPT_SORT_KEYS


@dataclass(frozen=True, slots=True)
class RecordFacts:
    """One stored record, decoded and checked on its own.

    Attributes:
        position: its index in file order (0-based).
        logged: the record as the reader returned it.
        record: the parsed JSON object, or None when the message is not one.
        seq: its ``seq``, when that is an integer.
        decision_id: its ``decision_id``, when that is a UUID-shaped string.
        address: its content address (see the module docstring).
        canonical: the bytes that address is the SHA-256 of: its canonical bytes,
            or the stored bytes when it has no canonical form (its Merkle leaf).
    """

    position: int
    logged: LoggedRecord
    record: Mapping[str, Any] | None
    seq: int | None
    decision_id: str | None
    address: str
    canonical: bytes

    @property
    def topic(self) -> str:
        """The topic the record was stored on."""
        return self.logged.topic

    def field(self, name: str) -> object:
        """Return the record's field ``name``, or None when absent or unreadable."""
        return None if self.record is None else self.record.get(name)

    def integer(self, name: str) -> int | None:
        """Return the field ``name`` when it is an integer (not a boolean), else None."""
        value = self.field(name)
        return value if type(value) is int else None

    def problem(self, check: IntegrityCheck, message: str) -> RunProblem:
        """Return a problem about this record."""
        return RunProblem(
            check=check,
            message=message,
            position=self.position,
            seq=self.seq,
            topic=self.topic,
            decision_id=self.decision_id,
            record_sha256=self.logged.sha256,
        )

    @property
    def label(self) -> str:
        """How another record's problem names this one: ``seq 4 (/decisions, decision <id>)``."""
        return record_label(self.position, self.seq, self.topic, self.decision_id)


def record_label(position: int, seq: int | None, topic: str, decision_id: str | None) -> str:
    """How a problem names a record: ``seq 4 (/decisions, decision <id>)`` (`RecordFacts.label`)."""
    place = f"record #{position}" if seq is None else f"seq {seq}"
    if decision_id is None:
        return f"{place} ({topic})"
    return f"{place} ({topic}, decision {decision_id})"


@dataclass(frozen=True, slots=True)
class RunEnd:
    """What a check learns when the last record has been read.

    Attributes:
        record_count: how many records were read.
        truncated: the file ends before its MCAP footer, as a crash leaves it.
        sealed: the last record seals the run (`seals_the_run`).
        attachments: the file's attachments, in file order.
    """

    record_count: int
    truncated: bool
    sealed: bool
    attachments: tuple[LoggedAttachment, ...]


class RecordCheck(Protocol):
    """One integrity check, fed a run's records one at a time, in file order.

    A check keeps what it needs between records (the previous address, the
    open assessments) and nothing more, so verification streams: one pass,
    no second look at a record. Each problem names the record it is about.
    """

    def visit(self, facts: RecordFacts) -> Iterable[RunProblem]:
        """Check one record against what came before it."""
        ...

    def finish(self, end: RunEnd) -> Iterable[RunProblem]:
        """Check what only the end of the run can tell (a missing seal, an unclaimed record)."""
        ...


def read_facts(
    position: int, logged: LoggedRecord, topic_schemas: Mapping[str, str]
) -> tuple[RecordFacts, list[RunProblem]]:
    """Decode one record and check it on its own: JSON, schema, canonical bytes.

    Args:
        position: the record's index in file order.
        logged: the record as read.
        topic_schemas: topic -> the schema name its records carry (`audit.TOPICS`).

    Returns:
        The record's facts, and the problems with it alone.
    """
    from audit import schema_problems, schema_valid

    record = logged.record
    seq = _integer(record, "seq")
    decision = None if record is None else record.get("decision_id")
    facts = RecordFacts(
        position=position,
        logged=logged,
        record=record,
        seq=seq,
        decision_id=decision if is_uuid(decision) else None,
        address=logged.sha256,
        canonical=logged.data,
    )
    if record is None:
        why = logged.problem or "it is not a JSON object"
        return facts, [facts.problem(IntegrityCheck.JSON, f"the message cannot be read: {why}")]
    if _well_formed(record, logged, topic_schemas, schema_valid):
        return facts, []
    problems: list[RunProblem] = []
    found = schema_problems(record)
    if found:
        problems.append(
            facts.problem(
                IntegrityCheck.SCHEMA, f"it does not match its schema: {'; '.join(found)}"
            )
        )
    expected = topic_schemas.get(logged.topic)
    if record.get("schema") != expected:
        problems.append(
            facts.problem(
                IntegrityCheck.SCHEMA,
                f"a record on {logged.topic} must have schema {expected!r},"
                f" but its schema is {shown_schema(record.get('schema'), topic_schemas.values())}",
            )
        )
    try:
        canonical = canonical_bytes(dict(record))
    except CanonicalEncodingError as exc:
        problems.append(
            facts.problem(
                IntegrityCheck.CANONICAL,
                f"it has no canonical form, so no writer of ghost's could have stored it"
                f" ({_clip(str(exc))})",
            )
        )
        return facts, problems
    if canonical != logged.data:
        address = sha256_hex(canonical)
        problems.append(
            facts.problem(
                IntegrityCheck.CANONICAL,
                f"it is not stored in its canonical bytes: it was re-encoded"
                f" ({len(logged.data)} bytes stored, {len(canonical)} canonical; its"
                f" content address is {address})",
            )
        )
        facts = RecordFacts(
            position=position,
            logged=logged,
            record=record,
            seq=seq,
            decision_id=facts.decision_id,
            address=address,
            canonical=canonical,
        )
    return facts, problems


def _well_formed(
    record: Mapping[str, Any],
    logged: LoggedRecord,
    topic_schemas: Mapping[str, str],
    schema_valid: Callable[[Mapping[str, Any]], bool],
) -> bool:
    """The fast path: a record of its topic's schema, stored in its canonical bytes (ADR 0026).

    `audit.schema_valid` is sound (True: `schema_problems` finds nothing), and
    a record it accepts is plain, whose canonical bytes are orjson's sorted
    bytes (ADR 0025); so True here means the checks below find nothing. False
    only means the precise checks must look.
    """
    if record.get("schema") != topic_schemas.get(logged.topic) or not schema_valid(record):
        return False
    try:
        return _dumps(dict(record), option=_SORTED) == logged.data
    except orjson.JSONEncodeError:
        return False


def seal_problems(seal: Mapping[str, Any], position: int, head: RecordFacts | None) -> list[str]:
    """Return what is wrong with a ``/seal`` record at ``position``, as sentences.

    Args:
        seal: the parsed seal record.
        position: its index in file order: the number of records before it.
        head: the record just before it, or None when it is the first.
    """
    problems: list[str] = []
    count = _integer(seal, "record_count")
    if count != position:
        problems.append(
            f"its record_count is {shown(seal.get('record_count'))}, but {position}"
            f" record{'' if position == 1 else 's'} precede it"
        )
    named = seal.get("head_sha256")
    if head is None:
        problems.append("it is the first record: there is no run for it to seal")
    elif named != head.address:
        problems.append(
            f"its head_sha256 is {shown(named)}, but the record before it,"
            f" {head.label}, has content address {head.address}"
        )
    return problems


def seals_the_run(last: RecordFacts | None, head: RecordFacts | None) -> bool:
    """Whether ``last`` is a ``/seal`` that counts and names the records before it.

    This is the one definition of "sealed" that `verify_run` and the decision
    trace report share.

    Args:
        last: a run's last record, or None for a run without records.
        head: the record just before it, or None.
    """
    if last is None or last.topic != SEAL_TOPIC or last.record is None:
        return False
    return not seal_problems(last.record, last.position, head)


def is_sealed(records: Sequence[LoggedRecord], topic_schemas: Mapping[str, str]) -> bool:
    """Whether the last of ``records`` seals the run (see `seals_the_run`).

    Args:
        records: a run's records in file order.
        topic_schemas: topic -> the schema name its records carry (`audit.TOPICS`).
    """
    if not records:
        return False
    count = len(records)
    last = read_facts(count - 1, records[-1], topic_schemas)[0]
    head = read_facts(count - 2, records[-2], topic_schemas)[0] if count > 1 else None
    return seals_the_run(last, head)


def is_uuid(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a lowercase, hyphenated UUID string (a decision or run id)."""
    return isinstance(value, str) and _UUID.fullmatch(value) is not None


def shown(value: object) -> str:
    """Return ``value`` as a message may show it: a hash, an id or an integer, else its type."""
    if isinstance(value, str) and (_SHA256_HEX.fullmatch(value) or is_uuid(value)):
        return value
    if type(value) is int:
        # Bounded before str(): a huge integer costs quadratic time to print.
        return str(value) if -_MAX_SHOWN_INT < value < _MAX_SHOWN_INT else "a very large integer"
    return json_type_name(value)


def shown_schema(value: object, schema_names: Iterable[str]) -> str:
    """Return a ``schema`` field as a message may show it: quoted when it is a ghost schema."""
    return repr(value) if isinstance(value, str) and value in schema_names else shown(value)


def _integer(record: Mapping[str, Any] | None, name: str) -> int | None:
    value = None if record is None else record.get(name)
    return value if type(value) is int else None


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"


class SealWatch:
    """Whether a run is sealed, from its records as they stream by: the two furthest in the file.

    The same test as `verify_run`'s: the last record is a ``/seal`` that
    counts and names the records before it.
    """

    __slots__ = ("_count", "_last_two")

    def __init__(self) -> None:
        self._last_two: list[LoggedRecord] = []
        self._count = 0

    def see(self, logged: LoggedRecord) -> None:
        """Note one record on a ghost topic (in any order: its position places it)."""
        self._count += 1
        last_two, position = self._last_two, logged.position
        if len(last_two) < 2:
            last_two.append(logged)
            last_two.sort(key=_record_position)
        elif position > last_two[1].position:
            last_two[0], last_two[1] = last_two[1], logged
        elif position > last_two[0].position:
            last_two[0] = logged

    def sealed(self, topic_schemas: Mapping[str, str]) -> bool:
        """Whether the records seen end as a sealed run does (``topic_schemas``: `audit.TOPICS`)."""
        if not self._last_two:
            return False
        *head, last = self._last_two
        index = self._count - 1
        before = read_facts(index - 1, head[0], topic_schemas)[0] if head else None
        return seals_the_run(read_facts(index, last, topic_schemas)[0], before)


def _record_position(logged: LoggedRecord) -> tuple[int, int]:
    return logged.position
