"""A real LangGraph agent for the LangChain adapter's tests: a scripted model, real tools, a gate.

The model is LangChain's own ``GenericFakeChatModel``, fed the tool calls a
test scripts; the graph is the usual agent loop (model node, gated
``ToolNode``, ``tools_condition``) with an in-memory checkpointer. Every tool
records the input it received, and the model node records the messages the
model was shown, so a test checks both sides.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from analysis import RunStatus, verify_run
from audit import McapAuditSink
from runtime import Gate, Policy
from runtime.testing import ManualClock

POLICY: dict[str, Any] = {
    "policy_id": "langgraph-test",
    "default": "deny",
    "rules": [
        {"id": "lookups", "verbs": ["lookup"], "resources": ["tool:lookup"], "effect": "allow"},
        {
            "id": "bounded-search",
            "verbs": ["search"],
            "resources": ["tool:search"],
            "effect": "narrow",
            "narrow": {"clamp": {"max_results": 10}},
        },
        {"id": "notes", "verbs": ["note"], "resources": ["tool:note"], "effect": "allow"},
        {
            "id": "refunds",
            "verbs": ["refund"],
            "resources": ["tool:refund"],
            "effect": "approval",
            "approval": {"timeout_s": 60, "approvers": ["alice", "bob"]},
        },
    ],
}

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example key: the scrubber's aws detector


@dataclass
class Tools:
    """The tools of the test agent, each recording what it received."""

    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def lookup(self, term: str) -> str:
        self.received.append(("lookup", {"term": term}))
        return f"definition of {term}"

    def search(self, query: str, max_results: int) -> str:
        self.received.append(("search", {"query": query, "max_results": max_results}))
        return f"{max_results} results for {query}"

    def note(self, text: str) -> str:
        self.received.append(("note", {"text": text}))
        return f"noted {len(text)} characters"

    def refund(self, order: str, amount: int) -> str:
        self.received.append(("refund", {"order": order, "amount": amount}))
        return f"refunded {amount} on {order}"

    def delete(self, path: str) -> str:
        self.received.append(("delete", {"path": path}))
        return f"deleted {path}"

    def all(self) -> list[BaseTool]:
        return [
            StructuredTool.from_function(self.lookup, description="Look a term up."),
            StructuredTool.from_function(self.search, description="Search."),
            StructuredTool.from_function(self.note, description="Keep a note."),
            StructuredTool.from_function(self.refund, description="Refund an order."),
            StructuredTool.from_function(self.delete, description="Delete a file."),
        ]


def call(name: str, args: Any, call_id: str) -> ToolCall:
    """A tool call as a model emits it."""
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def turns(*batches: list[ToolCall]) -> Iterator[AIMessage]:
    """The model's script: one AI message per batch of tool calls, then a final answer."""
    for batch in batches:
        yield AIMessage(content="", tool_calls=batch)
    yield AIMessage(content="done")


@dataclass
class Agent:
    """A compiled graph, what its model saw at each turn, and its tools."""

    graph: CompiledStateGraph[Any, Any, Any, Any]
    seen: list[list[BaseMessage]]
    tools: Tools

    def start(self, thread: str = "t1") -> dict[str, Any]:
        return self.graph.invoke(
            {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": thread}}
        )


def build_agent(
    node: ToolNode,
    tools: Tools,
    script: Iterator[AIMessage],
    checkpointer: InMemorySaver | None = None,
) -> Agent:
    """The agent loop around ``node`` (a gated ToolNode), with ``script`` as the model."""
    model = GenericFakeChatModel(messages=script)
    seen: list[list[BaseMessage]] = []

    def agent(state: MessagesState) -> dict[str, Any]:
        seen.append(list(state["messages"]))
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", node)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    graph = builder.compile(checkpointer=checkpointer or InMemorySaver(), name="shop")
    return Agent(graph, seen, tools)


def make_gate(sink: McapAuditSink, clock: ManualClock | None = None, **kwargs: Any) -> Gate:
    """A gate of the test policy on ``sink``."""
    return Gate(Policy.from_dict(POLICY), sink=sink, clock=clock, **kwargs)


def assert_intact(path: Path) -> None:
    """The run at ``path`` verifies: sealed, every chain intact, no problem."""
    result = verify_run(path)
    assert result.status is RunStatus.INTACT, result.problems
    assert result.ok
    assert result.problem_count == 0
