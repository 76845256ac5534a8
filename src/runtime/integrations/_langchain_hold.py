"""A ``pending`` tool call held as a LangGraph interrupt, and its resume (SPEC §7, ADR 0024).

LangGraph's human-in-the-loop flow is ``interrupt(payload)`` inside a node and
``Command(resume=value)`` from the host; on resume the node runs again from its
start, and the ``interrupt`` call returns ``value``. For a gated tool call that
re-run must not ask the gate again (a second pending decision for the same
call, and an approval of the first that nothing reads), so the held decision is
kept here, keyed by where the call sits in the graph: the thread, the task's
checkpoint namespace and the tool call id. The re-run finds it and goes
straight to the ``interrupt``, which now returns the resume value.

The key lives in this process: a resume served by another process, or after a
restart, finds nothing and asks the gate again (ADR 0024 says why and what that
costs). What runs is always a decision's own ``decision.args``, never the
re-run's input, so a key that matched a different call could not run arguments
nobody approved.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER, CONFIG_KEY_SCRATCHPAD

from runtime._action import Decision

__all__ = ["HeldCalls", "HoldKey", "Resume", "hold_key", "parse_resume", "payload"]

HoldKey = tuple[str, str, str, str]
"""(thread id, checkpoint namespace, tool call id, tool name) of one call in a graph."""

PAYLOAD_KIND: Final = "ghost.approval"
_MAX_HELD: Final = 4096


def hold_key(
    config: RunnableConfig | None, tool_call_id: object, tool_name: object
) -> HoldKey | None:
    """Where a tool call sits in a checkpointed LangGraph run, or None outside one.

    Only a run with a checkpointer can be interrupted and resumed; anywhere else
    (a tool invoked directly, a chain, a graph compiled without one) a pending
    call waits for its approval instead.
    """
    if config is None:
        return None
    configurable = config.get("configurable")
    if not isinstance(configurable, Mapping):
        return None
    if configurable.get(CONFIG_KEY_SCRATCHPAD) is None:
        return None
    if configurable.get(CONFIG_KEY_CHECKPOINTER) is None:
        return None
    return (
        _text(configurable.get("thread_id")),
        _text(configurable.get("checkpoint_ns")),
        _text(tool_call_id),
        _text(tool_name),
    )


def _text(value: object) -> str:
    # repr of a str subclass could run its code: read the characters themselves.
    if isinstance(value, str):
        return str.__str__(value)
    return f"<{type(value).__name__}>" if value is not None else ""


@dataclass(frozen=True, slots=True)
class _Held:
    decision: Decision
    tool_input: object


class HeldCalls:
    """The pending decisions of interrupted tool calls, by `HoldKey`. Thread-safe.

    Bounded: past 4,096 held calls the oldest are forgotten (a resume of one of
    those asks the gate again, as after a restart).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[HoldKey, _Held] = {}

    def find(self, key: HoldKey, tool_input: object) -> Decision | None:
        """The decision held for ``key``, if the call there has the same input."""
        with self._lock:
            held = self._held.get(key)
        if held is None:
            return None
        try:
            same = bool(held.tool_input == tool_input)
        except Exception:  # noqa: BLE001 - an input that cannot be compared is another call
            same = False
        return held.decision if same else None

    def hold(self, key: HoldKey, decision: Decision, tool_input: object) -> None:
        """Keep ``decision`` for the re-run of the call at ``key``."""
        with self._lock:
            self._held.pop(key, None)
            self._held[key] = _Held(decision, tool_input)
            while len(self._held) > _MAX_HELD:
                del self._held[next(iter(self._held))]

    def release(self, key: HoldKey) -> None:
        """Forget the call at ``key`` (it was resumed)."""
        with self._lock:
            self._held.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)


def payload(decision: Decision, *, agent: str, tool_name: str) -> dict[str, Any]:
    """What ``interrupt`` shows the host: what is held and why, as the log shows it.

    ``args`` is ``decision.args``: the arguments that run if approved, after
    narrowing and scrubbing, so a secret the scrubber caught is not in it.
    """
    return {
        "kind": PAYLOAD_KIND,
        "decision_id": decision.decision_id,
        "agent": agent,
        "tool": tool_name,
        "reason": decision.reason,
        "matched_policy": decision.matched_policy,
        "args": dict(decision.args),
        "resume": {"approved": "true or false", "approver": "who decides (optional)"},
    }


@dataclass(frozen=True, slots=True)
class Resume:
    """A resume value read as an answer to one held decision.

    Attributes:
        approve: the answer, or None when the value is not an answer.
        approver: who answered (None: the adapter's configured approver).
        decision_id: the decision the value names, or None when it names none.
        problem: why the value is not an answer, or None.
    """

    approve: bool | None
    approver: str | None
    decision_id: str | None
    problem: str | None


def parse_resume(value: object) -> Resume:
    """Read ``Command(resume=value)`` as an answer to one held decision.

    The value is ``{"approved": bool, "approver"?: str, "decision_id"?: str}``.

    Strict, so a truthy string or a number is never taken for an approval.
    """
    if not isinstance(value, Mapping):
        return Resume(None, None, None, "the resume value is not a mapping")
    try:
        approve = value.get("approved")
        approver = value.get("approver")
        decision_id = value.get("decision_id")
    except Exception:  # noqa: BLE001 - a hostile mapping is not an answer
        return Resume(None, None, None, "the resume value cannot be read")
    if decision_id is not None and type(decision_id) is not str:
        return Resume(None, None, None, "the resume value's decision_id is not a string")
    if type(approve) is not bool:
        return Resume(None, None, decision_id, "the resume value's 'approved' is not True or False")
    if approver is not None and type(approver) is not str:
        return Resume(None, None, decision_id, "the resume value's approver is not a string")
    return Resume(approve, approver, decision_id, None)
