"""examples/mcp_gateway runs offline as its README line says, and shows every verdict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_the_mcp_gateway_example_runs_and_its_run_verifies(tmp_path: Path) -> None:
    run = tmp_path / "example.mcap"
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mcp_gateway" / "client.py"), str(run)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    out = result.stdout
    assert "tools: read_file, send_mail, transfer, delete_file" in out
    assert '"max_bytes": 1000' in out  # narrowed
    assert "[REDACTED:aws_access_key_id]" in out  # scrubbed
    assert "delete_file: isError=True ghost denied this tool call" in out
    assert "alice approved decision" in out
    assert "transfer: isError=False" in out
    assert f"{run}: intact" in out
