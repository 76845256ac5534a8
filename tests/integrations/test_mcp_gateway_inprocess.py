"""`McpGateway.serve` in process (the real test server as its child): overrides, audit
failures, cancellation, the legacy handshake."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from audit import McapAuditSink
from runtime import Action, Gate, Policy
from runtime.integrations.mcp import GatewayEnd, GatewayResult, McpGateway, McpToolCall
from tests.integrations._mcp_support import SERVER, decisions, received, verify

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
POLICY = {
    "policy_id": "inprocess",
    "default": "deny",
    "rules": [
        {
            "id": "public-reads",
            "verbs": ["read_file"],
            "resources": ["file:/public/**"],
            "effect": "allow",
        },
        {
            "id": "reads",
            "verbs": ["read_file"],
            "resources": ["mcp:ghost-test-server"],
            "effect": "allow",
        },
        {
            "id": "transfers",
            "verbs": ["transfer"],
            "resources": ["mcp:*"],
            "effect": "approval",
            "approval": {"timeout_s": 600},
        },
    ],
}


class Client:
    """The client's side of one in-process session."""

    def __init__(self) -> None:
        self.reader = asyncio.StreamReader()
        self.out: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.early: dict[str, dict[str, Any]] = {}  # answers that came before they were asked for

    async def write(self, data: bytes) -> None:
        for line in data.splitlines():
            await self.out.put(json.loads(line))

    def send(self, message: dict[str, Any]) -> None:
        self.reader.feed_data(json.dumps(message).encode() + b"\n")

    def call(self, request_id: int, name: str, arguments: Any, **meta: Any) -> None:
        params = {"name": name, "arguments": arguments, "_meta": {**META, **meta}}
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})

    async def answer(self, request_id: Any) -> dict[str, Any]:
        key = json.dumps(request_id)
        while key not in self.early:
            message = await asyncio.wait_for(self.out.get(), 60)
            self.early[json.dumps(message.get("id"))] = message
        return self.early.pop(key)


@asynccontextmanager
async def session(
    tmp_path: Path, gateway_for: Callable[[Gate], McpGateway], result: list[GatewayResult]
) -> AsyncIterator[tuple[Client, McapAuditSink]]:
    sink = McapAuditSink(tmp_path / "run.mcap")
    gateway = gateway_for(Gate(Policy.from_dict(POLICY), sink=sink))
    client = Client()
    serving = asyncio.create_task(
        gateway.serve(
            [sys.executable, str(SERVER)],
            client.reader,
            client.write,
            env={**os.environ, "GHOST_TEST_MCP_LOG": str(tmp_path / "server.jsonl")},
        )
    )
    try:
        yield client, sink
    finally:
        client.reader.feed_eof()
        result.append(await asyncio.wait_for(serving, 60))
        sink.close()


def test_an_override_judges_a_finer_resource_and_its_failure_denies(tmp_path: Path) -> None:
    def by_path(call: McpToolCall) -> Action:
        path = call.arguments["path"]
        if path == "boom":
            raise KeyError("not a secret")
        return Action(call.agent, call.name, f"file:{path}", call.arguments)

    async def scenario() -> list[dict[str, Any]]:
        done: list[GatewayResult] = []
        async with session(tmp_path, lambda g: McpGateway(g, action_for=by_path), done) as (c, _):
            c.call(1, "read_file", {"path": "/public/a"})
            c.call(2, "read_file", {"path": "/private/b"})
            c.call(3, "read_file", {"path": "boom"})
            answers = [await c.answer(i) for i in (1, 2, 3)]
        assert done[0].end is GatewayEnd.CLIENT_CLOSED
        return answers

    allowed, denied, failed = asyncio.run(scenario())
    assert allowed["result"]["isError"] is False
    assert denied["result"]["isError"] is True
    assert failed["result"]["isError"] is True
    recorded = decisions(tmp_path / "run.mcap")
    # Each tools/call is its own task: the log holds them in the order they were decided.
    judged = {d["resource"]: d["verdict"] for d in recorded if d["verb"] == "read_file"}
    assert judged == {"file:/public/a": "allow", "file:/private/b": "deny"}
    (failure,) = [d for d in recorded if d["verb"] == "action override raised KeyError"]
    assert failure["verdict"] == "deny"
    assert [e["args"]["path"] for e in received(tmp_path / "server.jsonl")] == ["/public/a"]
    assert verify(tmp_path / "run.mcap").returncode == 0


def test_an_unrecordable_decision_is_an_error_and_never_forwarded(tmp_path: Path) -> None:
    async def scenario() -> tuple[dict[str, Any], list[GatewayResult]]:
        done: list[GatewayResult] = []
        async with session(tmp_path, McpGateway, done) as (client, sink):
            sink.close()  # every later record fails: AuditError
            client.call(1, "read_file", {"path": "/a"})
            answer = await client.answer(1)
        return answer, done

    answer, done = asyncio.run(scenario())
    assert answer["error"]["code"] == -32603
    assert "not forwarded" in answer["error"]["message"]
    assert "result" not in answer
    assert received(tmp_path / "server.jsonl") == []
    assert done[0].audit_failures == 1


def test_a_cancelled_held_call_is_never_forwarded_and_others_go_on(tmp_path: Path) -> None:
    async def scenario() -> dict[str, Any]:
        done: list[GatewayResult] = []
        async with session(tmp_path, McpGateway, done) as (client, sink):
            before = sink.record_count
            client.call(1, "transfer", {"amount": 1, "to": "x"})
            while sink.record_count < before + 2:  # its assessment and its pending decision
                await asyncio.sleep(0.02)
            client.send(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
            )
            client.call(2, "read_file", {"path": "/a"})
            return await client.answer(2)

    answer = asyncio.run(scenario())
    assert answer["result"]["isError"] is False
    assert [e["tool"] for e in received(tmp_path / "server.jsonl")] == ["read_file"]
    assert verify(tmp_path / "run.mcap").returncode == 0


def test_the_legacy_handshake_names_the_agent_and_the_server(tmp_path: Path) -> None:
    async def scenario() -> dict[str, Any]:
        done: list[GatewayResult] = []
        async with session(tmp_path, McpGateway, done) as (client, _):
            client.send(
                {
                    "jsonrpc": "2.0",
                    "id": "init",
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "legacy-client", "version": "1"},
                    },
                }
            )
            init = await client.answer("init")
            client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            params = {"name": "read_file", "arguments": {"path": "/a"}}
            client.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
            await client.answer(1)
            return init

    init = asyncio.run(scenario())
    assert init["result"]["serverInfo"]["name"] == "ghost-test-server"
    (decision,) = decisions(tmp_path / "run.mcap")
    assert decision["agent"] == "legacy-client"
    assert decision["resource"] == "mcp:ghost-test-server"
    assert decision["verdict"] == "allow"


@pytest.mark.parametrize("command", [[], ["/no/such/mcp-server"]])
def test_a_command_that_cannot_start_raises(tmp_path: Path, command: list[str]) -> None:
    from runtime.integrations.mcp import McpServerStartError

    async def scenario() -> None:
        sink = McapAuditSink(tmp_path / "run.mcap")
        gateway = McpGateway(Gate(Policy.from_dict(POLICY), sink=sink))
        try:
            await gateway.serve(command, asyncio.StreamReader(), Client().write)
        finally:
            sink.close()

    with pytest.raises(McpServerStartError, match="cannot start the MCP server"):
        asyncio.run(scenario())
