"""The bundled examples run as a user would run them, from a fresh directory, twice."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_embed_gate_example_runs_and_verifies_its_run(tmp_path: Path) -> None:
    script = tmp_path / "embed_gate.py"
    shutil.copy(ROOT / "examples" / "embed_gate.py", script)
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
        assert lines[0].startswith("allow   lookup: ran")
        assert lines[1].startswith("narrow  search: ran, 10 chars/items")
        assert lines[2].startswith("deny    delete: not run")
        assert lines[3] == "chain intact: True"
    assert (tmp_path / "runs" / "embed.mcap").is_file()
