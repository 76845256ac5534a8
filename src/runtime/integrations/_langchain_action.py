"""The `Action` of a LangChain tool call: the convention, the override, failing closed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from langchain_core.runnables import RunnableConfig

from runtime._action import Action
from runtime._logging import get_event_log
from runtime._recorded import type_name
from runtime.integrations._gated_call import tool_action

__all__ = [
    "DEFAULT_AGENT",
    "LangChainOverride",
    "LangChainToolCall",
    "OverrideFailed",
    "UnnamedTool",
    "agent_for",
    "make_action",
]

_log = get_event_log("ghost.integrations")

DEFAULT_AGENT: Final = "LangGraph"
"""The agent name when none is configured and the run names none: LangGraph's default graph name."""

_AGENT_METADATA_KEY: Final = "lc_agent_name"  # what LangChain's create_agent(name=...) sets


class OverrideFailed:
    """Stands in for the resource of a call whose override failed, so that the gate denies.

    The gate takes only a string as a resource; this object makes the failure
    a recorded ``deny`` ("resource must be a string, not OverrideFailed").
    """

    __slots__ = ()


class UnnamedTool:
    """Stands in for the resource of a call whose tool name is not a string (a recorded deny)."""

    __slots__ = ()


_OVERRIDE_FAILED: Final = OverrideFailed()
_UNNAMED: Final = UnnamedTool()


@dataclass(frozen=True, slots=True)
class LangChainToolCall:
    """One tool call as an override sees it, before the gate.

    Attributes:
        agent: the agent name the default convention would use.
        tool_name: the tool's name, as the call gives it (not checked yet).
        args: the tool input, as the call gives it (not checked yet).
        tool_call_id: the model's id of the call, or None (a direct invocation).
        config: the runnable config of the call, or None.
    """

    agent: str
    tool_name: object
    args: object
    tool_call_id: object
    config: RunnableConfig | None


LangChainOverride = Callable[[LangChainToolCall], Action]
"""An override: from a `LangChainToolCall` to the `Action` the gate judges (SPEC §7)."""


def agent_for(configured: str | None, config: RunnableConfig | None) -> str:
    """The agent of a call: as configured, else the run's ``lc_agent_name``, else the default."""
    if configured is not None:
        return configured
    metadata = config.get("metadata") if config is not None else None
    if isinstance(metadata, Mapping):
        named = metadata.get(_AGENT_METADATA_KEY)
        if isinstance(named, str):
            return named  # the gate validates it (a hostile name is a recorded deny)
    return DEFAULT_AGENT


def make_action(
    override: LangChainOverride | None,
    agent: str,
    tool_name: object,
    tool_input: object,
    tool_call_id: object,
    config: RunnableConfig | None,
) -> Action:
    """The action to judge; a failed override or a bad tool name becomes one the gate denies."""
    if override is not None:
        try:
            made = override(LangChainToolCall(agent, tool_name, tool_input, tool_call_id, config))
        except Exception as exc:  # noqa: BLE001 - host code failed: a recorded deny
            _log.warning("ghost.langchain_override_failed", error=type_name(exc))
            return Action(agent, cast(str, tool_name), cast(str, _OVERRIDE_FAILED), {})
        if isinstance(made, Action):
            return made
        _log.warning("ghost.langchain_override_failed", error=type_name(made))
        return Action(agent, cast(str, tool_name), cast(str, _OVERRIDE_FAILED), {})
    if type(tool_name) is not str:  # a str subclass could answer `+` with its own code
        return Action(agent, cast(str, tool_name), cast(str, _UNNAMED), {})
    # A non-dict input goes to the gate as it is: a recorded deny naming its type.
    return tool_action(agent, tool_name, cast(Mapping[str, Any], tool_input))
