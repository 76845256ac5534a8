"""`gate_tool`: a LangChain tool that gates each call of the tool it wraps, sync and async."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId, ToolException, tool
from langgraph.prebuilt import InjectedState, ToolNode
from langgraph.types import Command

from audit import McapAuditSink
from runtime.integrations.langchain import ToolGate, gate_tool
from runtime.testing import ManualClock
from tests.integrations.langgraph_run import (
    AWS_KEY,
    Tools,
    assert_intact,
    build_agent,
    call,
    make_gate,
    turns,
)

CONFIG: dict[str, Any] = {"configurable": {"thread_id": "t1"}}


def test_the_wrapped_tool_keeps_the_name_description_and_schema_the_model_sees(
    tmp_path: Path,
) -> None:
    tools = Tools()
    with McapAuditSink(tmp_path / "run.mcap") as sink:
        inner = tools.all()[1]
        gated = gate_tool(make_gate(sink), inner, agent="shop")
    assert gated.name == inner.name == "search"
    assert gated.description == inner.description
    assert gated.tool_call_schema.model_json_schema() == inner.tool_call_schema.model_json_schema()


def test_a_tool_call_input_gets_every_verdict_as_langchain_tool_results(tmp_path: Path) -> None:
    tools = Tools()
    out = tmp_path / "run.mcap"
    with McapAuditSink(out) as sink:
        tool_gate = ToolGate(make_gate(sink), agent="shop")
        lookup, search, note, _, delete = (tool_gate.tool(t) for t in tools.all())
        allowed = lookup.invoke(call("lookup", {"term": "t"}, "c1"))
        narrowed = search.invoke(call("search", {"query": "q", "max_results": 50}, "c2"))
        scrubbed = note.invoke(call("note", {"text": f"k {AWS_KEY}"}, "c3"))
        denied = delete.invoke(call("delete", {"path": "/"}, "c4"))
    assert isinstance(allowed, ToolMessage)
    assert allowed.content == "definition of t"
    assert narrowed.content == "10 results for q"
    assert scrubbed.status == "success"
    assert isinstance(denied, ToolMessage)
    assert denied.status == "error"
    assert denied.tool_call_id == "c4"
    assert denied.name == "delete"
    assert denied.artifact["ghost_decision_id"] in str(denied.content)
    assert [name for name, _ in tools.received] == ["lookup", "search", "note"]
    assert tools.received[1][1]["max_results"] == 10
    assert AWS_KEY not in tools.received[2][1]["text"]
    assert_intact(out)


def test_plain_arguments_run_with_the_effective_args_and_a_denial_raises_tool_exception(
    tmp_path: Path,
) -> None:
    tools = Tools()
    with McapAuditSink(tmp_path / "run.mcap") as sink:
        tool_gate = ToolGate(make_gate(sink), agent="shop")
        _, search, _, _, delete = (tool_gate.tool(t) for t in tools.all())
        assert search.invoke({"query": "q", "max_results": 50}) == "10 results for q"
        with pytest.raises(ToolException, match="no rule matched"):
            delete.invoke({"path": "/"})
        # BaseTool.run, a direct call, goes through the gate too.
        assert search.run({"query": "r", "max_results": 70}) == "10 results for r"
        with pytest.raises(ToolException, match="no rule matched"):
            delete.run({"path": "/"})
    assert tools.received == [
        ("search", {"query": "q", "max_results": 10}),
        ("search", {"query": "r", "max_results": 10}),
    ]


def test_the_async_path_gates_and_runs_with_the_effective_args(tmp_path: Path) -> None:
    tools = Tools()

    async def run() -> tuple[Any, Any]:
        with McapAuditSink(tmp_path / "run.mcap") as sink:
            tool_gate = ToolGate(make_gate(sink), agent="shop")
            _, search, _, _, delete = (tool_gate.tool(t) for t in tools.all())
            narrowed = await search.ainvoke(call("search", {"query": "q", "max_results": 50}, "a"))
            denied = await delete.ainvoke(call("delete", {"path": "/"}, "b"))
            return narrowed, denied

    narrowed, denied = asyncio.run(run())
    assert narrowed.content == "10 results for q"
    assert denied.status == "error"
    assert tools.received == [("search", {"query": "q", "max_results": 10})]
    assert_intact(tmp_path / "run.mcap")


def test_gated_tools_in_a_plain_tool_node_interrupt_and_resume(tmp_path: Path) -> None:
    tools = Tools()
    with McapAuditSink(tmp_path / "run.mcap") as sink:
        tool_gate = ToolGate(make_gate(sink), agent="shop")
        node = ToolNode([tool_gate.tool(t) for t in tools.all()])
        script = turns(
            [call("refund", {"order": "A", "amount": 3}, "c1"), call("delete", {"p": 1}, "c2")]
        )
        agent = build_agent(node, tools, script)
        shown = agent.start()["__interrupt__"][0].value
        assert shown["tool"] == "refund"
        agent.graph.invoke(Command(resume={"approved": True, "approver": "bob"}), CONFIG)
        assert tool_gate.gate.approvals.pending() == ()
    assert tools.received == [("refund", {"order": "A", "amount": 3})]
    assert_intact(tmp_path / "run.mcap")


def test_injected_arguments_reach_the_tool_but_are_not_judged(tmp_path: Path) -> None:
    got: list[tuple[str, str, int]] = []

    @tool
    def lookup(
        term: str,
        state: Annotated[dict[str, Any], InjectedState],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> str:
        """Look a term up."""
        got.append((term, tool_call_id, len(state["messages"])))
        return "ok"

    with McapAuditSink(tmp_path / "run.mcap") as sink:
        tool_gate = ToolGate(make_gate(sink), agent="shop")
        node = ToolNode([tool_gate.tool(lookup)])
        agent = build_agent(node, Tools(), turns([call("lookup", {"term": "x"}, "c1")]))
        agent.start()
    # The state object is not plain data: judged, it would have been a deny.
    assert got == [("x", "c1", 2)]


def test_outside_a_graph_pending_waits_for_a_resolution_through_ghost(tmp_path: Path) -> None:
    tools = Tools()
    with McapAuditSink(tmp_path / "run.mcap") as sink:
        gate = make_gate(sink, approval_poll_s=0.01)
        refund = gate_tool(gate, tools.all()[3], agent="shop")
        results: list[Any] = []
        waiter = threading.Thread(
            target=lambda: results.append(
                refund.invoke(call("refund", {"order": "Z", "amount": 1}, "c"))
            ),
        )
        waiter.start()
        for _ in range(2000):
            pending = gate.approvals.pending()
            if pending:
                break
            threading.Event().wait(0.005)
        (held,) = pending
        gate.approvals.resolve(held.decision_id, approved=True, approver="alice")
        waiter.join(timeout=30)
        assert not waiter.is_alive()
    assert results[0].content == "refunded 1 on Z"
    assert tools.received == [("refund", {"order": "Z", "amount": 1})]
    assert_intact(tmp_path / "run.mcap")


def test_outside_a_graph_pending_expires_at_the_rules_timeout_and_nothing_runs(
    tmp_path: Path,
) -> None:
    tools = Tools()
    clock = ManualClock()

    with McapAuditSink(tmp_path / "run.mcap") as sink:
        gate = make_gate(sink, clock, approval_poll_s=0.01)
        tool_gate = ToolGate(gate, agent="shop")
        results: list[Any] = []
        refund = tool_gate.tool(tools.all()[3])
        waiter = threading.Thread(
            target=lambda: results.append(
                refund.invoke(call("refund", {"order": "Z", "amount": 1}, "c"))
            ),
        )
        waiter.start()
        for _ in range(2000):
            if gate.approvals.store.pending():
                break
            threading.Event().wait(0.005)
        clock.advance(61 * 1_000_000_000)
        waiter.join(timeout=30)
        assert not waiter.is_alive()
    message = results[0]
    assert message.status == "error"
    assert "expired" in str(message.content)
    assert tools.received == []
    assert_intact(tmp_path / "run.mcap")


def test_outside_a_graph_the_wait_is_bounded_by_wait_timeout_s(tmp_path: Path) -> None:
    tools = Tools()
    with McapAuditSink(tmp_path / "run.mcap") as sink:
        gate = make_gate(sink, approval_poll_s=0.01)
        tool_gate = ToolGate(gate, agent="shop", wait_timeout_s=0.05)
        with pytest.raises(TimeoutError):
            tool_gate.tool(tools.all()[3]).invoke({"order": "Z", "amount": 1})
        assert len(gate.approvals.pending()) == 1  # it stays pending
    assert tools.received == []


def test_an_async_wait_outside_a_graph_is_resolved_from_another_thread(tmp_path: Path) -> None:
    tools = Tools()

    async def run() -> Any:
        with McapAuditSink(tmp_path / "run.mcap") as sink:
            gate = make_gate(sink, approval_poll_s=0.01)
            refund = gate_tool(gate, tools.all()[3], agent="shop")

            def approve() -> None:
                for _ in range(2000):
                    pending = gate.approvals.pending()
                    if pending:
                        gate.approvals.resolve(
                            pending[0].decision_id, approved=False, approver="bob"
                        )
                        return
                    threading.Event().wait(0.005)

            resolver = threading.Thread(target=approve)
            resolver.start()
            result = await refund.ainvoke(call("refund", {"order": "Z", "amount": 1}, "c"))
            resolver.join(timeout=30)
            return result

    message = asyncio.run(run())
    assert message.status == "error"
    assert "rejected by bob" in str(message.content)
    assert tools.received == []
