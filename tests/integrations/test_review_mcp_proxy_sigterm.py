"""Review of issue 9's ``ghost mcp-proxy``: SIGTERM while the client is not reading.

A client that stops reading its stdout fills the pipe, and the proxy's write
to it blocks for good. SIGTERM must still end the proxy with 143 and a sealed
run ("130 / 143: stopped by SIGINT / SIGTERM; the run is sealed"): the write
runs in a daemon thread of its own that nothing joins, so cancelling the
session stops waiting for it (a write in the loop's default executor would be
joined by ``asyncio.run`` at exit, with no timeout on Python 3.11).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.integrations._mcp_support import proxy_command, verify, write_policy

_EXIT_WAIT_S = 20  # a healthy SIGTERM takes a few seconds (the server's stop grace)


def test_sigterm_seals_the_run_even_when_the_client_stopped_reading(tmp_path: Path) -> None:
    policy = write_policy(tmp_path)
    run = tmp_path / "run.mcap"
    read_end, write_end = os.pipe()  # the proxy's stdout, which this client never reads
    proxy = subprocess.Popen(
        proxy_command(policy, run, "--server-name", "ghost-test-server"),
        stdin=subprocess.PIPE,
        stdout=write_end,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    try:
        assert proxy.stdin is not None
        # Far more answers than a pipe holds: the proxy's writes to the client block.
        ping = {"jsonrpc": "2.0", "id": "x" * 2000, "method": "ping"}
        for _ in range(200):
            proxy.stdin.write(json.dumps(ping).encode() + b"\n")
        proxy.stdin.flush()
        time.sleep(3)
        proxy.send_signal(signal.SIGTERM)
        try:
            code = proxy.wait(timeout=_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            code = None
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait()
        if proxy.stdin is not None:
            proxy.stdin.close()
        os.close(read_end)
    assert code == 128 + signal.SIGTERM
    assert verify(run).returncode == 0
