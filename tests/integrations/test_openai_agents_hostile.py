"""The OpenAI Agents SDK adapter under hostile input: every doubt is a recorded deny.

The model (scripted, so the test plays the attacker) controls the tool
arguments text and the call ids; the host controls the override, the tools and
the sink. None of it may run a tool the gate did not permit, with arguments it
did not decide, or leak a secret into the logs or the spans.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from agents import (
    Agent,
    FunctionTool,
    RunConfig,
    RunContextWrapper,
    Runner,
    WebSearchTool,
    function_tool,
)
from agents.run_config import ToolErrorFormatterArgs
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from analysis import verify_run
from audit import McapAuditSink, MemoryAuditSink
from runtime import Action, AuditError, Gate, RuntimeVerdict
from runtime.integrations._openai_agents_calls import ArgumentsError, arguments_key, parse_arguments
from runtime.integrations.openai_agents import AgentToolCall, ToolGate
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


@pytest.fixture
def mcap(tmp_path: Path) -> Iterator[McapAuditSink]:
    sink = McapAuditSink(tmp_path / "run.mcap")
    yield sink
    sink.close()
    assert verify_run(tmp_path / "run.mcap").ok


def run(agent: Agent[Any], start: Any, guard: ToolGate) -> Any:
    return asyncio.run(Runner.run(agent, start, run_config=guard.run_config()))


def one_call(name: str, arguments: Any, call_id: str = "c1") -> ScriptedModel:
    return ScriptedModel(
        [[function_call(name, arguments, call_id=call_id)], [assistant_message("done")]]
    )


def decisions(sink: MemoryAuditSink) -> list[Any]:
    return list(sink.records("/decisions"))


# --- the arguments text -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "a JSON list, not an object"),
        ('"just text"', "a JSON str, not an object"),
        ('{"term": NaN}', "ambiguous JSON"),
    ],
)
def test_arguments_that_are_not_a_json_object_deny_whatever_the_sdk_does(
    text: str, why: str
) -> None:
    # The SDK cannot read them either, so it asks for approval itself; approving
    # (the careless reviewer) still runs nothing: the call is a recorded deny.
    sink = MemoryAuditSink()
    guard = ToolGate(Gate(make_policy(), sink=sink))
    tools = Tools()
    model = one_call("lookup", text)
    agent = guard.agent(make_agent(model, tools))
    first = run(agent, "go", guard)
    if first.interruptions:
        state = first.to_state()
        state.approve(first.interruptions[0])
        run(agent, state, guard)
    assert tools.received == []
    (decision,) = decisions(sink)
    assert decision["verdict"] == "deny"
    seen = seen_outputs(model)["c1"]
    assert why in seen
    assert decision["decision_id"] in seen
    assert text[:20] not in seen or text.startswith("[[")


def test_deeply_nested_arguments_run_nothing() -> None:
    # The SDK itself fails on these (RecursionError while it fingerprints the call,
    # before any tool code); whatever fails, nothing runs and nothing is allowed.
    sink = MemoryAuditSink()
    guard = ToolGate(Gate(make_policy(), sink=sink))
    tools = Tools()
    model = one_call("lookup", '{"term": ' + "[" * 20_000 + "]" * 20_000 + "}")
    with contextlib.suppress(RecursionError):
        run(guard.agent(make_agent(model, tools)), "go", guard)
    assert tools.received == []
    assert all(d["verdict"] == "deny" for d in decisions(sink))


def test_parse_arguments_refuses_what_it_cannot_read() -> None:
    with pytest.raises(ArgumentsError, match="not valid JSON"):
        parse_arguments("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ArgumentsError, match="a int, not JSON text"):
        parse_arguments(3)
    with pytest.raises(ArgumentsError, match="ambiguous"):
        parse_arguments('{"a": Infinity}')
    assert parse_arguments("  ") == {}
    assert parse_arguments('{"a": [1, 1.0, true]}') == {"a": [1, 1.0, True]}
    assert arguments_key({"a": 1}) != arguments_key({"a": 1.0})
    assert arguments_key({"a": 1}) != arguments_key({"a": True})
    assert arguments_key({"b": 1, "a": 2}) == arguments_key({"a": 2, "b": 1})
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert arguments_key({"a": deep}) is None


def test_sync_denies_an_interruption_the_sdk_made_for_unreadable_arguments() -> None:
    sink = MemoryAuditSink()
    guard = ToolGate(Gate(make_policy(), sink=sink))
    tools = Tools()
    model = one_call("lookup", "{oops")
    agent = guard.agent(make_agent(model, tools))
    first = run(agent, "go", guard)
    state = first.to_state()
    assert guard.sync(state) == ()
    run(agent, state, guard)
    assert tools.received == []
    (decision,) = decisions(sink)
    assert decision["verdict"] == "deny"
    assert "not valid JSON" in seen_outputs(model)["c1"]


def test_a_key_given_twice_denies_although_the_sdk_would_take_the_last() -> None:
    sink = MemoryAuditSink()
    guard = ToolGate(Gate(make_policy(), sink=sink), action=read_file_as_path)
    tools = Tools()
    model = one_call("read_file", '{"path": "/data/ok.txt", "path": "/etc/shadow"}')
    run(guard.agent(make_agent(model, tools)), "go", guard)
    assert tools.received == []
    assert "appears twice" in seen_outputs(model)["c1"]
    assert decisions(sink)[-1]["verdict"] == "deny"


def test_a_reused_call_id_with_other_arguments_is_decided_again() -> None:
    sink = MemoryAuditSink()
    guard = ToolGate(Gate(make_policy(), sink=sink))
    tools = Tools()
    send = guard.tool(tools.all[3], agent="helper")  # send: approval
    context = RunContextWrapper(context=None)

    async def main() -> None:
        assert await _needs(send, context, {"to": "bob", "body": "a"}, "c1")
        assert await _needs(send, context, {"to": "bob", "body": "a"}, "c1")  # asked again
        assert await _needs(send, context, {"to": "eve", "body": "b"}, "c1")

    asyncio.run(main())
    assert [d["verdict"] for d in decisions(sink)] == ["pending", "pending"]


# --- held calls, executed with other arguments --------------------------------------------


async def _needs(tool: FunctionTool, ctx: Any, params: dict[str, Any], call_id: str) -> bool:
    decide = tool.needs_approval
    assert callable(decide)
    return bool(await decide(ctx, params, call_id))


def _tool_context(name: str, call_id: str, arguments: str) -> ToolContext[Any]:
    return ToolContext(context=None, tool_name=name, tool_call_id=call_id, tool_arguments=arguments)


def test_a_held_call_run_with_other_arguments_than_approved_does_not_run() -> None:
    sink = MemoryAuditSink()
    gate = Gate(make_policy(), sink=sink)
    guard = ToolGate(gate, approver="alice", wait_s=0)
    tools = Tools()
    send = guard.tool(tools.all[3], agent="helper")
    shown = {"to": "bob", "body": "hi"}

    async def main() -> tuple[Any, Any]:
        assert await _needs(send, RunContextWrapper(context=None), shown, "c1")
        swapped = json.dumps({"to": "eve", "body": "hi"})
        refused = await send.on_invoke_tool(_tool_context("send", "c1", swapped), swapped)
        again = json.dumps(shown)  # the approval is spent: a new call is a new decision
        later = await send.on_invoke_tool(_tool_context("send", "c1", again), again)
        return refused, later

    refused, later = asyncio.run(main())
    assert tools.received == []
    assert "the arguments differ from those approved" in refused
    assert "still waits for approval" in later
    (approval,) = sink.records("/approvals")
    assert approval["outcome"] == "approved"  # the SDK's approval is recorded; it ran nothing


def test_an_approval_runs_the_tool_once() -> None:
    sink = MemoryAuditSink()
    guard = ToolGate(Gate(make_policy(), sink=sink), approver="alice", wait_s=0)
    tools = Tools()
    send = guard.tool(tools.all[3], agent="helper")
    shown = json.dumps({"to": "bob", "body": "hi"})

    async def main() -> list[Any]:
        assert await _needs(send, RunContextWrapper(context=None), json.loads(shown), "c1")
        return [
            await send.on_invoke_tool(_tool_context("send", "c1", shown), shown) for _ in range(2)
        ]

    first, second = asyncio.run(main())
    assert first == "sent"
    assert "still waits for approval" in second
    assert tools.names() == ["send"]


def test_always_approve_in_the_sdk_does_not_approve_what_ghost_holds() -> None:
    sink = MemoryAuditSink()
    guard = ToolGate(Gate(make_policy(), sink=sink), approver="alice", wait_s=0)
    tools = Tools()
    model = make_model(
        [("send", {"to": "bob", "body": "1"}, "c1")], [("send", {"to": "eve", "body": "2"}, "c2")]
    )
    agent = guard.agent(make_agent(model, tools))
    first = run(agent, "go", guard)
    state = first.to_state()
    state.approve(first.interruptions[0], always_approve=True)
    run(agent, state, guard)
    assert tools.received == [("send", {"to": "bob", "body": "1"})]
    seen = seen_outputs(model)
    assert seen["c1"] == "sent"
    assert "still waits for approval" in seen["c2"]
    assert [d["verdict"] for d in decisions(sink)] == ["pending", "pending"]


# --- names, overrides -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["look\u202eup", "tab\there", "x" * 5000])
def test_a_hostile_tool_name_is_a_recorded_deny(name: str) -> None:
    sink = MemoryAuditSink()
    guard = ToolGate(Gate(make_policy(), sink=sink))
    calls: list[str] = []

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        calls.append(arguments)
        return "ran"

    tool = FunctionTool(
        name=name,
        description="d",
        params_json_schema={"type": "object", "properties": {}, "additionalProperties": False},
        on_invoke_tool=invoke,
    )
    model = one_call(name, "{}")
    agent = guard.agent(Agent(name="helper", model=model, tools=[tool]))
    run(agent, "go", guard)
    assert calls == []
    (decision,) = decisions(sink)
    assert decision["verdict"] == "deny"
    assert decision["decision_id"] in seen_outputs(model)["c1"]


def read_file_as_path(call: AgentToolCall) -> Action:
    return Action(call.agent, call.tool_name, "file:" + str(call.args["path"]), call.args)


@pytest.mark.parametrize(
    ("path", "runs"), [("/data/q3.txt", True), ("/etc/passwd", False), ("/data/../etc", False)]
)
def test_an_override_names_a_finer_resource(path: str, *, runs: bool) -> None:
    sink = MemoryAuditSink()
    guard = ToolGate(Gate(make_policy(), sink=sink), action=read_file_as_path)
    tools = Tools()
    model = one_call("read_file", {"path": path})
    run(guard.agent(make_agent(model, tools)), "go", guard)
    assert tools.received == ([("read_file", {"path": path})] if runs else [])
    (assessment,) = sink.records("/assessments")
    assert assessment["resource"].startswith("file:")


def _raises(call: AgentToolCall) -> Action:
    raise RuntimeError(f"secret {call.args}")


def _not_an_action(call: AgentToolCall) -> Any:
    return ("helper", "lookup", "tool:lookup")


@pytest.mark.parametrize(
    ("override", "why"),
    [(_raises, "override raised RuntimeError"), (_not_an_action, "returned a tuple")],
)
def test_an_override_that_fails_denies(override: Any, why: str) -> None:
    sink = MemoryAuditSink()
    guard = ToolGate(Gate(make_policy(), sink=sink), action=override)
    tools = Tools()
    model = one_call("lookup", {"term": AWS_KEY})
    run(guard.agent(make_agent(model, tools)), "go", guard)
    assert tools.received == []
    (decision,) = decisions(sink)
    assert decision["verdict"] == "deny"
    seen = seen_outputs(model)["c1"]
    assert why in seen
    assert AWS_KEY not in seen  # the exception's message is never passed on
    assert decision["decision_id"] in seen


# --- the audit log, the logs and the spans ------------------------------------------------


def test_a_decision_that_cannot_be_recorded_runs_nothing(tmp_path: Path) -> None:
    sink = McapAuditSink(tmp_path / "run.mcap")
    guard = ToolGate(Gate(make_policy(), sink=sink))
    sink.close()  # every later record fails: AuditError
    tools = Tools()
    model = one_call("lookup", {"term": "x"})
    with pytest.raises(Exception) as failed:  # noqa: PT011 - the SDK may wrap it: see below
        run(guard.agent(make_agent(model, tools)), "go", guard)
    chain: list[BaseException] = []
    error: BaseException | None = failed.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert any(isinstance(e, AuditError) for e in chain)
    assert tools.received == []


def test_secrets_reach_neither_the_logs_nor_the_spans(mcap: McapAuditSink) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    guard = ToolGate(Gate(make_policy(), sink=mcap, tracer_provider=provider))
    tools = Tools()
    model = make_model(
        [
            ("note", {"text": f"k={AWS_KEY}"}, "c1"),
            ("delete", {"path": AWS_KEY}, "c2"),
            ("send", {"to": AWS_KEY, "body": AWS_KEY}, "c3"),
            ("lookup", f'{{"term": "{AWS_KEY}", "term": 1}}', "c4"),
        ]
    )
    with structlog.testing.capture_logs() as logs:
        run(guard.agent(make_agent(model, tools)), "go", guard)
    assert logs  # the adapter and the gate did log
    assert AWS_KEY not in repr(logs)
    spans = exporter.get_finished_spans()
    assert spans
    for span in spans:
        assert AWS_KEY not in repr(dict(span.attributes or {}))
    assert AWS_KEY not in repr(tools.received)


# --- construction, configuration, laziness ----------------------------------------------


def test_construction_is_checked() -> None:
    gate = Gate(make_policy(), sink=MemoryAuditSink())
    with pytest.raises(TypeError, match="needs a Gate"):
        ToolGate(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="approver must be a str"):
        ToolGate(gate, approver=7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="action must be callable"):
        ToolGate(gate, action="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NaN"):
        ToolGate(gate, wait_s=math.nan)
    with pytest.raises(ValueError, match="non-negative"):
        ToolGate(gate, wait_s=-1)
    with pytest.raises(TypeError, match="number of seconds"):
        ToolGate(gate, wait_s="1")  # type: ignore[arg-type]
    guard = ToolGate(gate)
    tools = Tools()
    gated = guard.tool(tools.all[0], agent="a")
    with pytest.raises(ValueError, match="gated already"):
        guard.tool(gated, agent="a")
    with pytest.raises(ValueError, match="gated already"):
        ToolGate(gate).tool(gated, agent="a")
    with pytest.raises(TypeError, match="gates FunctionTools"):
        guard.tool(WebSearchTool(), agent="a")  # type: ignore[arg-type]


def test_agent_gates_its_function_tools_and_keeps_the_rest() -> None:
    guard = ToolGate(Gate(make_policy(), sink=MemoryAuditSink()))
    tools = Tools()
    hosted = WebSearchTool()
    original = Agent(name="helper", tools=[*tools.all, hosted])
    agent = guard.agent(original)
    assert agent is not original
    assert original.tools[0] is tools.all[0]  # the original is left as it was
    assert agent.tools[-1] is hosted
    assert [t.name for t in agent.tools[:-1]] == [t.name for t in tools.all]  # type: ignore[union-attr]
    assert all(t is not u for t, u in zip(agent.tools, tools.all, strict=False))


def test_a_tools_own_needs_approval_still_applies_to_what_ghost_permits() -> None:
    sink = MemoryAuditSink()
    guard = ToolGate(Gate(make_policy(), sink=sink))
    received: list[str] = []

    @function_tool(needs_approval=True)
    def lookup(term: str) -> str:
        """Look up."""
        received.append(term)
        return "found"

    @function_tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete."""
        received.append(path)
        return "deleted"

    model = ScriptedModel(
        [
            [
                function_call("lookup", {"term": "t"}, call_id="c1"),
                function_call("delete", {"path": "/"}, call_id="c2"),
            ],
            [assistant_message("done")],
        ]
    )
    agent = guard.agent(Agent(name="helper", model=model, tools=[lookup, delete]))
    first = run(agent, "go", guard)
    # Ghost denied the delete: no human is asked to approve it.
    assert [i.call_id for i in first.interruptions] == ["c1"]
    state = first.to_state()
    state.approve(first.interruptions[0])
    run(agent, state, guard)
    assert received == ["t"]
    assert "ghost denied" in seen_outputs(model)["c2"]


