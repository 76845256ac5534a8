"""A server that refuses the legacy ``initialize`` is still named by the gateway's probe.

A 2026-only server answers a client's ``initialize`` with an error. The
gateway then asks ``server/discover`` itself; the first ``tools/call`` must
wait for that answer and be judged under the server's name, not denied
for want of one.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from audit import MemoryAuditSink
from runtime import Gate, Policy
from runtime.integrations.mcp import McpGateway

# A minimal line-oriented server: refuses initialize, names itself on server/discover.
_SERVER = r"""
import json, sys, time
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        reply = {"error": {"code": -32601, "message": "initialize is not supported"}}
    elif method == "server/discover":
        time.sleep(0.2)  # the answer comes after the call arrives
        reply = {"result": {"serverInfo": {"name": "modern", "version": "1"}}}
    elif method == "tools/call":
        reply = {"result": {"content": [{"type": "text", "text": "ran"}], "isError": False}}
    else:
        reply = {"result": {}}
    reply.update({"jsonrpc": "2.0", "id": message["id"]})
    print(json.dumps(reply), flush=True)
"""

_POLICY = {
    "policy_id": "p",
    "default": "deny",
    "rules": [{"id": "modern-tools", "resources": ["mcp:modern"], "effect": "allow"}],
}


def test_the_first_call_after_a_refused_initialize_waits_for_the_probe() -> None:
    async def scenario() -> dict[str, Any]:
        answers: dict[Any, dict[str, Any]] = {}
        arrived = asyncio.Event()

        async def to_client(data: bytes) -> None:
            for line in data.splitlines():
                message = json.loads(line)
                answers[message.get("id")] = message
            arrived.set()

        async def answer(key: Any) -> dict[str, Any]:
            while key not in answers:
                arrived.clear()
                await asyncio.wait_for(arrived.wait(), 30)
            return answers[key]

        reader = asyncio.StreamReader()
        sink = MemoryAuditSink()
        gateway = McpGateway(Gate(Policy.from_dict(_POLICY), sink=sink))
        serving = asyncio.create_task(
            gateway.serve([sys.executable, "-c", _SERVER], reader, to_client)
        )

        def send(message: dict[str, Any]) -> None:
            reader.feed_data(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

        send({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "c"}}})
        refused = await answer(1)
        assert "error" in refused  # the client sees the server's own refusal
        send({"id": 2, "method": "tools/call", "params": {"name": "t", "arguments": {}}})
        result = await answer(2)
        reader.feed_eof()
        await asyncio.wait_for(serving, 30)
        return {"result": result, "decisions": sink.records("/decisions")}

    got = asyncio.run(scenario())
    assert got["result"]["result"]["isError"] is False
    (decision,) = got["decisions"]
    assert decision["verdict"] == "allow"
    assert decision["matched_policy"] == "modern-tools"


# A sloppy server: a banner on stdout, then an answer strict JSON refuses (NaN).
_SLOPPY = r"""
import json, sys
print("sloppy server ready", flush=True)
for line in sys.stdin:
    message = json.loads(line)
    if "id" in message:
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"score": float("nan")}}
        print(json.dumps(reply), flush=True)
"""


def test_a_sloppy_answer_is_relayed_and_the_banner_is_not() -> None:
    async def scenario() -> list[bytes]:
        lines: list[bytes] = []
        arrived = asyncio.Event()

        async def to_client(data: bytes) -> None:
            lines.extend(data.splitlines())
            arrived.set()

        reader = asyncio.StreamReader()
        gateway = McpGateway(
            Gate(Policy.from_dict(_POLICY), sink=MemoryAuditSink()), server_name="sloppy"
        )
        serving = asyncio.create_task(
            gateway.serve([sys.executable, "-c", _SLOPPY], reader, to_client)
        )
        reader.feed_data(b'{"jsonrpc": "2.0", "id": 7, "method": "ping"}\n')
        while not any(b'"id": 7' in line for line in lines):
            arrived.clear()
            await asyncio.wait_for(arrived.wait(), 30)
        reader.feed_eof()
        await asyncio.wait_for(serving, 30)
        return lines

    lines = asyncio.run(scenario())
    # The server's own answer, unparsed by ghost's strict reader, reaches the client as sent;
    # the banner never does.
    assert lines == [b'{"jsonrpc": "2.0", "id": 7, "result": {"score": NaN}}']
