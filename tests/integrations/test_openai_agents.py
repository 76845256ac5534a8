"""The OpenAI Agents SDK adapter against the real SDK and a scripted model: every verdict.

Each test runs `agents.Runner` over `agents.testing.ScriptedModel`, gates the
agent's tools with `ToolGate`, writes the run with `audit.McapAuditSink`, and
checks three things: what each tool received, what the model saw, and that
the MCAP run verifies with every chain intact.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner
from agents.result import RunResult
from agents.testing import ScriptedModel, assistant_message, function_call

from analysis import analyze_run, verify_run
from audit import McapAuditSink, MemoryAuditSink
from runtime import Gate, RuntimeVerdict, SqliteApprovalStore, value_sha256
from runtime.integrations.openai_agents import ToolGate
from runtime.testing import ManualClock
from tests.integrations.openai_agents_kit import (
    AWS_KEY,
    Tools,
    make_agent,
    make_model,
    make_policy,
    offline,  # noqa: F401 - the autouse fixture, imported to apply here
    records,
    seen_outputs,
)

SEND = ("send", {"to": "bob", "body": "hi"}, "c-send")


def check_intact(path: Path) -> None:
    verification = verify_run(path)
    assert verification.ok, verification.problems
    assert verification.verified_prefix == verification.record_count
    analysis = analyze_run(path)
    assert analysis.verification.ok


class Harness:
    """A gate writing one MCAP run, a ToolGate around it, and the recording tools."""

    def __init__(self, tmp_path: Path, *, approver: str = "alice", **gate: Any) -> None:
        self.path = tmp_path / "run.mcap"
        self.sink = McapAuditSink(self.path)
        self.gate = Gate(make_policy(), sink=self.sink, **gate)
        self.tools = Tools()
        self.guard = ToolGate(self.gate, approver=approver)
        self.config = self.guard.run_config()
        self.closed = False

    def run(self, agent: Any, start: Any) -> RunResult:
        return asyncio.run(Runner.run(agent, start, run_config=self.config))

    def close(self) -> None:
        self.closed = True
        self.sink.close()
        check_intact(self.path)

    def decisions(self) -> list[dict[str, Any]]:
        return records(self.path, "/decisions")

    def approvals(self) -> list[dict[str, Any]]:
        return records(self.path, "/approvals")


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def make(**options: Any) -> Harness:
        made.append(Harness(tmp_path, **options))
        return made[-1]

    yield make
    for h in made:
        if not h.closed:
            h.sink.close()


def test_allow_narrow_scrub_deny_and_an_approved_pending_call(
    harness: Callable[..., Harness],
) -> None:
    h = harness()
    model = make_model(
        [
            ("lookup", {"term": "idempotent"}, "c-allow"),
            ("search", {"query": "mcap", "max_results": 500}, "c-narrow"),
            ("note", {"text": f"key {AWS_KEY}"}, "c-scrub"),
            ("delete", {"path": "/"}, "c-deny"),
            SEND,
        ]
    )
    agent = h.guard.agent(make_agent(model, h.tools))

    first = h.run(agent, "go")
    # The held call is the SDK's own interruption; the others ran (or were refused) already.
    assert [(i.tool_name, i.call_id) for i in first.interruptions] == [("send", "c-send")]
    assert sorted(h.tools.names()) == ["lookup", "note", "search"]  # they run in parallel
    held = h.guard.decision("c-send", "send")
    assert held is not None
    assert held.verdict is RuntimeVerdict.PENDING

    state = first.to_state()
    state.approve(first.interruptions[0])
    final = h.run(agent, state)
    assert final.final_output == "done"
    assert not final.interruptions

    # What the tools received: the effective arguments, never the model's originals.
    got = dict(h.tools.received)
    assert got["lookup"] == {"term": "idempotent"}
    assert got["search"] == {"query": "mcap", "max_results": 3}
    assert AWS_KEY not in got["note"]["text"]
    assert "[REDACTED:" in got["note"]["text"]
    assert got["send"] == {"to": "bob", "body": "hi"}
    assert "delete" not in got
    # ... also where a tool reads its context.
    assert h.tools.raw_seen
    assert all(AWS_KEY not in text and "REDACTED" in text for _, text in h.tools.raw_seen)

    # What the model saw.
    seen = seen_outputs(model)
    assert seen["c-allow"] == "definition of idempotent"
    assert seen["c-narrow"] == "3 results"
    assert seen["c-scrub"] == "noted"
    assert seen["c-send"] == "sent"
    h.close()
    verdicts = [d["verdict"] for d in h.decisions()]
    assert sorted(verdicts) == sorted(["allow", "narrow", "scrub", "deny", "pending"])
    denied = next(d for d in h.decisions() if d["verdict"] == "deny")
    assert seen["c-deny"].startswith("ghost denied this tool call: ")
    assert denied["decision_id"] in seen["c-deny"]
    assert denied["reason"] in seen["c-deny"]
    (approval,) = h.approvals()
    assert (approval["outcome"], approval["approver"]) == ("approved", "alice")
    assert approval["decision_id"] == held.decision_id


def test_the_action_convention(harness: Callable[..., Harness]) -> None:
    h = harness()
    model = make_model([("lookup", {"term": "x"}, "c1")])
    h.run(h.guard.agent(make_agent(model, h.tools, name="researcher")), "go")
    h.close()
    (assessment,) = records(h.path, "/assessments")
    assert (assessment["agent"], assessment["verb"], assessment["resource"]) == (
        "researcher",
        "lookup",
        "tool:lookup",
    )
    assert assessment["args_sha256"] == value_sha256({"term": "x"})


def test_a_pending_call_rejected_through_the_sdk(harness: Callable[..., Harness]) -> None:
    h = harness()
    model = make_model([SEND])
    agent = h.guard.agent(make_agent(model, h.tools))
    first = h.run(agent, "go")
    state = first.to_state()
    state.reject(first.interruptions[0])  # no message: the run config's formatter records it
    h.run(agent, state)
    assert h.tools.received == []
    held = h.guard.decision("c-send", "send")
    assert held is None  # settled: nothing left to hold
    h.close()
    (approval,) = h.approvals()
    assert (approval["outcome"], approval["approver"]) == ("rejected", "alice")
    seen = seen_outputs(model)["c-send"]
    assert "approval was rejected by alice" in seen
    assert approval["decision_id"] in seen


def test_a_rejection_with_its_own_message_is_recorded_by_sync(
    harness: Callable[..., Harness],
) -> None:
    h = harness()
    model = make_model([SEND])
    agent = h.guard.agent(make_agent(model, h.tools))
    first = h.run(agent, "go")
    state = first.to_state()
    state.reject(first.interruptions[0], rejection_message="not today")
    (approval,) = h.guard.sync(state)
    assert approval.outcome == "rejected"
    h.run(agent, state)
    assert h.tools.received == []
    h.close()
    assert [(a["outcome"], a["approver"]) for a in h.approvals()] == [("rejected", "alice")]
    # ghost's words replace the SDK's: the model learns the reason and the decision id.
    assert approval.decision_id in seen_outputs(model)["c-send"]


def test_sync_records_an_sdk_approval_before_the_run_resumes(
    harness: Callable[..., Harness],
) -> None:
    h = harness()
    model = make_model([SEND])
    agent = h.guard.agent(make_agent(model, h.tools))
    first = h.run(agent, "go")
    state = first.to_state()
    state.approve(first.interruptions[0])
    (approval,) = h.guard.sync(state)
    assert (approval.outcome, approval.approver) == ("approved", "alice")
    assert h.guard.sync(state) == (approval,)  # idempotent: nothing resolved twice
    h.run(agent, state)
    assert h.tools.names() == ["send"]
    h.close()
    assert len(h.approvals()) == 1


@pytest.mark.parametrize("approve", [True, False])
def test_a_resolution_through_ghost_is_applied_to_the_run_state(
    harness: Callable[..., Harness], *, approve: bool
) -> None:
    h = harness()
    model = make_model([SEND])
    agent = h.guard.agent(make_agent(model, h.tools))
    first = h.run(agent, "go")
    held = h.guard.decision("c-send", "send")
    assert held is not None
    h.gate.approvals.resolve(held.decision_id, approved=approve, approver="ops")
    state = first.to_state()
    (approval,) = h.guard.sync(state)
    assert approval.approver == "ops"
    final = h.run(agent, state)
    assert final.final_output == "done"
    assert h.tools.names() == (["send"] if approve else [])
    seen = seen_outputs(model)["c-send"]
    if approve:
        assert seen == "sent"
    else:
        assert "approval was rejected by ops" in seen
        assert held.decision_id in seen
    h.close()
    assert [(a["outcome"], a["approver"]) for a in h.approvals()] == [
        ("approved" if approve else "rejected", "ops")
    ]


def test_the_first_resolution_wins_when_the_two_sides_disagree(
    harness: Callable[..., Harness],
) -> None:
    h = harness()
    model = make_model([SEND])
    agent = h.guard.agent(make_agent(model, h.tools))
    first = h.run(agent, "go")
    held = h.guard.decision("c-send", "send")
    assert held is not None
    h.gate.approvals.resolve(held.decision_id, approved=False, approver="ops")
    state = first.to_state()
    state.approve(first.interruptions[0])  # too late: ghost rejected it first
    (approval,) = h.guard.sync(state)
    assert approval.outcome == "rejected"
    h.run(agent, state)
    assert h.tools.received == []
    h.close()
    assert [(a["outcome"], a["approver"]) for a in h.approvals()] == [("rejected", "ops")]


def test_an_sdk_approval_after_a_ghost_rejection_does_not_run_even_without_sync(
    harness: Callable[..., Harness],
) -> None:
    h = harness()
    model = make_model([SEND])
    agent = h.guard.agent(make_agent(model, h.tools))
    first = h.run(agent, "go")
    held = h.guard.decision("c-send", "send")
    assert held is not None
    h.gate.approvals.resolve(held.decision_id, approved=False, approver="ops")
    state = first.to_state()
    state.approve(first.interruptions[0])
    h.run(agent, state)
    assert h.tools.received == []
    assert "approval was rejected by ops" in seen_outputs(model)["c-send"]
    h.close()


def test_an_expired_approval(harness: Callable[..., Harness]) -> None:
    clock = ManualClock()
    h = harness(clock=clock)
    model = make_model([SEND])
    agent = h.guard.agent(make_agent(model, h.tools))
    first = h.run(agent, "go")
    clock.advance(61 * 10**9)  # past the rule's 60 s
    state = first.to_state()
    (approval,) = h.guard.sync(state)
    assert (approval.outcome, approval.final_verdict) == ("expired", RuntimeVerdict.DENY)
    h.run(agent, state)
    assert h.tools.received == []
    seen = seen_outputs(model)["c-send"]
    assert "approval was expired" in seen
    assert approval.decision_id in seen
    h.close()
    assert [a["outcome"] for a in h.approvals()] == ["expired"]


def test_an_sdk_approval_after_expiry_does_not_run(harness: Callable[..., Harness]) -> None:
    clock = ManualClock()
    h = harness(clock=clock)
    model = make_model([SEND])
    agent = h.guard.agent(make_agent(model, h.tools))
    first = h.run(agent, "go")
    clock.advance(61 * 10**9)
    state = first.to_state()
    state.approve(first.interruptions[0])
    h.run(agent, state)
    assert h.tools.received == []
    assert "approval was expired" in seen_outputs(model)["c-send"]
    h.close()
    assert [a["outcome"] for a in h.approvals()] == ["expired"]


def test_an_approver_the_policy_does_not_allow_runs_nothing(
    harness: Callable[..., Harness],
) -> None:
    h = harness(approver="mallory")
    model = make_model([SEND])
    agent = h.guard.agent(make_agent(model, h.tools))
    first = h.run(agent, "go")
    state = first.to_state()
    state.approve(first.interruptions[0])
    assert h.guard.sync(state) == ()  # refused: it stays held in ghost
    h.run(agent, state)
    assert h.tools.received == []
    seen = seen_outputs(model)["c-send"]
    assert "mallory" in seen
    assert "not allowed" in seen or "allowed" in seen
    h.close()
    assert h.approvals() == []  # nothing was resolved by mallory


def test_ghost_approvals_cli_through_a_sqlite_store(
    harness: Callable[..., Harness], tmp_path: Path
) -> None:
    store_path = tmp_path / "approvals.sqlite"
    h = harness(approvals=SqliteApprovalStore(store_path), approval_poll_s=0.01)
    model = make_model([SEND])
    agent = h.guard.agent(make_agent(model, h.tools))
    first = h.run(agent, "go")
    held = h.guard.decision("c-send", "send")
    assert held is not None
    ghost = Path(sys.executable).with_name("ghost")
    done = subprocess.run(
        [str(ghost), "approvals", "approve", held.decision_id, "--store", str(store_path),
         "--approver", "ops"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    state = first.to_state()
    (approval,) = h.guard.sync(state)
    assert (approval.outcome, approval.approver) == ("approved", "ops")
    h.run(agent, state)
    assert h.tools.names() == ["send"]
    h.close()
    assert [(a["outcome"], a["approver"]) for a in h.approvals()] == [("approved", "ops")]


def test_an_approval_runs_once_with_the_approved_arguments(harness: Callable[..., Harness]) -> None:
    h = harness()
    model = make_model([("send", {"to": f"k {AWS_KEY}", "body": "hi"}, "c-send")])
    agent = h.guard.agent(make_agent(model, h.tools))
    first = h.run(agent, "go")
    held = h.guard.decision("c-send", "send")
    assert held is not None
    state = first.to_state()
    state.approve(first.interruptions[0])
    h.run(agent, state)
    # Held scrubbed: what was approved (and ran) is decision.args, not the model's text.
    assert h.tools.received == [("send", dict(held.args))]
    assert AWS_KEY not in str(h.tools.received)
    h.close()


def test_a_streamed_run_is_gated_the_same_way(harness: Callable[..., Harness]) -> None:
    h = harness()
    model = make_model(
        [
            ("search", {"query": "q", "max_results": 99}, "c-narrow"),
            ("delete", {"path": "/"}, "c-deny"),
            SEND,
        ]
    )
    agent = h.guard.agent(make_agent(model, h.tools))

    async def stream(start: Any) -> Any:
        result = Runner.run_streamed(agent, start, run_config=h.config)
        async for _ in result.stream_events():
            pass
        return result

    first = asyncio.run(stream("go"))
    assert [i.call_id for i in first.interruptions] == ["c-send"]
    state = first.to_state()
    state.approve(first.interruptions[0])
    asyncio.run(stream(state))
    assert sorted(h.tools.received) == [
        ("search", {"query": "q", "max_results": 3}),
        ("send", {"to": "bob", "body": "hi"}),
    ]
    assert "ghost denied" in seen_outputs(model)["c-deny"]
    h.close()
    assert [a["outcome"] for a in h.approvals()] == ["approved"]


@pytest.mark.parametrize(
    ("verb", "answer"), [("lookup", "expert says hi"), ("ask", "ghost denied")]
)
def test_an_agent_used_as_a_tool_is_gated_as_a_tool(verb: str, answer: str) -> None:
    sink = MemoryAuditSink()
    guard = ToolGate(Gate(make_policy(), sink=sink))
    expert = Agent(name="expert", model=ScriptedModel([[assistant_message("expert says hi")]]))
    model = ScriptedModel(
        [[function_call(verb, {"input": "q"}, call_id="c1")], [assistant_message("done")]]
    )
    boss = guard.agent(
        Agent(
            name="boss", model=model, tools=[expert.as_tool(tool_name=verb, tool_description="d")]
        )
    )
    asyncio.run(Runner.run(boss, "go", run_config=guard.run_config()))
    assert seen_outputs(model)["c1"].startswith(answer)
    (decision,) = sink.records("/decisions")
    assert decision["verdict"] == ("allow" if verb == "lookup" else "deny")
