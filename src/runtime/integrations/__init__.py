"""ghost where agents already run: adapters for agent frameworks and MCP (SPEC §7).

Each adapter is an optional extra, imported only when used, so ``import
runtime.integrations`` costs nothing beyond the runtime:

* `runtime.integrations.mcp` -- the gateway behind ``ghost mcp-proxy``
  (``ghost-sdk[mcp]``);
* `runtime.integrations.openai_agents` -- OpenAI Agents SDK function tools
  (``ghost-sdk[openai-agents]``);
* `runtime.integrations.langchain` -- LangChain tools and LangGraph
  interrupts (``ghost-sdk[langchain]``).

This package holds what they share: the action convention (`tool_action`)
and what one gated call comes to (`GatedCall`, `settle`, `resolve_held`).
"""

from runtime.integrations._gated_call import (
    ActionOverride,
    GatedCall,
    approved,
    asettle,
    judged,
    refusal_text,
    resolve_approval,
    resolve_held,
    settle,
    tool_action,
)

__all__ = [
    "ActionOverride",
    "GatedCall",
    "approved",
    "asettle",
    "judged",
    "refusal_text",
    "resolve_approval",
    "resolve_held",
    "settle",
    "tool_action",
]
