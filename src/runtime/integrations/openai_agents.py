"""ghost in the OpenAI Agents SDK: each function-tool call gated before it runs (SPEC §7, ADR 0023).

``pip install ghost-sdk[openai-agents]``; this module imports the SDK (``agents``),
nothing else in ``runtime`` does. A few lines around an agent::

    tools = ToolGate(gate, approver="alice")
    agent = tools.agent(Agent(name="mailer", instructions=..., tools=[send_mail]))
    config = tools.run_config()
    result = await Runner.run(agent, "...", run_config=config)
    while result.interruptions:                  # ghost said pending
        state = result.to_state()
        for item in result.interruptions:
            state.approve(item)                  # or state.reject(item): ghost records it
        tools.sync(state)
        result = await Runner.run(agent, state, run_config=config)

The convention (SPEC §7): the action's ``agent`` is the agent's ``name``, its
``verb`` the tool's name, its ``resource`` ``tool:<tool name>``, its ``args`` the
parsed tool arguments; an override (``action=``) maps an `AgentToolCall` to an
`Action` of its own. What each verdict becomes:

* ``allow``, ``narrow``, ``scrub``: the tool runs with ``decision.args`` -- the
  JSON text it is invoked with, ``ctx.tool_arguments`` and ``ctx.tool_call`` all
  hold the effective arguments, never the model's originals.
* ``deny``: the tool does not run; the model gets, as the tool's output, the
  refusal text (``decision.reason`` and the decision id).
* ``pending``: the SDK's own human-in-the-loop interruption (``needs_approval``:
  the call is in ``result.interruptions``). Approving it through the SDK
  (``state.approve``) resolves the ghost approval as ``approved`` by
  ``approver`` when the run resumes; rejecting it (``state.reject``) resolves it
  as ``rejected`` -- through `sync` or, at the latest, through the run config's
  tool error formatter. A resolution made through ghost (``gate.approvals
  .resolve``, ``ghost approvals`` on a shared store) or an expiry is applied to
  the run state by `sync`. The first resolution wins, whichever side made it;
  an approval runs the tool once, only with the arguments that were approved
  (`ApprovalQueue.execute`).

Fail closed: arguments text that is not a JSON object (or repeats a key), an
override that raises or returns something else, a tool name the gate refuses
-- each is a recorded deny. `AuditError` propagates: the tool does not run, and
the run fails.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import json
import math
import threading
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Final, TypeVar

from agents import Agent, FunctionTool, RunConfig, RunContextWrapper, RunState
from agents.run_config import ToolErrorFormatterArgs
from agents.tool_context import ToolContext

from runtime._action import Action, Decision
from runtime._approval import Approval, wait_limit_ns
from runtime._errors import ApprovalError
from runtime._gate import Gate
from runtime._logging import get_event_log
from runtime._recorded import type_name
from runtime._verdict import RuntimeVerdict
from runtime.integrations._gated_call import (
    ActionOverride,
    GatedCall,
    approved,
    asettle,
    resolve_approval,
    tool_action,
)
from runtime.integrations._openai_agents_calls import (
    AgentToolCall,
    ArgumentsError,
    GatedRecord,
    arguments_key,
    failure_action,
    parse_arguments,
    rejection_text,
)

__all__ = ["AgentToolCall", "ToolGate"]

_log = get_event_log("ghost.openai_agents")
_TContext = TypeVar("_TContext")
_GATED_MARK: Final = "_ghost_tool_gate"
_ErrorFormatter = Callable[[ToolErrorFormatterArgs[Any]], Any]


class ToolGate:
    """Gates the function tools of OpenAI Agents SDK agents through one `Gate`.

    Args:
        gate: the gate that decides (and records) every call.
        approver: the name ghost records for an approval or rejection made
            through the SDK (``state.approve`` / ``state.reject``); it must be
            allowed by every matching rule that lists approvers.
        action: an override from an `AgentToolCall` to the `Action` the gate
            judges (for resources finer than the tool); whatever it raises or
            returns other than an `Action` denies the call, recorded.
        wait_s: how long a call that turns ``pending`` only as it is about to
            run (the SDK did not ask first: a tool approved with
            ``always_approve``, a run state resumed in another process) waits
            for a resolution through ghost before it is refused (default: up to
            the rule's approval timeout).

    Raises:
        TypeError: ``gate`` is not a `Gate`, ``approver`` not a str, ``action``
            not callable, or ``wait_s`` not a number.
        ValueError: ``wait_s`` is NaN or negative.
    """

    def __init__(
        self,
        gate: Gate,
        *,
        approver: str = "openai-agents",
        action: ActionOverride[AgentToolCall] | None = None,
        wait_s: float = math.inf,
    ) -> None:
        if not isinstance(gate, Gate):
            raise TypeError(f"ToolGate needs a Gate, not {type_name(gate)}")
        if type(approver) is not str:
            raise TypeError(f"approver must be a str, not {type_name(approver)}")
        if action is not None and not callable(action):
            raise TypeError(f"action must be callable, not {type_name(action)}")
        wait_limit_ns(wait_s)  # a number of seconds, not NaN, not negative
        self._gate = gate
        self._approver = approver
        self._override = action
        self._wait_s = wait_s
        self._lock = threading.Lock()
        self._calls: dict[tuple[str, str], GatedRecord] = {}
        self._names: set[str] = set()  # the names of the tools gated here

    # -- wrapping -----------------------------------------------------------------------

    def agent(self, agent: Agent[_TContext]) -> Agent[_TContext]:
        """A clone of ``agent`` whose function tools are gated under its ``name``.

        Other tools (hosted tools, shell, computer) are kept as they are, ungated;
        so are MCP servers (gate those with ``ghost mcp-proxy``).

        Raises:
            ValueError: a tool is gated already.
        """
        name = agent.name
        tools = [
            self.tool(t, agent=name) if isinstance(t, FunctionTool) else t for t in agent.tools
        ]
        return agent.clone(tools=tools)

    def tool(self, tool: FunctionTool, *, agent: str) -> FunctionTool:
        """A copy of ``tool`` whose every call is gated first, as the agent named ``agent``.

        The copy keeps the tool's name, schema and failure handling; its own
        ``needs_approval`` still applies to calls ghost permits.

        Raises:
            TypeError: ``tool`` is not a `FunctionTool`.
            ValueError: ``tool`` is gated already (a second gate would decide twice).
        """
        if not isinstance(tool, FunctionTool):
            raise TypeError(f"ToolGate gates FunctionTools, not {type_name(tool)}")
        if getattr(tool, _GATED_MARK, None) is not None:
            raise ValueError(f"the tool {tool.name!r} is gated already")
        gated = copy.copy(tool)
        name = tool.name
        own_approval = tool.needs_approval

        async def needs_approval(
            ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str
        ) -> bool:
            return await self._needs_approval(agent, name, own_approval, ctx, params, call_id)

        async def on_invoke(ctx: ToolContext[Any], arguments: str) -> Any:
            return await self._invoke(agent, tool, ctx, arguments)

        gated.needs_approval = needs_approval
        gated.on_invoke_tool = on_invoke
        setattr(gated, _GATED_MARK, self)
        with self._lock:
            self._names.add(name)
        return gated

    def run_config(self, base: RunConfig | None = None) -> RunConfig:
        """``base`` (default: a fresh `RunConfig`) with what gated runs need.

        * a tool error formatter that records an SDK rejection of a held call as
          ``rejected`` and tells the model so with ghost's refusal (other errors
          go to ``base``'s formatter);
        * ``trace_include_sensitive_data=False``: the SDK's own spans would
          otherwise carry the model's raw arguments, secrets the scrubber
          removes included.
        """
        config = base if base is not None else RunConfig()
        chained: _ErrorFormatter | None = config.tool_error_formatter

        async def formatter(args: ToolErrorFormatterArgs[Any]) -> str | None:
            refusal = await self._rejected(args)
            if refusal is not None or chained is None:
                return refusal
            message = chained(args)
            return await message if inspect.isawaitable(message) else message  # type: ignore[no-any-return]

        return replace(config, tool_error_formatter=formatter, trace_include_sensitive_data=False)

    # -- the human side -------------------------------------------------------------------

    def decision(self, call_id: str, tool_name: str) -> Decision | None:
        """The decision a call waits under (what a reviewer should see), or None.

        ``decision.args`` are the arguments the tool will run with if approved:
        narrowed and scrubbed, not the model's originals the SDK's approval item shows.
        """
        with self._lock:
            known = self._calls.get((tool_name, call_id))
        return known.decision if known is not None else None

    def sync(self, state: RunState[Any, Any]) -> tuple[Approval, ...]:
        """Settle the held calls of ``state`` between ghost and the SDK; call it before resuming.

        For each interruption that is a ghost-held call: an approval or rejection
        made through the SDK (``state.approve``/``reject``) resolves the ghost
        approval (by the configured approver); a resolution made through ghost
        (``gate.approvals.resolve``, ``ghost approvals``), or its expiry, is
        applied to ``state`` (``approve``, or ``reject`` with ghost's refusal as
        the message the model gets). The first resolution is what ghost records;
        a refusal on either side stops the call: ghost's rejection or expiry
        overrides an SDK approval, and an SDK rejection is never turned into an
        approval (a ghost approval made first is then recorded, never executed).

        A gated call the SDK interrupted on its own, because it could not read
        the arguments (not a JSON object), is denied (recorded) and rejected
        with ghost's refusal.

        Blocks on the approval store: from asyncio, ``await asyncio.to_thread(tools.sync, state)``.

        Returns:
            the resolutions applied, one per settled call.

        Raises:
            AuditError: a resolution could not be recorded (the call stays held).
        """
        context = getattr(state, "_context", None)
        settled: list[Approval] = []
        for item in state.get_interruptions():
            call_id, tool_name = item.call_id, item.tool_name
            if type(call_id) is not str or type(tool_name) is not str:
                continue
            key = (tool_name, call_id)
            with self._lock:
                known = self._calls.get(key)
                ours = tool_name in self._names
            if known is None and ours:
                self._refuse_unread(state, item, tool_name)
            if known is None or not known.held:
                continue
            said = _sdk_status(context, tool_name, call_id)
            approval = known.approval
            if approval is None:
                approval = self._settle(known, said=said)
                if approval is None:
                    continue
            if approval.approved and said is None:
                state.approve(item)
            elif not approval.approved or said is False:
                with self._lock:
                    self._calls.pop(key, None)  # it will not run: nothing left to keep
                # A refusal on either side stops the call (an SDK rejection is never
                # turned into an approval); the model gets ghost's words for it.
                state.reject(item, rejection_message=rejection_text(known.decision, approval))
            settled.append(approval)
        return tuple(settled)

    # -- machinery ------------------------------------------------------------------------

    def _refuse_unread(self, state: RunState[Any, Any], item: Any, tool_name: str) -> None:
        """Deny (recorded) and reject an interruption whose arguments ghost cannot read."""
        try:
            parse_arguments(item.arguments)
        except ArgumentsError as exc:
            agent = getattr(item.agent, "name", None)
            decision = self._gate.check(
                failure_action(agent if type(agent) is str else "", tool_name, str(exc))
            )
            _log.warning("ghost.tool_call_unjudgeable", decision_id=decision.decision_id)
            state.reject(
                item,
                rejection_message=f"ghost denied this tool call: {exc}"
                f" (decision {decision.decision_id})",
            )

    def _settle(self, known: GatedRecord, *, said: bool | None) -> Approval | None:
        """Resolve ``known`` as the SDK said, or read ghost's resolution; None if still held."""
        try:
            if said is not None:
                approval = resolve_approval(
                    self._gate, known.decision, approve=said, approver=self._approver
                )
            else:
                approval = self._gate.approvals.wait(known.decision.decision_id, 0)
        except TimeoutError:
            return None
        except ApprovalError as exc:  # the approver is not allowed: it stays held in ghost
            _log.warning(
                "ghost.approval_not_applied",
                decision_id=known.decision.decision_id,
                error=type_name(exc),
            )
            return None
        with self._lock:
            if known.approval is None:
                known.approval = approval
            return known.approval

    async def _decide(
        self, agent: str, tool_name: str, call_id: str, args: dict[str, Any]
    ) -> GatedRecord:
        """Ask the gate about one call (through the override, if any)."""
        args_key = arguments_key(args)
        if self._override is None:
            return GatedRecord(
                await self._gate.acheck(tool_action(agent, tool_name, args)), args_key
            )
        failure: str | None = None
        try:
            action: object = self._override(AgentToolCall(agent, tool_name, call_id, dict(args)))
        except Exception as exc:  # noqa: BLE001 - fail closed: a failing override denies
            failure = f"the action override raised {type_name(exc)}"
        else:
            if not isinstance(action, Action):
                failure = f"the action override returned a {type_name(action)}, not an Action"
        if failure is not None:
            return await self._failed(agent, tool_name, failure, args_key)
        assert isinstance(action, Action)
        return GatedRecord(await self._gate.acheck(action), args_key)

    async def _failed(
        self, agent: str, tool_name: str, failure: str, args_key: str | None
    ) -> GatedRecord:
        """Record a deny for a call that cannot be judged as itself; the model learns why."""
        decision = await self._gate.acheck(failure_action(agent, tool_name, failure))
        _log.warning("ghost.tool_call_unjudgeable", decision_id=decision.decision_id)
        return GatedRecord(decision, args_key, failure=failure)

    async def _needs_approval(
        self,
        agent: str,
        tool_name: str,
        own: Any,
        ctx: RunContextWrapper[Any],
        params: dict[str, Any],
        call_id: str,
    ) -> bool:
        """The SDK's question before a call: interrupt for a human? Decides it, once."""
        key = (tool_name, call_id)
        args_key = arguments_key(params)
        with self._lock:
            known = self._calls.get(key)
        if known is None or args_key is None or known.args_key != args_key:
            known = await self._decide(agent, tool_name, call_id, params)
            with self._lock:
                self._calls[key] = known
        if known.held:
            return known.approval is None  # resolved through ghost meanwhile: run or refuse
        if known.decision.verdict is RuntimeVerdict.DENY:
            return False  # nothing for a human to approve: the refusal goes to the model
        if isinstance(own, bool):
            return own
        answer = own(ctx, dict(params), call_id)
        return bool(await answer if inspect.isawaitable(answer) else answer)

    async def _invoke(
        self, agent: str, tool: FunctionTool, ctx: ToolContext[Any], arguments: str
    ) -> Any:
        """The SDK runs the call: judge it (by what was decided), then run or refuse."""
        name = tool.name
        try:
            args = parse_arguments(arguments)
        except ArgumentsError as exc:
            return (await self._failed(agent, name, str(exc), None)).judged().refusal
        key = (name, ctx.tool_call_id)
        args_key = arguments_key(args)
        with self._lock:
            known = self._calls.pop(key, None)
        if known is not None and known.held:
            call = await asyncio.to_thread(self._run_held, known, args, args_key)
        elif known is not None and args_key is not None and known.args_key == args_key:
            call = known.judged()
        else:  # not asked first (or asked about other arguments): decide now
            call = (await self._decide(agent, name, ctx.tool_call_id, args)).judged()
            if call.held:
                call = await self._wait(call.decision)
        if call.args is None:
            _log.info(
                "ghost.tool_call_refused",
                decision_id=call.decision.decision_id,
                verdict=call.decision.verdict.value,
            )
            return call.refusal
        return await _run(tool, ctx, call)

    def _run_held(
        self, known: GatedRecord, args: dict[str, Any], args_key: str | None
    ) -> GatedCall:
        """A held call the SDK lets run: it was approved there (or through ghost, first)."""
        approval = known.approval
        if approval is None:
            try:
                approval = resolve_approval(
                    self._gate, known.decision, approve=True, approver=self._approver
                )
            except ApprovalError as exc:
                return GatedCall(
                    known.decision,
                    None,
                    None,
                    f"ghost did not run this tool call: {exc}"
                    f" (decision {known.decision.decision_id})",
                )
        same = args_key is not None and args_key == known.args_key
        # Other arguments than were held go to `execute` as they are: it refuses them
        # unless they are exactly the approved ones.
        return approved(self._gate, known.decision, approval, known.decision.args if same else args)

    async def _wait(self, decision: Decision) -> GatedCall:
        try:
            return await asettle(self._gate, decision, timeout_s=self._wait_s)
        except TimeoutError:
            return GatedCall(
                decision,
                None,
                None,
                f"ghost did not run this tool call: it still waits for approval"
                f" ({decision.reason}; decision {decision.decision_id})",
            )

    async def _rejected(self, args: ToolErrorFormatterArgs[Any]) -> str | None:
        """An SDK rejection of a held call: resolve it as rejected; the model's text."""
        if args.kind != "approval_rejected":
            return None
        with self._lock:
            key = (args.tool_name, args.call_id)
            if key not in self._calls:  # a namespaced tool's name comes qualified here
                # ``namespace.name`` only: the call id alone (the model chooses it) could
                # name another tool's call, and its rejection is not this call's.
                keys = [
                    k
                    for k in self._calls
                    if k[1] == args.call_id and str(args.tool_name).endswith("." + k[0])
                ]
                key = keys[0] if len(keys) == 1 else key
            known = self._calls.pop(key, None)
        if known is None or not known.held:
            return None
        approval = known.approval
        if approval is None:
            approval = await asyncio.to_thread(functools.partial(self._settle, known, said=False))
        return rejection_text(known.decision, approval)


def _sdk_status(context: object, tool_name: str, call_id: str) -> bool | None:
    """What the SDK's run state says of one call: approved, rejected, or None (not yet)."""
    if not isinstance(context, RunContextWrapper):
        return None
    status = context.is_tool_approved(tool_name, call_id)
    return status if isinstance(status, bool) else None


async def _run(tool: FunctionTool, ctx: ToolContext[Any], call: GatedCall) -> Any:
    """Invoke the original tool with the effective arguments, everywhere it could read them."""
    assert call.args is not None
    try:
        text = json.dumps(call.args, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):  # a value an override's action held (bytes): not JSON
        return (
            "ghost did not run this tool call: its arguments cannot be passed as JSON"
            f" (decision {call.decision.decision_id})"
        )
    inner = copy.copy(ctx)
    inner.tool_arguments = text
    if ctx.tool_call is not None:
        inner.tool_call = ctx.tool_call.model_copy(update={"arguments": text})
    # The SDK may hand a tool arguments it prepared from the model's text; never here.
    inner._function_tool_arguments = None
    result: Awaitable[Any] = tool.on_invoke_tool(inner, text)
    return await result
