"""The LangChain adapter fails closed: hostile calls are recorded denies; no record, no run."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from audit import MemoryAuditSink
from runtime import Action, AuditError, Policy, RuntimeVerdict
from runtime.integrations import tool_action
from runtime.integrations._langchain_hold import HeldCalls, hold_key, parse_resume, payload
from runtime.integrations.langchain import (
    DEFAULT_AGENT,
    LangChainToolCall,
    ToolGate,
    gate_tool,
    gated_tool_node,
)
from tests.integrations.langgraph_run import (
    POLICY,
    Tools,
    build_agent,
    call,
    make_gate,
    turns,
)


def decision_records(sink: MemoryAuditSink) -> list[dict[str, Any]]:
    return [dict(r) for r in sink.records("/decisions")]


def assessed_agents(sink: MemoryAuditSink) -> list[str]:
    return [r["agent"] for r in sink.records("/assessments")]


class EvilName(str):
    """A str subclass that would answer concatenation with its own code."""

    __slots__ = ()

    def __radd__(self, other: object) -> str:
        return "tool:lookup"


@pytest.mark.parametrize(
    "name",
    [None, 7, ["lookup"], EvilName("lookup"), "look\x00up", "lookup\n", "x" * 5000],
    ids=["none", "int", "list", "str-subclass", "nul", "newline", "huge"],
)
def test_a_hostile_tool_name_is_a_recorded_deny_and_nothing_runs(name: object) -> None:
    sink = MemoryAuditSink()
    tool_gate = ToolGate(make_gate(sink), agent="shop")
    gated = tool_gate.gate_call(name, {"term": "x"}, tool_call_id="c1")
    assert gated.decision.verdict is RuntimeVerdict.DENY
    assert not gated.runs
    assert gated.refusal is not None
    assert gated.decision.decision_id in gated.refusal
    assert len(decision_records(sink)) == 1


@pytest.mark.parametrize(
    "tool_input",
    ["lookup x", ["term", "x"], 5, None, {1: "x"}, {"term": float("nan")}, {"term": {1, 2}}],
    ids=["str", "list", "int", "none", "int-key", "nan", "set"],
)
def test_an_input_that_is_not_a_dict_of_plain_data_is_a_recorded_deny(tool_input: object) -> None:
    sink = MemoryAuditSink()
    tool_gate = ToolGate(make_gate(sink), agent="shop")
    gated = tool_gate.gate_call("lookup", tool_input)
    assert gated.decision.verdict is RuntimeVerdict.DENY
    assert not gated.runs
    assert len(decision_records(sink)) == 1


def test_a_hostile_agent_name_from_run_metadata_is_a_recorded_deny() -> None:
    sink = MemoryAuditSink()
    tool_gate = ToolGate(make_gate(sink))
    config: Any = {"metadata": {"lc_agent_name": "evil\x1b[2J"}}
    gated = tool_gate.gate_call("lookup", {"term": "x"}, config=config)
    assert gated.decision.verdict is RuntimeVerdict.DENY
    (agent,) = assessed_agents(sink)
    assert "\x1b" not in agent


def test_an_agent_name_in_metadata_that_is_not_a_string_is_ignored() -> None:
    sink = MemoryAuditSink()
    tool_gate = ToolGate(make_gate(sink))
    gated = tool_gate.gate_call("lookup", {"term": "x"}, config={"metadata": {"lc_agent_name": 3}})
    assert gated.decision.verdict is RuntimeVerdict.ALLOW
    assert assessed_agents(sink) == [DEFAULT_AGENT]


class Boom(Exception):
    pass


def test_an_override_that_raises_is_a_recorded_deny_whose_message_is_never_recorded() -> None:
    sink = MemoryAuditSink()

    def override(tool_call: LangChainToolCall) -> Action:
        raise Boom("secret-token-123")

    tool_gate = ToolGate(make_gate(sink), agent="shop", override=override)
    gated = tool_gate.gate_call("lookup", {"term": "x"})
    assert gated.decision.verdict is RuntimeVerdict.DENY
    assert "OverrideFailed" in gated.decision.reason
    assert "secret-token-123" not in repr(sink.entries)


def test_an_override_that_returns_no_action_is_a_recorded_deny() -> None:
    sink = MemoryAuditSink()
    tool_gate = ToolGate(make_gate(sink), agent="shop", override=lambda c: "tool:lookup")  # type: ignore[arg-type, return-value]
    gated = tool_gate.gate_call("lookup", {"term": "x"})
    assert gated.decision.verdict is RuntimeVerdict.DENY
    assert len(decision_records(sink)) == 1


def test_an_override_picks_a_finer_resource_and_sees_the_call() -> None:
    sink = MemoryAuditSink()
    policy = dict(POLICY)
    policy["rules"] = [
        {"id": "public", "verbs": ["read"], "resources": ["file:/public/*"], "effect": "allow"}
    ]
    seen: list[LangChainToolCall] = []

    def override(tool_call: LangChainToolCall) -> Action:
        seen.append(tool_call)
        args = tool_call.args
        assert isinstance(args, dict)
        return Action(tool_call.agent, "read", f"file:{args['path']}", args)

    from runtime import Gate

    tool_gate = ToolGate(Gate(Policy.from_dict(policy), sink=sink), agent="shop", override=override)
    assert tool_gate.gate_call("read_file", {"path": "/public/a"}, tool_call_id="c").runs
    assert not tool_gate.gate_call("read_file", {"path": "/etc/passwd"}).runs
    assert seen[0].tool_name == "read_file"
    assert seen[0].tool_call_id == "c"
    assert seen[0].agent == "shop"


class BrokenSink(MemoryAuditSink):
    def append(self, topic: str, record: Any) -> str:
        raise OSError("disk full")


def test_an_audit_error_propagates_from_a_tool_node_and_no_tool_runs() -> None:
    tools = Tools()
    node = gated_tool_node(make_gate(BrokenSink()), tools.all(), agent="shop")
    agent = build_agent(node, tools, turns([call("lookup", {"term": "x"}, "c1")]))
    with pytest.raises(AuditError):
        agent.start()
    assert tools.received == []


def test_an_audit_error_propagates_from_a_gated_tool_and_it_does_not_run() -> None:
    tools = Tools()
    lookup = gate_tool(make_gate(BrokenSink()), tools.all()[0], agent="shop")
    with pytest.raises(AuditError):
        lookup.invoke(call("lookup", {"term": "x"}, "c1"))
    assert tools.received == []


def test_the_model_cannot_smuggle_an_argument_past_the_gate_under_an_injected_name() -> None:
    # Only the names the wrapped tool declares as injected are passed unjudged: search
    # declares none, so a model's "state" argument is judged with the rest.
    tools = Tools()
    judged: list[object] = []

    def override(tool_call: LangChainToolCall) -> Action:
        judged.append(tool_call.args)
        return tool_action(tool_call.agent, "search", tool_call.args)  # type: ignore[arg-type]

    search = gate_tool(make_gate(MemoryAuditSink()), tools.all()[1], override=override)
    search.invoke(call("search", {"query": "q", "max_results": 10, "state": "x"}, "c"))
    assert judged == [{"query": "q", "max_results": 10, "state": "x"}]


def test_a_denied_call_of_an_unregistered_tool_in_a_tool_node_is_a_tool_error() -> None:
    tools = Tools()
    sink = MemoryAuditSink()
    node = gated_tool_node(make_gate(sink), tools.all(), agent="shop")
    agent = build_agent(node, tools, turns([call("format_disk", {}, "c1")]))
    agent.start()
    (message,) = [m for m in agent.seen[-1] if isinstance(m, ToolMessage)]
    assert message.status == "error"
    assert "ghost denied" in str(message.content)


def test_construction_refuses_what_is_not_a_gate_or_a_callable_override() -> None:
    with pytest.raises(TypeError, match="needs a Gate"):
        ToolGate(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="override must be callable"):
        ToolGate(make_gate(MemoryAuditSink()), override=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="BaseTool"):
        gate_tool(make_gate(MemoryAuditSink()), lambda: 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NaN"):
        ToolGate(make_gate(MemoryAuditSink()), wait_timeout_s=float("nan"))
    with pytest.raises(TypeError, match="timeout_s"):
        ToolGate(make_gate(MemoryAuditSink()), wait_timeout_s=True)
    with pytest.raises(TypeError, match="approver"):
        ToolGate(make_gate(MemoryAuditSink()), approver=7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="agent"):
        ToolGate(make_gate(MemoryAuditSink()), agent=["a"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="compose"):
        gated_tool_node(make_gate(MemoryAuditSink()), [], wrap_tool_call=lambda r, e: e(r))


# --- the resume value and the hold key --------------------------------------------------


@pytest.mark.parametrize(
    ("value", "approve", "approver", "decision_id"),
    [
        ({"approved": True}, True, None, None),
        ({"approved": False, "approver": "bob"}, False, "bob", None),
        ({"approved": True, "decision_id": "d"}, True, None, "d"),
    ],
)
def test_a_resume_value_is_read_strictly(
    value: object, approve: bool, approver: str | None, decision_id: str | None
) -> None:
    resume = parse_resume(value)
    assert (resume.approve, resume.approver, resume.decision_id) == (approve, approver, decision_id)
    assert resume.problem is None


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        ["approved"],
        {"approved": None},
        {"approved": 0},
        {"approved": "True"},
        {"approved": True, "decision_id": 5},
        {"approved": True, "approver": ["a"]},
    ],
)
def test_a_resume_value_that_is_no_answer_has_a_problem_and_no_answer(value: object) -> None:
    resume = parse_resume(value)
    assert resume.approve is None
    assert resume.problem is not None


def test_a_mapping_that_raises_on_read_is_no_answer() -> None:
    class Hostile(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            raise RuntimeError("no")

    assert parse_resume(Hostile()).problem == "the resume value cannot be read"


def test_there_is_a_hold_key_only_inside_a_checkpointed_run() -> None:
    from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER, CONFIG_KEY_SCRATCHPAD

    assert hold_key(None, "c", "t") is None
    assert hold_key({}, "c", "t") is None
    assert hold_key({"configurable": 3}, "c", "t") is None  # type: ignore[typeddict-item]
    no_saver = {"configurable": {CONFIG_KEY_SCRATCHPAD: object(), "thread_id": "t"}}
    assert hold_key(no_saver, "c", "t") is None  # type: ignore[arg-type]
    no_pad = {"configurable": {CONFIG_KEY_CHECKPOINTER: object(), "thread_id": "t"}}
    assert hold_key(no_pad, "c", "t") is None  # type: ignore[arg-type]
    full = {
        "configurable": {
            CONFIG_KEY_SCRATCHPAD: object(),
            CONFIG_KEY_CHECKPOINTER: object(),
            "thread_id": "t1",
            "checkpoint_ns": "tools:1",
        }
    }
    assert hold_key(full, "c1", "refund") == ("t1", "tools:1", "c1", "refund")  # type: ignore[arg-type]
    assert hold_key(full, None, 5) == ("t1", "tools:1", "", "<int>")  # type: ignore[arg-type]


def test_held_calls_match_only_the_same_input_and_stay_bounded() -> None:
    gate = make_gate(MemoryAuditSink())
    decision = gate.check(tool_action("shop", "refund", {"order": "A", "amount": 1}))
    held = HeldCalls()
    key = ("t", "ns", "c", "refund")
    held.hold(key, decision, {"order": "A", "amount": 1})
    found = held.find(key, {"order": "A", "amount": 1})
    assert found is not None
    assert found.decision is decision
    assert found.settled is None
    assert held.find(key, {"order": "A", "amount": 2}) is None
    assert held.find(("t", "ns", "other", "refund"), {"order": "A", "amount": 1}) is None

    class Incomparable:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("no")

        __hash__ = None  # type: ignore[assignment]

    held.hold(key, decision, Incomparable())
    assert held.find(key, {"order": "A"}) is None
    assert held.outcome(key, {"order": "A"}) == (False, None)
    held.answered(key, {"order": "A"}, "the result")
    assert len(held) == 0  # an answered call is no longer held
    assert held.outcome(key, {"order": "A"}) == (True, "the result")
    assert held.outcome(key, {"order": "B"}) == (False, None)
    for index in range(4100):
        held.hold(("t", str(index), "c", "refund"), decision, {})
    assert len(held) == 4096
    assert held.find(("t", "0", "c", "refund"), {}) is None  # the oldest went first
    newest = held.find(("t", "4099", "c", "refund"), {})
    assert newest is not None
    assert newest.decision is decision


def test_a_plain_answer_is_taken_only_in_a_task_that_held_one_decision() -> None:
    gate = make_gate(MemoryAuditSink())
    first = gate.check(tool_action("shop", "refund", {"order": "A", "amount": 1}))
    second = gate.check(tool_action("shop", "refund", {"order": "B", "amount": 1}))
    held = HeldCalls()
    plain = parse_resume({"approved": True})
    named = parse_resume({"approved": True, "decision_id": first.decision_id})
    held.hold(("t", "ns", "a", "refund"), first, {})
    assert held.answerable(("t", "ns", "a", "refund"), plain)
    held.hold(("t", "ns", "b", "refund"), second, {})
    assert not held.answerable(("t", "ns", "a", "refund"), plain)
    assert held.answerable(("t", "ns", "a", "refund"), named)
    assert held.answerable(("t", "other", "c", "refund"), plain)  # another task


def test_importing_the_integrations_package_does_not_import_langchain() -> None:
    script = (
        "import sys, runtime, runtime.integrations\n"
        "roots = ('langchain_core', 'langgraph')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in roots))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_langchain_module_exports_a_sorted_complete_all() -> None:
    import runtime.integrations.langchain as module

    exported = list(module.__all__)
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", "") == module.__name__
    }
    assert public <= set(exported), public - set(exported)


def test_the_interrupt_payload_names_a_tool_that_is_no_string_by_its_type_only() -> None:
    gate = make_gate(MemoryAuditSink())
    decision = gate.check(tool_action("shop", "refund", {"order": "A", "amount": 1}))
    shown = payload(decision, agent="shop", tool_name=EvilName("refund"))
    assert shown["tool"] == "refund"
    assert type(shown["tool"]) is str
    assert payload(decision, agent="shop", tool_name=5)["tool"] == "<int>"
    assert shown["decision_id"] == decision.decision_id
    assert shown["answer"]["decision_id"] == decision.decision_id
    assert shown["args"] == {"order": "A", "amount": 1}
