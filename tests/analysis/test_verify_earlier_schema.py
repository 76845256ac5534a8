"""Runs made before a schema gained an optional field still verify (ADRs 0031, 0032).

A file made before the assessment schema gained ``limits`` and ``shadow`` carries the earlier
schema's bytes on its ``/assessments`` channel. The verifier accepts exactly
those bytes (and the current ones) for that name; any other bytes are still
an altered schema.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import audit._mcap_sink as mcap_sink
from analysis import verify_run
from audit import McapAuditSink
from audit._schemas import schema_data, schema_versions
from runtime import Action, Gate, Policy

POLICY = {"policy_id": "p", "rules": [{"id": "all", "effect": "allow"}]}


def _write(path: Path, assessment_bytes: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    def data(name: str) -> bytes:
        return assessment_bytes if name == "ghost.assessment/1" else schema_data(name)

    monkeypatch.setattr(mcap_sink, "schema_data", data)
    with McapAuditSink(path) as sink:
        gate = Gate(Policy.from_dict(POLICY), sink=sink)
        gate.check(Action(agent="a", verb="v", resource="r"))


def test_a_run_carrying_the_earlier_assessment_schema_is_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    current, earlier = schema_versions("ghost.assessment/1")
    assert current == schema_data("ghost.assessment/1")
    assert earlier != current
    assert b"limits" not in earlier
    assert b"shadow" not in earlier
    path = tmp_path / "old.mcap"
    _write(path, earlier, monkeypatch)
    result = verify_run(path)
    assert result.status.value == "intact", result.problems


def test_other_bytes_under_the_name_are_still_an_altered_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "altered.mcap"
    _write(path, schema_data("ghost.assessment/1").replace(b"limits", b"limitz"), monkeypatch)
    result = verify_run(path)
    assert result.status.value == "tampered"
    assert any("does not carry that ghost schema" in p.message for p in result.problems)
