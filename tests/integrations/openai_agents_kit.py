"""What the OpenAI Agents SDK adapter's tests share: a policy, tools that keep what they got,
a scripted model, the log's records, and no network.

The model is the SDK's own `agents.testing.ScriptedModel`: it answers each model
call with the next scripted step and records what it was given, so a test reads
exactly what the model saw.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, FunctionTool, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext

from audit import LoggedRecord, iter_run
from runtime import Policy

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"

POLICY: dict[str, Any] = {
    "policy_id": "oai-test",
    "default": "deny",
    "rules": [
        {"id": "lookups", "verbs": ["lookup"], "effect": "allow"},
        {
            "id": "bounded-search",
            "verbs": ["search"],
            "effect": "narrow",
            "narrow": {"clamp": {"max_results": 3}},
        },
        {"id": "notes", "verbs": ["note"], "effect": "allow"},
        {
            "id": "mail-needs-approval",
            "verbs": ["send"],
            "effect": "approval",
            "approval": {"timeout_s": 60, "approvers": ["alice", "ops"]},
        },
        {"id": "data-files", "resources": ["file:/data/**"], "effect": "allow"},
    ],
}


def make_policy() -> Policy:
    return Policy.from_dict(POLICY)


class Tools:
    """Function tools that record every call they receive (name, arguments)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.raw_seen: list[tuple[str, str]] = []  # what ctx.tool_arguments / tool_call held

        @function_tool
        def lookup(term: str) -> str:
            """Look a term up."""
            self.received.append(("lookup", {"term": term}))
            return f"definition of {term}"

        @function_tool
        def search(query: str, max_results: int) -> str:
            """Search."""
            self.received.append(("search", {"query": query, "max_results": max_results}))
            return f"{max_results} results"

        @function_tool
        def note(ctx: ToolContext[Any], text: str) -> str:
            """Keep a note (reads its context, as a tool may)."""
            self.received.append(("note", {"text": text}))
            self.raw_seen.append(("tool_arguments", ctx.tool_arguments))
            if ctx.tool_call is not None:
                self.raw_seen.append(("tool_call", ctx.tool_call.arguments))
            return "noted"

        @function_tool
        def send(to: str, body: str) -> str:
            """Send mail."""
            self.received.append(("send", {"to": to, "body": body}))
            return "sent"

        @function_tool
        def delete(path: str) -> str:
            """Delete a file."""
            self.received.append(("delete", {"path": path}))
            return "deleted"

        @function_tool
        def read_file(path: str) -> str:
            """Read a file."""
            self.received.append(("read_file", {"path": path}))
            return "contents"

        self.all: list[FunctionTool] = [lookup, search, note, send, delete, read_file]

    def names(self) -> list[str]:
        return [name for name, _ in self.received]


def make_model(*turns: Sequence[tuple[str, Any, str]]) -> ScriptedModel:
    """A model making the given tool calls (name, arguments, call id) turn by turn, then done."""
    steps: list[Any] = [
        [function_call(name, args, call_id=call_id) for name, args, call_id in turn]
        for turn in turns
    ]
    steps.append([assistant_message("done")])
    return ScriptedModel(steps)


def make_agent(model: ScriptedModel, tools: Tools, name: str = "helper") -> Agent[Any]:
    return Agent(name=name, instructions="use the tools", model=model, tools=list(tools.all))


def seen_outputs(model: ScriptedModel) -> dict[str, str]:
    """What the model saw as each call's output, by call id, over all its calls."""
    outputs: dict[str, str] = {}
    for call in model.calls:
        if not isinstance(call.input, list):
            continue
        for item in call.input:
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                outputs[item["call_id"]] = str(item["output"])
    return outputs


def records(path: Path, topic: str) -> list[dict[str, Any]]:
    """The records of one topic of a run, in order."""
    return [
        dict(item.record)
        for item in iter_run(path)
        if isinstance(item, LoggedRecord) and item.topic == topic and item.record is not None
    ]


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """No API key, no trace export, and any attempt to open a connection fails the test."""
    attempts: list[object] = []
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    set_tracing_disabled(disabled=True)

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("network access attempted in an offline test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    yield attempts
    assert attempts == [], "the SDK tried to reach the network"
