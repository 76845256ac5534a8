"""Shadowed runs, real MCAP files: they verify, and the analyzer counts the shadow exactly."""

from __future__ import annotations

import dataclasses
import io
import random
from collections import Counter
from pathlib import Path
from types import MappingProxyType

import pytest

from analysis import (
    build_decision_trace_report,
    decode_decision_trace_report_from_json,
    encode_decision_trace_report_to_bytes,
    verify_run,
)
from analysis._run_facts import RunEnd, read_facts
from analysis._summary import summarize, summary_document
from analysis._summary_render import render_summary
from analysis._trace_model import SHADOW_IDS_PER_PAIR
from analysis._verify_links import PolicyAttachmentCheck
from audit import TOPICS, LoggedAttachment, LoggedRecord, McapAuditSink, read_run
from runtime import Action, AuditError, Gate, Policy, ShadowPolicy, canonical_bytes, sha256_hex
from tests.records import make_run_start
from tests.runtime.conftest import POLICY

# Every report built here is also streamed and compared byte for byte (tests/analysis/streamed.py).
pytestmark = pytest.mark.usefixtures("streamed_trace_checked")

ENFORCED = Policy.from_dict(POLICY)
# The candidate denies all mail and every refund, and holds search for approval.
CANDIDATE = Policy.from_dict(
    {
        "policy_id": "candidate",
        "default": "allow",
        "rules": [
            {"id": "no-mail", "verbs": ["send"], "effect": "deny"},
            {"id": "no-refunds", "verbs": ["refund"], "effect": "deny"},
            {"id": "hold-search", "verbs": ["search"], "effect": "approval"},
        ],
    }
)
ACTIONS = [
    Action("bot", "send", "mail:team", {"body": "hi"}),
    Action("bot", "refund", "payments:stripe", {"amount": 10}),
    Action("bot", "search", "tool:search", {"q": "x"}),
    Action("bot", "delete", "file:/x", {}),
    Action("bot", "read", "file:/data/public/a", {"path": "/data/public/a"}),
]


def _run(path: Path, actions: list[Action], *, shadow: Policy | None = CANDIDATE) -> list[str]:
    with McapAuditSink(path) as sink:
        gate = Gate(ENFORCED, sink=sink, shadow=shadow)
        return [gate.check(action).verdict.value for action in actions]


