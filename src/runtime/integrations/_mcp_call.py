"""One MCP ``tools/call`` as the gate sees it: the call, its `Action`, its trace context.

SPEC §7's convention: ``agent`` is ``--agent``, else the client's name from
the request's ``_meta`` (``io.modelcontextprotocol/clientInfo``, MCP
2026-07-28), else the ``clientInfo`` of ``initialize`` (older revisions),
else ``mcp-client``; ``verb`` is the tool's name; ``resource`` is
``mcp:<server name>``; ``args`` are the call's arguments.

Nothing is validated here, on purpose: whatever the client sent (a tool name
that is a number or holds control characters, arguments that are a list or a
string, a ``clientInfo`` without a name) goes to the gate as it came, and the
gate's snapshot denies it and records it in escaped form (SPEC §3). A check
made here instead would be a refusal the log never saw.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from runtime._action import Action

__all__ = [
    "CLIENT_INFO_META_KEY",
    "DEFAULT_AGENT",
    "MCP_RESOURCE_PREFIX",
    "McpToolCall",
    "mcp_action",
    "trace_headers",
]

CLIENT_INFO_META_KEY: Final = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_META_KEY: Final = "io.modelcontextprotocol/serverInfo"
DEFAULT_AGENT: Final = "mcp-client"
MCP_RESOURCE_PREFIX: Final = "mcp:"
# What the gate is given for a trace header that is not a string: invalid by W3C's
# grammar, so the decision records a replaced trace and the value is never shown.
_NOT_A_HEADER: Final = "-"
_ABSENT: Final = object()


@dataclass(frozen=True, slots=True)
class McpToolCall:
    """One ``tools/call`` request, as the client sent it (nothing validated).

    What an action override (`runtime.integrations.ActionOverride`) receives.

    Attributes:
        name: ``params.name``: the tool's name (any JSON value; None if absent).
        arguments: ``params.arguments`` (``{}`` when absent or null; any JSON value).
        agent: the agent by SPEC §7's convention (any JSON value: a hostile
            ``clientInfo`` may make it a non-string, which the gate denies).
        server_name: ``--server-name`` or the child's own name; None when
            neither is known.
        meta: the request's ``_meta`` (``{}`` when absent or not an object).
    """

    name: Any
    arguments: Any
    agent: Any
    server_name: str | None
    meta: Mapping[str, Any]

    @classmethod
    def from_params(
        cls,
        params: object,
        *,
        agent: str | None,
        initialize_client: str | None,
        server_name: str | None,
    ) -> McpToolCall:
        """Read a ``tools/call`` request's ``params`` (any JSON value).

        Args:
            params: the request's ``params``.
            agent: the configured agent name (``--agent``), which wins.
            initialize_client: the ``clientInfo.name`` of the session's
                ``initialize`` request, if one was seen.
            server_name: the server's name, if known.
        """
        if isinstance(params, dict):
            name = params.get("name")
            arguments = params.get("arguments")
            if arguments is None:
                arguments = {}
            meta_value = params.get("_meta")
        else:
            # Not an object: no name, and the params themselves as the arguments,
            # so the gate's snapshot denies the call ("args must be a dict").
            name, arguments, meta_value = None, params, None
        meta: Mapping[str, Any] = meta_value if isinstance(meta_value, dict) else {}
        return cls(
            name=name,
            arguments=arguments,
            agent=_agent(agent, meta, initialize_client),
            server_name=server_name,
            meta=meta,
        )


def _agent(configured: str | None, meta: Mapping[str, Any], initialize_client: str | None) -> Any:
    if configured is not None:
        return configured
    info = meta.get(CLIENT_INFO_META_KEY, _ABSENT)
    if info is not _ABSENT:
        # Present but malformed (not an object, no name) is not absent: the gate
        # denies a non-string agent instead of the call passing as someone else.
        return info.get("name") if isinstance(info, dict) else info
    if initialize_client is not None:
        return initialize_client
    return DEFAULT_AGENT


def mcp_action(call: McpToolCall) -> Action:
    """The `Action` of ``call`` by SPEC §7's convention (``resource`` ``mcp:<server>``).

    With the server's name unknown the resource is None, which the gate denies.
    """
    resource = None if call.server_name is None else MCP_RESOURCE_PREFIX + call.server_name
    return Action(agent=call.agent, verb=call.name, resource=resource, args=call.arguments)  # type: ignore[arg-type]


def trace_headers(meta: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The W3C ``traceparent`` and ``tracestate`` a request's ``_meta`` carries.

    A value that is not a string becomes a header the gate rejects (and records
    as a replaced trace), never one it silently ignores.
    """
    return _header(meta.get("traceparent")), _header(meta.get("tracestate"))


def _header(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return _NOT_A_HEADER
