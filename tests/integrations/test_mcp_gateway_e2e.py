"""``ghost mcp-proxy`` end to end: the MCP SDK's own client, the proxy, a real MCP server.

Three real processes: this test's `mcp.Client` over stdio, ``python -m
analysis mcp-proxy`` (the console script's code), and the test server
(`mcp_server.py`) as the proxy's child. What the server's tools received is
read from the server's own log; what the client saw, from the SDK's parsed
results; what was decided, from the MCAP the proxy sealed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from runtime import Resolution, SqliteApprovalStore
from tests.integrations._mcp_support import (
    SECRET,
    SERVER,
    SERVER_NAME,
    TRACE_ID,
    TRACEPARENT,
    decisions,
    proxy_command,
    received,
    verify,
    write_policy,
)


def _params(command: list[str], log: Path) -> StdioServerParameters:
    env = {**os.environ, "GHOST_TEST_MCP_LOG": str(log)}
    return StdioServerParameters(command=command[0], args=command[1:], env=env)


def _text(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def _pending_ids(store_path: Path) -> list[str]:
    while True:
        with SqliteApprovalStore(store_path, create=False) as store:
            waiting = [pending.decision_id for pending in store.pending()]
        if waiting:
            return waiting
        await asyncio.sleep(0.05)


async def _session(tmp_path: Path) -> dict[str, Any]:
    """One client session through the proxy; returns what the client saw."""
    log = tmp_path / "server.jsonl"
    store = tmp_path / "approvals.sqlite"
    command = proxy_command(
        write_policy(tmp_path), tmp_path / "run.mcap", "--approvals-store", str(store)
    )
    seen: dict[str, Any] = {}
    with (tmp_path / "proxy.stderr").open("w") as errlog:
        async with Client(stdio_client(_params(command, log), errlog=errlog)) as client:
            seen["server_info"] = client.server_info
            seen["tools"] = (await client.list_tools()).tools
            seen["resource"] = await client.read_resource("notes://readme")
            seen["narrow"] = await client.call_tool(
                "read_file",
                {"path": "/data/q3.txt", "max_bytes": 10**6},
                meta={"traceparent": TRACEPARENT},
            )
            seen["allow"] = await client.call_tool(
                "send_mail", {"to": "ops@example.com", "body": "hello"}
            )
            seen["scrub"] = await client.call_tool(
                "send_mail", {"to": "ops@example.com", "body": f"the key is {SECRET}"}
            )
            seen["deny"] = await client.call_tool("delete_file", {"path": f"/keys/{SECRET}"})
            # A held call must not hold up the others: while it waits, another runs.
            held = asyncio.create_task(
                client.call_tool("transfer", {"amount": 250, "to": "acct-42"})
            )
            (decision_id,) = await _pending_ids(store)
            seen["during_hold"] = await client.call_tool("read_file", {"path": "/data/a.txt"})
            seen["held_done_early"] = held.done()
            with SqliteApprovalStore(store, create=False) as approvals:
                approvals.resolve(Resolution(decision_id, "approved", "alice", time.time_ns()))
            seen["approved"] = await held
            seen["pending_id"] = decision_id
    return seen


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp_path = tmp_path_factory.mktemp("mcp-gateway")
    return tmp_path, asyncio.run(_session(tmp_path))


def test_tools_list_is_the_servers_own(session: tuple[Path, dict[str, Any]]) -> None:
    tmp_path, seen = session

    async def direct() -> list[Any]:
        params = _params([sys.executable, str(SERVER)], tmp_path / "direct.jsonl")
        async with Client(params) as client:
            return (await client.list_tools()).tools

    assert [tool.model_dump() for tool in seen["tools"]] == [
        tool.model_dump() for tool in asyncio.run(direct())
    ]
    assert seen["server_info"].name == SERVER_NAME
    assert seen["resource"].contents[0].text == "resources pass through"


def test_each_verdict_reaches_the_server_as_decided(session: tuple[Path, dict[str, Any]]) -> None:
    tmp_path, seen = session
    got = received(tmp_path / "server.jsonl")
    assert [entry["tool"] for entry in got] == [
        "read_file",
        "send_mail",
        "send_mail",
        "read_file",
        "transfer",
    ]
    assert got[0]["args"] == {"path": "/data/q3.txt", "max_bytes": 1000}  # narrowed
    assert got[1]["args"] == {"to": "ops@example.com", "body": "hello"}  # allowed as sent
    assert SECRET not in got[2]["args"]["body"]  # scrubbed before it was forwarded
    assert got[2]["args"]["to"] == "ops@example.com"
    assert got[4]["args"] == {"amount": 250, "to": "acct-42"}  # approved, then run
    # What the client saw is the server's answer to exactly those arguments.
    assert seen["narrow"].structured_content["received"]["max_bytes"] == 1000
    assert seen["scrub"].structured_content["received"] == got[2]["args"]
    assert seen["approved"].is_error is False
    assert seen["held_done_early"] is False  # the read ran while the transfer was held


def test_a_denied_call_never_reaches_the_server(session: tuple[Path, dict[str, Any]]) -> None:
    tmp_path, seen = session
    deny = seen["deny"]
    assert deny.is_error is True
    (record,) = [d for d in decisions(tmp_path / "run.mcap") if d["verdict"] == "deny"]
    assert record["decision_id"] in _text(deny)
    assert record["reason"] in _text(deny)
    assert "delete_file" not in [entry["tool"] for entry in received(tmp_path / "server.jsonl")]


def test_the_run_records_every_call_by_the_convention_and_verifies(
    session: tuple[Path, dict[str, Any]],
) -> None:
    tmp_path, seen = session
    run = tmp_path / "run.mcap"
    result = verify(run)
    assert result.returncode == 0, result.stdout + result.stderr
    assert b"intact" in result.stdout
    recorded = decisions(run)
    assert [(d["verb"], d["verdict"]) for d in recorded] == [
        ("read_file", "narrow"),
        ("send_mail", "allow"),
        ("send_mail", "scrub"),
        ("delete_file", "deny"),
        ("transfer", "pending"),
        ("read_file", "allow"),
    ]
    assert {d["resource"] for d in recorded} == {f"mcp:{SERVER_NAME}"}
    assert {d["agent"] for d in recorded} == {"mcp"}  # the SDK client's own clientInfo name
    assert recorded[4]["decision_id"] == seen["pending_id"]
    # The _meta trace context is the decision's, and the forwarded call is its child.
    assert recorded[0]["trace_id"] == TRACE_ID
    got = received(tmp_path / "server.jsonl")
    assert got[0]["traceparent"].split("-")[1] == TRACE_ID
    assert got[0]["traceparent"].split("-")[2] == recorded[0]["span_id"]


def test_no_secret_reaches_the_log_or_stderr_raw(session: tuple[Path, dict[str, Any]]) -> None:
    tmp_path, _ = session
    assert SECRET.encode() not in (tmp_path / "run.mcap").read_bytes()
    assert SECRET not in (tmp_path / "proxy.stderr").read_text()
