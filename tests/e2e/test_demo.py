"""`ghost demo` end to end, as a real subprocess: all five verdicts, every chain verified."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from analysis import (
    build_decision_trace_report,
    decode_decision_trace_report_from_json,
    verify_decision_chain,
)
from audit import read_run


def test_demo_writes_a_verified_run_with_every_verdict(tmp_path: Path) -> None:
    out = tmp_path / "runs" / "demo.mcap"
    result = subprocess.run(
        [sys.executable, "-m", "analysis", "demo", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr

    report = build_decision_trace_report(out)
    assert set(report.per_decision_kind_counts) == {"allow", "narrow", "scrub", "pending", "deny"}
    assert report.total_decisions >= 24
    assert report.verified_count == report.total_decisions
    assert verify_decision_chain(out) == (True, ())
    assert not report.truncated
    # A human approved one held call, rejected one, and let one expire; none is left.
    assert report.per_approval_outcome_counts == {"approved": 1, "rejected": 1, "expired": 1}
    assert report.unresolved_pending_decision_ids == ()
    assert "approved by alice: refunded 480 EUR" in result.stdout
    assert "rejected by bob: not run" in result.stdout
    assert "expired: not run" in result.stdout
    verified = subprocess.run(
        [sys.executable, "-m", "analysis", "verify", "--mcap", str(out)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout
    # The page it points to is made by the command it prints.
    (hint,) = [line for line in result.stdout.splitlines() if line.startswith("see it:")]
    command = hint.removeprefix("see it:").split("(")[0].split()
    assert command[:2] == ["ghost", "report"]
    page = subprocess.run(
        [sys.executable, "-m", "analysis", *command[1:]], capture_output=True, timeout=120
    )
    assert page.returncode == 0, page.stderr
    assert b"the run is INTACT" in page.stderr
    assert out.with_suffix(".html").read_bytes().startswith(b"<!DOCTYPE html>")

    # The report printed and saved is the one built from the file.
    saved = decode_decision_trace_report_from_json(out.with_suffix(".trace.json").read_bytes())
    assert saved == report
    assert f"decisions: {report.total_decisions}" in result.stdout
    assert f"verified={report.total_decisions} broken=0" in result.stdout

    # The run is sealed and carries its policy source.
    run = read_run(out)
    topics = [r.topic for r in run.records]
    assert topics[0] == "/run"
    assert topics[-1] == "/seal"
    assert [a.name for a in run.attachments] == ["demo_policy.toml"]


def test_demo_output_holds_no_raw_secret(tmp_path: Path) -> None:
    out = tmp_path / "demo.mcap"
    result = subprocess.run(
        [sys.executable, "-m", "analysis", "demo", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    logged = out.read_bytes() + result.stdout.encode() + result.stderr.encode()
    # The demo script sends these; the default durability writes uncompressed bytes.
    for secret in (b"AKIAIOSFODNN7EXAMPLE", b"4111 1111 1111 1111", b"BEGIN RSA PRIVATE KEY"):
        assert secret not in logged
