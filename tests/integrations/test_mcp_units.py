"""The gateway's pure parts, in process: the action convention, trace headers, the wire."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit import MemoryAuditSink
from runtime import Gate, Policy, RuntimeVerdict
from runtime.integrations._mcp_call import trace_headers
from runtime.integrations._mcp_wire import MalformedMessage, encode, parse, read_line, tool_refusal
from runtime.integrations.mcp import (
    CLIENT_INFO_META_KEY,
    DEFAULT_AGENT,
    McpGateway,
    McpToolCall,
    mcp_action,
)


def _call(params: object, agent: str | None = None, init: str | None = None) -> McpToolCall:
    return McpToolCall.from_params(params, agent=agent, initialize_client=init, server_name="srv")


def test_agent_precedence_flag_then_meta_then_initialize_then_default() -> None:
    meta = {"_meta": {CLIENT_INFO_META_KEY: {"name": "from-meta"}}, "name": "t"}
    assert _call(meta, agent="flag", init="init").agent == "flag"
    assert _call(meta, init="init").agent == "from-meta"
    assert _call({"name": "t"}, init="init").agent == "init"
    assert _call({"name": "t"}).agent == DEFAULT_AGENT


@pytest.mark.parametrize("info", [{"version": "1"}, "mallory", 7, None])
def test_a_malformed_client_info_is_not_absent(info: object) -> None:
    agent = _call({"_meta": {CLIENT_INFO_META_KEY: info}, "name": "t"}, init="init").agent
    assert not isinstance(agent, str) or agent == "mallory"
    assert agent != "init"


def test_the_action_follows_the_convention() -> None:
    action = mcp_action(_call({"name": "read", "arguments": {"p": 1}}))
    assert (action.verb, action.resource, dict(action.args)) == ("read", "mcp:srv", {"p": 1})
    assert _call({"name": "t", "arguments": None}).arguments == {}
    assert _call({"name": "t"}).arguments == {}
    assert _call([1, 2]).arguments == [1, 2]  # not an object: the gate denies it
    assert _call([1, 2]).name is None
    unnamed = McpToolCall.from_params(
        {"name": "t"}, agent=None, initialize_client=None, server_name=None
    )
    assert mcp_action(unnamed).resource is None


@pytest.mark.parametrize(
    "params",
    [
        {"name": "t", "arguments": [1]},
        {"name": "t", "arguments": "x"},
        {"name": 5, "arguments": {}},
        {"name": "t\x00", "arguments": {}},
        {"name": "t", "_meta": {CLIENT_INFO_META_KEY: {"name": 3}}},
        "params",
    ],
)
def test_every_malformed_call_the_gate_sees_is_denied_and_recorded(params: object) -> None:
    sink = MemoryAuditSink()
    policy = Policy.from_dict({"policy_id": "p", "default": "allow"})
    gate = Gate(policy, sink=sink)
    decision = gate.check(mcp_action(_call(params)))
    assert decision.verdict is RuntimeVerdict.DENY
    recorded = [d["decision_id"] for d in sink.records("/decisions")]
    assert recorded == [decision.decision_id]


def test_trace_headers_pass_strings_and_spoil_the_rest() -> None:
    assert trace_headers({"traceparent": "a", "tracestate": "b"}) == ("a", "b")
    assert trace_headers({}) == (None, None)
    spoiled = trace_headers({"traceparent": 5, "tracestate": ["x"]})
    assert all(isinstance(h, str) and h for h in spoiled)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_encode_then_parse_is_the_identity(value: Any) -> None:
    line = encode(value)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1  # one message, one line, whatever the strings hold
    assert parse(line) == value


@pytest.mark.parametrize(
    "line", [b"NaN", b'{"a": Infinity}', b"\xff\xfe", b"{", b"[" * 50_000, b"1" * 5000]
)
def test_parse_refuses_what_is_not_strict_json(line: bytes) -> None:
    with pytest.raises(MalformedMessage):
        parse(line)


def test_a_lone_surrogate_is_sent_escaped() -> None:
    line = encode({"s": "\ud800"})
    assert line == b'{"s":"\\ud800"}\n'
    assert json.loads(line) == {"s": "\ud800"}


def test_the_refusal_is_an_error_tool_result() -> None:
    result = tool_refusal(3, "no")["result"]
    assert result == {
        "content": [{"type": "text", "text": "no"}],
        "isError": True,
        "resultType": "complete",
    }


def test_read_line_skips_an_over_long_line_and_goes_on() -> None:
    async def lines() -> list[bytes | None]:
        reader = asyncio.StreamReader(limit=16)
        reader.feed_data(b"short\n" + b"x" * 100 + b"\nnext\nlast")
        reader.feed_eof()
        out: list[bytes | None] = []
        while True:
            try:
                out.append(await read_line(reader))
            except EOFError:
                return out

    assert asyncio.run(lines()) == [b"short\n", None, b"next\n", b"last"]


@pytest.mark.parametrize(
    "kwargs",
    [{"discover_timeout_s": 0}, {"discover_timeout_s": float("nan")}, {"max_message_bytes": 0}],
)
def test_the_gateway_refuses_bad_settings(kwargs: dict[str, Any]) -> None:
    gate = Gate(Policy.from_dict({"policy_id": "p"}), sink=MemoryAuditSink())
    with pytest.raises(ValueError, match="must be positive"):
        McpGateway(gate, **kwargs)
