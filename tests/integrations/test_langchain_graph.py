"""The LangChain adapter in a real LangGraph agent: a scripted model hits every verdict (SPEC §7).

Each test checks three things: what the tools received, what the model was
shown afterwards, and that the MCAP run verifies with every chain intact.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from analysis import verify_run
from audit import McapAuditSink
from runtime import RuntimeVerdict
from runtime.integrations.langchain import ToolGate, gated_tool_node
from runtime.testing import ManualClock
from tests.integrations.langgraph_run import (
    AWS_KEY,
    Agent,
    Tools,
    assert_intact,
    build_agent,
    call,
    make_gate,
    turns,
)

CONFIG: dict[str, Any] = {"configurable": {"thread_id": "t1"}}


def tool_messages(agent: Agent) -> dict[str, ToolMessage]:
    """The tool results the model was shown on its last turn, by tool call id."""
    return {m.tool_call_id: m for m in agent.seen[-1] if isinstance(m, ToolMessage)}


def decisions(path: Path) -> int:
    return verify_run(path).per_topic_counts.get("/decisions", 0)


def test_every_verdict_but_pending_reaches_the_model_as_langchain_tool_results(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run.mcap"
    tools = Tools()
    script = turns(
        [
            call("lookup", {"term": "idempotent"}, "c-allow"),
            call("search", {"query": "mcap", "max_results": 500}, "c-narrow"),
            call("note", {"text": f"key {AWS_KEY} for later"}, "c-scrub"),
            call("delete", {"path": "/"}, "c-deny"),
        ]
    )
    with McapAuditSink(out) as sink:
        gate = make_gate(sink)
        agent = build_agent(gated_tool_node(gate, tools.all(), agent="shop"), tools, script)
        final = agent.start()

    assert final["messages"][-1].content == "done"
    received = dict(tools.received)
    assert received["lookup"] == {"term": "idempotent"}
    assert received["search"] == {"query": "mcap", "max_results": 10}  # narrowed, not 500
    assert AWS_KEY not in received["note"]["text"]  # scrubbed before the tool saw it
    assert received["note"]["text"].startswith("key ")
    assert "delete" not in received  # denied: never ran
    shown = tool_messages(agent)
    assert shown["c-allow"].status == "success"
    assert shown["c-allow"].content == "definition of idempotent"
    assert shown["c-narrow"].content == "10 results for mcap"
    assert shown["c-deny"].status == "error"
    denial = str(shown["c-deny"].content)
    assert "no rule matched" in denial
    decision_id = shown["c-deny"].artifact["ghost_decision_id"]
    assert f"decision {decision_id}" in denial
    assert_intact(out)
    assert decisions(out) == 4


def held_agent(
    tmp_path: Path, clock: ManualClock | None = None, **gate_kwargs: Any
) -> tuple[Agent, ToolGate, McapAuditSink]:
    tools = Tools()
    sink = McapAuditSink(tmp_path / "run.mcap")
    gate = make_gate(sink, clock, **gate_kwargs)
    tool_gate = ToolGate(gate, agent="shop")
    script = turns([call("refund", {"order": "A-1", "amount": 30}, "c-pending")])
    return build_agent(tool_gate.tool_node(tools.all()), tools, script), tool_gate, sink


def test_pending_interrupts_with_what_is_held_and_an_approval_resume_runs_it(
    tmp_path: Path,
) -> None:
    agent, tool_gate, sink = held_agent(tmp_path)
    with sink:
        interrupted = agent.start()
        (held,) = interrupted["__interrupt__"]
        shown = held.value
        assert shown["tool"] == "refund"
        assert shown["args"] == {"order": "A-1", "amount": 30}
        assert "approval" in shown["reason"]
        assert tools_received(agent) == []  # nothing ran while it waits
        (pending,) = tool_gate.gate.approvals.pending()
        assert pending.decision_id == shown["decision_id"]

        final = agent.graph.invoke(Command(resume={"approved": True, "approver": "alice"}), CONFIG)

        assert tool_gate.gate.approvals.pending() == ()
        assert tool_gate.held_count == 0
    assert tools_received(agent) == [("refund", {"order": "A-1", "amount": 30})]
    assert final["messages"][-1].content == "done"
    assert tool_messages(agent)["c-pending"].content == "refunded 30 on A-1"
    assert_intact(tmp_path / "run.mcap")
    # One decision, whose approval was recorded: the re-run on resume asked no second time.
    assert decisions(tmp_path / "run.mcap") == 1
    assert verify_run(tmp_path / "run.mcap").per_topic_counts.get("/approvals") == 1


def tools_received(agent: Agent) -> list[tuple[str, dict[str, Any]]]:
    return agent.tools.received


def test_a_rejecting_resume_reaches_the_model_as_a_tool_error(tmp_path: Path) -> None:
    agent, _tool_gate, sink = held_agent(tmp_path)
    with sink:
        decision_id = agent.start()["__interrupt__"][0].value["decision_id"]
        agent.graph.invoke(Command(resume={"approved": False, "approver": "bob"}), CONFIG)
    assert tools_received(agent) == []
    message = tool_messages(agent)["c-pending"]
    assert message.status == "error"
    assert "rejected by bob" in str(message.content)
    assert decision_id in str(message.content)
    assert_intact(tmp_path / "run.mcap")
    assert decisions(tmp_path / "run.mcap") == 1


def test_a_resolution_through_ghost_during_the_interrupt_wins_over_the_resume(
    tmp_path: Path,
) -> None:
    agent, tool_gate, sink = held_agent(tmp_path)
    with sink:
        decision_id = agent.start()["__interrupt__"][0].value["decision_id"]
        tool_gate.gate.approvals.resolve(decision_id, approved=True, approver="alice")
        # The host resumes with a rejection; the first resolution (alice's) stands.
        agent.graph.invoke(Command(resume={"approved": False, "approver": "bob"}), CONFIG)
    assert tools_received(agent) == [("refund", {"order": "A-1", "amount": 30})]
    assert tool_messages(agent)["c-pending"].status == "success"
    assert_intact(tmp_path / "run.mcap")
    assert verify_run(tmp_path / "run.mcap").per_topic_counts.get("/approvals") == 1


def test_a_rejection_through_ghost_during_the_interrupt_wins_over_an_approving_resume(
    tmp_path: Path,
) -> None:
    agent, tool_gate, sink = held_agent(tmp_path)
    with sink:
        decision_id = agent.start()["__interrupt__"][0].value["decision_id"]
        tool_gate.gate.approvals.resolve(decision_id, approved=False, approver="bob")
        agent.graph.invoke(Command(resume={"approved": True, "approver": "alice"}), CONFIG)
    assert tools_received(agent) == []
    assert "rejected by bob" in str(tool_messages(agent)["c-pending"].content)
    assert_intact(tmp_path / "run.mcap")


def test_an_approval_resumed_after_the_rules_timeout_is_expired_and_nothing_runs(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    agent, _tool_gate, sink = held_agent(tmp_path, clock)
    with sink:
        decision_id = agent.start()["__interrupt__"][0].value["decision_id"]
        clock.advance(61 * 1_000_000_000)  # past the refunds rule's 60 s
        agent.graph.invoke(Command(resume={"approved": True, "approver": "alice"}), CONFIG)
    assert tools_received(agent) == []
    message = tool_messages(agent)["c-pending"]
    assert message.status == "error"
    assert "expired" in str(message.content)
    assert decision_id in str(message.content)
    assert_intact(tmp_path / "run.mcap")


@pytest.mark.parametrize(
    ("resume", "problem"),
    [
        ("yes", "not a mapping"),
        ({"approved": "true", "approver": "alice"}, "'approved' is not True or False"),
        ({"approved": 1, "approver": "alice"}, "'approved' is not True or False"),
        ({"approved": True, "approver": 7}, "approver is not a string"),
        ({"approved": True}, "names no approver"),
        ({"approved": True, "approver": "mallory"}, "mallory"),
    ],
)
def test_a_resume_that_is_no_valid_answer_runs_nothing_and_leaves_the_decision_pending(
    tmp_path: Path, resume: object, problem: str
) -> None:
    agent, tool_gate, sink = held_agent(tmp_path)
    with sink:
        decision_id = agent.start()["__interrupt__"][0].value["decision_id"]
        agent.graph.invoke(Command(resume=resume), CONFIG)
        assert [p.decision_id for p in tool_gate.gate.approvals.pending()] == [decision_id]
    assert tools_received(agent) == []
    message = tool_messages(agent)["c-pending"]
    assert message.status == "error"
    assert problem in str(message.content)
    assert f"decision {decision_id} stays pending" in str(message.content)


def test_the_configured_approver_answers_a_resume_that_names_none(tmp_path: Path) -> None:
    tools = Tools()
    with McapAuditSink(tmp_path / "run.mcap") as sink:
        tool_gate = ToolGate(make_gate(sink), agent="shop", approver="alice")
        script = turns([call("refund", {"order": "A-1", "amount": 30}, "c-pending")])
        agent = build_agent(tool_gate.tool_node(tools.all()), tools, script)
        agent.start()
        agent.graph.invoke(Command(resume={"approved": True}), CONFIG)
    assert tools.received == [("refund", {"order": "A-1", "amount": 30})]


def test_a_resume_naming_another_decision_is_not_taken_for_this_one(tmp_path: Path) -> None:
    agent, _tool_gate, sink = held_agent(tmp_path)
    with sink:
        decision_id = agent.start()["__interrupt__"][0].value["decision_id"]
        other = "0190a000-0000-7000-8000-000000000000"
        again = agent.graph.invoke(
            Command(resume={"approved": True, "approver": "alice", "decision_id": other}), CONFIG
        )
        # Asked again, for the same decision: no second pending decision was made.
        assert again["__interrupt__"][0].value["decision_id"] == decision_id
        assert tools_received(agent) == []
        agent.graph.invoke(
            Command(resume={"approved": True, "approver": "alice", "decision_id": decision_id}),
            CONFIG,
        )
    assert tools_received(agent) == [("refund", {"order": "A-1", "amount": 30})]
    assert decisions(tmp_path / "run.mcap") == 1


def test_invoking_an_interrupted_thread_again_reuses_the_held_decision(tmp_path: Path) -> None:
    agent, tool_gate, sink = held_agent(tmp_path)
    with sink:
        first = agent.start()["__interrupt__"][0].value["decision_id"]
        # Re-run the pending task without an answer (e.g. a stream reconnect).
        again = agent.graph.invoke(None, CONFIG)
        assert again["__interrupt__"][0].value["decision_id"] == first
        assert len(tool_gate.gate.approvals.pending()) == 1
    assert decisions(tmp_path / "run.mcap") == 1


def test_a_scrubbed_secret_never_reaches_the_interrupt_payload(tmp_path: Path) -> None:
    tools = Tools()
    with McapAuditSink(tmp_path / "run.mcap") as sink:
        tool_gate = ToolGate(make_gate(sink), agent="shop")
        script = turns([call("refund", {"order": f"A-1 {AWS_KEY}", "amount": 30}, "c-1")])
        agent = build_agent(tool_gate.tool_node(tools.all()), tools, script)
        shown = agent.start()["__interrupt__"][0].value
        assert AWS_KEY not in repr(shown)
        agent.graph.invoke(Command(resume={"approved": True, "approver": "alice"}), CONFIG)
    # What was approved is what ran: the scrubbed arguments.
    ((name, args),) = tools.received
    assert name == "refund"
    assert args["order"] == shown["args"]["order"]
    assert AWS_KEY not in args["order"]
    assert_intact(tmp_path / "run.mcap")


def test_the_default_agent_is_the_runs_lc_agent_name_else_langgraph(tmp_path: Path) -> None:
    tools = Tools()
    seen: list[str] = []
    with McapAuditSink(tmp_path / "run.mcap") as sink:
        gate = make_gate(sink)

        def override(tool_call: Any) -> Any:
            seen.append(tool_call.agent)
            from runtime.integrations import tool_action

            return tool_action(tool_call.agent, tool_call.tool_name, tool_call.args)

        node = gated_tool_node(gate, tools.all(), override=override)
        agent = build_agent(node, tools, turns([call("lookup", {"term": "x"}, "c-1")]))
        agent.graph.invoke(
            {"messages": []},
            {"configurable": {"thread_id": "a"}, "metadata": {"lc_agent_name": "planner"}},
        )
        agent2 = build_agent(node, tools, turns([call("lookup", {"term": "y"}, "c-2")]))
        agent2.start()
    assert seen == ["planner", "LangGraph"]


def test_async_graph_hits_the_verdicts_and_resumes(tmp_path: Path) -> None:
    import asyncio

    out = tmp_path / "run.mcap"
    tools = Tools()
    script = turns(
        [
            call("search", {"query": "q", "max_results": 99}, "c-narrow"),
            call("delete", {"path": "/etc"}, "c-deny"),
        ],
        [call("refund", {"order": "B-2", "amount": 5}, "c-pending")],
    )

    async def run() -> None:
        with McapAuditSink(out) as sink:
            gate = make_gate(sink)
            agent = build_agent(gated_tool_node(gate, tools.all(), agent="shop"), tools, script)
            first = await agent.graph.ainvoke({"messages": []}, CONFIG)
            assert first["__interrupt__"][0].value["tool"] == "refund"
            await agent.graph.ainvoke(
                Command(resume={"approved": True, "approver": "alice"}), CONFIG
            )
            shown = tool_messages(agent)
            assert shown["c-deny"].status == "error"
            assert shown["c-pending"].content == "refunded 5 on B-2"

    asyncio.run(run())
    assert tools.received == [
        ("search", {"query": "q", "max_results": 10}),
        ("refund", {"order": "B-2", "amount": 5}),
    ]
    assert_intact(out)
    assert decisions(out) == 3


def test_verdicts_are_what_the_policy_says(tmp_path: Path) -> None:
    # The adapter's action convention: agent, verb = tool name, resource tool:<name>.
    with McapAuditSink(tmp_path / "run.mcap") as sink:
        tool_gate = ToolGate(make_gate(sink), agent="shop")
        verdicts = {
            name: tool_gate.gate_call(name, args).decision.verdict
            for name, args in [
                ("lookup", {"term": "t"}),
                ("search", {"query": "q", "max_results": 11}),
                ("note", {"text": AWS_KEY}),
                ("delete", {"path": "/"}),
            ]
        }
    assert verdicts == {
        "lookup": RuntimeVerdict.ALLOW,
        "search": RuntimeVerdict.NARROW,
        "note": RuntimeVerdict.SCRUB,
        "delete": RuntimeVerdict.DENY,
    }


def parallel_refunds(tmp_path: Path) -> tuple[Agent, McapAuditSink]:
    tools = Tools()
    sink = McapAuditSink(tmp_path / "run.mcap")
    tool_gate = ToolGate(make_gate(sink), agent="shop")
    script = turns(
        [
            call("refund", {"order": "A", "amount": 30}, "c-a"),
            call("refund", {"order": "B", "amount": 5000}, "c-b"),
        ]
    )
    return build_agent(tool_gate.tool_node(tools.all()), tools, script), sink


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_parallel_held_calls_are_answered_by_decision_id_each_with_its_own_answer(
    tmp_path: Path, mode: str
) -> None:
    import asyncio

    agent, sink = parallel_refunds(tmp_path)

    def invoke(value: Any) -> dict[str, Any]:
        return asyncio.run(agent.graph.ainvoke(value, CONFIG))

    answered: dict[str, bool] = {}
    with sink:
        state = invoke({"messages": []})
        for _ in range(12):  # each round answers what is shown; bounded, so a bug still ends
            if "__interrupt__" not in state:
                break
            shown = state["__interrupt__"][0].value
            approve = shown["args"]["order"] == "A"
            answered[shown["decision_id"]] = approve
            answer = {"approved": approve, "approver": "alice", "decision_id": shown["decision_id"]}
            state = invoke(Command(resume=answer))
    assert "__interrupt__" not in state
    assert len(answered) == 2
    assert agent.tools.received == [("refund", {"order": "A", "amount": 30})]
    shown_results = tool_messages(agent)
    assert shown_results["c-a"].status == "success"
    assert "rejected by alice" in str(shown_results["c-b"].content)
    assert_intact(tmp_path / "run.mcap")
    assert decisions(tmp_path / "run.mcap") == 2


def test_a_plain_answer_never_runs_a_parallel_call_other_than_the_one_shown(
    tmp_path: Path,
) -> None:
    # LangGraph hands a plain resume value to whichever interrupt of the task comes
    # first on the re-run; parallel tool calls make that order a race. Approving what
    # shows A must never run B.
    agent, sink = parallel_refunds(tmp_path)
    with sink:
        state = agent.start()
        for _ in range(6):
            if "__interrupt__" not in state:
                break
            shown = state["__interrupt__"][0].value
            approve = shown["args"]["order"] == "A"
            state = agent.graph.invoke(
                Command(resume={"approved": approve, "approver": "alice"}), CONFIG
            )
    assert ("refund", {"order": "B", "amount": 5000}) not in agent.tools.received


class _RefundAWaitsForRelease(Tools):
    """Refund A says when it has started, then blocks until the test releases it."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self.release = threading.Event()

    def refund(self, order: str, amount: int) -> str:
        if order == "A":
            self.started.set()
            # Bounded, so the failure this test guards against shows as A running twice
            # instead of hanging the suite.
            self.release.wait(timeout=20)
        return super().refund(order, amount)


