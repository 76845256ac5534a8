"""A LangGraph interrupt answered by an operator's ``ghost approvals`` through a SQLite store.

The agent's gate keeps its approvals in a `SqliteApprovalStore`; while the
graph is interrupted, another process (the real CLI, in a fresh interpreter)
resolves the held decision. The host's resume then says the opposite, and the
operator's resolution -- the first -- is the one that stands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from analysis import verify_run
from audit import McapAuditSink
from runtime import SqliteApprovalStore
from runtime.integrations.langchain import ToolGate
from tests.e2e.test_cli import ghost
from tests.integrations.langgraph_run import (
    Tools,
    assert_intact,
    build_agent,
    call,
    make_gate,
    turns,
)

CONFIG: dict[str, Any] = {"configurable": {"thread_id": "t1"}}


@pytest.mark.parametrize(
    ("command", "operator", "resume", "runs"),
    [
        ("approve", "alice", False, True),
        ("reject", "bob", True, False),
    ],
)
def test_an_operators_resolution_during_the_interrupt_stands_on_resume(
    tmp_path: Path, command: str, operator: str, resume: bool, runs: bool
) -> None:
    store_path = tmp_path / "approvals.db"
    out = tmp_path / "run.mcap"
    tools = Tools()
    store = SqliteApprovalStore(store_path)
    with McapAuditSink(out) as sink:
        tool_gate = ToolGate(make_gate(sink, approvals=store, approval_poll_s=0.01), agent="shop")
        script = turns([call("refund", {"order": "A-1", "amount": 30}, "c-pending")])
        agent = build_agent(tool_gate.tool_node(tools.all()), tools, script)
        decision_id = agent.start()["__interrupt__"][0].value["decision_id"]

        result = ghost(
            "approvals",
            command,
            decision_id,
            "--store",
            store_path,
            "--approver",
            operator,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr

        agent.graph.invoke(Command(resume={"approved": resume, "approver": "alice"}), CONFIG)
    (message,) = [m for m in agent.seen[-1] if isinstance(m, ToolMessage)]
    if runs:
        assert tools.received == [("refund", {"order": "A-1", "amount": 30})]
        assert message.status == "success"
    else:
        assert tools.received == []
        assert f"rejected by {operator}" in str(message.content)
    assert_intact(out)
    # The operator's resolution is logged once, by the agent; the host's answer never was.
    assert verify_run(out).per_topic_counts.get("/approvals") == 1