def test_a_shadowed_run_verifies_intact_with_the_candidate_attached(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    _run(path, ACTIONS)

    verification = verify_run(path)
    assert verification.status == "intact", [str(p) for p in verification.problems]
    run = read_run(path)
    (first, *_) = run.records
    assert first.record is not None
    assert first.record["shadow"] == {
        "policy_id": "candidate",
        "policy_sha256": CANDIDATE.policy_sha256,
        "policy_source_sha256": CANDIDATE.source_sha256,
    }
    attached = {attachment.sha256: attachment.data for attachment in run.attachments}
    assert attached == {
        ENFORCED.source_sha256: ENFORCED.source,
        CANDIDATE.source_sha256: CANDIDATE.source,
    }


def test_a_candidate_with_the_policys_own_source_is_attached_once(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    _run(path, ACTIONS, shadow=Policy.from_dict(POLICY))

    assert verify_run(path).status == "intact"
    assert len(read_run(path).attachments) == 1


def test_a_run_without_a_shadow_has_no_shadow_keys(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    _run(path, ACTIONS, shadow=None)

    run = read_run(path)
    assert all(
        logged.record is not None and "shadow" not in logged.record for logged in run.records
    )
    report = build_decision_trace_report(path)
    assert report.shadow_decision_count == 0
    assert report.shadow_disagreement_counts == {}
    assert verify_run(path).status == "intact"


def test_the_analyzer_counts_exactly_the_disagreements(tmp_path: Path) -> None:
    rng = random.Random(11)
    actions = [rng.choice(ACTIONS) for _ in range(60)]
    path = tmp_path / "run.mcap"
    _run(path, actions)
    # The truth, from the records themselves.
    run = read_run(path)
    shadows = {
        r.record["decision_id"]: r.record["shadow"]
        for r in run.records
        if r.topic == "/assessments" and r.record is not None
    }
    verdicts = [
        (r.record["decision_id"], r.record["verdict"])
        for r in run.records
        if r.topic == "/decisions" and r.record is not None
    ]
    pairs: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    ids: dict[str, list[str]] = {}
    for decision_id, verdict in verdicts:
        shadow = shadows[decision_id]
        if shadow["verdict"] != verdict:
            pair = f"{verdict} -> {shadow['verdict']}"
            pairs[pair] += 1
            ids.setdefault(pair, []).append(decision_id)
            if shadow["matched_policy"] is not None:
                rules[shadow["matched_policy"]] += 1
    assert pairs["scrub -> deny"] + pairs["allow -> deny"] > 0  # the run has disagreements

    report = build_decision_trace_report(path)

    assert report.shadow_decision_count == len(verdicts) == 60
    assert report.shadow_disagreement_counts == pairs
    assert report.shadow_disagreements_by_rule == rules
    assert dict(report.shadow_disagreement_ids) == {
        pair: tuple(listed[:SHADOW_IDS_PER_PAIR]) for pair, listed in ids.items()
    }
    # The JSON report carries it all, and reads back to the same report.
    data = encode_decision_trace_report_to_bytes(report)
    assert decode_decision_trace_report_from_json(data) == report
    assert b'"shadow_disagreement_counts"' in data

    summary = summarize(report, verify_run(path))
    document = summary_document(summary)
    assert document["shadow"]["decisions"] == 60
    assert {
        f"{d['enforced']} -> {d['shadow']}": d["count"] for d in document["shadow"]["disagreements"]
    } == pairs
    allowed_denied = [
        d for d in summary.shadow_disagreements if (d.enforced, d.shadow) == ("allow", "deny")
    ]
    for disagreement in allowed_denied:
        assert disagreement.sentence == (
            f"the shadow would have denied {disagreement.count} actions the enforced policy allowed"
        )


def test_a_tampered_report_of_disagreements_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    _run(path, ACTIONS)
    data = encode_decision_trace_report_to_bytes(build_decision_trace_report(path))

    forged = data.replace(b'"shadow_decision_count": 5', b'"shadow_decision_count": 4')

    assert forged != data
    with pytest.raises(ValueError, match="shadow_decision_count disagrees"):
        decode_decision_trace_report_from_json(forged)


# --- the attachment check, on crafted /run records ------------------------------------------


def _facts(record: dict[str, object]) -> object:
    full = {"seq": 0, "prev_sha256": None, **record}
    data = canonical_bytes(full)
    logged = LoggedRecord(
        topic="/run",
        log_time_ns=1,
        sequence=0,
        data=data,
        sha256=sha256_hex(data),
        record=MappingProxyType(full),
        problem=None,
        publish_time_ns=1,
        channel_id=1,
        offset=0,
        offset_in_chunk=None,
    )
    return read_facts(0, logged, TOPICS)[0]


def _attached(data: bytes, log_time: int = 1) -> LoggedAttachment:
    return LoggedAttachment(
        name="x", media_type="application/toml", log_time_ns=log_time, data=data,
        sha256=sha256_hex(data), create_time_ns=log_time, offset=0,
    )  # fmt: skip


def _problems(shadow_source: bytes, *attachments: LoggedAttachment) -> list[str]:
    check = PolicyAttachmentCheck()
    record = {
        "schema": "ghost.run/1",
        "stamp_ns": 1,
        "policy_source_sha256": sha256_hex(b"policy"),
        "shadow": {"policy_source_sha256": sha256_hex(shadow_source)},
    }
    list(check.visit(_facts(record)))  # type: ignore[arg-type]
    end = RunEnd(record_count=1, truncated=False, sealed=True, attachments=attachments)
    return [problem.message for problem in check.finish(end)]


def test_the_shadow_attachment_is_held_to_the_policys_rules() -> None:
    policy, candidate = _attached(b"policy"), _attached(b"candidate")
    assert _problems(b"candidate", policy, candidate) == []
    assert _problems(b"policy", policy) == []  # the same bytes: one attachment serves both
    (missing,) = _problems(b"candidate", policy)
    assert missing.startswith("no attachment holds the shadow policy source it names")
    (twice,) = _problems(b"candidate", policy, candidate, candidate)
    assert twice == "its shadow policy source is attached 2 times; a sink attaches it once"
    (late,) = _problems(b"candidate", policy, _attached(b"candidate", log_time=2))
    assert "its shadow policy attachment has MCAP log_time 2" in late
    (other,) = _problems(b"candidate", policy, candidate, _attached(b"notes"))
    assert other.startswith("an attachment that is not the run's policy source")


def test_a_shadow_source_that_is_not_what_it_claims_cannot_open_a_run(tmp_path: Path) -> None:
    bad = ShadowPolicy(
        policy_id="c", policy_sha256="0" * 64, source=b"candidate", source_name="c.toml",
        source_media_type="application/toml", source_sha256=sha256_hex(b"other"),
    )  # fmt: skip
    with (
        McapAuditSink(tmp_path / "run.mcap") as sink,
        pytest.raises(AuditError, match=r"shadow\.source_sha256"),
    ):
        sink.open_run(dataclasses.replace(make_run_start(), shadow=bad))


def test_ghost_summary_prints_one_sentence_per_disagreement(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    verdicts = _run(path, ACTIONS)
    summary = summarize(build_decision_trace_report(path), verify_run(path))
    out = io.StringIO()

    render_summary(summary, name="run.mcap", file=out, terminal=False, color=False)

    text = out.getvalue()
    differing = sum(d.count for d in summary.shadow_disagreements)
    assert differing > 0
    assert f"shadow: {len(verdicts)} decision(s) shadowed; {differing} would have" in text
    for disagreement in summary.shadow_disagreements:
        assert f"  {disagreement.sentence}: {disagreement.decision_ids[0]}" in text
    assert "the shadow would have denied 2 actions the enforced policy allowed: " in text
    assert "no-mail" in text  # the shadow rules table
