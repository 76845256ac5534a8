"""Gate → McapAuditSink → file bytes → reader: what is in a real run, and what is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import ChainStatus, build_decision_trace_report
from audit import McapAuditSink, read_run
from runtime import Action, Gate, Policy, RuntimeVerdict, content_address
from tests.runtime.conftest import POLICY

SECRETS = {
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "card": "4111 1111 1111 1111",
    "mail": "jane.doe@example.com",
}


@pytest.mark.parametrize("durability", ["process", "fsync", "chunk"])
def test_raw_secrets_are_in_neither_decision_args_nor_the_file(
    tmp_path: Path, durability: str
) -> None:
    out = tmp_path / "run.mcap"
    with McapAuditSink(out, durability=durability) as sink:  # type: ignore[arg-type]
        gate = Gate(Policy.from_dict(POLICY), sink=sink)
        decision = gate.check(
            Action(
                "mailer",
                "send",
                f"mail:{SECRETS['mail']}",
                {"body": f"key {SECRETS['aws']} card {SECRETS['card']}", "cc": SECRETS["mail"]},
            )
        )
    assert decision.verdict is RuntimeVerdict.SCRUB
    assert not any(s in repr(decision.args) for s in SECRETS.values())
    raw = out.read_bytes()
    messages = b"".join(r.data for r in read_run(out).records)  # decompressed in chunk mode
    for secret in SECRETS.values():
        assert secret.encode() not in raw
        assert secret.encode() not in messages


def test_every_decision_of_a_real_run_verifies(tmp_path: Path) -> None:
    out = tmp_path / "run.mcap"
    with McapAuditSink(out) as sink:
        gate = Gate(Policy.from_dict(POLICY), sink=sink)
        decisions = [
            gate.check(Action("bot", "search", "tool:search", {"q": "x"})),
            gate.check(Action("bot", "delete", "file:/x")),
            gate.check(Action("bot", "refund", "payments:x", {"amount": 100})),
        ]
    report = build_decision_trace_report(out)
    assert [r.decision_id for r in report.records] == [d.decision_id for d in decisions]
    assert all(r.chain_status is ChainStatus.VERIFIED for r in report.records)
    assert [r.decision_kind for r in report.records] == ["allow", "deny", "pending"]
    assert [r.latency_ns for r in report.records] == [d.latency_ns for d in decisions]
    # The content addresses the gate handed out are those of the bytes in the file.
    run = read_run(out)
    by_topic = {r.topic: r for r in run.records if r.topic == "/decisions"}
    assert by_topic["/decisions"].sha256 == decisions[-1].decision_sha256
    assert by_topic["/decisions"].record is not None
    assert content_address(by_topic["/decisions"].record) == decisions[-1].decision_sha256
