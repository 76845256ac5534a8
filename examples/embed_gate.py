"""Embedding ghost in an agent loop: the smallest complete example.

Run it with ``.venv/bin/python examples/embed_gate.py`` after ``make demo`` (or
any install). It gates three tool calls under an inline policy, writes the run
to ``runs/embed.mcap``, and verifies the decision chain from the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis import verify_decision_chain
from audit import McapAuditSink
from runtime import Action, Gate, Policy

POLICY = Policy.from_dict(
    {
        "policy_id": "embed-example",
        "default": "deny",
        "rules": [
            {"id": "lookups", "verbs": ["lookup"], "effect": "allow"},
            {
                "id": "bounded-search",
                "verbs": ["search"],
                "effect": "narrow",
                "narrow": {"clamp": {"max_results": 10}},
            },
        ],
    }
)


def lookup(term: str) -> str:
    return f"definition of {term}"


def search(query: str, max_results: int) -> list[str]:
    return [f"{query} #{i}" for i in range(max_results)]


TOOLS: dict[str, Any] = {"lookup": lookup, "search": search}


def main() -> None:
    out = Path("runs/embed.mcap")
    calls = [
        Action("helper", "lookup", "tool:lookup", {"term": "idempotent"}),
        Action("helper", "search", "tool:search", {"query": "mcap", "max_results": 500}),
        Action("helper", "delete", "tool:files", {"path": "/"}),
    ]
    # An audit log is never replaced silently; this example's own scratch run may be.
    with McapAuditSink(out, overwrite=True) as sink:
        gate = Gate(POLICY, sink=sink)
        for action in calls:
            decision = gate.check(action)
            if decision.permitted:
                result = TOOLS[action.verb](**decision.args)
                print(f"{decision.verdict:<7} {action.verb}: ran, {len(result)} chars/items")
            else:
                print(f"{decision.verdict:<7} {action.verb}: not run ({decision.reason})")
    intact, problems = verify_decision_chain(out)
    print(f"chain intact: {intact}", *problems, sep="\n")


if __name__ == "__main__":
    main()