class _SaverThatEndsARunLate(InMemorySaver):
    """Holds back the write of an interrupt until ``wait_for`` is set (when armed).

    LangGraph ends a run on an interrupt only after writing it: holding that write
    until refund A's tool has started makes "the run ends while A runs" certain
    instead of a matter of scheduling.
    """

    wait_for: threading.Event | None = None

    async def aput_writes(
        self, config: Any, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        armed = self.wait_for
        if armed is not None and any(channel == "__interrupt__" for channel, _ in writes):
            await asyncio.to_thread(armed.wait, 20)
        await super().aput_writes(config, writes, task_id, task_path)


def test_an_approved_async_call_still_running_when_its_graph_run_ends_runs_once(
    tmp_path: Path,
) -> None:
    # A and B are held; A is answered first, so the re-run runs A while B interrupts
    # again, and that graph run (its own asyncio.run) ends while A's tool is running.
    # Tearing the loop down must not cut A off: its outcome would be lost and the next
    # run would run it a second time (or a cancellation before the tool thread started
    # would run it never).
    tools = _RefundAWaitsForRelease()
    saver = _SaverThatEndsARunLate()
    sink = McapAuditSink(tmp_path / "run.mcap")
    tool_gate = ToolGate(make_gate(sink), agent="shop")
    script = turns(
        [
            call("refund", {"order": "A", "amount": 30}, "c-a"),
            call("refund", {"order": "B", "amount": 5000}, "c-b"),
        ]
    )
    agent = build_agent(tool_gate.tool_node(tools.all()), tools, script, checkpointer=saver)

    def invoke(value: Any) -> dict[str, Any]:
        return asyncio.run(agent.graph.ainvoke(value, CONFIG))

    def resume(decision_id: str, *, approved: bool) -> Command[Any]:
        return Command(
            resume={"approved": approved, "approver": "alice", "decision_id": decision_id}
        )

    with sink:
        state = invoke({"messages": []})
        # Both calls are held; which interrupt the run shows is a race, so find A and B
        # among the pending decisions (a resume value names the decision it answers).
        shown = state["__interrupt__"][0].value
        others = [p.decision_id for p in tool_gate.gate.approvals.pending()]
        assert len(others) == 2
        assert shown["decision_id"] in others
        other = next(d for d in others if d != shown["decision_id"])
        a, b = (
            (shown["decision_id"], other)
            if shown["args"]["order"] == "A"
            else (other, shown["decision_id"])
        )
        saver.wait_for = tools.started
        state = invoke(resume(a, approved=True))
        saver.wait_for = None
        assert tools.started.is_set()  # the run ended on B's interrupt with A's tool running
        assert state["__interrupt__"][0].value["decision_id"] == b
        tools.release.set()
        state = invoke(resume(b, approved=False))
    assert "__interrupt__" not in state
    assert tools.received == [("refund", {"order": "A", "amount": 30})]
    shown_results = tool_messages(agent)
    assert shown_results["c-a"].content == "refunded 30 on A"
    assert "rejected by alice" in str(shown_results["c-b"].content)
    assert_intact(tmp_path / "run.mcap")
