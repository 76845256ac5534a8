"""Review of issue 9's OpenAI Agents SDK adapter: an SDK rejection of another tool's call.

The run config's tool error formatter resolves a held ghost decision as
``rejected`` when the SDK reports an ``approval_rejected`` for it. When the
reported (tool name, call id) is not one ghost holds, it falls back to any held
call with the same call id (for a namespaced tool, whose name comes qualified):
so the SDK's rejection of a *different* tool's call -- an ungated tool, another
agent's, one the host's own ``needs_approval`` guards -- that happens to share
the call id (the model chooses call ids) records a rejection, by the configured
approver, of the ghost-held call nobody rejected, and drops ghost's hold on it.
Fail closed (the held call then waits for ghost again), but the approval
record was wrong. The fallback now takes only a qualified form of the held
tool's name (``namespace.name``, the SDK's `tool_qualified_name`), never the
call id alone.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Agent, RunContextWrapper, Runner
from agents.run_config import ToolErrorFormatterArgs
from agents.testing import ScriptedModel, assistant_message, function_call

from audit import MemoryAuditSink
from runtime import Gate
from runtime.integrations.openai_agents import ToolGate
from tests.integrations.openai_agents_kit import (
    Tools,
    make_agent,
    make_policy,
    offline,  # noqa: F401 - the autouse fixture, imported to apply here
)


def test_another_tools_rejection_with_the_same_call_id_leaves_the_held_call_alone() -> None:
    sink = MemoryAuditSink()
    gate = Gate(make_policy(), sink=sink)
    guard = ToolGate(gate, approver="alice")
    model = ScriptedModel(
        [
            [function_call("send", {"to": "bob", "body": "x"}, call_id="c1")],
            [assistant_message("done")],
        ]
    )
    agent: Agent[Any] = guard.agent(make_agent(model, Tools()))
    first = asyncio.run(Runner.run(agent, "go", run_config=guard.run_config()))
    held = guard.decision("c1", "send")
    assert held is not None
    assert first.interruptions  # ghost holds send/c1

    formatter = guard.run_config().tool_error_formatter
    assert formatter is not None
    other = ToolErrorFormatterArgs(
        kind="approval_rejected",
        tool_type="function",
        tool_name="shell",  # a different tool whose own approval was refused in the SDK
        call_id="c1",
        default_message="rejected",
        run_context=RunContextWrapper(context=None),
    )
    asyncio.run(formatter(other))  # type: ignore[arg-type]
    assert list(sink.records("/approvals")) == []  # nobody resolved send/c1
    assert guard.decision("c1", "send") is not None  # still held by ghost


def test_a_namespaced_name_still_finds_its_held_call() -> None:
    sink = MemoryAuditSink()
    gate = Gate(make_policy(), sink=sink)
    guard = ToolGate(gate, approver="alice")
    model = ScriptedModel(
        [
            [function_call("send", {"to": "bob", "body": "x"}, call_id="c1")],
            [assistant_message("done")],
        ]
    )
    agent: Agent[Any] = guard.agent(make_agent(model, Tools()))
    asyncio.run(Runner.run(agent, "go", run_config=guard.run_config()))
    formatter = guard.run_config().tool_error_formatter
    assert formatter is not None
    qualified = ToolErrorFormatterArgs(
        kind="approval_rejected",
        tool_type="function",
        tool_name="mail.send",  # the SDK's namespace.name
        call_id="c1",
        default_message="rejected",
        run_context=RunContextWrapper(context=None),
    )
    text = asyncio.run(formatter(qualified))  # type: ignore[arg-type]
    assert [a["outcome"] for a in sink.records("/approvals")] == ["rejected"]
    assert text is not None
    assert "rejected" in text
    assert guard.decision("c1", "send") is None
