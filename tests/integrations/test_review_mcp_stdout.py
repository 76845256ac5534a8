"""Review of issue 9's MCP gateway: the proxy's stdout carries protocol messages only.

`McpGateway.serve_stdio` points descriptor 1 at stderr for the session, but
what host code printed during it (an action override, a span exporter, a
library) waited in ``sys.stdout``'s buffer -- block-buffered, as it is when
an MCP client starts the process on a pipe -- and was flushed at exit, after
descriptor 1 was restored: into the protocol stream.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.integrations._mcp_support import SERVER

_HOST = """
import asyncio, sys
from audit import MemoryAuditSink
from runtime import Action, Gate, Policy
from runtime.integrations.mcp import McpGateway

def chatty(call):
    print("a library's chatter")  # no flush: it waits in sys.stdout's buffer
    return Action(call.agent, call.name, "mcp:x", call.arguments)

policy = Policy.from_dict({"policy_id": "p", "default": "deny", "rules": []})
gate = Gate(policy, sink=MemoryAuditSink())
gateway = McpGateway(gate, server_name="x", action_for=chatty)
asyncio.run(gateway.serve_stdio([sys.executable, sys.argv[1]]))
"""


def test_what_the_host_printed_during_the_session_never_reaches_stdout() -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "/a"}},
    }
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proxy = subprocess.Popen(
        [sys.executable, "-c", _HOST, str(SERVER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert proxy.stdin is not None
        assert proxy.stdout is not None
        proxy.stdin.write(json.dumps(call).encode() + b"\n")
        proxy.stdin.flush()
        first = proxy.stdout.readline()  # the answer, before the client leaves
        proxy.stdin.close()  # the client leaves: the session ends
        proxy.stdin = None  # so that communicate does not flush the closed pipe
        rest, err = proxy.communicate(timeout=120)
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait()
    assert proxy.returncode == 0, err.decode(errors="replace")[-2000:]
    assert json.loads(first)["id"] == 1
    assert rest == b""  # nothing after the session: the chatter is not in the protocol stream
    assert b"a library's chatter" in err  # it went where descriptor 1 pointed
