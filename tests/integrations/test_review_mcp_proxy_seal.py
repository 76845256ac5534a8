"""Review of issue 9's ``ghost mcp-proxy``: a run that cannot be sealed is not exit 0.

The proxy closed its sink under ``contextlib.suppress(AuditError)``: when the
seal or the footer could not be written (a full disk), it exited 0 -- "the
client disconnected; the run is sealed" -- with a run `ghost verify` calls
truncated, and said nothing. The disk is made full for real here: a file-size
limit (RLIMIT_FSIZE, with SIGXFSZ ignored so that a write past it fails with
EFBIG) between the size of the opened run and that of the sealed one.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from audit import McapAuditSink
from runtime import Gate, Policy
from tests.integrations._mcp_support import proxy_command, verify, write_policy


def _sizes(policy: Path, run: Path) -> tuple[int, int]:
    """The size of a run the proxy's way opened, and once sealed (no call made)."""
    sink = McapAuditSink(run)
    Gate(Policy.from_toml(policy), sink=sink)
    opened = run.stat().st_size
    sink.close()
    return opened, run.stat().st_size


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_seal_that_cannot_be_written_exits_1_and_says_so(tmp_path: Path) -> None:
    policy = write_policy(tmp_path)
    opened, sealed = _sizes(policy, tmp_path / "probe.mcap")
    assert sealed - opened > 1000  # room for a limit between the two
    limit = (opened + sealed) // 2

    def full_disk() -> None:  # in the proxy's process, before it runs
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    run = tmp_path / "run.mcap"
    result = subprocess.run(
        proxy_command(policy, run, "--server-name", "ghost-test-server"),
        input=b"",  # the client leaves at once: the proxy seals and exits
        capture_output=True,
        timeout=120,
        check=False,
        preexec_fn=full_disk,  # a resource limit is set in the child, before it runs
    )
    stderr = result.stderr.decode(errors="replace")
    assert verify(run).returncode != 0  # the seal really could not be written
    assert result.returncode == 1, stderr
    assert "ghost: error: cannot seal the audit log" in stderr
    assert "Traceback" not in stderr
    assert result.stdout == b""
