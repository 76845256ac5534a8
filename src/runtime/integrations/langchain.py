"""ghost for LangChain tools and LangGraph graphs (SPEC §7, ADR 0024; ``ghost-sdk[langchain]``).

Every tool call is judged by the gate before the tool runs, as the `Action`
``agent=<agent name>, verb=<tool name>, resource="tool:<tool name>",
args=<the tool input>``. Two ways in, one behaviour:

* a ``ToolNode`` hook: ``ToolNode(tools, wrap_tool_call=tool_gate.wrap_tool_call,
  awrap_tool_call=tool_gate.awrap_tool_call)``, or `gated_tool_node` which
  builds that node -- every call the node makes is gated;
* a tool wrapper: `gate_tool` (or `ToolGate.tool`) returns a `BaseTool` that
  gates each call of the tool it wraps, for agents and chains that take tools.

What the verdicts become:

* ``allow``, ``narrow``, ``scrub``: the tool runs with ``decision.args`` (the
  narrowed or scrubbed arguments, never the model's originals);
* ``deny``: the model gets LangChain's own tool error, a ``ToolMessage`` with
  ``status="error"`` whose text carries ``decision.reason`` and the decision id;
* ``pending``: inside a LangGraph run with a checkpointer, ``interrupt(payload)``
  (the payload shows the decision id, the tool, the reason and the arguments
  that would run, scrubbed); ``Command(resume={"approved": True, "approver":
  "alice"})`` resolves the ghost approval (`resolve_held`: a resolution made
  meanwhile through ``gate.approvals`` or ``ghost approvals`` wins), and the tool
  runs only under an approval `ApprovalQueue.execute` accepts. Anywhere else
  the call waits, up to the rule's approval timeout (`settle`).

Fail closed: a tool name that is not a string, an input that is not a dict,
or an override that raises or returns no `Action` is a recorded ``deny``. An
`AuditError` propagates and the tool does not run (``ToolNode``'s default
error handling re-raises it too).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, interrupt

from runtime._action import Action, Decision
from runtime._approval import wait_limit_ns
from runtime._errors import ApprovalError
from runtime._gate import Gate
from runtime._recorded import type_name
from runtime._verdict import RuntimeVerdict
from runtime.integrations._gated_call import (
    GatedCall,
    asettle,
    judged,
    resolve_held,
    settle,
)
from runtime.integrations._langchain_action import (
    DEFAULT_AGENT,
    LangChainOverride,
    LangChainToolCall,
    OverrideFailed,
    UnnamedTool,
    agent_for,
    make_action,
)
from runtime.integrations._langchain_hold import (
    HeldCalls,
    HoldKey,
    Resume,
    hold_key,
    parse_resume,
    payload,
)

__all__ = [
    "DEFAULT_AGENT",
    "LangChainOverride",
    "LangChainToolCall",
    "OverrideFailed",
    "ToolGate",
    "UnnamedTool",
    "gate_tool",
    "gated_tool_node",
]

_ResultT = TypeVar("_ResultT")


class ToolGate:
    """Gates LangChain tool calls with one `Gate`: the ``ToolNode`` hooks and a tool wrapper.

    Args:
        gate: the gate that judges every call.
        agent: the agent name of every call; default: the run's ``lc_agent_name``
            metadata (LangChain's ``create_agent(name=...)``), else ``"LangGraph"``.
        override: a callable from a `LangChainToolCall` to the `Action` to judge,
            for resources finer than the tool; what it raises (or a result that
            is not an `Action`) denies the call, recorded.
        approver: who answers a LangGraph resume that names no ``approver``.
        wait_timeout_s: outside a checkpointed graph, the longest a pending
            call blocks (default: until resolved or expired by the rule's
            timeout); past it `TimeoutError` is raised and nothing runs.

    Raises:
        TypeError: ``gate`` is not a `Gate`, ``override`` is not callable,
            ``agent`` or ``approver`` is not a str, ``wait_timeout_s`` not a number.
        ValueError: ``wait_timeout_s`` is NaN or negative.
    """

    def __init__(
        self,
        gate: Gate,
        *,
        agent: str | None = None,
        override: LangChainOverride | None = None,
        approver: str | None = None,
        wait_timeout_s: float = math.inf,
    ) -> None:
        if not isinstance(gate, Gate):
            raise TypeError(f"ToolGate needs a Gate, not {type_name(gate)}")
        if override is not None and not callable(override):
            raise TypeError(f"override must be callable, not {type_name(override)}")
        wait_limit_ns(wait_timeout_s)  # checked here, not at the first pending call
        if approver is not None and type(approver) is not str:
            raise TypeError(f"approver must be a name (a str), not {type_name(approver)}")
        if agent is not None and not isinstance(agent, str):
            raise TypeError(f"agent must be a name (a str), not {type_name(agent)}")
        self._gate = gate
        self._agent = agent
        self._override = override
        self._approver = approver
        self._wait_timeout_s = wait_timeout_s
        self._held = HeldCalls()

    @property
    def gate(self) -> Gate:
        """The gate that judges every call."""
        return self._gate

    @property
    def held_count(self) -> int:
        """How many interrupted calls this process remembers for their resume."""
        return len(self._held)

    # -- judging one call -----------------------------------------------------------------

    def gate_call(
        self,
        tool_name: object,
        tool_input: object,
        *,
        tool_call_id: object = None,
        config: RunnableConfig | None = None,
    ) -> GatedCall:
        """Judge one tool call; hold a ``pending`` one (interrupt, or wait); return what to do.

        Args:
            tool_name: the tool's name.
            tool_input: the tool's input (a dict of the model's arguments).
            tool_call_id: the model's id of the call.
            config: the call's runnable config (a LangGraph run's, inside a graph).

        Returns:
            The `GatedCall`: run with ``call.args``, or hand ``call.refusal`` to the model.

        Raises:
            GraphInterrupt: (LangGraph's) the call is held for a human.
            TimeoutError: outside a graph, ``wait_timeout_s`` passed first.
            AuditError: a record could not be written; the tool must not run.
        """
        key = hold_key(config, tool_call_id, tool_name)
        return self._judge(key, tool_name, tool_input, tool_call_id, config)

    async def agate_call(
        self,
        tool_name: object,
        tool_input: object,
        *,
        tool_call_id: object = None,
        config: RunnableConfig | None = None,
    ) -> GatedCall:
        """The asyncio twin of `gate_call`: the gate and any wait never block the loop."""
        key = hold_key(config, tool_call_id, tool_name)
        return await self._ajudge(key, tool_name, tool_input, tool_call_id, config)

    def run_call(
        self,
        tool_name: object,
        tool_input: object,
        run: Callable[[dict[str, Any]], _ResultT],
        refuse: Callable[[GatedCall], _ResultT],
        *,
        tool_call_id: object = None,
        config: RunnableConfig | None = None,
    ) -> _ResultT:
        """Gate one call, then ``run(call.args)`` or ``refuse(call)``; return what that returns.

        Inside a checkpointed graph, a call that was held and then answered is
        answered once: when LangGraph runs the node again (another call of the
        same step interrupts), its first outcome is returned, and the tool does
        not run a second time.

        Raises:
            as `gate_call`, and whatever ``run`` raises.
        """
        key = hold_key(config, tool_call_id, tool_name)
        if key is not None:
            found, result = self._held.outcome(key, tool_input)
            if found:
                return cast(_ResultT, result)
        call = self._judge(key, tool_name, tool_input, tool_call_id, config)
        result = refuse(call) if call.args is None else run(call.args)
        if key is not None and call.decision.verdict is RuntimeVerdict.PENDING:
            self._held.answered(key, tool_input, result)
        return result

    async def arun_call(
        self,
        tool_name: object,
        tool_input: object,
        run: Callable[[dict[str, Any]], Awaitable[_ResultT]],
        refuse: Callable[[GatedCall], _ResultT],
        *,
        tool_call_id: object = None,
        config: RunnableConfig | None = None,
    ) -> _ResultT:
        """The asyncio twin of `run_call` (``run`` is awaited).

        An answered held call runs to its end in a thread of its own
        (`HeldCalls.start`): a run of the graph that ends meanwhile (another call
        of the step interrupted it, and ``asyncio.run`` tore its loop down) does
        not stop it halfway, and the node's re-run, on whatever loop, awaits its
        outcome rather than running the tool again.
        """
        key = hold_key(config, tool_call_id, tool_name)
        if key is not None:
            found, result = self._held.outcome(key, tool_input)
            if found:
                return cast(_ResultT, result)
            running = self._held.running(key)
            if running is not None:
                return cast(_ResultT, await asyncio.wrap_future(running))
        call = await self._ajudge(key, tool_name, tool_input, tool_call_id, config)
        if key is None or call.decision.verdict is not RuntimeVerdict.PENDING:
            return refuse(call) if call.args is None else await run(call.args)
        held_at = key

        async def finish() -> _ResultT:
            outcome = refuse(call) if call.args is None else await run(call.args)
            self._held.answered(held_at, tool_input, outcome)
            return outcome

        return await asyncio.wrap_future(self._held.start(held_at, finish()))

    # -- the ToolNode hooks -----------------------------------------------------------------

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        execute: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """``ToolNode(wrap_tool_call=...)``: gate the call, then run it with the effective args.

        Raises:
            as `gate_call`.
        """
        tool_call = request.tool_call
        return self.run_call(
            tool_call.get("name"),
            tool_call.get("args"),
            lambda args: execute(request.override(tool_call={**tool_call, "args": args})),
            lambda call: _error_message(tool_call, call),
            tool_call_id=tool_call.get("id"),
            config=_config_of(request),
        )

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        execute: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """``ToolNode(awrap_tool_call=...)``: the asyncio twin of `wrap_tool_call`."""
        tool_call = request.tool_call
        return await self.arun_call(
            tool_call.get("name"),
            tool_call.get("args"),
            lambda args: execute(request.override(tool_call={**tool_call, "args": args})),
            lambda call: _error_message(tool_call, call),
            tool_call_id=tool_call.get("id"),
            config=_config_of(request),
        )

    def tool_node(self, tools: Sequence[BaseTool | Callable[..., Any]], **kwargs: Any) -> ToolNode:
        """A ``ToolNode`` of ``tools`` whose every call is gated (``kwargs`` go to ``ToolNode``).

        Raises:
            TypeError: ``kwargs`` names a wrapper of its own (``wrap_tool_call``,
                ``awrap_tool_call``): compose it around `wrap_tool_call` instead.
        """
        if "wrap_tool_call" in kwargs or "awrap_tool_call" in kwargs:
            raise TypeError("a gated ToolNode takes ghost's wrappers; compose yours around them")
        return ToolNode(
            tools,
            wrap_tool_call=self.wrap_tool_call,
            awrap_tool_call=self.awrap_tool_call,
            **kwargs,
        )

    def tool(self, tool: BaseTool) -> BaseTool:
        """A tool that gates each call of ``tool`` and runs it with the effective args.

        Raises:
            TypeError: ``tool`` is not a LangChain `BaseTool`.
        """
        from runtime.integrations._langchain_tool import GatedTool

        if not isinstance(tool, BaseTool):
            raise TypeError(f"gate_tool wraps a LangChain BaseTool, not {type_name(tool)}")
        return GatedTool.wrapping(tool, self)

    # -- machinery ------------------------------------------------------------------------

    def _judge(
        self,
        key: HoldKey | None,
        tool_name: object,
        tool_input: object,
        tool_call_id: object,
        config: RunnableConfig | None,
    ) -> GatedCall:
        held = self._held.find(key, tool_input) if key is not None else None
        if held is not None and held.settled is not None:
            return held.settled  # answered on an earlier run of the node that never finished
        agent = agent_for(self._agent, config)
        if held is not None:
            decision = held.decision  # the re-run of a held call: no second decision
        else:
            action = make_action(self._override, agent, tool_name, tool_input, tool_call_id, config)
            decision = self._check_and_hold(key, action, tool_input)
        call = judged(decision)
        if not call.held:
            return call
        if key is None:
            return settle(self._gate, decision, timeout_s=self._wait_timeout_s)
        resume = self._interrupt(key, decision, agent, tool_name)
        return self._resolve(key, decision, resume)

    async def _ajudge(
        self,
        key: HoldKey | None,
        tool_name: object,
        tool_input: object,
        tool_call_id: object,
        config: RunnableConfig | None,
    ) -> GatedCall:
        held = self._held.find(key, tool_input) if key is not None else None
        if held is not None and held.settled is not None:
            return held.settled
        agent = agent_for(self._agent, config)
        if held is not None:
            decision = held.decision
        else:
            action = make_action(self._override, agent, tool_name, tool_input, tool_call_id, config)
            # One worker thread decides and holds: a run cancelled while it waits
            # cannot leave a pending decision that its re-run does not find.
            decision = await asyncio.to_thread(self._check_and_hold, key, action, tool_input)
        call = judged(decision)
        if not call.held:
            return call
        if key is None:
            return await asettle(self._gate, decision, timeout_s=self._wait_timeout_s)
        resume = self._interrupt(key, decision, agent, tool_name)
        # In a worker thread, which a cancelled run cannot stop halfway: the answer is
        # kept (HeldCalls.settle) even if this coroutine is cancelled while it waits.
        return await asyncio.to_thread(self._resolve, key, decision, resume)

    def _interrupt(self, key: HoldKey, decision: Decision, agent: str, tool_name: object) -> Resume:
        """Interrupt the run; on its resume, the answer to this decision.

        A resume value that names another decision is an answer to another held
        call, and one that names none is no answer when the task holds several
        (parallel tool calls reach ``interrupt`` in any order): this call asks
        again, with the next ``interrupt`` of its task. Nothing runs on a guess.
        """
        shown = payload(decision, agent=agent, tool_name=tool_name)
        while True:
            resume = parse_resume(interrupt(shown))
            if resume.decision_id not in (None, decision.decision_id):
                continue
            if self._held.answerable(key, resume):
                return resume

    def _check_and_hold(self, key: HoldKey | None, action: Action, tool_input: object) -> Decision:
        """Ask the gate; hold a ``pending`` decision for the re-run of the call at ``key``."""
        decision = self._gate.check(action)
        if key is not None and decision.verdict is RuntimeVerdict.PENDING:
            self._held.hold(key, decision, tool_input)
        return decision

    def _resolve(self, key: HoldKey, decision: Decision, resume: Resume) -> GatedCall:
        """Resolve a held decision with the answer a resume carried, and keep the answer."""
        call = self._answer(decision, resume)
        self._held.settle(key, call)
        return call

    def _answer(self, decision: Decision, resume: Resume) -> GatedCall:
        """The answer a resume carried, resolved through the gate (the first resolution wins)."""
        held = f"decision {decision.decision_id} stays pending until it is resolved or expires"
        if resume.approve is None:
            return _refused(decision, f"{resume.problem}; {held}")
        approver = resume.approver if resume.approver is not None else self._approver
        if approver is None:
            return _refused(decision, f"the resume value names no approver; {held}")
        try:
            return resolve_held(self._gate, decision, approve=resume.approve, approver=approver)
        except ApprovalError as exc:
            return _refused(decision, f"{exc}; {held}")


def _config_of(request: ToolCallRequest) -> RunnableConfig | None:
    runtime = request.runtime
    return runtime.config if runtime is not None else None


def _refused(decision: Decision, why: str) -> GatedCall:
    return GatedCall(decision, None, None, f"ghost did not run this tool call: {why}")


def _error_message(tool_call: Mapping[str, Any], call: GatedCall) -> ToolMessage:
    """LangChain's own tool error: the refusal, as a ``ToolMessage`` with ``status="error"``."""
    name = tool_call.get("name")
    return ToolMessage(
        content=cast(str, call.refusal),
        name=name if isinstance(name, str) else None,
        tool_call_id=_call_id(tool_call.get("id")),
        status="error",
        artifact={"ghost_decision_id": call.decision.decision_id},
    )


def _call_id(value: object) -> str:
    return str.__str__(value) if isinstance(value, str) else ""


def gate_tool(
    gate: Gate,
    tool: BaseTool,
    *,
    agent: str | None = None,
    override: LangChainOverride | None = None,
    approver: str | None = None,
) -> BaseTool:
    """A LangChain tool that gates each call of ``tool`` (sync and async).

    Shorthand for ``ToolGate(gate, ...).tool(tool)``; several tools gated alike
    share one `ToolGate`.

    Raises:
        TypeError: ``gate`` is not a `Gate`, or ``tool`` not a `BaseTool`.
    """
    return ToolGate(gate, agent=agent, override=override, approver=approver).tool(tool)


def gated_tool_node(
    gate: Gate,
    tools: Sequence[BaseTool | Callable[..., Any]],
    *,
    agent: str | None = None,
    override: LangChainOverride | None = None,
    approver: str | None = None,
    **kwargs: Any,
) -> ToolNode:
    """A LangGraph ``ToolNode`` of ``tools`` whose every call is gated (``kwargs`` go to it).

    Raises:
        TypeError: as `ToolGate` and `ToolGate.tool_node`.
    """
    return ToolGate(gate, agent=agent, override=override, approver=approver).tool_node(
        tools, **kwargs
    )
