"""`ghost trace-decisions` names the decisions a budget or rate denied, by rule (ADR 0032)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from audit import McapAuditSink
from runtime import Action, Gate, Policy
from runtime.testing import ManualClock

POLICY = {
    "policy_id": "rates",
    "rules": [
        {"id": "mail-rate", "verbs": ["send"], "effect": "deny",
         "limit": {"key": "agent", "window_s": 60, "max_count": 2}},
        {"id": "never", "verbs": ["delete"], "effect": "deny"},
        {"id": "mail", "verbs": ["send"], "effect": "allow"},
    ],
}  # fmt: skip


def _ghost(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "analysis", *args],
        capture_output=True, text=True, env=env, check=False, timeout=300,
    )  # fmt: skip


def test_trace_decisions_counts_limit_denials_by_rule(tmp_path: Path) -> None:
    run = tmp_path / "run.mcap"
    with McapAuditSink(run) as sink:
        gate = Gate(Policy.from_dict(POLICY), sink=sink, clock=ManualClock())
        for _ in range(5):
            gate.check(Action(agent="m", verb="send", resource="mail:x"))
        gate.check(Action(agent="m", verb="delete", resource="x"))
    result = _ghost("trace-decisions", "--mcap", str(run))
    assert result.returncode == 0, result.stderr
    assert "ghost: 3 decisions denied over a limit: mail-rate 3\n" in result.stderr
    kinds = [r["decision_kind"] for r in json.loads(result.stdout)["records"]]
    assert kinds == ["allow", "allow", "deny", "deny", "deny", "deny"]


def test_trace_decisions_says_nothing_of_limits_without_them(tmp_path: Path) -> None:
    run = tmp_path / "run.mcap"
    with McapAuditSink(run) as sink:
        gate = Gate(Policy.from_dict(POLICY), sink=sink, clock=ManualClock())
        gate.check(Action(agent="m", verb="delete", resource="x"))
    result = _ghost("trace-decisions", "--mcap", str(run))
    assert result.returncode == 0, result.stderr
    assert "limit" not in result.stderr
