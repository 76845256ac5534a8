"""The Parquet tables ``ghost export`` writes: their columns, types and version (ADR 0030).

Four tables, one directory each under the export root, Hive-partitioned by
the run's start date (UTC) and its run::

    OUT_DIR/<table>/date=YYYY-MM-DD/run=<run key>/part-0.parquet

``runs`` (one row per exported file), ``decisions``, ``assessments`` and
``approvals`` (one row per readable record). Every row carries
``schema_version`` (`EXPORT_SCHEMA_VERSION`) and ``run_id``; every file
carries the version in its Parquet key-value metadata
(``ghost.export.schema_version``) too, so a reader can tell before reading a
row. A version is never changed in place: a column added, removed or retyped
is a new version.

Columns hold only what the MCAP file holds (the assessment's fields as the
gate wrote them: ids, hashes, rule ids, findings' detector, path and
fingerprint; never argument values, which the log does not store), plus
what the export derives from it: ``stamp`` (``stamp_ns`` as a UTC
timestamp), ``record_sha256`` (SHA-256 of the record's stored bytes), and
in ``runs`` the verification verdict of `analysis.verify_run`.

Each column is declared once here, as `Column` (its name, its kind, and
whether a record without a valid value for it is left out); `arrow_schema`
turns the declarations into a ``pyarrow`` schema, and `analysis._export_rows`
uses the same declarations to coerce a record's values, so the two cannot
drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

__all__ = [
    "APPROVALS",
    "ASSESSMENTS",
    "DECISIONS",
    "EXPORT_SCHEMA_VERSION",
    "RUNS",
    "SCHEMA_VERSION_KEY",
    "TABLES",
    "Column",
    "Kind",
    "arrow_schema",
]

EXPORT_SCHEMA_VERSION: Final = 2
"""The version of the exported tables' layout (the ``schema_version`` column).

2: ``assessments`` has the shadow's verdict, rule, policy hash and mode (ADR 0031).
"""

SCHEMA_VERSION_KEY: Final = b"ghost.export.schema_version"
"""The Parquet key-value metadata key that carries `EXPORT_SCHEMA_VERSION`."""


class Kind(StrEnum):
    """What a column holds. Closed: each maps to one Arrow type (`arrow_schema`)."""

    TEXT = "text"
    INT = "int"
    """A signed 64-bit integer (nanoseconds, counts, a pid)."""
    BOOL = "bool"
    STAMP = "stamp"
    """A UTC timestamp in nanoseconds, derived from an integer ``stamp_ns``."""
    TEXTS = "texts"
    """A list of strings."""
    RULES = "rules"
    """``matched_rules``: a list of ``{id, effect}``."""
    FINDINGS = "findings"
    """``findings``: a list of ``{detector, path, fingerprint}``."""
    NARROWINGS = "narrowings"
    """``narrowings``: a list of ``{rule, kind, path}``."""


@dataclass(frozen=True, slots=True)
class Column:
    """One column of an exported table.

    Attributes:
        name: the column's name.
        kind: what it holds.
        required: a record whose value for it is missing or of the wrong type
            is not exported (the same records the decision trace report
            cannot read); otherwise such a value becomes null.
        source: the record field it comes from (default: ``name``).
    """

    name: str
    kind: Kind
    required: bool = False
    source: str | None = None

    @property
    def field(self) -> str:
        """The record field the column's value is read from."""
        return self.source or self.name


def _common() -> tuple[Column, ...]:
    return (
        Column("schema_version", Kind.INT),
        Column("run_id", Kind.TEXT),
        Column("seq", Kind.INT),
        Column("stamp_ns", Kind.INT, required=True),
        Column("stamp", Kind.STAMP, source="stamp_ns"),
    )


DECISIONS: Final = (
    *_common(),
    Column("decision_id", Kind.TEXT, required=True),
    Column("verdict", Kind.TEXT, required=True),
    Column("reason", Kind.TEXT, required=True),
    Column("matched_policy", Kind.TEXT),
    Column("policy_id", Kind.TEXT, required=True),
    Column("policy_sha256", Kind.TEXT),
    Column("assessment_sha256", Kind.TEXT),
    Column("trace_id", Kind.TEXT, required=True),
    Column("span_id", Kind.TEXT),
    Column("trace_origin", Kind.TEXT),
    Column("latency_ns", Kind.INT, required=True),
    Column("executed_args_sha256", Kind.TEXT),
    Column("record_sha256", Kind.TEXT),
)
"""``decisions``: one row per readable ``/decisions`` record."""

