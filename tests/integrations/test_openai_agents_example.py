"""``examples/openai_agents_gate.py``: offline, all five verdicts, a run that verifies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from analysis import verify_run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "openai_agents_gate.py"


def test_the_example_runs_offline_and_its_run_verifies(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    verdicts = sorted(line.split()[-1] for line in lines if line.startswith("  decision "))
    assert verdicts == ["allow", "deny", "narrow", "pending", "pending", "scrub"]
    assert any(line.endswith("approved by alice") for line in lines)
    assert any(line.endswith("rejected by ops") for line in lines)
    assert "AKIAIOSFODNN7EXAMPLE" not in done.stdout.split("what the model saw")[1]
    assert verify_run(tmp_path / "runs" / "openai_agents.mcap").ok
