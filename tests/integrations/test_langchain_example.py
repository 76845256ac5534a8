"""examples/langgraph_gate.py runs as a user runs it: offline, in a fresh directory, twice."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from analysis import RunStatus, verify_run

ROOT = Path(__file__).parents[2]


def test_the_langgraph_example_hits_every_verdict_and_its_run_verifies(tmp_path: Path) -> None:
    script = tmp_path / "langgraph_gate.py"
    shutil.copy(ROOT / "examples" / "langgraph_gate.py", script)
    for _ in range(2):  # a second run replaces the example's own scratch log explicitly
        result = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        lines = result.stdout.splitlines()
        assert lines[0].startswith("pending refund: held for approval by rule 'refunds'")
        assert "'amount': 30" in lines[0]
        assert lines[1] == "success lookup: definition of idempotent"
        assert lines[2] == "success search: 10 results for mcap"  # narrowed from 500
        assert lines[3].startswith("success note: noted: the key is [REDACTED:")
        assert "AKIA" not in result.stdout
        assert lines[4].startswith("error   delete: ghost denied this tool call: no rule matched")
        assert lines[5] == "success refund: refunded 30 on A-1001"
        assert lines[-1] == "run verifies: True"
    run = verify_run(tmp_path / "runs" / "langgraph.mcap")
    assert run.status is RunStatus.INTACT
    assert run.per_topic_counts.get("/approvals") == 1
