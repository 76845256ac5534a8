"""Review of issue 9's MCP gateway: what the child prints that is not a message.

The issue asks that the proxy "not write anything to its stdout except
protocol messages". A server that prints a banner or a debug line on stdout
-- common, and what the MCP stdio transport forbids the server -- must not
put that text into the client's protocol stream through the proxy: each
child line is parsed, and what is not one JSON-RPC object is dropped with a
``ghost.mcp_server_noise_dropped`` warning.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from audit import MemoryAuditSink
from runtime import Gate, Policy
from runtime.integrations.mcp import McpGateway
from tests.integrations._mcp_support import SERVER

# The test server, after a banner on stdout.
_NOISY = (
    "import runpy, sys\n"
    "print('test server starting', flush=True)\n"
    "sys.argv = [sys.argv[1]]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def test_a_servers_non_protocol_output_never_reaches_the_client(tmp_path: Path) -> None:
    async def scenario() -> list[bytes]:
        lines: list[bytes] = []
        answered = asyncio.Event()

        async def to_client(data: bytes) -> None:
            lines.extend(data.splitlines())
            answered.set()

        reader = asyncio.StreamReader()
        policy = Policy.from_dict({"policy_id": "p", "default": "deny", "rules": []})
        gateway = McpGateway(Gate(policy, sink=MemoryAuditSink()), server_name="x")
        serving = asyncio.create_task(
            gateway.serve(
                [sys.executable, "-c", _NOISY, str(SERVER)],
                reader,
                to_client,
                env={**os.environ, "GHOST_TEST_MCP_LOG": str(tmp_path / "server.jsonl")},
            )
        )
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        reader.feed_data(json.dumps(ping).encode() + b"\n")
        for _ in range(600):
            if any(b'"id":1' in line for line in lines):
                break
            answered.clear()
            await asyncio.wait_for(answered.wait(), 60)
        reader.feed_eof()
        await asyncio.wait_for(serving, 60)
        return lines

    lines = asyncio.run(scenario())
    assert any(b'"id":1' in line for line in lines), "the ping went unanswered"
    assert not any(b"test server starting" in line for line in lines)
    for line in lines:
        assert isinstance(json.loads(line), dict), line  # every line a protocol message
