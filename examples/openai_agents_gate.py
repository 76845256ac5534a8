"""ghost around an OpenAI Agents SDK agent: every function-tool call gated, offline.

Run it with ``.venv/bin/python examples/openai_agents_gate.py`` (needs the
``openai-agents`` extra). No network and no API key: the model is the SDK's own
scripted test model (`agents.testing.ScriptedModel`), which makes six tool calls
that meet all five verdicts:

* ``lookup``  -> allow: runs as asked;
* ``search``  -> narrow: runs with ``max_results`` clamped to 5;
* ``note``    -> scrub: runs with the AWS key in its text redacted;
* ``delete``  -> deny: does not run; the model gets the reason and the decision id;
* ``send`` x2 -> pending: the SDK interrupts the run; one is approved through the
  SDK (``state.approve``), the other rejected through ghost
  (``gate.approvals.resolve``), which `ToolGate.sync` applies to the run state.

The run is written to ``runs/openai_agents.mcap`` and verified from the file.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from analysis import verify_run
from audit import LoggedRecord, McapAuditSink, iter_run
from runtime import Gate, Policy
from runtime.integrations.openai_agents import ToolGate

POLICY = Policy.from_dict(
    {
        "policy_id": "openai-agents-example",
        "default": "deny",
        "rules": [
            {"id": "lookups", "verbs": ["lookup", "note"], "effect": "allow"},
            {
                "id": "bounded-search",
                "verbs": ["search"],
                "effect": "narrow",
                "narrow": {"clamp": {"max_results": 5}},
            },
            {
                "id": "mail-needs-approval",
                "verbs": ["send"],
                "effect": "approval",
                "approval": {"timeout_s": 300, "approvers": ["alice", "ops"]},
            },
        ],
    }
)


@function_tool
def lookup(term: str) -> str:
    """Define a term."""
    return f"definition of {term}"


@function_tool
def search(query: str, max_results: int) -> str:
    """Search the index."""
    return f"{max_results} results for {query}"


@function_tool
def note(text: str) -> str:
    """Keep a note."""
    return f"noted: {text}"


@function_tool
def send(to: str, body: str) -> str:
    """Send a message."""
    return f"sent to {to}"


@function_tool
def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def scripted_model() -> ScriptedModel:
    calls: list[tuple[str, dict[str, Any], str]] = [
        ("lookup", {"term": "idempotent"}, "c-allow"),
        ("search", {"query": "mcap", "max_results": 500}, "c-narrow"),
        ("note", {"text": "key AKIAIOSFODNN7EXAMPLE"}, "c-scrub"),
        ("delete", {"path": "/"}, "c-deny"),
        ("send", {"to": "bob", "body": "the report"}, "c-approved"),
        ("send", {"to": "eve", "body": "the keys"}, "c-rejected"),
    ]
    return ScriptedModel(
        [
            [function_call(name, args, call_id=call_id) for name, args, call_id in calls],
            [assistant_message("all done")],
        ]
    )


async def main() -> None:
    set_tracing_disabled(disabled=True)  # offline: the SDK exports no trace
    out = Path("runs/openai_agents.mcap")
    out.parent.mkdir(exist_ok=True)
    model = scripted_model()
    # An audit log is never replaced silently; this example's own scratch run may be.
    with McapAuditSink(out, overwrite=True) as sink:
        gate = Gate(POLICY, sink=sink)
        tools = ToolGate(gate, approver="alice")
        agent = tools.agent(
            Agent(name="assistant", model=model, tools=[lookup, search, note, send, delete])
        )
        config = tools.run_config()
        result = await Runner.run(agent, "do the chores", run_config=config)
        while result.interruptions:
            state = result.to_state()
            for item in result.interruptions:
                held = tools.decision(str(item.call_id), str(item.tool_name))
                assert held is not None
                print(f"pending {item.call_id}: {held.reason}")
                if item.call_id == "c-approved":
                    state.approve(item)  # through the SDK: ghost records alice's approval
                else:  # through ghost, as `ghost approvals reject` would on a shared store
                    gate.approvals.resolve(held.decision_id, approved=False, approver="ops")
            tools.sync(state)
            result = await Runner.run(agent, state, run_config=config)
        print(f"final output: {result.final_output}")

    print("\nwhat the model saw, per call:")
    for call in model.calls:
        for item in call.input if isinstance(call.input, list) else []:
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                print(f"  {item['call_id']:<11} {item['output']}")
    print("\nthe audit log:")
    for entry in iter_run(out):
        if isinstance(entry, LoggedRecord) and entry.record is not None:
            record = entry.record
            if entry.topic == "/decisions":
                print(f"  decision {record['decision_id']} {record['verdict']}")
            elif entry.topic == "/approvals":
                print(
                    f"  approval {record['decision_id']} {record['outcome']}"
                    f" by {record['approver']}"
                )
    print(f"\n{verify_run(out).summary}")


if __name__ == "__main__":
    asyncio.run(main())