ASSESSMENTS: Final = (
    *_common(),
    Column("decision_id", Kind.TEXT, required=True),
    Column("agent", Kind.TEXT),
    Column("verb", Kind.TEXT),
    Column("resource", Kind.TEXT),
    Column("args_sha256", Kind.TEXT),
    Column("policy_id", Kind.TEXT),
    Column("policy_sha256", Kind.TEXT),
    Column("matched_rules", Kind.RULES),
    Column("findings", Kind.FINDINGS),
    Column("narrowings", Kind.NARROWINGS),
    Column("errors", Kind.TEXTS),
    Column("stage_policy_ns", Kind.INT, source="stage_ns.policy"),
    Column("stage_narrow_ns", Kind.INT, source="stage_ns.narrow"),
    Column("stage_scrub_ns", Kind.INT, source="stage_ns.scrub"),
    Column("trace_id", Kind.TEXT),
    Column("span_id", Kind.TEXT),
    Column("parent_span_id", Kind.TEXT),
    # What the shadow would have decided (ADR 0031); null without a shadow.
    Column("shadow_verdict", Kind.TEXT, source="shadow.verdict"),
    Column("shadow_matched_policy", Kind.TEXT, source="shadow.matched_policy"),
    Column("shadow_policy_sha256", Kind.TEXT, source="shadow.policy_sha256"),
    Column("shadow_mode", Kind.TEXT, source="shadow.mode"),
    Column("record_sha256", Kind.TEXT),
)
"""``assessments``: one row per readable ``/assessments`` record (ids, hashes, rules, findings)."""

APPROVALS: Final = (
    *_common(),
    Column("decision_id", Kind.TEXT, required=True),
    Column("decision_sha256", Kind.TEXT),
    Column("outcome", Kind.TEXT, required=True),
    Column("approver", Kind.TEXT),
    Column("wait_ns", Kind.INT, required=True),
    Column("final_verdict", Kind.TEXT),
    Column("executed_args_sha256", Kind.TEXT),
    Column("policy_sha256", Kind.TEXT),
    Column("decision_run_id", Kind.TEXT),
    Column("expires_ns", Kind.INT),
    Column("record_sha256", Kind.TEXT),
)
"""``approvals``: one row per readable ``/approvals`` record."""

RUNS: Final = (
    Column("schema_version", Kind.INT),
    Column("run_id", Kind.TEXT),
    Column("host", Kind.TEXT),
    Column("pid", Kind.INT),
    Column("sdk_version", Kind.TEXT),
    Column("policy_id", Kind.TEXT),
    Column("policy_sha256", Kind.TEXT),
    Column("policy_source_sha256", Kind.TEXT),
    Column("durability", Kind.TEXT),
    Column("signed", Kind.BOOL),
    Column("sealed", Kind.BOOL),
    Column("truncated", Kind.BOOL),
    Column("status", Kind.TEXT),
    Column("problem_count", Kind.INT),
    Column("problems", Kind.TEXTS),
    Column("record_count", Kind.INT),
    Column("verified_prefix", Kind.INT),
    Column("decision_count", Kind.INT),
    Column("assessment_count", Kind.INT),
    Column("approval_count", Kind.INT),
    Column("first_stamp_ns", Kind.INT),
    Column("last_stamp_ns", Kind.INT),
    Column("first_stamp", Kind.STAMP, source="first_stamp_ns"),
    Column("last_stamp", Kind.STAMP, source="last_stamp_ns"),
    Column("source_sha256", Kind.TEXT),
    Column("source_path", Kind.TEXT),
    Column("analysis_version", Kind.INT),
)
"""``runs``: one row per exported file: the ``/run`` record, the verdict, the time span."""

TABLES: Final[dict[str, tuple[Column, ...]]] = {
    "runs": RUNS,
    "decisions": DECISIONS,
    "assessments": ASSESSMENTS,
    "approvals": APPROVALS,
}
"""Table name -> its columns, in the order they are written."""


def arrow_schema(pa: Any, columns: tuple[Column, ...]) -> Any:
    """Return the ``pyarrow.Schema`` of a table, with the version in its metadata.

    Args:
        pa: the ``pyarrow`` module (imported by the caller: it is an optional extra).
        columns: the table's columns (`TABLES`).
    """
    rule = pa.struct([("id", pa.string()), ("effect", pa.string())])
    finding = pa.struct(
        [("detector", pa.string()), ("path", pa.string()), ("fingerprint", pa.string())]
    )
    narrowing = pa.struct([("rule", pa.string()), ("kind", pa.string()), ("path", pa.string())])
    types = {
        Kind.TEXT: pa.string(),
        Kind.INT: pa.int64(),
        Kind.BOOL: pa.bool_(),
        Kind.STAMP: pa.timestamp("ns", tz="UTC"),
        Kind.TEXTS: pa.list_(pa.string()),
        Kind.RULES: pa.list_(rule),
        Kind.FINDINGS: pa.list_(finding),
        Kind.NARROWINGS: pa.list_(narrowing),
    }
    return pa.schema(
        [pa.field(column.name, types[column.kind]) for column in columns],
        metadata={SCHEMA_VERSION_KEY: str(EXPORT_SCHEMA_VERSION).encode()},
    )
