"""The pieces of the OpenAI Agents SDK adapter that need no SDK (ADR 0023).

What one function-tool call is to ghost (`AgentToolCall`), what the adapter
keeps of its decision until it runs (`GatedRecord`), how its arguments
text is read (`parse_arguments`: strictly, or not at all), the action a failure
is judged as (`failure_action`: one the gate always denies, whatever the
policy). A held call is resolved (`resolve_approval`) and executed
(`approved` with the arguments it runs with) in two steps of the shared core,
because the SDK resolves a call at one moment and runs it at another.

Pure but for the gate calls: no SDK import, no logging of argument values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from runtime._action import Action, Decision
from runtime._approval import Approval
from runtime._canonical import StrictJSONError, loads_strict
from runtime._recorded import type_name
from runtime._verdict import RuntimeVerdict
from runtime.integrations._gated_call import TOOL_RESOURCE_PREFIX, GatedCall, judged, refusal_text

__all__ = [
    "AgentToolCall",
    "ArgumentsError",
    "GatedRecord",
    "arguments_key",
    "failure_action",
    "parse_arguments",
    "rejection_text",
]

# The key every failure action carries, and the value that makes the gate deny it:
# a non-finite float denies before any policy is read, `to_data` or not (SPEC §3).
FAILURE_KEY: Final = "ghost_adapter_failure"
_DENY_KEY: Final = "ghost_adapter_deny"


@dataclass(frozen=True, slots=True)
class AgentToolCall:
    """One function-tool call of an OpenAI Agents SDK run, as an action override receives it.

    Attributes:
        agent: the name of the agent the tool belongs to.
        tool_name: the tool's name, as the model called it.
        call_id: the model's id for the call.
        args: the parsed tool arguments (a fresh dict; the override may keep it).
    """

    agent: str
    tool_name: str
    call_id: str
    args: dict[str, Any]


class ArgumentsError(ValueError):
    """A tool call's arguments text that ghost will not read (not JSON, not an object, ambiguous).

    The message names what is wrong, never the text.
    """


def parse_arguments(text: object) -> dict[str, Any]:
    """Parse a tool call's arguments text into the dict the gate judges.

    Strict (`runtime.loads_strict`): a key given twice, ``NaN`` or ``Infinity``
    is refused, so that no two readers can take the text two ways. An empty
    text is ``{}``, as the SDK reads it.

    Raises:
        ArgumentsError: the text is not a str, not JSON, or not a JSON object.
    """
    if type(text) is not str:
        raise ArgumentsError(f"the tool arguments are a {type_name(text)}, not JSON text")
    if not text.strip():
        return {}
    try:
        parsed = loads_strict(text)
    except StrictJSONError as exc:
        raise ArgumentsError(f"the tool arguments are ambiguous JSON: {exc}") from None
    except (ValueError, RecursionError):
        raise ArgumentsError("the tool arguments are not valid JSON") from None
    if type(parsed) is not dict:
        raise ArgumentsError(f"the tool arguments are a JSON {type_name(parsed)}, not an object")
    return parsed


def arguments_key(args: Mapping[str, Any]) -> str | None:
    """A type-strict fingerprint of parsed arguments (``1``, ``1.0`` and ``true`` differ).

    None when the arguments cannot be encoded (too deep): then no two calls compare equal.
    """
    try:
        return json.dumps(
            args, sort_keys=True, ensure_ascii=True, allow_nan=False, separators=(",", ":")
        )
    except (ValueError, TypeError, RecursionError):
        return None


def failure_action(agent: str, tool_name: str, what: str) -> Action:
    """The action a call is judged as when it cannot be judged as itself: always denied.

    The gate records it like any other decision, under the call's own agent,
    verb and resource, and denies it under every policy: one of its arguments
    is NaN, which the snapshot refuses before any rule is read (the reason
    says so). ``what`` is for the model's refusal; in the log it is part of the
    arguments' hash only, as every argument is.
    """
    return Action(
        agent=agent,
        verb=tool_name,
        resource=TOOL_RESOURCE_PREFIX + tool_name,
        args={FAILURE_KEY: what, _DENY_KEY: math.nan},
    )


@dataclass(slots=True)
class GatedRecord:
    """What the gate decided for one call (by tool name and call id), until it runs.

    ``args_key`` binds the decision to the arguments it was made on: a call that
    arrives with other arguments is not this decision's. ``approval`` is set once
    a held decision is resolved (mutated under the `ToolGate`'s lock). ``failure``
    says why a call was judged as a `failure_action` (the model is told).
    """

    decision: Decision
    args_key: str | None
    approval: Approval | None = None
    failure: str | None = None  # why the call could not be judged as itself

    @property
    def held(self) -> bool:
        return self.decision.verdict is RuntimeVerdict.PENDING

    def judged(self) -> GatedCall:
        """The call before any human; a failure's refusal says what failed."""
        if self.failure is None:
            return judged(self.decision)
        return GatedCall(
            self.decision,
            None,
            None,
            f"ghost denied this tool call: {self.failure} (decision {self.decision.decision_id})",
        )


def rejection_text(decision: Decision, approval: Approval | None) -> str:
    """What the model gets for a held call that will not run."""
    if approval is None or approval.approved:  # ghost approved it, but the SDK rejected it
        return (
            "the tool call was rejected in the agent run and did not run"
            f" (decision {decision.decision_id})"
        )
    return refusal_text(decision, approval)
