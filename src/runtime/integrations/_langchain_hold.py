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

import asyncio
import contextvars
import threading
from collections.abc import Coroutine, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER, CONFIG_KEY_SCRATCHPAD

from runtime._action import Decision
from runtime.integrations._gated_call import GatedCall

__all__ = ["Held", "HeldCalls", "HoldKey", "Resume", "hold_key", "parse_resume", "payload"]

HoldKey = tuple[str, str, str, str]
"""(thread id, checkpoint namespace, tool call id, tool name) of one call in a graph."""

ResultT = TypeVar("ResultT")
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
class Held:
    """A held call: its decision and, once its resume was answered, what it came to.

    Attributes:
        decision: the pending decision.
        tool_input: the input of the call that was held.
        settled: the judged answer, kept until the call's outcome is (so a run
            cancelled between the answer and the tool still runs it on the
            re-run, under the approval already given), or None.
    """

    decision: Decision
    tool_input: object
    settled: GatedCall | None = None


@dataclass(frozen=True, slots=True)
class _Answered:
    tool_input: object
    result: object


def _same(a: object, b: object) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an input that cannot be compared is another call
        return False


class HeldCalls:
    """The pending decisions of interrupted tool calls, by `HoldKey`. Thread-safe.

    Also which decisions each task (thread and checkpoint namespace) ever held:
    LangGraph hands a task's resume values to its ``interrupt`` calls by their
    order, and tool calls a ``ToolNode`` runs in parallel reach their
    ``interrupt`` in any order, so in a task that held more than one decision a
    resume value must name the decision it answers (`answerable`).

    Bounded: past 4,096 held calls (or tasks) the oldest are forgotten (a resume
    of one of those asks the gate again, as after a restart).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[HoldKey, Held] = {}
        self._tasks: dict[tuple[str, str], set[str]] = {}
        self._answered: dict[HoldKey, _Answered] = {}
        self._running: dict[HoldKey, Future[Any]] = {}

    def find(self, key: HoldKey, tool_input: object) -> Held | None:
        """What is held for ``key``, if the call there has the same input."""
        with self._lock:
            held = self._held.get(key)
        if held is None:
            return None
        return held if _same(held.tool_input, tool_input) else None

    def settle(self, key: HoldKey, call: GatedCall) -> None:
        """Keep the answer of the held call at ``key`` until its outcome is kept."""
        with self._lock:
            held = self._held.get(key)
            if held is not None:
                self._held[key] = Held(held.decision, held.tool_input, call)

    def answered(self, key: HoldKey, tool_input: object, result: object) -> None:
        """Keep the outcome of the held call at ``key``, now answered (run or refused).

        LangGraph runs the whole node again while another call of the same step
        is held; the answered call then returns this, and runs no second time.
        """
        with self._lock:
            self._held.pop(key, None)
            self._answered.pop(key, None)
            self._answered[key] = _Answered(tool_input, result)
            while len(self._answered) > _MAX_HELD:
                del self._answered[next(iter(self._answered))]

    def start(self, key: HoldKey, work: Coroutine[Any, Any, ResultT]) -> Future[ResultT]:
        """Run ``work`` (an answered call's tool) to its end in a thread of its own.

        Not a task on the caller's loop: each ``graph.ainvoke`` under
        ``asyncio.run`` has a loop of its own, and when another call of the step
        interrupts, that run ends and its loop's teardown cancels every task left
        on it — a tool already running in an executor thread would finish with
        its outcome lost (and run again on the next run), one not yet started
        would never run. Here ``work`` runs on a loop that nothing but its own end
        closes, in the caller's context (LangGraph's config lives in
        contextvars), and records its outcome (`answered`) before the returned
        future is done. The future cannot be cancelled: awaiting it and giving
        up leaves the call running.
        """
        done: Future[ResultT] = Future()
        done.set_running_or_notify_cancel()  # from here on, cancel() is refused
        context = contextvars.copy_context()

        def run() -> None:
            try:
                result = context.run(asyncio.run, work)
            except BaseException as exc:  # noqa: BLE001 - handed to whoever awaits the call
                done.set_exception(exc)
            else:
                done.set_result(result)
            finally:
                with self._lock:
                    if self._running.get(key) is done:
                        del self._running[key]

        with self._lock:
            self._running[key] = done
        threading.Thread(target=run, name="ghost-answered-call", daemon=True).start()
        return done

    def running(self, key: HoldKey) -> Future[Any] | None:
        """The future of the answered call at ``key`` whose tool is still running, or None."""
        with self._lock:
            return self._running.get(key)

    def outcome(self, key: HoldKey, tool_input: object) -> tuple[bool, object]:
        """``(True, outcome)`` of the answered call at ``key`` else ``(False, None)``."""
        with self._lock:
            answered = self._answered.get(key)
        if answered is None or not _same(answered.tool_input, tool_input):
            return False, None
        return True, answered.result

    def hold(self, key: HoldKey, decision: Decision, tool_input: object) -> None:
        """Keep ``decision`` for the re-run of the call at ``key``."""
        with self._lock:
            self._held.pop(key, None)
            self._held[key] = Held(decision, tool_input)
            while len(self._held) > _MAX_HELD:
                del self._held[next(iter(self._held))]
            self._tasks.setdefault(key[:2], set()).add(decision.decision_id)
            while len(self._tasks) > _MAX_HELD:
                del self._tasks[next(iter(self._tasks))]

    def answerable(self, key: HoldKey, resume: Resume) -> bool:
        """Whether ``resume`` may answer the call at ``key`` without naming its decision.

        Only when its task never held another decision: LangGraph cannot say
        which of several parallel interrupts a plain value answers.
        """
        if resume.decision_id is not None:
            return True
        with self._lock:
            return len(self._tasks.get(key[:2], ())) <= 1

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)


def payload(decision: Decision, *, agent: str, tool_name: object) -> dict[str, Any]:
    """What ``interrupt`` shows the host: what is held and why, as the log shows it.

    ``args`` is ``decision.args``: the arguments that run if approved, after
    narrowing and scrubbing, so a secret the scrubber caught is not in it.
    """
    return {
        "kind": PAYLOAD_KIND,
        "decision_id": decision.decision_id,
        "agent": agent,
        "tool": _text(tool_name),  # an override can hold a call whose name is no str
        "reason": decision.reason,
        "matched_policy": decision.matched_policy,
        "args": dict(decision.args),
        # How to answer: Command(resume={"approved": ..., "approver": ..., "decision_id": ...}).
        "answer": {
            "approved": "True or False",
            "approver": "who decides (else the adapter's configured approver)",
            "decision_id": decision.decision_id,
        },
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
