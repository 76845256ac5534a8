"""`GatedTool`: a LangChain `BaseTool` that gates each call of the tool it wraps (ADR 0024).

It shows the model the wrapped tool's name, description and schema, and on
each ``invoke``/``ainvoke`` asks its `ToolGate`, then runs the wrapped tool
with the effective arguments or answers with LangChain's own tool error.

Arguments LangGraph injects (``InjectedState``, ``InjectedToolCallId``,
``ToolRuntime``...) are not the model's: they are passed to the wrapped tool as
they are and are not judged (a state object is not plain data). Which names
those are is read once, from the wrapped tool's schemas, so a model that sends
an argument of that name does not hide it from the gate: ``ToolNode`` replaces
injected values with its own before the tool is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel

from runtime.integrations._gated_call import GatedCall

if TYPE_CHECKING:
    from runtime.integrations.langchain import ToolGate

__all__ = ["GatedTool"]


def _is_tool_call(value: object) -> bool:
    return isinstance(value, dict) and value.get("type") == "tool_call" and "args" in value


def _injected_names(tool: BaseTool) -> frozenset[str]:
    """The arguments of ``tool`` that LangGraph injects, not the model."""
    try:
        schema = tool.get_input_schema()
        model_args = set(tool.args)
    except Exception:  # noqa: BLE001 - an unreadable schema: judge every argument
        return frozenset()
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return frozenset()
    return frozenset(name for name in schema.model_fields if name not in model_args)


class GatedTool(BaseTool):
    """A tool whose every call the gate judges first (built by `ToolGate.tool`, `gate_tool`)."""

    inner: BaseTool
    tool_gate: Any
    injected: frozenset[str] = frozenset()

    @classmethod
    def wrapping(cls, tool: BaseTool, tool_gate: ToolGate) -> GatedTool:
        """The gated twin of ``tool``: same name, description and schema."""
        return cls(
            name=tool.name,
            description=tool.description,
            args_schema=tool.args_schema,
            return_direct=tool.return_direct,
            response_format=tool.response_format,
            inner=tool,
            tool_gate=tool_gate,
            injected=_injected_names(tool),
        )

    def _split(self, value: object) -> tuple[object, object, dict[str, Any]]:
        """(tool call id, the model's arguments, the injected ones) of an input."""
        tool_call_id: object = None
        args: object = value
        if _is_tool_call(value):
            call = cast(dict[str, Any], value)
            tool_call_id = call.get("id")
            args = call["args"]
        injected: dict[str, Any] = {}
        if self.injected and type(args) is dict:
            injected = {k: v for k, v in args.items() if k in self.injected}
            args = {k: v for k, v in args.items() if k not in self.injected}
        return tool_call_id, args, injected

    def _effective(self, value: object, effective: dict[str, Any], injected: dict[str, Any]) -> Any:
        """The input the wrapped tool gets: the effective arguments (and the injected ones)."""
        args = {**effective, **injected}
        if _is_tool_call(value):
            return {**cast(dict[str, Any], value), "args": args}
        return args

    def _refusal(self, call: GatedCall, tool_call_id: object) -> ToolMessage:
        refusal = cast(str, call.refusal)
        if tool_call_id is None:
            raise ToolException(refusal)
        return ToolMessage(
            content=refusal,
            name=self.name,
            tool_call_id=str.__str__(tool_call_id) if isinstance(tool_call_id, str) else "",
            status="error",
            artifact={"ghost_decision_id": call.decision.decision_id},
        )

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Gate the call, then run the wrapped tool with the effective arguments.

        Returns:
            The wrapped tool's result; for a refused call given as a tool call,
            a ``ToolMessage`` with ``status="error"``.

        Raises:
            ToolException: a refused call given as plain arguments.
            GraphInterrupt: (LangGraph's) the call is held for a human.
            AuditError: a record could not be written; the tool did not run.
        """
        tool_call_id, args, injected = self._split(input)
        return self.tool_gate.run_call(
            self.name,
            args,
            lambda effective: self.inner.invoke(
                self._effective(input, effective, injected), config, **kwargs
            ),
            lambda call: self._refusal(call, tool_call_id),
            tool_call_id=tool_call_id,
            config=config,
        )

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """The asyncio twin of `invoke`."""
        tool_call_id, args, injected = self._split(input)
        return await self.tool_gate.arun_call(
            self.name,
            args,
            lambda effective: self.inner.ainvoke(
                self._effective(input, effective, injected), config, **kwargs
            ),
            lambda call: self._refusal(call, tool_call_id),
            tool_call_id=tool_call_id,
            config=config,
        )

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        """``BaseTool.run`` (a direct call): gate the parsed arguments, then run the inner tool."""
        kwargs.pop("run_manager", None)
        kwargs.pop("config", None)
        call = self.tool_gate.gate_call(self.name, kwargs if not args else list(args))
        if call.args is None:
            raise ToolException(call.refusal)
        return self.inner.invoke(call.args)
