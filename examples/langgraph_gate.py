"""ghost in a LangGraph agent: every tool call gated, ``pending`` as an interrupt. Offline.

Run it with ``.venv/bin/python examples/langgraph_gate.py`` (needs
``ghost-sdk[langchain]``). No model, no network: LangChain's own fake chat
model scripts the tool calls, which hit all five verdicts -- allow, narrow,
scrub, deny, and pending, which interrupts the graph until a human answers
with ``Command(resume=...)``. The run is written to ``runs/langgraph.mcap`` and
verified from the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import Command

from analysis import verify_run
from audit import McapAuditSink
from runtime import Gate, Policy
from runtime.integrations.langchain import gated_tool_node

POLICY = Policy.from_dict(
    {
        "policy_id": "langgraph-example",
        "default": "deny",
        "rules": [
            {"id": "lookups", "verbs": ["lookup"], "effect": "allow"},
            {
                "id": "bounded-search",
                "verbs": ["search"],
                "effect": "narrow",
                "narrow": {"clamp": {"max_results": 10}},
            },
            {"id": "notes", "verbs": ["note"], "effect": "allow"},
            {
                "id": "refunds",
                "verbs": ["refund"],
                "effect": "approval",
                "approval": {"timeout_s": 300, "approvers": ["alice"]},
            },
        ],
    }
)


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    return f"definition of {term}"


@tool
def search(query: str, max_results: int) -> str:
    """Search, returning at most max_results hits."""
    return f"{max_results} results for {query}"


@tool
def note(text: str) -> str:
    """Keep a note."""
    return f"noted: {text}"


@tool
def refund(order: str, amount: int) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order}"


@tool
def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def scripted_model() -> GenericFakeChatModel:
    """The model: one turn of five tool calls, then a final answer."""
    calls = [
        ("lookup", {"term": "idempotent"}),
        ("search", {"query": "mcap", "max_results": 500}),
        ("note", {"text": "the key is AKIAIOSFODNN7EXAMPLE"}),  # AWS's documented example key
        ("delete", {"path": "/"}),
        ("refund", {"order": "A-1001", "amount": 30}),
    ]
    tool_calls: list[Any] = [
        {"name": name, "args": args, "id": f"call-{name}", "type": "tool_call"}
        for name, args in calls
    ]
    return GenericFakeChatModel(
        messages=iter([AIMessage(content="", tool_calls=tool_calls), AIMessage(content="done")])
    )


def main() -> None:
    out = Path("runs/langgraph.mcap")
    # An audit log is never replaced silently; this example's own scratch run may be.
    with McapAuditSink(out, overwrite=True) as sink:
        gate = Gate(POLICY, sink=sink)
        model = scripted_model()

        def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        builder = StateGraph(MessagesState)
        builder.add_node("agent", agent)
        builder.add_node(
            "tools", gated_tool_node(gate, [lookup, search, note, refund, delete], agent="shop")
        )
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        graph = builder.compile(checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "example"}}

        state = graph.invoke({"messages": [HumanMessage("tidy up")]}, config)
        (held,) = state["__interrupt__"]
        shown = held.value
        print(f"pending {shown['tool']}: {shown['reason']}, args {shown['args']}")
        state = graph.invoke(Command(resume={"approved": True, "approver": "alice"}), config)

    for message in state["messages"]:
        if isinstance(message, ToolMessage):
            print(f"{message.status:<7} {message.name}: {message.content}")
    print(f"model's last word: {state['messages'][-1].content}")
    print(f"run verifies: {verify_run(out).ok}")


if __name__ == "__main__":
    main()
