"""Valid records of every kind, as the gate emits them, for tests of every package."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audit import CrcStatus, Durability, McapAuditSink, ReadEnd
from runtime import RunStart, make_uuid7, sha256_hex
from runtime.testing import ManualClock

STAMP_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
POLICY_SOURCE = b'policy_id = "support-agent"\ndefault = "deny"\n\xc3\xa9 = "non-ascii kept"\n'
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"


def make_run_start(*, stamp_ns: int = STAMP_NS, source: bytes = POLICY_SOURCE) -> RunStart:
    """A gate's declaration of itself, with a consistent source hash."""
    return RunStart(
        policy_id="support-agent",
        policy_sha256="a" * 64,
        policy_source=source,
        policy_source_name="policy.toml",
        policy_source_media_type="application/toml",
        policy_source_sha256=sha256_hex(source),
        sdk_version="0.1.0",
        stamp_ns=stamp_ns,
    )


def assessment(decision_id: str, *, stamp_ns: int = STAMP_NS, **changes: Any) -> dict[str, Any]:
    """A ``ghost.assessment/1`` record without ``seq``/``prev_sha256``."""
    record: dict[str, Any] = {
        "schema": "ghost.assessment/1",
        "stamp_ns": stamp_ns,
        "decision_id": decision_id,
        "agent": "researcher",
        "verb": "read",
        "resource": "file:/data/q3.txt",
        "args_sha256": "b" * 64,
        "policy_id": "support-agent",
        "policy_sha256": "a" * 64,
        "matched_rules": [{"id": "read-public", "effect": "allow"}],
        "findings": [{"detector": "email", "path": "$.to", "fingerprint": "c" * 64}],
        "narrowings": [{"rule": "query-customers", "kind": "clamp", "path": "$.limit"}],
        "errors": [],
        "stage_ns": {"policy": 1200, "narrow": 300, "scrub": 4500},
        "trace_id": TRACE_ID,
        "span_id": SPAN_ID,
        "parent_span_id": None,
    }
    record.update(changes)
    return record


def decision(
    decision_id: str,
    assessment_sha256: str | None,
    *,
    stamp_ns: int = STAMP_NS,
    **changes: Any,
) -> dict[str, Any]:
    """A ``ghost.decision/1`` record without ``seq``/``prev_sha256``."""
    record: dict[str, Any] = {
        "schema": "ghost.decision/1",
        "stamp_ns": stamp_ns,
        "decision_id": decision_id,
        "verdict": "allow",
        "reason": "rule 'read-public' allows reading public files — café",
        "matched_policy": "read-public",
        "policy_id": "support-agent",
        "policy_sha256": "a" * 64,
        "assessment_sha256": assessment_sha256,
        "trace_id": TRACE_ID,
        "span_id": SPAN_ID,
        "trace_origin": "generated",
        "latency_ns": 52_000,
        "executed_args_sha256": "b" * 64,
    }
    record.update(changes)
    return record


def approval(
    decision_id: str, decision_sha256: str, *, stamp_ns: int = STAMP_NS, **changes: Any
) -> dict[str, Any]:
    """A ``ghost.approval/1`` record without ``seq``/``prev_sha256``."""
    record: dict[str, Any] = {
        "schema": "ghost.approval/1",
        "stamp_ns": stamp_ns,
        "decision_id": decision_id,
        "decision_sha256": decision_sha256,
        "outcome": "approved",
        "approver": "alice",
        "wait_ns": 3_000_000_000,
        "final_verdict": "allow",
        "executed_args_sha256": "b" * 64,
        "policy_sha256": "a" * 64,
        "decision_run_id": None,
        "expires_ns": stamp_ns + 600_000_000_000,
    }
    record.update(changes)
    return record


def append_decisions(sink: Any, count: int, *, start_ns: int = STAMP_NS) -> list[str]:
    """Append ``count`` assessment+decision pairs (and one approval); return the addresses."""
    addresses: list[str] = []
    for index in range(count):
        stamp = start_ns + (index + 1) * 1000
        decision_id = make_uuid7(stamp)
        a_sha = sink.append("/assessments", assessment(decision_id, stamp_ns=stamp))
        verdict = "pending" if index == 0 else "allow"
        d_sha = sink.append(
            "/decisions", decision(decision_id, a_sha, stamp_ns=stamp + 1, verdict=verdict)
        )
        addresses += [a_sha, d_sha]
        if index == 0:
            addresses.append(
                sink.append("/approvals", approval(decision_id, d_sha, stamp_ns=stamp + 2))
            )
    return addresses


def write_run(
    path: Path,
    *,
    decisions: int = 2,
    durability: Durability = "process",
    close: bool = True,
    **options: Any,
) -> McapAuditSink:
    """Write a small run to ``path``: /run, checkpoints, assessments, decisions, an approval, /seal.

    ``options`` go to `McapAuditSink` (``signing_key=``, ``checkpoint_every_records=``, ...).
    """
    # A clock that stands still unless told: a machine that stalls for a second mid-run
    # must not add a time-based checkpoint to a run whose layout a test pins.
    options.setdefault("clock", ManualClock())
    sink = McapAuditSink(path, durability=durability, **options)
    sink.open_run(make_run_start())
    append_decisions(sink, decisions)
    if close:
        sink.close()
    return sink


def write_tampered_run(directory: Path, *, decisions: int = 3) -> Path:
    """Write a sealed run and a copy whose pending decision now says allow; return the copy."""
    from tests.audit.mcap_tools import rewrite_mcap

    honest, edited = directory / "honest.mcap", directory / "edited.mcap"
    write_run(honest, decisions=decisions)

    def allow_the_pending_one(topic: str, data: bytes) -> bytes:
        if topic == "/decisions":
            return data.replace(b'"verdict":"pending"', b'"verdict":"allow"')
        return data

    rewrite_mcap(honest, edited, allow_the_pending_one)
    return edited


def read_end(*, source_sha256: str = "0" * 64, truncated: bool = False) -> ReadEnd:
    """A `ReadEnd` with these two fields (the only ones the trace reads), the rest empty."""
    return ReadEnd(
        path=Path("run.mcap"),
        source_sha256=source_sha256,
        size_bytes=0,
        truncated=truncated,
        footer=not truncated,
        data_end=not truncated,
        data_section_crc=CrcStatus.ABSENT,
        summary_crc=CrcStatus.ABSENT,
        has_summary=False,
        chunk_count=0,
        chunk_index_count=0,
        message_index_count=0,
        statistics_count=0,
        library=None,
        stopped=False,
    )
