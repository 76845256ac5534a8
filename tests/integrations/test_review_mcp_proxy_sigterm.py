"""Review of issue 9's ``ghost mcp-proxy``: SIGTERM while the client is not reading.

The proxy writes to the client from a worker thread of the loop's default
executor (``asyncio.to_thread(_write_all, ...)``, blocking ``os.write``). A
client that stops reading its stdout fills the pipe; the write blocks in that
thread for good. SIGTERM then cancels the session as it should, but
``asyncio.run`` ends by joining the default executor's threads (no timeout on
Python 3.11), so the proxy never exits, the audit sink is never closed, and the
run is left unsealed once the process is killed -- where the documented
contract is "130 / 143: stopped by SIGINT / SIGTERM; the run is sealed".

A fix: write to the client without a thread that can be stuck -- make the
output descriptor non-blocking for the session and wait for it with
``loop.add_writer`` on EAGAIN (a cancellable await), restoring blocking mode
in ``_private_stdio``; or close the sink inside ``_serve`` before the loop
shuts down and exit with ``os._exit`` if a write is still stuck.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integrations._mcp_support import proxy_command, verify, write_policy

_EXIT_WAIT_S = 20  # a healthy SIGTERM takes a few seconds (the server's stop grace)


@pytest.mark.xfail(
    strict=True,
    reason="review issue 9: a client write blocked in a default-executor thread makes the"
    " proxy hang at exit after SIGTERM, and the run is never sealed",
)
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
