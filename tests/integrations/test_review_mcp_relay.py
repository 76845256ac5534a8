"""Review of issue 9's MCP gateway: hostile client lines that used to end the session.

A client line the relay could parse but not encode again (a number such as
``1e400``, which Python reads as infinity; nesting just under the parser's
limit, which the encoder, deeper in the stack, cannot follow) raised out of
the client pump: the session ended as if the client had left, every later
request went unanswered, and a permitted ``tools/call`` carrying such a value
was recorded but answered by nothing (a bare "Task exception was never
retrieved" traceback on stderr instead). Each such line must be answered and
the session must go on.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from audit import MemoryAuditSink
from runtime import Gate, Policy
from runtime.integrations._mcp_relay import Relay, RelaySettings
from runtime.integrations._mcp_wire import PARSE_ERROR, MalformedMessage, encode, parse

_POLICY = {
    "policy_id": "review-relay",
    "default": "deny",
    "rules": [{"id": "reads", "verbs": ["read_file"], "resources": ["mcp:srv"], "effect": "allow"}],
}
_LIMIT = 1 << 20


class _Ends:
    """The relay's two far ends, in memory: what reached the child, what reached the client."""

    def __init__(self) -> None:
        self.child: list[dict[str, Any]] = []
        self.client: list[dict[str, Any]] = []

    async def to_child(self, data: bytes) -> None:
        self.child.append(json.loads(data))

    async def to_client(self, data: bytes) -> None:
        self.client.append(json.loads(data))


async def _relay(lines: list[bytes], *, answers: int) -> tuple[_Ends, MemoryAuditSink]:
    """Pump ``lines`` through a relay (server named, so no probe) until ``answers`` came back."""
    sink = MemoryAuditSink()
    gate = Gate(Policy.from_dict(_POLICY), sink=sink)
    ends = _Ends()
    relay = Relay(RelaySettings(gate, None, "srv", None, 5.0), ends.to_child, ends.to_client)
    reader = asyncio.StreamReader(limit=_LIMIT)
    for line in lines:
        reader.feed_data(line + b"\n")
    reader.feed_eof()
    await relay.pump_client(reader, _LIMIT)  # must return, not raise
    for _ in range(6000):  # held tools/call tasks answer on their own time
        if len(ends.client) + len(ends.child) >= answers:
            break
        await asyncio.sleep(0.01)
    await relay.drain()
    return ends, sink


def _call(
    request_id: Any, *, tool: str = "read_file", path: str = "/a", meta_extra: str = ""
) -> bytes:
    meta = '{"io.modelcontextprotocol/protocolVersion":"2026-07-28"' + meta_extra + "}"
    params = f'{{"name":"{tool}","arguments":{{"path":"{path}"}},"_meta":{meta}}}'
    return f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call","params":{params}}}'.encode()


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1E999"])
def test_a_number_past_a_float_is_a_parse_error_not_infinity(number: str) -> None:
    with pytest.raises(MalformedMessage, match="out of range"):
        parse(f'{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":{number}}}}}'.encode())
    assert parse(b'{"x":1e308}') == {"x": 1e308}  # the largest finite floats still parse


def test_an_overflowing_number_is_answered_and_the_session_goes_on() -> None:
    lines = [
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":1e400}}',
        _call(2, meta_extra=',"x":1e400'),  # permitted by the policy, if it were read
        _call(3, path="/b"),
        b'{"jsonrpc":"2.0","id":4,"method":"ping"}',
    ]
    ends, sink = asyncio.run(_relay(lines, answers=4))
    errors = [m for m in ends.client if "error" in m]
    assert [m["error"]["code"] for m in errors] == [PARSE_ERROR, PARSE_ERROR]
    # What came after the bad lines still passed: the call judged and forwarded, the ping.
    by_id = {m["id"]: m for m in ends.child}  # the call waits on the gate's thread: any order
    assert sorted((i, m["method"]) for i, m in by_id.items()) == [(3, "tools/call"), (4, "ping")]
    assert by_id[3]["params"]["arguments"] == {"path": "/b"}
    # The overflowing call was never forwarded, and never decided (it was never read).
    assert len(sink.records("/decisions")) == 1


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_nesting_the_parser_follows_but_the_encoder_cannot_never_ends_the_session() -> None:
    # Around the interpreter's recursion limit some depth parses in the pump but cannot
    # be encoded again deeper in the stack; which one depends on the stack, so sweep them.
    depths = range(850, 1000, 3)
    lines: list[bytes] = []
    for depth in depths:
        nested = _nested(depth)
        ping = f'{{"jsonrpc":"2.0","id":"p{depth}","method":"ping","params":{{"x":{nested}}}}}'
        lines.append(ping.encode())
        # Deep ids: a permitted call (forwarded, or answered if it cannot be) and a
        # denied one (its refusal must still go out).
        lines.append(_call(nested))
        lines.append(_call(nested, tool="delete_file"))
    lines.append(b'{"jsonrpc":"2.0","id":"last","method":"ping"}')
    ends, sink = asyncio.run(_relay(lines, answers=len(lines)))
    # Every line got somewhere: forwarded to the child or answered to the client.
    assert len(ends.child) + len(ends.client) == len(lines)
    assert any(m.get("id") == "last" for m in ends.child)
    forwarded = [m for m in ends.child if m.get("method") == "tools/call"]
    assert all(m["params"]["name"] == "read_file" for m in forwarded)
    decided = sink.records("/decisions")
    assert len(forwarded) <= len([d for d in decided if d["verdict"] == "allow"])


def test_encode_names_a_message_it_cannot_encode() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(MalformedMessage, match="nested too deeply"):
        encode({"jsonrpc": "2.0", "id": 1, "result": deep})
