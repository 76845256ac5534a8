"""`record_row`: any record a file may hold becomes a row pyarrow accepts, or no row."""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow", reason="the fleet extra (pyarrow) is not installed")

from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from analysis._export_rows import as_int, as_text, record_row
from analysis._export_schema import APPROVALS, ASSESSMENTS, DECISIONS, TABLES, arrow_schema

INT64_MAX = 2**63 - 1

DECISION: dict[str, Any] = {
    "schema": "ghost.decision/1",
    "seq": 3,
    "stamp_ns": 1_767_225_600_000_000_000,
    "decision_id": "019b76da-a800-7366-8bd6-29d07d04627d",
    "verdict": "deny",
    "reason": "no rule allows it",
    "matched_policy": None,
    "policy_id": "p",
    "policy_sha256": "a" * 64,
    "assessment_sha256": "b" * 64,
    "trace_id": "1" * 32,
    "span_id": "2" * 16,
    "trace_origin": "generated",
    "latency_ns": 5_000,
    "executed_args_sha256": None,
}


ASSESSMENT: dict[str, Any] = {
    "schema": "ghost.assessment/1",
    "stamp_ns": 1,
    "decision_id": "d",
}


def _row(record: dict[str, Any], topic: str = "/decisions") -> dict[str, object] | None:
    columns = {"/decisions": DECISIONS, "/assessments": ASSESSMENTS, "/approvals": APPROVALS}
    return record_row(topic, record, columns[topic], run_id="r", record_sha256="c" * 64)


def test_as_int_keeps_exactly_the_signed_64_bit_integers() -> None:
    assert as_int(INT64_MAX) == INT64_MAX
    assert as_int(-(2**63)) == -(2**63)
    assert as_int(INT64_MAX + 1) is None
    assert as_int(-(2**63) - 1) is None
    assert as_int(True) is None  # noqa: FBT003 - a bool is the point
    assert as_int(1.0) is None
    assert as_int(0) == 0


def test_as_text_refuses_what_utf_8_cannot_encode() -> None:
    assert as_text("é") == "é"
    assert as_text("\ud800") is None
    assert as_text(b"x") is None
    assert as_text("") == ""


def test_a_readable_decision_is_one_row_with_its_values() -> None:
    row = _row(DECISION)

    assert row is not None
    assert row["verdict"] == "deny"
    assert row["stamp"] == row["stamp_ns"] == DECISION["stamp_ns"]
    assert row["run_id"] == "r"
    assert row["record_sha256"] == "c" * 64
    assert row["schema_version"] == 2
    assert list(row) == [column.name for column in DECISIONS]


def test_a_decision_the_report_cannot_read_is_no_row() -> None:
    for field, value in [
        ("verdict", "allowed"),
        ("verdict", None),
        ("latency_ns", True),
        ("latency_ns", 2**63),
        ("stamp_ns", "1"),
        ("reason", 7),
        ("decision_id", "\udc00"),
    ]:
        assert _row({**DECISION, field: value}) is None, (field, value)
    missing = dict(DECISION)
    del missing["trace_id"]
    assert _row(missing) is None


def test_an_optional_field_of_the_wrong_type_becomes_null() -> None:
    row = _row({**DECISION, "matched_policy": 5, "span_id": ["x"], "seq": -1.5})

    assert row is not None
    assert (row["matched_policy"], row["span_id"], row["seq"]) == (None, None, None)


def test_an_approval_needs_an_outcome_ghost_writes() -> None:
    approval = {
        "schema": "ghost.approval/1",
        "stamp_ns": 1,
        "decision_id": "d",
        "outcome": "approved",
        "wait_ns": 3,
    }
    assert _row(approval, "/approvals") is not None
    assert _row({**approval, "outcome": "maybe"}, "/approvals") is None


def test_nested_lists_keep_their_shape_and_drop_what_is_not_an_object() -> None:
    assessment = {
        "schema": "ghost.assessment/1",
        "stamp_ns": 1,
        "decision_id": "d",
        "matched_rules": [{"id": "r", "effect": "allow"}, "junk", {"id": 3}],
        "findings": "not a list",
        "errors": ["e", 4],
        "stage_ns": {"policy": 10, "narrow": "x"},
    }
    row = _row(assessment, "/assessments")

    assert row is not None
    assert row["matched_rules"] == [{"id": "r", "effect": "allow"}, {"id": None, "effect": None}]
    assert row["findings"] is None
    assert row["errors"] == ["e", None]
    assert (row["stage_policy_ns"], row["stage_narrow_ns"], row["stage_scrub_ns"]) == (
        10,
        None,
        None,
    )


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    topic=st.sampled_from(["/decisions", "/assessments", "/approvals"]),
    changes=st.dictionaries(
        st.sampled_from(
            sorted({column.field.split(".")[0] for table in TABLES.values() for column in table})
        ),
        _JSON,
        max_size=6,
    ),
)
def test_any_record_gives_a_row_pyarrow_accepts_or_none(
    topic: str, changes: dict[str, Any]
) -> None:
    columns = {"/decisions": DECISIONS, "/assessments": ASSESSMENTS, "/approvals": APPROVALS}[topic]
    row = record_row(topic, {**DECISION, **changes}, columns, run_id=None, record_sha256="c" * 64)

    if row is None:
        return
    batch = pa.RecordBatch.from_pylist([row], schema=arrow_schema(pa, columns))
    assert batch.num_rows == 1
    for column in columns:
        if column.required:
            assert row[column.name] is not None


def test_an_assessments_shadow_is_four_columns_and_null_without_one() -> None:
    shadow: dict[str, Any] = {
        "mode": "candidate", "policy_id": "c", "policy_sha256": "b" * 64, "verdict": "deny",
        "matched_policy": "no-mail", "matched_rules": [], "executed_args_sha256": None,
        "error": None, "eval_ns": 5,
    }  # fmt: skip
    row = _row({**ASSESSMENT, "shadow": shadow}, "/assessments")
    assert row is not None
    assert (row["shadow_verdict"], row["shadow_matched_policy"]) == ("deny", "no-mail")
    assert (row["shadow_policy_sha256"], row["shadow_mode"]) == ("b" * 64, "candidate")
    forged = _row({**ASSESSMENT, "shadow": {**shadow, "verdict": "maybe"}}, "/assessments")
    assert forged is not None
    assert forged["shadow_verdict"] is None  # a closed vocabulary: not a verdict, not kept
    plain = _row(ASSESSMENT, "/assessments")
    assert plain is not None
    assert plain["shadow_verdict"] is plain["shadow_mode"] is None