def test_run_config_keeps_the_base_and_chains_its_formatter() -> None:
    guard = ToolGate(Gate(make_policy(), sink=MemoryAuditSink()))
    asked: list[str] = []

    def base_formatter(args: ToolErrorFormatterArgs[Any]) -> str:
        asked.append(args.kind)
        return "base says"

    config = guard.run_config(RunConfig(workflow_name="wf", tool_error_formatter=base_formatter))
    assert config.workflow_name == "wf"
    assert config.trace_include_sensitive_data is False
    assert guard.run_config().trace_include_sensitive_data is False
    formatter = config.tool_error_formatter
    assert formatter is not None
    for kind in ("tool_exception", "approval_rejected"):
        args = ToolErrorFormatterArgs(
            kind=kind,  # type: ignore[arg-type]
            tool_type="function",
            tool_name="lookup",
            call_id="unknown",
            default_message="default",
            run_context=RunContextWrapper(context=None),
        )
        assert asyncio.run(formatter(args)) == "base says"  # type: ignore[arg-type]
    assert asked == ["tool_exception", "approval_rejected"]


def test_importing_runtime_integrations_does_not_import_the_sdk() -> None:
    code = (
        "import sys, runtime, runtime.integrations\n"
        "assert 'agents' not in sys.modules, 'agents imported'\n"
        "import runtime.integrations.openai_agents\n"
        "assert 'agents' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_a_pending_decision_is_held_in_the_run_log(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with McapAuditSink(path) as sink:
        guard = ToolGate(Gate(make_policy(), sink=sink))
        tools = Tools()
        model = one_call("send", {"to": "bob", "body": "x"})
        first = run(guard.agent(make_agent(model, tools)), "go", guard)
        assert first.interruptions
        held = guard.decision("c1", "send")
        assert held is not None
        assert held.verdict is RuntimeVerdict.PENDING
        assert guard.decision("c1", "lookup") is None
    assert verify_run(path).ok
    assert [d["verdict"] for d in records(path, "/decisions")] == ["pending"]


# --- the remaining paths ----------------------------------------------------------------


@pytest.mark.parametrize("asks", [True, False])
def test_a_tools_own_needs_approval_callable_is_asked_with_the_arguments(*, asks: bool) -> None:
    guard = ToolGate(Gate(make_policy(), sink=MemoryAuditSink()))
    asked: list[tuple[dict[str, Any], str]] = []

    async def own(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        asked.append((params, call_id))
        return asks

    @function_tool(needs_approval=own)
    def lookup(term: str) -> str:
        """Look up."""
        return "found"

    gated = guard.tool(lookup, agent="helper")
    answer = asyncio.run(_needs(gated, RunContextWrapper(context=None), {"term": "t"}, "c9"))
    assert answer is asks
    assert asked == [({"term": "t"}, "c9")]


def test_arguments_an_override_made_unencodable_do_not_run() -> None:
    sink = MemoryAuditSink()
    guard = ToolGate(
        Gate(make_policy(), sink=sink),
        action=lambda call: Action(call.agent, call.tool_name, "tool:lookup", {"term": b"raw"}),
    )
    tools = Tools()
    model = one_call("lookup", {"term": "x"})
    run(guard.agent(make_agent(model, tools)), "go", guard)
    assert tools.received == []
    (decision,) = decisions(sink)
    assert decision["verdict"] == "allow"  # permitted, but not expressible to the tool
    assert "cannot be passed as JSON" in seen_outputs(model)["c1"]


def test_a_call_held_only_as_it_runs_waits_for_ghost() -> None:
    gate = Gate(make_policy(), sink=MemoryAuditSink(), approval_poll_s=0.01)
    guard = ToolGate(gate)  # wait_s: until resolved or expired
    tools = Tools()
    send = guard.tool(tools.all[3], agent="helper")
    text = json.dumps({"to": "bob", "body": "hi"})

    async def main() -> Any:
        invoked = asyncio.ensure_future(
            send.on_invoke_tool(_tool_context("send", "c1", text), text)
        )
        while not await asyncio.to_thread(gate.approvals.pending):
            await asyncio.sleep(0.01)
        (held,) = await asyncio.to_thread(gate.approvals.pending)
        await asyncio.to_thread(
            gate.approvals.resolve, held.decision_id, approved=True, approver="ops"
        )
        return await invoked

    assert asyncio.run(main()) == "sent"
    assert tools.names() == ["send"]


def test_an_sdk_rejection_after_a_ghost_approval_runs_nothing() -> None:
    sink = MemoryAuditSink()
    gate = Gate(make_policy(), sink=sink)
    guard = ToolGate(gate, approver="alice")
    tools = Tools()
    model = one_call("send", {"to": "bob", "body": "x"})
    agent = guard.agent(make_agent(model, tools))
    first = run(agent, "go", guard)
    held = guard.decision("c1", "send")
    assert held is not None
    gate.approvals.resolve(held.decision_id, approved=True, approver="ops")
    state = first.to_state()
    state.reject(first.interruptions[0])  # no sync: the run config's formatter sees it
    run(agent, state, guard)
    assert tools.received == []
    seen = seen_outputs(model)["c1"]
    assert "rejected in the agent run" in seen
    assert held.decision_id in seen
    assert [a["outcome"] for a in sink.records("/approvals")] == ["approved"]


def test_sync_never_turns_an_sdk_rejection_into_an_approval() -> None:
    sink = MemoryAuditSink()
    gate = Gate(make_policy(), sink=sink)
    guard = ToolGate(gate, approver="alice")
    tools = Tools()
    model = one_call("send", {"to": "bob", "body": "x"})
    agent = guard.agent(make_agent(model, tools))
    first = run(agent, "go", guard)
    held = guard.decision("c1", "send")
    assert held is not None
    gate.approvals.resolve(held.decision_id, approved=True, approver="ops")
    state = first.to_state()
    state.reject(first.interruptions[0], rejection_message="no")
    (approval,) = guard.sync(state)
    assert approval.outcome == "approved"  # ghost's first resolution is what it records
    run(agent, state, guard)
    assert tools.received == []
    assert "rejected in the agent run" in seen_outputs(model)["c1"]
    assert guard.decision("c1", "send") is None


def test_the_formatter_leaves_what_is_not_a_held_call_to_the_sdk() -> None:
    guard = ToolGate(Gate(make_policy(), sink=MemoryAuditSink()))
    formatter = guard.run_config().tool_error_formatter
    assert formatter is not None
    args = ToolErrorFormatterArgs(
        kind="approval_rejected",
        tool_type="function",
        tool_name="send",
        call_id="nobody",
        default_message="default",
        run_context=RunContextWrapper(context=None),
    )
    assert asyncio.run(formatter(args)) is None  # type: ignore[arg-type]


def test_the_module_exports_its_public_names() -> None:
    import runtime.integrations.openai_agents as module

    exported = list(module.__all__)
    assert exported == sorted(exported)
    for name in exported:
        assert hasattr(module, name), name
    defined = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", "") == module.__name__
    }
    assert defined <= set(exported), defined - set(exported)
